//! Kubernetes-style `Warning: 299` response headers (RFC 9111 §5.5
//! syntax, as kube-apiserver sends them) for a create's field warnings.

use axum::http::{HeaderMap, HeaderValue, header};

use crate::domain::{FieldViolation, text::bounded};

/// At most this many `Warning` headers; the body's `warnings` has them all.
const MAX_HEADERS: usize = 32;
/// At most this many bytes of one warning's text in a header.
const MAX_TEXT_BYTES: usize = 256;

/// One `Warning: 299 - "<field>: <what>"` header per warning (the first
/// [`MAX_HEADERS`], then one saying how many more the body holds).
pub(super) fn warning_headers(warnings: &[FieldViolation]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let texts = warnings.iter().take(MAX_HEADERS).map(ToString::to_string);
    let more = warnings.len().saturating_sub(MAX_HEADERS);
    let rest = (more > 0).then(|| format!("{more} more warnings in the response body"));
    for text in texts.chain(rest) {
        if let Ok(value) = HeaderValue::from_str(&format!("299 - \"{}\"", quoted(&text))) {
            headers.append(header::WARNING, value);
        }
    }
    headers
}

/// The inside of an HTTP quoted-string: `"` and `\` escaped, and anything
/// but printable ASCII (a header value's safe set) as `\u{…}`.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in bounded(text, MAX_TEXT_BYTES).chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            other => out.extend(other.escape_unicode()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warning(field: &str, description: &str) -> FieldViolation {
        FieldViolation {
            field: field.into(),
            description: description.into(),
        }
    }

    #[test]
    fn each_warning_is_one_quoted_299_header() {
        let headers = warning_headers(&[
            warning("head.gpus", "the string \"2\" read as 2"),
            warning("services.vscode\u{1b}é", "unknown field, ignored"),
        ]);
        let values: Vec<&str> = headers
            .get_all(header::WARNING)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert_eq!(
            values,
            [
                r#"299 - "head.gpus: the string \"2\" read as 2""#,
                r#"299 - "services.vscode\u{1b}\u{e9}: unknown field, ignored""#,
            ]
        );
    }

    #[test]
    fn many_warnings_are_capped_with_a_pointer_to_the_body() {
        let many: Vec<FieldViolation> = (0..40)
            .map(|i| warning(&format!("head.k{i}"), "unknown field, ignored"))
            .collect();
        let headers = warning_headers(&many);
        let values: Vec<&HeaderValue> = headers.get_all(header::WARNING).iter().collect();
        assert_eq!(values.len(), MAX_HEADERS + 1);
        assert_eq!(values[MAX_HEADERS], "299 - \"8 more warnings in the response body\"");
        let long = warning_headers(&[warning("head.x", &"a".repeat(1000))]);
        assert!(long.get(header::WARNING).unwrap().len() < MAX_TEXT_BYTES + 16);
    }
}
