//! Text taken from a request, made safe to log and to store: control
//! characters escaped (a newline or ESC in a user agent must not start a
//! forged log line or recolour a terminal) and length bounded (a 60 KB
//! header must not become a 60 KB audit row).

use std::{borrow::Cow, fmt::Write as _};

/// Longest free text (user agent, error, correlation id) kept from a
/// request, in bytes, before the cut mark.
pub const MAX_FREE_TEXT_BYTES: usize = 512;

/// Marks text that was cut.
pub const CUT_MARK: char = '…';

/// `text` with every control character (C0, DEL, C1) written as an
/// escape (`\n`, `\u{1b}`), so it stays one line of printable text.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `text` cut to at most `max_bytes` (at a character boundary), ending in
/// [`CUT_MARK`] when cut.
pub fn bounded(text: &str, max_bytes: usize) -> Cow<'_, str> {
    if text.len() <= max_bytes {
        return Cow::Borrowed(text);
    }
    let mut end = max_bytes.saturating_sub(CUT_MARK.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}{CUT_MARK}", &text[..end]))
}

/// Free text from a request as krayne logs and stores it: controls
/// escaped, then cut to [`MAX_FREE_TEXT_BYTES`].
pub fn printable(text: &str) -> String {
    bounded(&escape_controls(text), MAX_FREE_TEXT_BYTES).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_plain_text_is_kept() {
        assert_eq!(escape_controls("curl/8.5"), "curl/8.5");
        assert!(matches!(escape_controls("plain"), Cow::Borrowed(_)));
        assert_eq!(
            escape_controls("a\nINFO forged\r\x1b[31mred\x7f\u{85}"),
            "a\\nINFO forged\\r\\u{1b}[31mred\\u{7f}\\u{85}"
        );
    }

    #[test]
    fn long_text_is_cut_at_a_boundary_and_marked() {
        let cut = printable(&"é".repeat(10_000));
        assert!(cut.len() <= MAX_FREE_TEXT_BYTES, "{}", cut.len());
        assert!(cut.ends_with(CUT_MARK) && cut.starts_with("éé"));
        assert_eq!(printable(&"x".repeat(512)).len(), 512);
        assert_eq!(bounded("abc", 3), "abc");
    }

    #[test]
    fn escaping_happens_before_the_cut() {
        let forged = "\n".repeat(1_000);
        let p = printable(&forged);
        assert!(!p.contains('\n') && p.len() <= MAX_FREE_TEXT_BYTES);
    }
}
