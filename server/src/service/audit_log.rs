//! Reading the audit log: namespace admins see their namespaces, global
//! admins everything.

use super::{ClusterService, Context};
use crate::domain::{
    Action, Error, Page, PageRequest,
    audit::{AuditEntry, AuditFilter},
};

impl ClusterService {
    /// Audit rows matching `filter`, newest first. The scope is set here:
    /// callers cannot widen it.
    pub async fn audit_log(
        &self,
        cx: &Context,
        mut filter: AuditFilter,
        page: &PageRequest,
    ) -> Result<Page<AuditEntry>, Error> {
        filter.scope = None;
        if !cx.principal.global_admin {
            match &filter.namespace {
                Some(ns) => self.authorize(cx, Action::ReadAudit, "audit.list", ns, None).await?,
                None => {
                    let namespaces = self.store.namespaces(&cx.meta.request_id).await?;
                    let mine: Vec<String> = namespaces
                        .into_iter()
                        .filter(|ns| cx.principal.may(Action::ReadAudit, ns))
                        .collect();
                    if mine.is_empty() {
                        let e = Error::PermissionDenied(format!(
                            "{} needs the admin role on a namespace to read its audit log",
                            cx.principal.subject
                        ));
                        self.record_refusal(cx, "audit.list", None, None, &e).await;
                        return Err(e);
                    }
                    filter.scope = Some(mine);
                }
            }
        }
        let mut rows = self.audit.query(&filter, page.size + 1, page.after.as_deref()).await?;
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
