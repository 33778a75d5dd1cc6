//! Printing: data to stdout (table, JSON or YAML), messages to stderr.

use std::io::{IsTerminal as _, Write as _};

use comfy_table::{Cell, Color, ColumnConstraint, ContentArrangement, Table, Width, presets};
use serde_json::Value;

use crate::failure::Failure;

/// `-o`: how data is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// Aligned columns.
    Table,
    /// Aligned columns, with more of them.
    Wide,
    /// JSON, with the API's field names.
    Json,
    /// YAML, with the API's field names.
    Yaml,
    /// Comma-separated values of a table's rows, for spreadsheets.
    Csv,
}

/// Prints in the chosen format; colours only on a terminal without
/// `NO_COLOR`.
pub(crate) struct Printer {
    pub(crate) format: Format,
    color: bool,
}

impl Printer {
    pub(crate) fn new(format: Format) -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let dumb = std::env::var("TERM").is_ok_and(|t| t == "dumb");
        Self {
            format,
            color: std::io::stdout().is_terminal() && !no_color && !dumb,
        }
    }

    /// Whether `-o json` or `-o yaml` was asked for.
    pub(crate) fn structured(&self) -> bool {
        matches!(self.format, Format::Json | Format::Yaml)
    }

    /// Whether `-o csv` was asked for.
    pub(crate) fn csv(&self) -> bool {
        self.format == Format::Csv
    }

    /// Whether `-o wide` was asked for.
    pub(crate) fn wide(&self) -> bool {
        self.format == Format::Wide
    }

    /// `value` as JSON for `-o json`, else as YAML.
    pub(crate) fn data(&self, value: &Value) -> Result<(), Failure> {
        let text = match self.format {
            Format::Json => serde_json::to_string_pretty(value).map_err(|e| Failure::Other(e.to_string()))? + "\n",
            Format::Table | Format::Wide | Format::Yaml | Format::Csv => {
                let yaml = serde_saphyr::to_string(value).map_err(|e| Failure::Other(e.to_string()))?;
                if yaml.ends_with('\n') { yaml } else { yaml + "\n" }
            }
        };
        out(&text)
    }

    /// Rows under a header, kubectl style: no borders, two spaces apart.
    /// With `-o csv`, the same as comma-separated values.
    pub(crate) fn table(&self, header: &[&str], rows: Vec<Vec<Cell>>) -> Result<(), Failure> {
        if self.csv() {
            return out(&csv(header, &rows)?);
        }
        out(&self.render(Some(header), rows, &mut Vec::new()))
    }

    /// Rows printed a batch at a time (a watch's changes), each batch in
    /// the columns of those before it, which only grow: rows stay under
    /// the first batch's header.
    pub(crate) fn rows_in(
        &self,
        header: Option<&[&str]>,
        rows: Vec<Vec<Cell>>,
        widths: &mut Vec<u16>,
    ) -> Result<(), Failure> {
        out(&self.render(header, rows, widths))
    }

    /// The table's text; `widths` are the columns' least widths, and
    /// become the widths used.
    fn render(&self, header: Option<&[&str]>, rows: Vec<Vec<Cell>>, widths: &mut Vec<u16>) -> String {
        let mut table = Table::new();
        table
            .load_style(presets::NOTHING)
            .set_content_arrangement(ContentArrangement::Disabled);
        if let Some(header) = header {
            table.set_header(header.iter().copied());
        }
        if self.color {
            table.enforce_styling();
        } else {
            table.force_no_tty();
        }
        table.add_rows(
            rows.into_iter()
                .map(|row| row.into_iter().map(printable_cell).collect::<Vec<_>>()),
        );
        let content = table.column_max_content_widths();
        widths.resize(content.len().max(widths.len()), 0);
        for (width, content) in widths.iter_mut().zip(content) {
            *width = (*width).max(content);
        }
        for (column, width) in table.column_iter_mut().zip(widths.iter()) {
            column.set_padding((0, 2));
            // A boundary counts the padding.
            column.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(width.saturating_add(2))));
        }
        table.lines().map(|l| l.trim_end().to_owned() + "\n").collect()
    }

    /// `Label:  value` lines, labels aligned.
    pub(crate) fn fields(&self, fields: &[(&str, String)]) -> Result<(), Failure> {
        let width = fields.iter().map(|(label, _)| label.len()).max().unwrap_or(0) + 1;
        let text: String = fields
            .iter()
            .map(|(label, value)| format!("{:width$}  {}\n", format!("{label}:"), printable(value, true)))
            .collect();
        out(&text)
    }

    /// A cluster status, coloured by what it means for the user.
    pub(crate) fn status(&self, status: &str) -> Cell {
        self.status_as(status, status)
    }

    /// [`Self::status`] coloured by `status`, showing `shown` (`queued #2`).
    pub(crate) fn status_as(&self, status: &str, shown: &str) -> Cell {
        let color = match status {
            "ready" => Color::Green,
            "creating" | "running" | "containers-creating" | "pods-pending" | "queued" => Color::Yellow,
            "suspended" | "suspending" => Color::DarkGrey,
            _ => Color::Red,
        };
        let cell = Cell::new(shown);
        if self.color { cell.fg(color) } else { cell }
    }

    /// A job's status as Ray spells it (`SUCCEEDED`), as every command
    /// and `-o json` show it; colored on a terminal.
    pub(crate) fn job_status(&self, status: &str) -> Cell {
        let color = match status {
            "SUCCEEDED" => Color::Green,
            "PENDING" | "RUNNING" => Color::Yellow,
            "STOPPED" => Color::DarkGrey,
            _ => Color::Red,
        };
        let cell = Cell::new(status);
        if self.color { cell.fg(color) } else { cell }
    }
}

/// `text` for a terminal: each control character (a terminal's escape, a
/// bell, a carriage return; newlines too unless `lines`) shown as
/// `\u{1b}`. What the server or a head sends is printed through this —
/// never a log stream's text, which stays raw as `kubectl logs` keeps it.
pub(crate) fn printable(text: &str, lines: bool) -> std::borrow::Cow<'_, str> {
    let escaped = |c: char| c.is_control() && !(lines && (c == '\n' || c == '\t'));
    if !text.chars().any(escaped) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if escaped(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `rows` under `header` as CSV (RFC 4180), each cell's text as it is
/// (printable: control characters shown, as in a table).
fn csv(header: &[&str], rows: &[Vec<Cell>]) -> Result<String, Failure> {
    let mut writer = ::csv::Writer::from_writer(Vec::new());
    let failed = |e: ::csv::Error| Failure::Other(format!("writing CSV: {e}"));
    writer.write_record(header).map_err(failed)?;
    for row in rows {
        writer
            .write_record(row.iter().map(|c| printable(&c.content(), false).into_owned()))
            .map_err(failed)?;
    }
    let bytes = writer
        .into_inner()
        .map_err(|e| Failure::Other(format!("writing CSV: {e}")))?;
    String::from_utf8(bytes).map_err(|e| Failure::Other(format!("writing CSV: {e}")))
}

/// A table cell holding text from the server or a head: its control
/// characters escaped (the cell loses its colour only then).
fn printable_cell(cell: Cell) -> Cell {
    let content = cell.content();
    match printable(&content, false) {
        std::borrow::Cow::Borrowed(_) => cell,
        std::borrow::Cow::Owned(clean) => Cell::new(clean),
    }
}

/// Writes data to stdout. A closed pipe (`krayne get | head -1`) ends the
/// output quietly.
pub(crate) fn out(text: &str) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Failure::Other(format!("cannot write output: {e}")))
        }
        _ => Ok(()),
    }
}

/// A message for the person at the terminal, on stderr.
pub(crate) fn note(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{}", printable(text, true));
}

/// How long ago `t` was, kubectl style: `45s`, `12m`, `3h`, `5d`.
pub(crate) fn age(t: Option<&prost_types::Timestamp>) -> String {
    age_at(t, jiff::Timestamp::now())
}

/// How long before `now` `t` was, as [`age`] says it.
pub(crate) fn age_at(t: Option<&prost_types::Timestamp>, now: jiff::Timestamp) -> String {
    let Some(t) = t else { return "<unknown>".into() };
    let seconds = (now.as_second() - t.seconds).max(0);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// How long until `t`: `in 45s`, `in 12m`, `in 3h`, `in 2d`; `now` once
/// it has come.
pub(crate) fn countdown(t: &prost_types::Timestamp, now: jiff::Timestamp) -> String {
    match t.seconds - now.as_second() {
        s if s <= 0 => "now".into(),
        s if s < 120 => format!("in {s}s"),
        s if s < 2 * 3600 => format!("in {}m", s / 60),
        s if s < 2 * 86_400 => format!("in {}h", s / 3600),
        s => format!("in {}d", s / 86_400),
    }
}

/// What the lifecycle policy will do to a cluster and when, counting down:
/// `suspends in 12m (idle 2h)`, `deleted in 3d (lifetime 7d reached)`;
/// `None` when nothing is planned.
pub(crate) fn lifecycle_countdown(info: &krayne_client::proto::ClusterInfo, now: jiff::Timestamp) -> Option<String> {
    let (what, at) = match (&info.suspends_at, &info.expires_at) {
        (Some(at), _) => ("suspends", at),
        (None, Some(at)) => ("deleted", at),
        (None, None) => return None,
    };
    let why = info
        .lifecycle
        .as_deref()
        .and_then(|text| text.split_once(": "))
        .map(|(_, why)| format!(" ({why})"))
        .unwrap_or_default();
    Some(format!("{what} {}{why}", countdown(at, now)))
}

/// RFC 3339 text of a protobuf timestamp.
pub(crate) fn time(t: Option<&prost_types::Timestamp>) -> String {
    t.and_then(|t| jiff::Timestamp::new(t.seconds, t.nanos).ok())
        .map_or_else(|| "-".to_owned(), |t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
}

/// `value` or `-`.
pub(crate) fn or_dash(value: Option<&str>) -> String {
    value.filter(|v| !v.is_empty()).unwrap_or("-").to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reliability 29g (issue 53, item 7): a job's entrypoint as a head
    /// may send it reaches the terminal escaped.
    #[test]
    fn text_from_the_server_reaches_a_terminal_without_its_escapes() {
        let hostile = "python x.py\u{1b}]0;owned\u{7}\u{1b}[2J\rgone";
        let printer = Printer {
            format: Format::Table,
            color: false,
        };
        let text = printer.render(
            Some(&["ID", "ENTRYPOINT"]),
            vec![vec![Cell::new("raysubmit_1"), Cell::new(hostile)]],
            &mut Vec::new(),
        );
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text:?}");
        assert!(text.contains("\\u{1b}]0;owned"), "{text:?}");
        let yaml = serde_saphyr::to_string(&serde_json::json!({"entrypoint": hostile})).unwrap();
        assert!(!yaml.contains('\u{1b}'), "-o yaml escapes them too: {yaml:?}");
        assert_eq!(printable("two\nlines", true), "two\nlines");
        assert_eq!(printable("one\nline", false), "one\\u{a}line");
    }

    #[test]
    fn the_lifecycle_counts_down_to_what_it_will_do() {
        let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let at = |s: i64| prost_types::Timestamp {
            seconds: 1_800_000_000 + s,
            nanos: 0,
        };
        assert_eq!(countdown(&at(45), now), "in 45s");
        assert_eq!(countdown(&at(720), now), "in 12m");
        assert_eq!(countdown(&at(-5), now), "now");
        let mut info = krayne_client::proto::ClusterInfo {
            suspends_at: Some(at(720)),
            lifecycle: Some("suspend at 2027-01-15T08:12:00Z: idle 2h".into()),
            ..Default::default()
        };
        assert_eq!(
            lifecycle_countdown(&info, now).as_deref(),
            Some("suspends in 12m (idle 2h)")
        );
        info.suspends_at = None;
        assert_eq!(lifecycle_countdown(&info, now), None);
        info.expires_at = Some(at(3 * 86_400));
        info.lifecycle = Some("delete at 2027-01-18T08:00:00Z: lifetime 7d reached".into());
        assert_eq!(
            lifecycle_countdown(&info, now).as_deref(),
            Some("deleted in 3d (lifetime 7d reached)")
        );
    }

    #[test]
    fn later_batches_line_up_under_the_first() {
        let p = Printer::new(Format::Table);
        let mut widths = Vec::new();
        let first = p.render(
            Some(&["EVENT", "NAME", "STATUS"]),
            vec![vec![
                Cell::new("ADDED"),
                Cell::new("a-long-name"),
                Cell::new("creating"),
            ]],
            &mut widths,
        );
        let later = p.render(
            None,
            vec![vec![Cell::new("ADDED"), Cell::new("b"), Cell::new("ready")]],
            &mut widths,
        );
        let at = |text: &str, word: &str| text.lines().find_map(|l| l.find(word));
        assert_eq!(at(&first, "STATUS"), at(&later, "ready"), "{first}{later}");
        assert_eq!(at(&first, "creating"), at(&later, "ready"), "{first}{later}");
    }

    #[test]
    fn ages_read_like_kubectls() {
        let ago = |s: i64| {
            age(Some(&prost_types::Timestamp {
                seconds: jiff::Timestamp::now().as_second() - s,
                nanos: 0,
            }))
        };
        assert_eq!(ago(5), "5s");
        assert_eq!(ago(600), "10m");
        assert_eq!(ago(3 * 3600), "3h");
        assert_eq!(ago(5 * 86_400), "5d");
        assert_eq!(age(None), "<unknown>");
    }
}
