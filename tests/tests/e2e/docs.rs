//! The `krayne-server` commands shown in the README and the docs parse as
//! written (the `krayne` ones are checked beside the CLI's command line).

use krayne_server::config::Cli;

#[test]
fn every_krayne_server_command_in_the_docs_parses() {
    let (found, wrong) = krayne_tests::docs::misparsed::<Cli>("krayne-server");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(
        found > 0,
        "the README's `cargo run -p krayne-server -- sandbox` was not found"
    );
}
