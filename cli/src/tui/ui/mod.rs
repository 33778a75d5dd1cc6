//! Drawing: one function per screen and overlay, all reading [`App`].

mod detail;
mod explorer;
mod overlays;
#[cfg(test)]
mod tests;

pub(crate) use detail::SCROLLABLE;

use ratatui::{
    Frame,
    layout::{Constraint, Flex, Layout, Rect},
    style::{Color, Modifier, Style},
    text::{Line, Span},
};

use krayne_client::proto::ClusterInfo;

use super::app::{App, Connection, Screen};

/// Terminals narrower than this get the narrow explorer.
pub(crate) const MEDIUM: u16 = 100;
/// Terminals at least this wide also get the tunnels column.
pub(crate) const WIDE: u16 = 140;

/// Draws the whole screen.
pub(crate) fn draw(frame: &mut Frame, app: &App) {
    match &app.screen {
        Screen::Explorer => explorer::draw(frame, app),
        Screen::Detail(key) => detail::draw(frame, app, key),
    }
    overlays::draw(frame, app);
}

/// A cluster or service status in the colour of what it means.
pub(crate) fn status_style(status: &str) -> Style {
    let color = match status {
        "ready" | "running" | "available" | "succeeded" => Color::Green,
        "creating" | "containers-creating" | "pods-pending" | "pending" | "queued" => Color::Yellow,
        "suspended" | "suspending" | "stopped" => Color::DarkGray,
        _ => Color::Red,
    };
    Style::new().fg(color)
}

/// A cluster's status as the tables show it: a queued one with its place
/// in line (`queued #2`).
pub(crate) fn shown_status(c: &ClusterInfo) -> String {
    match c.queue_position {
        Some(place) if crate::commands::cluster::WAITING.contains(&c.status.as_str()) => {
            format!("{} #{place}", c.status)
        }
        _ => c.status.clone(),
    }
}

/// The connection state, for the top bar.
pub(crate) fn connection(app: &App) -> Span<'static> {
    match &app.connection {
        Connection::Connecting => Span::styled("○ connecting…", Style::new().fg(Color::Yellow)),
        Connection::Live => Span::styled("● live", Style::new().fg(Color::Green)),
        Connection::Reconnecting(_) => Span::styled(
            "○ reconnecting…",
            Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
        ),
        Connection::Refused(_) => Span::styled("✕ no access", Style::new().fg(Color::Red).add_modifier(Modifier::BOLD)),
        Connection::SignedOut(_) => {
            Span::styled("✕ signed out", Style::new().fg(Color::Red).add_modifier(Modifier::BOLD))
        }
    }
}

/// The bottom line: the status message, else the keys that work here
/// (as many as fit in `width`, the most used first).
pub(crate) fn status_line(app: &App, hints: &[&str], width: u16) -> Line<'static> {
    if let Some(status) = &app.status {
        let style = if status.error {
            Style::new().fg(Color::Red)
        } else {
            Style::new().fg(Color::Cyan)
        };
        return Line::from(Span::styled(status.text.clone(), style));
    }
    match &app.connection {
        Connection::Reconnecting(why) => {
            return Line::from(Span::styled(
                format!("reconnecting… ({why})"),
                Style::new().fg(Color::Yellow),
            ));
        }
        Connection::Refused(_) => {
            return Line::from(Span::styled(
                "no access · n: choose a namespace · q: quit",
                Style::new().fg(Color::Red),
            ));
        }
        Connection::SignedOut(_) => {
            return Line::from(Span::styled(
                "signed out · `krayne login`, then start the TUI again · q: quit",
                Style::new().fg(Color::Red),
            ));
        }
        Connection::Connecting | Connection::Live => {}
    }
    let mut shown = String::new();
    for hint in hints {
        let next = if shown.is_empty() {
            (*hint).to_owned()
        } else {
            format!("{shown} · {hint}")
        };
        if next.chars().count() > usize::from(width) {
            break;
        }
        shown = next;
    }
    Line::from(Span::styled(shown, Style::new().fg(Color::DarkGray)))
}

/// Marks the highlighted row of a table or list (visible without colour).
pub(crate) const HIGHLIGHT: &str = "▶ ";

/// A box of `width` × `height` in the middle of `area`, no larger than it.
pub(crate) fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let [row] = Layout::vertical([Constraint::Length(height.min(area.height))])
        .flex(Flex::Center)
        .areas(area);
    let [cell] = Layout::horizontal([Constraint::Length(width.min(area.width))])
        .flex(Flex::Center)
        .areas(row);
    cell
}

/// Header cells in bold.
pub(crate) fn header_style() -> Style {
    Style::new().add_modifier(Modifier::BOLD)
}

/// The highlighted row.
pub(crate) fn highlight_style() -> Style {
    Style::new().add_modifier(Modifier::REVERSED)
}
