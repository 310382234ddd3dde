//! Placement and epochs, failure detection, recovery, rebuild (a later issue).
