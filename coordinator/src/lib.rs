//! Coordinator: planning, votes and decision, phase 2, client API (a later issue).

pub mod decision;
