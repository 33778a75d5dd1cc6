//! The commands shown in the README and the docs, for tests that check
//! them against the binaries' command lines (issue 41: docs had drifted).

use std::path::{Path, PathBuf};

/// The Markdown files users read: the README, `docs/`, the SDK's README.
pub fn documents() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = vec![root.join("README.md"), root.join("client/README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .map(|dir| dir.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    docs.retain(|p| p.extension().is_some_and(|e| e == "md"));
    docs.sort();
    files.extend(docs);
    files
}

/// Every `program …` command in the shell blocks of `markdown`, as words
/// (a `$ ` prompt, trailing comments, and what `&&`, `|`, `;` chain to it
/// left out), with its line number.
pub fn commands(markdown: &str, program: &str) -> Vec<(usize, Vec<String>)> {
    let mut found = Vec::new();
    let mut shell = false;
    for (n, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(lang) = trimmed.strip_prefix("```") {
            shell = !shell && matches!(lang.trim(), "sh" | "bash" | "shell" | "console");
            continue;
        }
        if !shell {
            continue;
        }
        let text = trimmed.strip_prefix("$ ").unwrap_or(trimmed);
        let Ok(words) = shell_words::split(text) else {
            continue;
        };
        let words: Vec<String> = words.into_iter().take_while(|w| !w.starts_with('#')).collect();
        for part in words.split(|w| matches!(w.as_str(), "&&" | "||" | "|" | ";")) {
            if part.first().is_some_and(|w| w == program) {
                found.push((n + 1, part.to_vec()));
            } else if let Some(args) = cargo_run(part, program) {
                found.push((n + 1, args));
            }
        }
    }
    found
}

/// `cargo run -p program -- ARGS` as `program ARGS`.
fn cargo_run(words: &[String], program: &str) -> Option<Vec<String>> {
    let rest = words.strip_prefix(&["cargo".to_owned(), "run".to_owned()])?;
    let at = rest.windows(2).position(|w| w[0] == "-p" && w[1] == program)?;
    let args = rest[at..]
        .iter()
        .position(|w| w == "--")
        .map_or(&[][..], |dash| &rest[at + dash + 1..]);
    Some(
        std::iter::once(program.to_owned())
            .chain(args.iter().cloned())
            .collect(),
    )
}

/// Every `program …` command of every document, each with where it is
/// (`file:line`).
pub fn documented_commands(program: &str) -> Vec<(String, Vec<String>)> {
    documents()
        .into_iter()
        .flat_map(|file| {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            commands(&text, program)
                .into_iter()
                .map(move |(line, words)| (format!("{}:{line}", file.display()), words))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// How many `program …` commands the docs show, and those that `P`
/// (the program's command line) does not parse, each with where it is and
/// why.
pub fn misparsed<P: clap::Parser>(program: &str) -> (usize, Vec<String>) {
    let commands = documented_commands(program);
    let wrong = commands
        .iter()
        .filter_map(|(at, words)| {
            let e = P::try_parse_from(words).err()?;
            let shown = matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            );
            (!shown).then(|| format!("{at}: {}\n{e}", words.join(" ")))
        })
        .collect();
    (commands.len(), wrong)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_found_in_shell_blocks_only() {
        let markdown = "```sh\n$ krayne get -n ml-team   # a comment\nkrayne tunnel demo --detach && krayne tunnel --list\n```\n\
                        ```text\nkrayne not-a-command\n```\n```sh\ncargo run -p krayne -- get -A\n```\n";
        let found: Vec<String> = commands(markdown, "krayne")
            .into_iter()
            .map(|(_, w)| w.join(" "))
            .collect();
        assert_eq!(
            found,
            [
                "krayne get -n ml-team",
                "krayne tunnel demo --detach",
                "krayne tunnel --list",
                "krayne get -A"
            ]
        );
    }
}
