//! The audit log.

mod command;
pub(crate) mod list;

pub(crate) use command::Command;
