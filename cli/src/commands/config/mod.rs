//! The CLI's own configuration and metadata.

pub(crate) mod completions;
pub(crate) mod login;
pub(crate) mod version;
