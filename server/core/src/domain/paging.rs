//! Cursor paging over sorted keys, with opaque tokens.

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};

use super::Error;

/// Default and largest page sizes.
pub(super) const DEFAULT_PAGE_SIZE: usize = 100;
const MAX_PAGE_SIZE: usize = 1000;

/// A validated page request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageRequest {
    /// Items per page.
    pub size: usize,
    /// The last key of the previous page.
    pub after: Option<String>,
}

impl PageRequest {
    /// Checks `page_size` (0 = default) and decodes `page_token`.
    pub fn new(page_size: u32, page_token: &str) -> Result<Self, Error> {
        let size = usize::try_from(page_size).unwrap_or(usize::MAX);
        let size = match size {
            0 => DEFAULT_PAGE_SIZE,
            n if n <= MAX_PAGE_SIZE => n,
            _ => {
                return Err(Error::invalid("page_size", format!("must be at most {MAX_PAGE_SIZE}")));
            }
        };
        let after = if page_token.is_empty() {
            None
        } else {
            let bytes = URL_SAFE_NO_PAD
                .decode(page_token)
                .map_err(|_| Error::invalid("page_token", "is not a token this server issued"))?;
            Some(
                String::from_utf8(bytes)
                    .map_err(|_| Error::invalid("page_token", "is not a token this server issued"))?,
            )
        };
        Ok(Self { size, after })
    }

    /// The opaque token that resumes after `key`.
    pub fn token_for(key: &str) -> String {
        URL_SAFE_NO_PAD.encode(key)
    }

    /// One page of `items`, which must be sorted by `key`.
    pub fn apply<T>(&self, items: Vec<T>, key: impl Fn(&T) -> String) -> Page<T> {
        let mut rest: Vec<T> = match &self.after {
            Some(after) => items.into_iter().filter(|i| key(i) > *after).collect(),
            None => items,
        };
        let next_page_token = if rest.len() > self.size {
            rest.truncate(self.size);
            rest.last().map(|i| URL_SAFE_NO_PAD.encode(key(i)))
        } else {
            None
        };
        Page {
            items: rest,
            next_page_token,
        }
    }
}

/// Where a page over `namespaces` (sorted) resumes after `after`
/// (namespace, name): the namespaces from `after`'s on, each with the name
/// its part starts after (`after`'s own name in its namespace, `None`
/// from the start of the later ones).
pub fn resume_points<'a>(
    namespaces: &'a [String],
    after: Option<(&'a str, &'a str)>,
) -> impl Iterator<Item = (&'a str, Option<&'a str>)> + 'a {
    namespaces.iter().filter_map(move |ns| match after {
        Some((a_ns, _)) if ns.as_str() < a_ns => None,
        Some((a_ns, a_name)) if ns.as_str() == a_ns => Some((ns.as_str(), Some(a_name))),
        _ => Some((ns.as_str(), None)),
    })
}

/// One page of results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    /// The items.
    pub items: Vec<T>,
    /// Token for the next page; `None` on the last.
    pub next_page_token: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_tokens_to_the_end() {
        let items: Vec<String> = (0..25).map(|i| format!("k{i:02}")).collect();
        let mut seen = Vec::new();
        let mut token = String::new();
        loop {
            let page = PageRequest::new(10, &token).unwrap().apply(items.clone(), Clone::clone);
            seen.extend(page.items);
            match page.next_page_token {
                Some(t) => token = t,
                None => break,
            }
        }
        assert_eq!(seen, items);
    }

    #[test]
    fn a_page_over_namespaces_resumes_where_the_last_ended() {
        let namespaces: Vec<String> = ["a", "a-b", "b"].map(String::from).to_vec();
        let all: Vec<_> = resume_points(&namespaces, None).collect();
        assert_eq!(all, [("a", None), ("a-b", None), ("b", None)]);
        let after: Vec<_> = resume_points(&namespaces, Some(("a-b", "x"))).collect();
        assert_eq!(after, [("a-b", Some("x")), ("b", None)]);
    }

    #[test]
    fn bad_requests_are_invalid_arguments() {
        assert_eq!(PageRequest::new(0, "").unwrap().size, DEFAULT_PAGE_SIZE);
        assert!(PageRequest::new(1001, "").is_err());
        let e = PageRequest::new(10, "%%%").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid request: page_token: is not a token this server issued"
        );
    }
}
