//! The audit log.

pub(crate) mod list;
