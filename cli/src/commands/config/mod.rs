//! The CLI's own configuration and metadata.

mod command;
pub(crate) mod completions;
pub(crate) mod krayne_only;
pub(crate) mod login;
pub(crate) mod logout;
pub(crate) mod version;

pub(crate) use command::Command;
