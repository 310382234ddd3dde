//! redt's gRPC front end: every node serves the `redt.v1` client API (`redt-api`, generated
//! from `api/proto/redt/v1/redt.proto`) beside its QUIC transport, so a program in any
//! language with gRPC stubs can run transactions.
//!
//! - [`server`]: the endpoint: TCP, TLS 1.3 with a client certificate of the cluster CA, the
//!   caps of the topology's `transport:` section, health checking and reflection.
//! - [`service`]: the `Transactions` service, which serves each call through the node's own
//!   request handler as the caller its certificate identifies (the QUIC side's roles, limits
//!   and reservations).
//! - [`convert`]: the API's messages to and from the node's wire messages.
//! - [`errors`]: the error model: status codes with a `google.rpc.ErrorInfo` detail.

#![forbid(unsafe_code)]

pub mod convert;
pub mod errors;
pub mod server;
pub mod service;

pub use server::{GrpcError, GrpcServer, GrpcTls};
pub use service::TransactionsService;
