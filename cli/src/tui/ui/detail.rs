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

use super::{HIGHLIGHT, MEDIUM, connection, header_style, highlight_style, status_line, status_style};
use crate::{
    commands::job::status,
    output::{age_at, or_dash},
    tui::app::{App, Key},
};

const HINTS: &[&str] = &[
    "q back",
    "↑↓ job",
    "l follow log",
    "x stop job",
    "s scale",
    "d delete",
    "t tunnels",
    "o open",
    "r refresh",
    "? help",
];

pub(super) fn draw(frame: &mut Frame, app: &App, key: &Key) {
    let services = app.detail.services.as_ref().map_or(1, Vec::len);
    let jobs = app.detail.jobs.as_ref().map_or(1, |j| j.len().clamp(1, 6));
    let groups = app.detail.details.as_ref().map_or(1, |d| d.worker_groups.len().max(1));
    let narrow = frame.area().width < MEDIUM;
    let top = if narrow { 4 + groups + 3 } else { 4.max(groups + 1) };
    let [bar, top_area, services_area, jobs_area, bottom, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(u16::try_from(top + 2).unwrap_or(u16::MAX)),
        Constraint::Length(u16::try_from(services + 3).unwrap_or(u16::MAX)),
        Constraint::Length(u16::try_from(jobs + 3).unwrap_or(u16::MAX)),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(Paragraph::new(title(app, key)), bar);
    let (head_area, groups_area) = if narrow {
        let [h, g] = Layout::vertical([Constraint::Length(6), Constraint::Min(3)]).areas(top_area);
        (h, g)
    } else {
        let [h, g] = Layout::horizontal([Constraint::Percentage(40), Constraint::Percentage(60)]).areas(top_area);
        (h, g)
    };
    head(frame, app, head_area);
    worker_groups(frame, app, groups_area);
    services_table(frame, app, key, services_area);
    jobs_table(frame, app, jobs_area);
    if app.detail.logs.is_some() {
        log(frame, app, bottom);
    } else {
        events(frame, app, bottom);
    }
    frame.render_widget(Paragraph::new(status_line(app, HINTS, status.width)), status);
}

fn title(app: &App, key: &Key) -> Line<'static> {
    let mut spans = vec![
        Span::styled(" krayne ", Style::new().fg(Color::Black).bg(Color::Cyan)),
        Span::raw(format!("  {} ({})  ", key.1, key.0)),
    ];
    match app.clusters.get(key) {
        Some(c) => {
            spans.push(Span::styled(c.status.clone(), status_style(&c.status)));
            spans.push(Span::raw(format!(
                "  {}/{} workers ready  age {}  by {}  ",
                c.ready_workers,
                c.num_workers,
                age_at(c.created_at.as_ref(), app.now),
                or_dash(c.created_by.as_deref()),
            )));
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

fn head(frame: &mut Frame, app: &App, area: Rect) {
    let block = Block::bordered().title(" Head ");
    let Some(details) = &app.detail.details else {
        frame.render_widget(loading().block(block), area);
        return;
    };
    let head = details.head.clone().unwrap_or_default();
    let ip = details.info.as_ref().and_then(|i| i.head_ip.as_deref());
    let lines = vec![
        Line::from(format!("Image   {}", head.image)),
        Line::from(format!("CPU {}  Memory {}  GPUs {}", head.cpus, head.memory, head.gpus)),
        Line::from(format!("IP      {}", or_dash(ip))),
        Line::from(format!(
            "Ray {}  Python {}",
            details.ray_version, details.python_version
        )),
    ];
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
    let mut newest_first: Vec<_> = details.events.iter().collect();
    newest_first.sort_by_key(|e| std::cmp::Reverse(e.last_seen.as_ref().map(|t| (t.seconds, t.nanos))));
    let lines: Vec<Line> = newest_first
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
        .collect();
    frame.render_widget(Paragraph::new(lines).block(block).wrap(Wrap { trim: true }), area);
}
