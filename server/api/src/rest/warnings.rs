//! Kubernetes-style `Warning: 299` response headers (RFC 9111 §5.5
//! syntax, as kube-apiserver sends them) for a create's field warnings.

use axum::http::{HeaderMap, HeaderValue, header};

use crate::domain::FieldViolation;

/// At most this many `Warning` headers; the body's `warnings` has them all.
const MAX_HEADERS: usize = 32;
/// At most this many bytes of one header's value (after escaping).
const MAX_VALUE_BYTES: usize = 256;
/// At most this many bytes of `Warning` headers in all (kube-apiserver
/// keeps to 4 KiB; clients such as Node's limit all headers to 16 KiB).
const MAX_TOTAL_BYTES: usize = 4096;

/// One `Warning: 299 - "<field>: <what>"` header per warning while they
/// fit in [`MAX_HEADERS`] and [`MAX_TOTAL_BYTES`], then one saying how many
/// more the body holds.
pub(super) fn warning_headers(warnings: &[FieldViolation]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let mut total = 0;
    let mut sent = 0;
    for warning in warnings {
        let value = header_value(&warning.to_string());
        if sent == MAX_HEADERS || total + value.len() > MAX_TOTAL_BYTES {
            break;
        }
        total += value.len();
        sent += 1;
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.append(header::WARNING, value);
        }
    }
    let more = warnings.len() - sent;
    if more > 0
        && let Ok(value) = HeaderValue::from_str(&header_value(&format!("{more} more warnings in the response body")))
    {
        headers.append(header::WARNING, value);
    }
    headers
}

/// `299 - "<text>"`: `"` and `\` escaped, anything but printable ASCII (a
/// header value's safe set) as `\u{…}`, then cut to [`MAX_VALUE_BYTES`].
fn header_value(text: &str) -> String {
    const CUT: &str = "...\"";
    let mut out = String::from("299 - \"");
    for c in text.chars() {
        let mut escaped = String::new();
        match c {
            '"' | '\\' => {
                escaped.push('\\');
                escaped.push(c);
            }
            ' '..='~' => escaped.push(c),
            other => escaped.extend(other.escape_unicode()),
        }
        if out.len() + escaped.len() + CUT.len() > MAX_VALUE_BYTES {
            out.push_str(CUT);
            return out;
        }
        out.push_str(&escaped);
    }
    out.push('"');
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
    }

    #[test]
    fn escaping_cannot_outgrow_the_caps() {
        let wide: Vec<FieldViolation> = (0..40)
            .map(|_| warning(&"\u{1b}é".repeat(300), "unknown field, ignored"))
            .collect();
        let headers = warning_headers(&wide);
        let values: Vec<&str> = headers
            .get_all(header::WARNING)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert!(values.iter().all(|v| v.len() <= MAX_VALUE_BYTES), "{values:?}");
        assert!(values.iter().map(|v| v.len()).sum::<usize>() <= MAX_TOTAL_BYTES + MAX_VALUE_BYTES);
        assert!(values[0].ends_with("...\""), "{}", values[0]);
        assert!(values.last().unwrap().contains("more warnings in the response body"));
    }
}
