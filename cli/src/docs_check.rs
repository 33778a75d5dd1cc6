//! The `krayne` commands shown in the README and the docs, checked
//! against this command line: each must parse as written (issue 41: docs
//! had drifted from the binary).

use crate::cli::Cli;

#[test]
fn every_krayne_command_in_the_docs_parses() {
    let (found, wrong) = krayne_tests::docs::misparsed::<Cli>("krayne");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(found > 20, "only {found} commands found: is the extraction broken?");
}
