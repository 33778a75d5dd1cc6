//! `krayne version`.

use serde_json::json;

use crate::{
    failure::Failure,
    output::{Format, Printer, out},
};

/// Print the client version.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_: &Args, format: Format) -> Result<(), Failure> {
    let version = env!("CARGO_PKG_VERSION");
    let printer = Printer::new(format);
    if printer.structured() {
        return printer.data(&json!({ "client": version }));
    }
    out(&format!("krayne {version}\n"))
}
