//! redt's client API, generated from `api/proto/redt/v1/redt.proto` (the single source of
//! the messages; Python, Go or Java stubs come from the same file): the messages, the
//! `Transactions` gRPC client ([`v1::transactions_client::TransactionsClient`]) and server
//! trait ([`v1::transactions_server::Transactions`]).
//!
//! The proto file documents every message, the error model (gRPC status codes with a
//! `google.rpc.ErrorInfo` detail) and the compatibility rules; docs/api.md is the reference
//! with examples.

#![forbid(unsafe_code)]

/// The `redt.v1` package: messages, client and server.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod v1 {
    tonic::include_proto!("redt.v1");

    /// The encoded `FileDescriptorSet` of the package, for gRPC server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("redt_v1_descriptor");

    /// The package's name, as `StatusResponse::api_version` gives it.
    pub const API_VERSION: &str = "redt.v1";

    /// The `google.rpc.ErrorInfo` domain of every error detail of the API.
    pub const ERROR_DOMAIN: &str = "redt.dev";
}
