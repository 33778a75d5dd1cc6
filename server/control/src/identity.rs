//! Who the caller is, and which namespaces they may use.

use super::{Context, ControlPlane};
use crate::domain::{Error, Identity, NamespaceAccess, Page, PageRequest, quota};

impl ControlPlane {
    /// The caller, their teams and their effective role per namespace.
    pub async fn whoami(&self, cx: &Context) -> Result<Identity, Error> {
        let p = &cx.principal;
        Ok(Identity {
            subject: p.subject.clone(),
            email: p.email.clone(),
            groups: p.groups.clone(),
            teams: p.teams.clone(),
            global_admin: p.global_admin,
            namespaces: self.accessible(cx).await?,
            grants: p.grants.clone(),
            issuer: p.issuer.clone(),
            expires_at: p
                .expires_at
                .and_then(|t| jiff::Timestamp::from_second(t).ok())
                .map(|t| t.to_string()),
        })
    }

    /// Namespaces the caller may use, by name.
    pub async fn namespaces(&self, cx: &Context, page: &PageRequest) -> Result<Page<NamespaceAccess>, Error> {
        Ok(page.apply(self.accessible(cx).await?, |n| n.namespace.clone()))
    }

    async fn accessible(&self, cx: &Context) -> Result<Vec<NamespaceAccess>, Error> {
        let mut names = self.store.namespaces(&cx.meta.request_id).await?;
        names.sort();
        let mut accessible = Vec::new();
        for ns in names {
            let Some(role) = cx.principal.role_in(&ns) else {
                continue;
            };
            let quota = match self.quota_of(&ns) {
                Some(quota) => quota::standing(&quota, &self.usage_cached(&ns, &cx.meta.request_id).await?),
                None => Vec::new(),
            };
            accessible.push(NamespaceAccess {
                via_teams: cx.principal.teams_for(&ns),
                namespace: ns,
                role,
                quota,
            });
        }
        Ok(accessible)
    }
}
