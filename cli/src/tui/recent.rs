//! The namespaces picked in the TUI, most recent first, kept between runs
//! in `$XDG_STATE_HOME/krayne/tui-namespaces` (one per line). Losing the
//! file loses only the order, so failures to read or write it are ignored.

use std::path::PathBuf;

/// How many are kept.
const KEPT: usize = 20;

fn file() -> Option<PathBuf> {
    use etcetera::BaseStrategy as _;
    let base = etcetera::choose_base_strategy().ok()?;
    let state = base.state_dir().unwrap_or_else(|| base.data_dir());
    Some(state.join("krayne").join("tui-namespaces"))
}

/// The namespaces picked before, most recent first.
pub(crate) fn load() -> Vec<String> {
    file()
        .and_then(|f| std::fs::read_to_string(f).ok())
        .map(|text| parse(&text))
        .unwrap_or_default()
}

fn parse(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .take(KEPT)
        .collect()
}

/// Puts `namespace` first.
pub(crate) fn remember(namespace: &str) {
    let Some(file) = file() else { return };
    let mut names = load();
    names.retain(|n| n != namespace);
    names.insert(0, namespace.to_owned());
    names.truncate(KEPT);
    if let Some(dir) = file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(file, names.join("\n") + "\n");
}

#[cfg(test)]
mod tests {
    #[test]
    fn blank_lines_are_skipped_and_the_list_is_bounded() {
        let text: String = (0..30).map(|i| format!("ns-{i}\n\n")).collect();
        let names = super::parse(&text);
        assert_eq!(names.len(), super::KEPT);
        assert_eq!(names[0], "ns-0");
    }
}
