//! Usage: GPU-, CPU- and memory-hours.

mod chart;
mod command;
pub(crate) mod report;

pub(crate) use command::Command;
