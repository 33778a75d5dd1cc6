//! krayne's end-to-end tests and benchmarks live in this crate: they start
//! the real `krayne-server` binary against the sandbox and a real Postgres.
#![forbid(unsafe_code)]
