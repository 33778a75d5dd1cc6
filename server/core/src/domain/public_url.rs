//! The URL users reach the server at (`--public-url`), which may be behind
//! an ingress that adds a path prefix.

use std::fmt;

/// `scheme://host[:port]` and the path prefix in front of the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl {
    origin: String,
    prefix: String,
}

impl PublicUrl {
    /// Parses `http(s)://host[:port][/prefix]` (no query, no fragment).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let rest = text
            .strip_prefix("https://")
            .or_else(|| text.strip_prefix("http://"))
            .ok_or_else(|| format!("{text:?}: expected http://… or https://…"))?;
        if rest.contains(['?', '#']) || rest.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!("{text:?}: a public URL has no query, fragment or spaces"));
        }
        let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if host.is_empty() {
            return Err(format!("{text:?}: no host"));
        }
        let scheme = &text[..text.len() - rest.len()];
        Ok(Self {
            origin: format!("{scheme}{host}"),
            prefix: path.trim_end_matches('/').to_owned(),
        })
    }

    /// `scheme://host[:port]`.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The path in front of the API's routes (`""` or `/krayne`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Whether browsers reach the server over TLS (cookies are `Secure`).
    pub fn is_https(&self) -> bool {
        self.origin.starts_with("https://")
    }
}

impl fmt::Display for PublicUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.origin, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_and_prefix_are_split() {
        let u = PublicUrl::parse("https://ml.example.com/krayne/").unwrap();
        assert_eq!(
            (u.origin(), u.prefix(), u.is_https()),
            ("https://ml.example.com", "/krayne", true)
        );
        let u = PublicUrl::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(
            (u.origin(), u.prefix(), u.is_https()),
            ("http://127.0.0.1:8080", "", false)
        );
        assert_eq!(u.to_string(), "http://127.0.0.1:8080");
        for bad in [
            "ml.example.com",
            "ftp://x",
            "https://",
            "https://x/?a=1",
            "https://x/#f",
            "https://x/a b",
        ] {
            assert!(PublicUrl::parse(bad).is_err(), "{bad}");
        }
    }
}
