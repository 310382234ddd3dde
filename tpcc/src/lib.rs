//! TPC-C (specification v5.11) as stored procedures beside redt's key/value and YCSB ones: the
//! nine tables as cell-level records ([`schema`]) and New-Order, Payment, Order-Status,
//! Delivery and Stock-Level ([`procedures`]), which the coordinator builds for
//! `ProcedureKind::Tpcc` calls (`redt_coordinator::call::procedure`).
//!
//! The loader, the terminals and the consistency check are the bench's (`redt_bench::tpcc`).

#![forbid(unsafe_code)]

pub mod procedures;
pub mod schema;
