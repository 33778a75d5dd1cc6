//! A cluster's detail: head, worker groups, services with their health
//! and tunnels, jobs, and the followed job's log or the recent events.

use krayne_client::proto::WorkerGroupDetails;
use ratatui::{
    Frame,
    layout::{Constraint, Layout, Rect},
    style::{Color, Style},
    text::{Line, Span},
    widgets::{Block, Cell, HighlightSpacing, Paragraph, Row, Table, TableState, Wrap},
};

use super::{HIGHLIGHT, MEDIUM, connection, header_style, highlight_style, shown_status, status_line, status_style};
use crate::{
    commands::job::status,
    output::{age_at, lifecycle_countdown, or_dash},
    tui::app::{App, Key},
};

const HINTS: &[&str] = &[
    "q back",
    "↑↓ job",
    "PgDn/PgUp scroll",
    "l follow log",
    "x stop job",
    "s scale",
    "d delete",
    "t tunnels",
    "o open",
    "r refresh",
    "? help",
];

/// The boxes PageDown scrolls past, top to bottom.
#[derive(Debug, Clone, Copy)]
enum Panel {
    /// The head and the worker groups.
    Shape,
    Services,
    Jobs,
}

/// How many panels PageDown can scroll past.
pub(crate) const SCROLLABLE: usize = 2;

pub(super) fn draw(frame: &mut Frame, app: &App, key: &Key) {
    let rows = |n: usize| u16::try_from(n).unwrap_or(u16::MAX);
    let services = rows(app.detail.services.as_ref().map_or(1, Vec::len));
    let jobs = rows(app.detail.jobs.as_ref().map_or(1, |j| j.len().clamp(1, 6)));
    let groups = rows(app.detail.details.as_ref().map_or(1, |d| d.worker_groups.len().max(1)));
    let narrow = frame.area().width < MEDIUM;
    // Narrow, the head box (two lines) sits on the worker groups' box.
    let top = if narrow { 4 + groups + 3 } else { 4.max(groups + 1) + 2 };
    let [bar, body, status] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(0), Constraint::Length(1)]).areas(frame.area());
    frame.render_widget(Paragraph::new(title(app, key, narrow)), bar);
    frame.render_widget(Paragraph::new(status_line(app, HINTS, status.width)), status);
    // A cluster whose head is down leads with why: the reason, the
    // events, the head's last lines; the rest scrolls below.
    let failing = failure(app, key);
    let rest = match &failing {
        Some(reason) => {
            let why_height = (body.height * 2 / 5).max(5).min(body.height);
            let lines_height = (body.height - why_height) * 3 / 7;
            let [why_area, lines_area, rest] = Layout::vertical([
                Constraint::Length(why_height),
                Constraint::Length(lines_height),
                Constraint::Min(0),
            ])
            .areas(body);
            why(frame, app, reason, why_area);
            if lines_area.height >= 3 {
                match (&app.detail.logs, &app.detail.head_lines) {
                    (Some(_), _) => log(frame, app, lines_area),
                    (None, Some(lines)) => head_lines(frame, lines, lines_area),
                    (None, None) => frame.render_widget(
                        loading().block(Block::bordered().title(" Head's last lines ")),
                        lines_area,
                    ),
                }
            }
            rest
        }
        None => body,
    };
    let panels: Vec<(Panel, u16)> = [
        (Panel::Shape, top),
        (Panel::Services, services + 3),
        (Panel::Jobs, jobs + 3),
    ]
    .into_iter()
    .skip(app.detail.scroll.min(SCROLLABLE))
    .collect();
    let wanted: Vec<u16> = panels.iter().map(|(_, h)| *h).collect();
    let (mut heights, left) = allot(rest.height, &wanted);
    // What no panel wants goes to the events (or the log) below them, when
    // it makes a box; else to the last panel shown, never left blank.
    let bottom = if failing.is_none() && left >= 3 {
        left
    } else {
        if let Some(last) = heights.iter_mut().rev().find(|h| **h > 0) {
            *last += left;
        }
        0
    };
    let mut constraints: Vec<Constraint> = heights.iter().map(|h| Constraint::Length(*h)).collect();
    constraints.push(Constraint::Length(bottom));
    let areas = Layout::vertical(constraints).split(rest);
    for ((panel, _), area) in panels.iter().zip(areas.iter()) {
        if area.height == 0 {
            continue;
        }
        match panel {
            Panel::Shape => shape(frame, app, *area, narrow),
            Panel::Services => services_table(frame, app, key, *area),
            Panel::Jobs => jobs_table(frame, app, *area),
        }
    }
    let bottom_area = areas.last().copied().unwrap_or_default();
    if bottom_area.height >= 3 {
        match (&app.detail.logs, &app.detail.head_lines) {
            (Some(_), _) => log(frame, app, bottom_area),
            (None, Some(lines)) if bottom_area.height >= 6 => {
                let [events_area, head_area] =
                    Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(bottom_area);
                events(frame, app, events_area);
                head_lines(frame, lines, head_area);
            }
            (None, Some(lines)) => head_lines(frame, lines, bottom_area),
            (None, None) => events(frame, app, bottom_area),
        }
    }
}

/// The head and the worker groups: side by side, or narrow one on the
/// other.
fn shape(frame: &mut Frame, app: &App, area: Rect, narrow: bool) {
    let (head_area, groups_area) = if narrow {
        let [h, g] = Layout::vertical([Constraint::Length(4), Constraint::Min(0)]).areas(area);
        (h, g)
    } else {
        let [h, g] = Layout::horizontal([Constraint::Percentage(40), Constraint::Percentage(60)]).areas(area);
        (h, g)
    };
    head(frame, app, head_area, narrow);
    worker_groups(frame, app, groups_area);
}

/// Why a cluster whose head is down is not ready: its status, and the
/// head pod's reason and message once the details say them.
fn failure(app: &App, key: &Key) -> Option<String> {
    let status = &app.clusters.get(key)?.status;
    if !crate::commands::cluster::HEAD_DOWN.contains(&status.as_str()) {
        return None;
    }
    let head = app
        .detail
        .details
        .as_ref()
        .and_then(|d| d.pods.iter().find(|p| p.node_type == "head"));
    let mut reason = status.clone();
    if let Some(head) = head {
        if let Some(r) = &head.reason {
            reason.push_str(&format!(": {r}"));
        }
        if let Some(m) = &head.message {
            reason.push_str(&format!(": {m}"));
        }
        if head.restarts > 0 {
            reason.push_str(&format!(" ({} restarts)", head.restarts));
        }
    }
    Some(reason)
}

/// The reason first, then the events, newest first.
fn why(frame: &mut Frame, app: &App, reason: &str, area: Rect) {
    let block = Block::bordered()
        .title(" Why it is not ready ")
        .border_style(Style::new().fg(Color::Red));
    let mut lines = vec![Line::from(Span::styled(reason.to_owned(), Style::new().fg(Color::Red)))];
    match &app.detail.details {
        Some(details) if details.events.is_empty() => lines.push(Line::from("No events.")),
        Some(details) => lines.extend(event_lines(details)),
        None => lines.push(Line::from("loading the events…")),
    }
    lines.push(Line::from(Span::styled(
        "`krayne describe` and `krayne logs --previous` say more",
        Style::new().fg(Color::DarkGray),
    )));
    frame.render_widget(Paragraph::new(lines).block(block).wrap(Wrap { trim: true }), area);
}

/// The heights of `wanted` boxes in `height` lines, by priority, each as
/// tall as it wants while there is room (a box of fewer than 3 lines
/// shows nothing, so it gets none); and the lines left.
fn allot(height: u16, wanted: &[u16]) -> (Vec<u16>, u16) {
    let mut left = height;
    let mut heights = Vec::with_capacity(wanted.len());
    for want in wanted {
        let given = (*want).min(left);
        let given = if given >= 3 { given } else { 0 };
        heights.push(given);
        left -= given;
    }
    (heights, left)
}

fn title(app: &App, key: &Key, narrow: bool) -> Line<'static> {
    // Narrow, the badge and the words go so that the creator fits whole.
    let mut spans = if narrow {
        vec![Span::raw(format!(" {} ({})  ", key.1, key.0))]
    } else {
        vec![
            Span::styled(" krayne ", Style::new().fg(Color::Black).bg(Color::Cyan)),
            Span::raw(format!("  {} ({})  ", key.1, key.0)),
        ]
    };
    match app.clusters.get(key) {
        Some(c) => {
            spans.push(Span::styled(shown_status(c), status_style(&c.status)));
            let waiting = crate::commands::cluster::WAITING.contains(&c.status.as_str());
            if let Some(why) = c.queue_reason.as_deref().filter(|_| waiting) {
                spans.push(Span::raw(format!("  waits: {}", crate::output::printable(why, false))));
            }
            let age = age_at(c.created_at.as_ref(), app.now);
            let by = or_dash(c.created_by.as_deref());
            let head_down = crate::commands::cluster::HEAD_DOWN.contains(&c.status.as_str());
            // Its workers' readiness says nothing while the head is down.
            spans.push(Span::raw(if head_down && narrow {
                format!("  head down  {age}  by {by}  ")
            } else if head_down {
                format!("  head down  age {age}  by {by}  ")
            } else if narrow {
                format!("  {}/{} workers  {age}  by {by}  ", c.ready_workers, c.num_workers)
            } else {
                format!(
                    "  {}/{} workers ready  age {age}  by {by}  ",
                    c.ready_workers, c.num_workers
                )
            }));
            // What the lifecycle policy will do, counting down: loud once
            // the owner has been warned.
            if let Some(countdown) = lifecycle_countdown(c, app.now) {
                let style = if c.lifecycle_warned_at.is_some() {
                    Style::new().fg(Color::Black).bg(Color::Yellow)
                } else {
                    Style::new().fg(Color::Yellow)
                };
                spans.push(Span::styled(format!(" {countdown} "), style));
                spans.push(Span::raw("  "));
            }
        }
        None => spans.push(Span::styled("deleted  ", Style::new().fg(Color::Red))),
    }
    spans.push(connection(app));
    Line::from(spans)
}

/// A box's title; marked stale when the last refresh of a list it shows
/// failed.
fn titled(title: &str, error: Option<&String>, listed: bool) -> Block<'static> {
    match error.filter(|_| listed) {
        Some(_) => Block::bordered()
            .title(format!(" {title} (stale: the last refresh failed) "))
            .border_style(Style::new().fg(Color::Yellow)),
        None => Block::bordered().title(format!(" {title} ")),
    }
}

fn loading() -> Paragraph<'static> {
    Paragraph::new("loading…").style(Style::new().fg(Color::DarkGray))
}

/// What the services and jobs boxes say before they have a list.
fn not_yet(error: Option<&String>) -> Paragraph<'static> {
    match error {
        Some(why) => Paragraph::new(why.clone())
            .style(Style::new().fg(Color::Yellow))
            .wrap(Wrap { trim: true }),
        None => loading(),
    }
}

fn head(frame: &mut Frame, app: &App, area: Rect, compact: bool) {
    let block = Block::bordered().title(" Head ");
    let Some(details) = &app.detail.details else {
        frame.render_widget(loading().block(block), area);
        return;
    };
    let head = details.head.clone().unwrap_or_default();
    let ip = details.info.as_ref().and_then(|i| i.head_ip.as_deref());
    // A version nobody could tell is left out rather than said "unknown".
    let known = |v: &str| !v.is_empty() && v != "unknown";
    let python = if known(&details.python_version) {
        format!("  Python {}", details.python_version)
    } else {
        String::new()
    };
    let lines = if compact {
        vec![
            Line::from(format!("{}  Ray {}{python}", head.image, details.ray_version)),
            Line::from(format!(
                "CPU {}  Memory {}  GPUs {}  IP {}",
                head.cpus,
                head.memory,
                head.gpus,
                or_dash(ip)
            )),
        ]
    } else {
        vec![
            Line::from(format!("Image   {}", head.image)),
            Line::from(format!("CPU {}  Memory {}  GPUs {}", head.cpus, head.memory, head.gpus)),
            Line::from(format!("IP      {}", or_dash(ip))),
            Line::from(format!("Ray {}{python}", details.ray_version)),
        ]
    };
    frame.render_widget(Paragraph::new(lines).block(block), area);
}

fn worker_groups(frame: &mut Frame, app: &App, area: Rect) {
    let block = Block::bordered().title(" Worker groups ");
    let Some(details) = &app.detail.details else {
        frame.render_widget(loading().block(block), area);
        return;
    };
    let rows = details.worker_groups.iter().map(|g: &WorkerGroupDetails| {
        Row::new([
            g.name.clone(),
            g.replicas.to_string(),
            g.min_replicas.to_string(),
            g.max_replicas.to_string(),
            g.gpus.to_string(),
            g.cpus.clone(),
            g.memory.clone(),
        ])
    });
    let widths = [
        Constraint::Length(16),
        Constraint::Length(8),
        Constraint::Length(4),
        Constraint::Length(4),
        Constraint::Length(4),
        Constraint::Length(5),
        Constraint::Fill(1),
    ];
    let header = Row::new(["GROUP", "REPLICAS", "MIN", "MAX", "GPUS", "CPU", "MEMORY"]).style(header_style());
    frame.render_widget(Table::new(rows, widths).header(header).block(block), area);
}

fn services_table(frame: &mut Frame, app: &App, key: &Key, area: Rect) {
    let block = titled(
        "Services",
        app.detail.services_error.as_ref(),
        app.detail.services.is_some(),
    );
    let Some(services) = &app.detail.services else {
        frame.render_widget(not_yet(app.detail.services_error.as_ref()).block(block), area);
        return;
    };
    let tunnels = app.tunnels.get(key);
    let rows = services.iter().map(|s| {
        let state = crate::commands::service::state_name(s);
        let tunnel = tunnels
            .and_then(|t| t.iter().find(|(name, _)| name == &s.name))
            .map_or_else(|| "-".to_owned(), |(_, url)| url.clone());
        Row::new([
            Cell::from(s.name.clone()),
            Cell::from(s.port.to_string()),
            Cell::from(Span::styled(state, status_style(state))),
            Cell::from(tunnel),
        ])
    });
    let widths = [
        Constraint::Length(12),
        Constraint::Length(6),
        Constraint::Length(12),
        Constraint::Min(10),
    ];
    let header = Row::new(["SERVICE", "PORT", "HEALTH", "LOCAL TUNNEL (t)"]).style(header_style());
    frame.render_widget(Table::new(rows, widths).header(header).block(block), area);
}

fn jobs_table(frame: &mut Frame, app: &App, area: Rect) {
    let block = titled("Jobs", app.detail.jobs_error.as_ref(), app.detail.jobs.is_some());
    let Some(jobs) = &app.detail.jobs else {
        frame.render_widget(not_yet(app.detail.jobs_error.as_ref()).block(block), area);
        return;
    };
    if jobs.is_empty() {
        let hint = "No jobs yet: `krayne submit NAME -- python script.py` runs one.";
        frame.render_widget(
            Paragraph::new(hint)
                .style(Style::new().fg(Color::DarkGray))
                .block(block),
            area,
        );
        return;
    }
    let rows = jobs.iter().map(|j| {
        let s = status(j).to_ascii_lowercase();
        Row::new([
            Cell::from(j.id.clone()),
            Cell::from(Span::styled(s.clone(), status_style(&s))),
            Cell::from(age_at(j.start_time.as_ref(), app.now)),
            Cell::from(j.entrypoint.clone()),
        ])
    });
    let widths = [
        Constraint::Length(28),
        Constraint::Length(10),
        Constraint::Length(6),
        Constraint::Min(10),
    ];
    let header = Row::new(["JOB", "STATUS", "AGE", "ENTRYPOINT"]).style(header_style());
    let table = Table::new(rows, widths)
        .header(header)
        .block(block)
        .highlight_symbol(HIGHLIGHT)
        .highlight_spacing(HighlightSpacing::Always)
        .row_highlight_style(highlight_style());
    let mut state = TableState::default().with_selected(Some(app.detail.job));
    frame.render_stateful_widget(table, area, &mut state);
}

fn log(frame: &mut Frame, app: &App, area: Rect) {
    let Some(logs) = &app.detail.logs else { return };
    let mut title = format!(" Log of {} ", logs.job);
    if let Some(ended) = &logs.ended {
        title = format!(" Log of {} ({ended}) ", logs.job);
    }
    let inner_height = usize::from(area.height.saturating_sub(2));
    let skip = logs.lines.len().saturating_sub(inner_height);
    let lines: Vec<Line> = logs.lines.iter().skip(skip).map(|l| Line::from(l.clone())).collect();
    frame.render_widget(Paragraph::new(lines).block(Block::bordered().title(title)), area);
}

/// The head's last lines, for a cluster that is not ready: why, usually.
fn head_lines(frame: &mut Frame, lines: &Result<(String, String), String>, area: Rect) {
    match lines {
        Ok((pod, text)) => {
            let block = Block::bordered().title(format!(" Head's last lines ({pod}) "));
            let shown = usize::from(area.height.saturating_sub(2));
            let all: Vec<&str> = text.lines().collect();
            let last: Vec<Line> = all[all.len().saturating_sub(shown)..]
                .iter()
                .map(|l| Line::from((*l).to_owned()))
                .collect();
            frame.render_widget(Paragraph::new(last).block(block), area);
        }
        Err(why) => frame.render_widget(
            Paragraph::new(format!("No log from the head yet: {why}"))
                .style(Style::new().fg(Color::DarkGray))
                .wrap(Wrap { trim: true })
                .block(Block::bordered().title(" Head's last lines ")),
            area,
        ),
    }
}

fn events(frame: &mut Frame, app: &App, area: Rect) {
    let block = Block::bordered().title(" Recent events ");
    let Some(details) = &app.detail.details else {
        frame.render_widget(loading().block(block), area);
        return;
    };
    if details.events.is_empty() {
        frame.render_widget(
            Paragraph::new("No events.")
                .style(Style::new().fg(Color::DarkGray))
                .block(block),
            area,
        );
        return;
    }
    frame.render_widget(
        Paragraph::new(event_lines(details))
            .block(block)
            .wrap(Wrap { trim: true }),
        area,
    );
}

/// A cluster's events, newest first, warnings in yellow.
fn event_lines(details: &krayne_client::proto::ClusterDetails) -> Vec<Line<'static>> {
    let mut newest_first: Vec<_> = details.events.iter().collect();
    newest_first.sort_by_key(|e| std::cmp::Reverse(e.last_seen.as_ref().map(|t| (t.seconds, t.nanos))));
    newest_first
        .into_iter()
        .map(|e| {
            let style = if e.r#type == "Warning" {
                Style::new().fg(Color::Yellow)
            } else {
                Style::new()
            };
            Line::from(vec![
                Span::styled(format!("{:<8}", e.r#type), style),
                Span::raw(format!(
                    "{:<18} {}/{}: {}",
                    e.reason, e.object_kind, e.object_name, e.message
                )),
            ])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::allot;

    #[test]
    fn the_shape_comes_first_then_services_then_jobs() {
        // 80×24: 22 lines under the title.
        assert_eq!(allot(22, &[8, 8, 6]), (vec![8, 8, 6], 0));
        assert_eq!(allot(20, &[8, 8, 6]), (vec![8, 8, 4], 0), "jobs shrink before services");
        assert_eq!(
            allot(18, &[8, 8, 6]),
            (vec![8, 8, 0], 2),
            "a box with no room for a row is left out"
        );
        assert_eq!(allot(40, &[8, 8, 6]), (vec![8, 8, 6], 18), "the events get the rest");
    }
}
