//! Answers as a Ray head's dashboard (aiohttp) gives them: JSON from
//! Python's `json.dumps` (`", "` and `": "` separators, non-ASCII escaped),
//! errors as plain text (tracebacks for 400 and 500), and its guard
//! against browsers.

use std::io;

use axum::{
    body::Body,
    http::{HeaderMap, HeaderValue, Method, StatusCode, header},
    response::{IntoResponse, Response},
};
use futures::StreamExt as _;
use serde::Serialize as _;
use serde_json::{Value, ser::Formatter};

/// The dashboard's request body limit.
pub(super) const MAX_BODY: usize = 100 * 1024 * 1024;

/// `Value` as Python's `json.dumps` writes it.
pub(super) fn python_json_text(value: &Value) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PythonFormatter);
    // Writing to a Vec cannot fail, and a Value always serializes.
    let _ = value.serialize(&mut ser);
    String::from_utf8(out).unwrap_or_default()
}

/// 200-like JSON answer (`application/json; charset=utf-8`).
pub(in crate::standins) fn python_json(status: StatusCode, value: &Value) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        )],
        python_json_text(value),
    )
        .into_response()
}

/// A plain-text answer, as aiohttp sends errors.
pub(super) fn text(status: StatusCode, body: impl Into<String>) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        body.into(),
    )
        .into_response()
}

/// A Python traceback ending in `exception` (`TypeError: …`), as the
/// dashboard answers a 400 or 500.
pub(super) fn traceback(status: StatusCode, function: &str, exception: &str) -> Response {
    text(
        status,
        format!(
            "Traceback (most recent call last):\n  File \"/krayne-sandbox/ray/dashboard/modules/job/job_head.py\", line 1, in {function}\n{exception}\n"
        ),
    )
}

/// `Job {id} does not exist` (404).
pub(super) fn no_such_job(id: &str) -> Response {
    text(StatusCode::NOT_FOUND, format!("Job {id} does not exist"))
}

/// aiohttp's answer to an exception it did not expect.
pub(super) fn trouble() -> Response {
    text(
        StatusCode::INTERNAL_SERVER_ERROR,
        "500 Internal Server Error\n\nServer got itself in trouble",
    )
}

/// 413 past [`MAX_BODY`].
pub(super) fn too_large() -> Response {
    text(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("Maximum request body size {MAX_BODY} exceeded."),
    )
}

/// Whether Ray takes the request for a browser's.
pub(super) fn from_browser(headers: &HeaderMap) -> bool {
    const BROWSER_HEADERS: [&str; 8] = [
        "origin",
        "referer",
        "sec-fetch-mode",
        "sec-fetch-dest",
        "sec-fetch-site",
        "sec-fetch-user",
        "access-control-request-method",
        "access-control-request-headers",
    ];
    headers
        .get(header::USER_AGENT)
        .and_then(|ua| ua.to_str().ok())
        .is_some_and(|ua| ua.starts_with("Mozilla"))
        || BROWSER_HEADERS.iter().any(|h| headers.contains_key(*h))
}

/// Ray's browser guard: a browser may read, never change (every
/// mutation it sends is refused with 405).
pub(super) async fn browser_guard(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let method = request.method().clone();
    if [Method::POST, Method::PUT, Method::DELETE].contains(&method) && from_browser(request.headers()) {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("'{method}' method not allowed for browser traffic."),
        );
    }
    next.run(request).await
}

/// Why a body could not be read.
pub(super) enum BodyError {
    TooLarge,
    Broken,
    Io(io::Error),
}

impl BodyError {
    pub(super) fn into_response(self, function: &str) -> Response {
        match self {
            Self::TooLarge => too_large(),
            Self::Broken => trouble(),
            Self::Io(e) => traceback(StatusCode::INTERNAL_SERVER_ERROR, function, &format!("OSError: {e}")),
        }
    }
}

/// A request body read chunk by chunk, refused past [`MAX_BODY`].
pub(super) struct Capped {
    stream: axum::body::BodyDataStream,
    total: usize,
}

impl Capped {
    pub(super) fn new(body: Body) -> Self {
        Self {
            stream: body.into_data_stream(),
            total: 0,
        }
    }

    /// The next chunk; `None` at the end.
    pub(super) async fn next(&mut self) -> Result<Option<axum::body::Bytes>, BodyError> {
        let Some(chunk) = self.stream.next().await else {
            return Ok(None);
        };
        let chunk = chunk.map_err(|_| BodyError::Broken)?;
        self.total += chunk.len();
        if self.total > MAX_BODY {
            return Err(BodyError::TooLarge);
        }
        Ok(Some(chunk))
    }
}

/// Python's `json.dumps` defaults: `", "` between items, `": "` after
/// keys, `ensure_ascii` (every non-ASCII character as `\uXXXX`).
struct PythonFormatter;

impl Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + io::Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + io::Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        writer.write_all(b": ")
    }

    fn write_string_fragment<W: ?Sized + io::Write>(&mut self, writer: &mut W, fragment: &str) -> io::Result<()> {
        for c in fragment.chars() {
            if c.is_ascii() {
                writer.write_all(&[c as u8])?;
            } else {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    write!(writer, "\\u{unit:04x}")?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderMap;
    use serde_json::json;

    use super::*;

    #[test]
    fn json_is_written_as_python_writes_it() {
        let v = json!({"a": [1, 2], "b": {"c": null}, "d": "é😀\n\""});
        assert_eq!(
            python_json_text(&v),
            r#"{"a": [1, 2], "b": {"c": null}, "d": "\u00e9\ud83d\ude00\n\""}"#
        );
        assert_eq!(python_json_text(&json!([])), "[]");
        assert_eq!(python_json_text(&json!({})), "{}");
    }

    #[test]
    fn browsers_are_told_by_their_headers() {
        let with = |k: &'static str, v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(k, HeaderValue::from_static(v));
            h
        };
        assert!(from_browser(&with("user-agent", "Mozilla/5.0 (X11)")));
        assert!(from_browser(&with("origin", "http://x")));
        assert!(from_browser(&with("sec-fetch-mode", "cors")));
        assert!(!from_browser(&with("user-agent", "python-requests/2.34.2")));
        assert!(!from_browser(&HeaderMap::new()));
    }
}
