//! Workloads, drivers, checks and reports.
