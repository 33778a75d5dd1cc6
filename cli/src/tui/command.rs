//! What the user can ask for, by key or from the command palette; the
//! help screen is written from the same table.

use nucleo_matcher::{
    Config, Matcher,
    pattern::{CaseMatching, Normalization, Pattern},
};

use super::app::Key;

/// One thing to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    Detail,
    Create,
    Scale,
    /// Suspend the cluster, or resume it when suspended.
    Suspend,
    Delete,
    Tunnels,
    Open,
    Filter,
    Namespaces,
    AllNamespaces,
    Refresh,
    Sort,
    Help,
    Back,
    Quit,
    /// Show this cluster's detail.
    GoTo(Key),
}

/// The keys and what they do, for `?`.
pub(crate) const KEYS: &[(&str, &str)] = &[
    ("↑ ↓ / j k", "move"),
    ("Enter", "cluster detail"),
    ("c", "create a cluster"),
    ("s", "scale the cluster"),
    ("z", "suspend the cluster, or resume it"),
    ("d", "delete the cluster"),
    ("t", "open / close its tunnels"),
    ("o", "open its dashboard in the browser"),
    ("/", "filter: words match names; status: ns: service:"),
    ("n", "pick a namespace"),
    ("r", "refresh"),
    ("Tab", "sort by the next column"),
    ("l  x", "detail: follow the job's log, stop the job"),
    ("Ctrl+P", "command palette"),
    ("?", "this help"),
    ("q  Esc", "back, or quit"),
];

/// The palette's fixed entries (clusters are added to them).
const ENTRIES: &[(&str, Command)] = &[
    ("Show cluster detail", Command::Detail),
    ("Create cluster", Command::Create),
    ("Scale cluster", Command::Scale),
    ("Suspend or resume cluster", Command::Suspend),
    ("Delete cluster", Command::Delete),
    ("Toggle tunnels", Command::Tunnels),
    ("Open dashboard in browser", Command::Open),
    ("Filter clusters", Command::Filter),
    ("Switch namespace", Command::Namespaces),
    ("All namespaces", Command::AllNamespaces),
    ("Refresh", Command::Refresh),
    ("Cycle sort column", Command::Sort),
    ("Help", Command::Help),
    ("Back", Command::Back),
    ("Quit", Command::Quit),
];

/// Ctrl+P: a query and the entries that match it, best first.
#[derive(Debug, Clone)]
pub(crate) struct Palette {
    pub(crate) query: String,
    entries: Vec<(String, Command)>,
    pub(crate) shown: Vec<(String, Command)>,
    pub(crate) selected: usize,
}

impl Palette {
    /// The fixed entries, then `Go to <cluster>` for each of `clusters`.
    pub(crate) fn new(clusters: impl IntoIterator<Item = Key>) -> Self {
        let mut entries: Vec<(String, Command)> = ENTRIES.iter().map(|(l, c)| ((*l).to_owned(), c.clone())).collect();
        entries.extend(
            clusters
                .into_iter()
                .map(|key| (format!("Go to {}/{}", key.0, key.1), Command::GoTo(key))),
        );
        let mut palette = Self {
            query: String::new(),
            shown: Vec::new(),
            entries,
            selected: 0,
        };
        palette.rank();
        palette
    }

    /// Sets the query and ranks the entries for it.
    pub(crate) fn set_query(&mut self, query: String) {
        self.query = query;
        self.rank();
    }

    fn rank(&mut self) {
        self.selected = 0;
        if self.query.trim().is_empty() {
            self.shown = self.entries.clone();
            return;
        }
        let mut matcher = Matcher::new(Config::DEFAULT);
        let pattern = Pattern::parse(&self.query, CaseMatching::Ignore, Normalization::Smart);
        let labels: Vec<&str> = self.entries.iter().map(|(l, _)| l.as_str()).collect();
        let ranked = pattern.match_list(labels, &mut matcher);
        self.shown = ranked
            .into_iter()
            .filter_map(|(label, _)| self.entries.iter().find(|(l, _)| l == label).cloned())
            .collect();
    }

    /// The highlighted entry's command.
    pub(crate) fn chosen(&self) -> Option<Command> {
        self.shown.get(self.selected).map(|(_, c)| c.clone())
    }

    /// Moves the highlight by `delta`, staying in the list.
    pub(crate) fn move_by(&mut self, delta: isize) {
        let last = self.shown.len().saturating_sub(1);
        self.selected = self.selected.saturating_add_signed(delta).min(last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuzzy_queries_rank_the_closest_entry_first() {
        let mut p = Palette::new([("ml-team".to_owned(), "train-gpu".to_owned())]);
        assert_eq!(p.shown.len(), ENTRIES.len() + 1);
        p.set_query("scale".into());
        assert_eq!(p.chosen(), Some(Command::Scale));
        p.set_query("trgpu".into());
        assert_eq!(p.chosen(), Some(Command::GoTo(("ml-team".into(), "train-gpu".into()))));
        p.set_query("zzzz".into());
        assert_eq!(p.chosen(), None);
    }

    #[test]
    fn the_highlight_stays_in_the_list() {
        let mut p = Palette::new([]);
        p.move_by(-3);
        assert_eq!(p.selected, 0);
        p.move_by(100);
        assert_eq!(p.selected, ENTRIES.len() - 1);
    }
}
