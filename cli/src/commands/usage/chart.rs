//! `krayne usage --chart`: GPU-hours per day as horizontal bars, drawn
//! with ratatui's `BarChart` into a buffer and printed as plain text (no
//! terminal sequences, so it pastes and pipes).

use ratatui::{
    buffer::Buffer,
    layout::{Direction, Rect},
    widgets::{Bar, BarChart, BarGroup, Widget as _},
};

/// `days` (each `YYYY-MM-DD` with its GPU-hours) as one bar each, `width`
/// columns wide.
pub(crate) fn gpu_hours_per_day(days: &[(String, f64)], width: u16) -> String {
    if days.is_empty() {
        return "(no usage in this window)\n".to_owned();
    }
    // Bars are drawn relative to the largest, so a short window's small
    // figures still draw.
    let max = days.iter().map(|(_, h)| *h).fold(0.0, f64::max);
    let bars: Vec<Bar> = days
        .iter()
        .map(|(day, hours)| {
            Bar::default()
                .label(day.as_str())
                .value(if max > 0.0 {
                    (hours.max(0.0) / max * 1_000_000.0).round() as u64
                } else {
                    0
                })
                .text_value(String::new())
        })
        .collect();
    let height = u16::try_from(days.len()).unwrap_or(u16::MAX);
    // The figure goes after its bar, in room kept for the widest.
    let figures: Vec<String> = days
        .iter()
        .map(|(_, hours)| match *hours {
            h if h > 0.0 && h < 0.005 => "<0.01".to_owned(),
            h => format!("{h:.2}"),
        })
        .collect();
    let room = figures.iter().map(String::len).max().unwrap_or(0) + 1;
    let width = width.saturating_sub(u16::try_from(room).unwrap_or(0)).max(12);
    let area = Rect::new(0, 0, width, height);
    let mut buffer = Buffer::empty(area);
    BarChart::default()
        .direction(Direction::Horizontal)
        .bar_width(1)
        .bar_gap(0)
        .data(BarGroup::default().bars(&bars))
        .render(area, &mut buffer);
    let mut text = String::new();
    for y in 0..height {
        let line: String = (0..width)
            .map(|x| buffer.cell((x, y)).map_or(" ", |c| c.symbol()))
            .collect();
        text.push_str(line.trim_end());
        text.push(' ');
        text.push_str(&figures[usize::from(y)]);
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_hours_per_day_draw_as_bars() {
        let days = [
            ("2026-11-01".to_owned(), 12.5),
            ("2026-11-02".to_owned(), 48.0),
            ("2026-11-03".to_owned(), 0.0),
            ("2026-11-04".to_owned(), 30.25),
        ];
        insta::assert_snapshot!(gpu_hours_per_day(&days, 60));
        assert_eq!(gpu_hours_per_day(&[], 60), "(no usage in this window)\n");
    }
}
