//! The explorer: the scope bar, the clusters table (columns by width),
//! the status line.

use ratatui::{
    Frame,
    layout::{Constraint, Layout, Rect},
    style::{Color, Style},
    text::{Line, Span},
    widgets::{Cell, HighlightSpacing, Paragraph, Row, Table, TableState, Wrap},
};

use krayne_client::proto::ClusterInfo;

use super::{
    HIGHLIGHT, MEDIUM, WIDE, centered, connection, header_style, highlight_style, shown_status, status_line,
    status_style,
};
use crate::{
    output::age_at,
    tui::{
        app::{App, Connection, Sort},
        filter::services,
    },
};

const HINTS: &[&str] = &[
    "? help",
    "q quit",
    "Enter detail",
    "/ filter",
    "c create",
    "s scale",
    "d delete",
    "t tunnels",
    "o open",
    "n namespace",
    "Tab sort",
    "Ctrl+P commands",
];

pub(super) fn draw(frame: &mut Frame, app: &App) {
    let quota = quota_line(app);
    let [bar, quota_area, body, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(u16::from(quota.is_some())),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(Paragraph::new(scope_bar(app)), bar);
    if let Some(quota) = quota {
        frame.render_widget(Paragraph::new(quota), quota_area);
    }
    clusters(frame, app, body);
    frame.render_widget(Paragraph::new(status_line(app, HINTS, status.width)), status);
}

fn scope_bar(app: &App) -> Line<'static> {
    let (healthy, all) = app.health();
    let scope = app.namespace.clone().unwrap_or_else(|| "all".into());
    let mut spans = vec![
        Span::styled(" krayne ", Style::new().fg(Color::Black).bg(Color::Cyan)),
        Span::raw(format!(
            "  Namespace: {scope}  Clusters: {all}  Healthy: {healthy}/{all}  "
        )),
        connection(app),
    ];
    if !app.filter_text.is_empty() {
        spans.push(Span::styled(
            format!("  filter: {}", app.filter_text),
            Style::new().fg(Color::Magenta),
        ));
    }
    Line::from(spans)
}

/// `Quota: cpu 6/16 · gpus@us-2 1/2 · this month 12.5 GPU-h`, when the
/// namespace has limits or recorded usage.
fn quota_line(app: &App) -> Option<Line<'static>> {
    let lines = app.quota.as_ref().map_or(&[][..], |q| &q.resources[..]);
    let mut parts: Vec<String> = lines
        .iter()
        .filter_map(|l| {
            let at = l.site.as_ref().map(|s| format!("@{s}")).unwrap_or_default();
            l.limit
                .as_ref()
                .map(|limit| format!("{}{at} {}/{limit}", l.resource, l.used))
        })
        .collect();
    if let Some(hours) = app.month_gpu_hours {
        parts.push(format!("this month {hours:.1} GPU-h"));
    }
    if parts.is_empty() {
        return None;
    }
    let full = lines.iter().any(|l| l.used_fraction.is_some_and(|f| f >= 1.0));
    let style = Style::new().fg(if full { Color::Red } else { Color::DarkGray });
    Some(Line::from(Span::styled(
        format!(" Quota: {}", parts.join(" · ")),
        style,
    )))
}

fn clusters(frame: &mut Frame, app: &App, area: Rect) {
    let visible = app.visible();
    if visible.is_empty() {
        let text = match (&app.connection, app.clusters.is_empty()) {
            (Connection::Connecting, _) => "Connecting to the server…".to_owned(),
            (Connection::SignedOut(why), _) => format!(
                "The server refused your token: {why}. Sign in again (`krayne login --token …`), then start krayne tui again."
            ),
            (Connection::Refused(why), _) => format!(
                "You may not see the clusters of {}: {why}. Press n to choose a namespace you may use.",
                app.namespace
                    .as_deref()
                    .map_or("every namespace".into(), |n| format!("namespace {n}"))
            ),
            (_, true) => format!(
                "No clusters in {} yet. Press c to create one (or run `krayne create NAME`).",
                app.namespace
                    .as_deref()
                    .map_or("any namespace you may see".into(), |n| n.to_owned())
            ),
            (_, false) => format!("No cluster matches \"{}\". Esc clears the filter.", app.filter_text),
        };
        let width = area.width.saturating_sub(4);
        let height = if matches!(app.connection, Connection::Refused(_) | Connection::SignedOut(_)) {
            4
        } else {
            2
        };
        frame.render_widget(
            Paragraph::new(text)
                .style(Style::new().fg(Color::DarkGray))
                .centered()
                .wrap(Wrap { trim: true }),
            centered(area, width, height),
        );
        return;
    }
    let width = frame.area().width;
    let longest = |f: fn(&ClusterInfo) -> usize| visible.iter().map(|c| f(c)).max().unwrap_or(0);
    let fit = |n: usize, min: u16, max: u16| Constraint::Length(u16::try_from(n).unwrap_or(max).clamp(min, max));
    let columns = [
        (Sort::Name, fit(longest(|c| c.name.len()), 8, 40)),
        (Sort::Status, fit(longest(|c| shown_status(c).len()), 8, 20)),
        (Sort::Workers, Constraint::Length(8)),
    ];
    let mut header: Vec<String> = columns.iter().map(|(s, _)| s.label().to_owned()).collect();
    let mut widths: Vec<Constraint> = columns.iter().map(|(_, c)| *c).collect();
    if width >= MEDIUM {
        header.extend(["NAMESPACE".into(), "AGE".into(), "SERVICES".into()]);
        let namespace = fit(longest(|c| c.namespace.len()), 9, 30);
        let services = fit(
            visible.iter().map(|c| services(c).join(",").len()).max().unwrap_or(0),
            8,
            42,
        );
        widths.extend([namespace, Constraint::Length(5), services]);
    }
    if width >= WIDE {
        header.push("TUNNELS".into());
        widths.push(Constraint::Fill(1));
    }
    let sort = app.sort.label();
    let header = Row::new(header.into_iter().map(|h| {
        if h == sort {
            Cell::from(format!("{h}▾"))
        } else {
            Cell::from(h)
        }
    }))
    .style(header_style());
    let rows = visible.iter().map(|c| {
        let mut cells = vec![
            Cell::from(c.name.clone()),
            Cell::from(Span::styled(shown_status(c), status_style(&c.status))),
            Cell::from(format!("{}/{}", c.ready_workers, c.num_workers)),
        ];
        if width >= MEDIUM {
            cells.extend([
                Cell::from(c.namespace.clone()),
                Cell::from(age_at(c.created_at.as_ref(), app.now)),
                Cell::from(services(c).join(",")),
            ]);
        }
        if width >= WIDE {
            let key = (c.namespace.clone(), c.name.clone());
            let tunnels = app.tunnels.get(&key).map_or_else(
                || "-".to_owned(),
                |t| t.iter().map(|(s, u)| format!("{s} {u}")).collect::<Vec<_>>().join(", "),
            );
            cells.push(Cell::from(tunnels));
        }
        Row::new(cells)
    });
    let table = Table::new(rows, widths)
        .header(header)
        .column_spacing(2)
        .highlight_symbol(HIGHLIGHT)
        .highlight_spacing(HighlightSpacing::Always)
        .row_highlight_style(highlight_style());
    let mut state = TableState::default().with_selected(app.selected_index(&visible));
    frame.render_stateful_widget(table, area, &mut state);
}
