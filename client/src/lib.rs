//! Rust SDK for krayne's gRPC API.
//!
//! For now this re-exports the generated `krayne.v1` client stubs and
//! messages; the ergonomic client builds on them.
#![forbid(unsafe_code)]

pub use krayne_proto::v1 as proto;
