//! The audit trail: its rows as stored, and the sink that batches them
//! into the database.

pub(crate) mod rows;
mod sink;

pub use sink::{QueueOptions, SqlAuditSink};
