//! What is drawn over a screen: help, the filter line, the delete
//! confirmation, the create and scale forms, the palette, the namespace
//! picker.

use ratatui::{
    Frame,
    layout::{Constraint, Layout, Rect},
    style::{Color, Modifier, Style},
    text::{Line, Span},
    widgets::{Block, Clear, HighlightSpacing, List, ListItem, ListState, Paragraph, Wrap},
};

use super::{HIGHLIGHT, centered, highlight_style};
use crate::tui::{
    app::{App, Overlay},
    command::{KEYS, Palette},
    form::{Form, Value},
};

pub(super) fn draw(frame: &mut Frame, app: &App) {
    let area = frame.area();
    match &app.overlay {
        None => {}
        Some(Overlay::Help) => help(frame, area),
        Some(Overlay::Filter) => filter(frame, app, area),
        Some(Overlay::ConfirmDelete(key)) => {
            let text = vec![
                Line::from(format!("Delete cluster {} in {}?", key.1, key.0)),
                Line::from(""),
                Line::from(Span::styled(
                    "y delete · any other key keeps it",
                    Style::new().fg(Color::DarkGray),
                )),
            ];
            let popup = centered(area, 50, 5);
            frame.render_widget(Clear, popup);
            frame.render_widget(
                Paragraph::new(text).block(
                    Block::bordered()
                        .title(" Delete ")
                        .border_style(Style::new().fg(Color::Red)),
                ),
                popup,
            );
        }
        Some(Overlay::Create(form) | Overlay::Scale(_, form)) => form_popup(frame, form, area),
        Some(Overlay::Palette(palette)) => palette_popup(frame, palette, area),
        Some(Overlay::Namespaces { selected }) => namespaces(frame, app, *selected, area),
        Some(Overlay::Link { what, url }) => link(frame, what, url, area),
    }
}

/// A sign-in link across the whole width, with no border beside it, so
/// that selecting it copies the link and nothing else (a browser's
/// address bar drops the line breaks of a wrapped link).
fn link(frame: &mut Frame, what: &str, url: &str, area: Rect) {
    let width = usize::from(area.width.max(1));
    let url_lines = url.chars().count().div_ceil(width).max(1);
    let height = u16::try_from(url_lines + 6).unwrap_or(u16::MAX).min(area.height);
    let band = Rect {
        y: area.y + area.height.saturating_sub(height) / 2,
        height,
        ..area
    };
    frame.render_widget(Clear, band);
    let dim = Style::new().fg(Color::DarkGray);
    let [top, link_area, bottom] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Length(u16::try_from(url_lines).unwrap_or(u16::MAX)),
        Constraint::Min(0),
    ])
    .areas(band);
    frame.render_widget(
        Paragraph::new(vec![
            Line::from(Span::styled("─".repeat(width), dim)),
            Line::from(Span::styled(
                format!("Sign-in link for {what} (no browser here)"),
                Style::new().add_modifier(Modifier::BOLD),
            )),
            Line::from(Span::styled(
                "Open it once, within a minute; it signs in as you: do not share it.",
                dim,
            )),
        ]),
        top,
    );
    // Cut by characters: a link has no spaces to wrap at.
    let lines: Vec<Line> = url
        .chars()
        .collect::<Vec<_>>()
        .chunks(width)
        .map(|c| Line::from(Span::styled(c.iter().collect::<String>(), Style::new().fg(Color::Cyan))))
        .collect();
    frame.render_widget(Paragraph::new(lines), link_area);
    frame.render_widget(
        Paragraph::new(vec![
            Line::from(Span::styled(
                "c copies it (OSC 52) · p prints it unwrapped when you quit · any other key closes",
                dim,
            )),
            Line::from(Span::styled("─".repeat(width), dim)),
        ]),
        bottom,
    );
}

fn help(frame: &mut Frame, area: Rect) {
    let lines: Vec<Line> = KEYS
        .iter()
        .map(|(key, what)| {
            Line::from(vec![
                Span::styled(format!("{key:>10}  "), Style::new().add_modifier(Modifier::BOLD)),
                Span::raw(*what),
            ])
        })
        .collect();
    let height = u16::try_from(lines.len() + 2).unwrap_or(u16::MAX);
    let popup = centered(area, 64, height);
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" Keys (any key closes) ")),
        popup,
    );
}

fn filter(frame: &mut Frame, app: &App, area: Rect) {
    let line = Rect {
        y: area.bottom().saturating_sub(1),
        height: 1,
        ..area
    };
    frame.render_widget(Clear, line);
    let text = Line::from(vec![
        Span::styled("/", Style::new().fg(Color::Magenta)),
        Span::raw(app.filter_text.clone()),
        Span::styled("█", Style::new().fg(Color::Magenta)),
        Span::styled(
            "   Enter keeps · Esc clears · status: ns: service:",
            Style::new().fg(Color::DarkGray),
        ),
    ]);
    frame.render_widget(Paragraph::new(text), line);
}

fn form_popup(frame: &mut Frame, form: &Form, area: Rect) {
    let mut lines = Vec::new();
    for (i, field) in form.fields.iter().enumerate() {
        let focused = i == form.focus;
        let label = Span::styled(
            format!("{:>16}  ", field.label),
            if focused {
                Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD)
            } else {
                Style::new()
            },
        );
        let value = match &field.value {
            Value::Toggle(on) => Span::raw(if *on { "[x]" } else { "[ ]" }),
            Value::Text(t) if t.is_empty() && !focused => {
                Span::styled(field.hint.clone(), Style::new().fg(Color::DarkGray))
            }
            Value::Text(t) => Span::raw(t.clone()),
        };
        let mut spans = vec![label, value];
        if focused && matches!(field.value, Value::Text(_)) {
            spans.push(Span::styled("█", Style::new().fg(Color::Cyan)));
        }
        lines.push(Line::from(spans));
        if let Some(error) = &field.error {
            lines.push(Line::from(Span::styled(
                format!("  ↳ {error}"),
                Style::new().fg(Color::Red),
            )));
        }
    }
    lines.push(Line::from(""));
    if let Some(error) = &form.error {
        lines.push(Line::from(Span::styled(error.clone(), Style::new().fg(Color::Red))));
    }
    let footer = if form.busy {
        "sending…"
    } else {
        "Tab/↑↓ field · Space toggles · Enter sends · Esc cancels"
    };
    lines.push(Line::from(Span::styled(footer, Style::new().fg(Color::DarkGray))));
    let height = u16::try_from(lines.len() + 2).unwrap_or(u16::MAX);
    let popup = centered(area, 72, height);
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(format!(" {} ", form.title))),
        popup,
    );
}

fn palette_popup(frame: &mut Frame, palette: &Palette, area: Rect) {
    let popup = centered(area, 60, 14);
    frame.render_widget(Clear, popup);
    let block = Block::bordered().title(" Command palette (Esc closes) ");
    let inner = block.inner(popup);
    frame.render_widget(block, popup);
    let [query, list] = Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(inner);
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled("> ", Style::new().fg(Color::Cyan)),
            Span::raw(palette.query.clone()),
            Span::styled("█", Style::new().fg(Color::Cyan)),
        ])),
        query,
    );
    let items: Vec<ListItem> = palette.shown.iter().map(|(l, _)| ListItem::new(l.clone())).collect();
    let mut state = ListState::default().with_selected((!items.is_empty()).then_some(palette.selected));
    frame.render_stateful_widget(
        List::new(items)
            .highlight_symbol(HIGHLIGHT)
            .highlight_spacing(HighlightSpacing::Always)
            .highlight_style(highlight_style()),
        list,
        &mut state,
    );
}

fn namespaces(frame: &mut Frame, app: &App, selected: usize, area: Rect) {
    let names = app.picker();
    let mut items = vec![ListItem::new("(all namespaces)")];
    items.extend(names.iter().map(|n| {
        let role = app
            .namespaces
            .iter()
            .find(|a| &a.namespace == n)
            .map(|a| a.role().as_str_name().trim_start_matches("ROLE_").to_ascii_lowercase())
            .unwrap_or_default();
        let current = if app.namespace.as_deref() == Some(n) {
            " ●"
        } else {
            ""
        };
        ListItem::new(format!("{n}  ({role}){current}"))
    }));
    let height = u16::try_from(items.len() + 2).unwrap_or(u16::MAX).clamp(4, 20);
    let popup = centered(area, 48, height);
    frame.render_widget(Clear, popup);
    let title = if app.namespaces.is_empty() {
        " Namespaces (loading…) "
    } else {
        " Namespaces (most recent first) "
    };
    let mut state = ListState::default().with_selected(Some(selected));
    frame.render_stateful_widget(
        List::new(items)
            .block(Block::bordered().title(title))
            .highlight_symbol(HIGHLIGHT)
            .highlight_spacing(HighlightSpacing::Always)
            .highlight_style(highlight_style()),
        popup,
        &mut state,
    );
}
