//! Reading the audit log: namespace admins see their namespaces, global
//! admins everything.

use super::{Context, ControlPlane};
use crate::domain::audit::AuditAction;
use crate::domain::{
    Action, Error, Page, PageRequest,
    audit::{AuditEntry, AuditFilter},
    check_dns1123_label,
};

impl ControlPlane {
    /// Audit rows matching `filter`, newest first. The scope is set here:
    /// callers cannot widen it.
    pub async fn audit_log(
        &self,
        cx: &Context,
        mut filter: AuditFilter,
        page: &PageRequest,
    ) -> Result<Page<AuditEntry>, Error> {
        filter.scope = None;
        let after = check_filter(&filter, page)?;
        if !cx.principal.global_admin {
            match &filter.namespace {
                Some(ns) => drop(self.authorize(cx, AuditAction::AuditList, ns, None).await?),
                None => {
                    let mine = self.namespaces_where(cx, Action::ReadAudit).await?;
                    if mine.is_empty() {
                        let e = Error::PermissionDenied(format!(
                            "{} needs the admin role on a namespace to read its audit log",
                            cx.principal.subject
                        ));
                        self.record_refusal(cx, AuditAction::AuditList, None, None, &e).await;
                        return Err(e);
                    }
                    filter.scope = Some(mine);
                }
            }
        }
        let mut rows = self.audit.query(&filter, page.size + 1, after.as_deref()).await?;
        let next_page_token = if rows.len() > page.size {
            rows.truncate(page.size);
            rows.last().map(|r| PageRequest::token_for(&r.id))
        } else {
            None
        };
        Ok(Page {
            items: rows,
            next_page_token,
        })
    }
}

/// The earliest time a filter may name: 0001-01-01T00:00:00Z. Postgres has
/// no year 0, so an earlier `since` could never be compared.
const EARLIEST_SECOND: i64 = -62_135_596_800;

/// Refuses filters no row could be compared with, on either database, and
/// returns the page's resume key in the form rows are stored in.
fn check_filter(filter: &AuditFilter, page: &PageRequest) -> Result<Option<String>, Error> {
    if let Some(ns) = &filter.namespace {
        check_dns1123_label(ns).map_err(|why| Error::invalid("namespace", why))?;
    }
    for (field, value) in [("since", &filter.since), ("until", &filter.until)] {
        let parsed = value.as_deref().map(str::parse::<jiff::Timestamp>);
        if parsed.is_some_and(|t| t.map_or(true, |t| t.as_second() < EARLIEST_SECOND)) {
            return Err(Error::invalid(
                field,
                "must be an RFC 3339 time from year 1 on, e.g. 2026-01-31T12:00:00Z",
            ));
        }
    }
    // Rows are keyed by UUID (lower case, hyphenated): any other key is not
    // a token this list handed out.
    page.after
        .as_deref()
        .map(|key| {
            uuid::Uuid::parse_str(key)
                .map(|id| id.hyphenated().to_string())
                .map_err(|_| Error::invalid("page_token", "is not a token this server issued"))
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(since: &str) -> AuditFilter {
        AuditFilter {
            since: Some(since.to_owned()),
            ..AuditFilter::default()
        }
    }

    #[test]
    fn times_must_be_from_year_one_on() {
        let page = PageRequest::new(0, "").unwrap();
        assert!(check_filter(&filter("0001-01-01T00:00:00Z"), &page).is_ok());
        for bad in [
            "0000-01-01T00:00:00Z",
            "0000-12-31T23:59:59Z",
            "-000001-01-01T00:00:00Z",
            "yesterday",
        ] {
            assert!(check_filter(&filter(bad), &page).is_err(), "{bad}");
        }
    }

    #[test]
    fn page_keys_are_stored_form_uuids() {
        let id = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
        for token in [
            id.to_owned(),
            format!("urn:uuid:{id}"),
            id.to_uppercase(),
            id.replace('-', ""),
        ] {
            let page = PageRequest::new(0, &PageRequest::token_for(&token)).unwrap();
            assert_eq!(
                check_filter(&AuditFilter::default(), &page).unwrap().as_deref(),
                Some(id),
                "{token}"
            );
        }
        let garbage = PageRequest::new(0, &PageRequest::token_for("garbage")).unwrap();
        assert!(check_filter(&AuditFilter::default(), &garbage).is_err());
    }

    #[test]
    fn a_namespace_filter_must_be_a_namespace() {
        let page = PageRequest::new(0, "").unwrap();
        let f = AuditFilter {
            namespace: Some("ml\0team".into()),
            ..AuditFilter::default()
        };
        assert!(check_filter(&f, &page).is_err());
    }
}
