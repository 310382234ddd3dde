//! User-space WAN emulation for inter-DC links (a later issue).
