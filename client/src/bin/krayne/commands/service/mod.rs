//! A cluster's services: list them, tunnel to them, SSH through a tunnel.

pub(crate) mod list;
pub(crate) mod ssh;
pub(crate) mod tunnel;
