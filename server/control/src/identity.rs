//! Who the caller is, and which namespaces they may use.

use super::{Context, ControlPlane};
use crate::domain::{Action, Error, Identity, NamespaceAccess, Page, PageRequest, quota};

impl ControlPlane {
    /// The caller, their teams and their effective role per namespace
    /// their grants reach (a global admin's: their teams'), and how many
    /// namespaces they may use: bounded by what the caller's grants cover,
    /// never every namespace of the platform.
    pub async fn whoami(&self, cx: &Context) -> Result<Identity, Error> {
        let p = &cx.principal;
        let namespaces = self.granted(cx).await?;
        let namespace_count = if p.global_admin {
            self.store.namespace_count(&cx.meta.request_id).await?
        } else {
            namespaces.len()
        };
        Ok(Identity {
            subject: p.subject.clone(),
            email: p.email.clone(),
            groups: p.groups.clone(),
            teams: p.teams.clone(),
            global_admin: p.global_admin,
            namespaces,
            namespace_count,
            grants: p.grants.clone(),
            issuer: p.issuer.clone(),
            expires_at: p
                .expires_at
                .and_then(|t| jiff::Timestamp::from_second(t).ok())
                .map(|t| t.to_string()),
        })
    }

    /// Namespaces the caller may use, by name (a global admin's: every
    /// one).
    pub async fn namespaces(&self, cx: &Context, page: &PageRequest) -> Result<Page<NamespaceAccess>, Error> {
        let names = self.namespaces_where(cx, Action::Read).await?;
        let names = page.apply(names, Clone::clone);
        Ok(Page {
            items: self.access_to(cx, names.items).await?,
            next_page_token: names.next_page_token,
        })
    }

    /// The namespaces that exist where the caller may `action`, sorted:
    /// looked up by the caller's grants, so it costs what it finds; a
    /// global admin's are every namespace.
    pub(crate) async fn namespaces_where(&self, cx: &Context, action: Action) -> Result<Vec<String>, Error> {
        let rid = &cx.meta.request_id;
        if cx.principal.global_admin {
            let mut all = self.store.namespaces(rid).await?;
            all.sort_unstable();
            return Ok(all);
        }
        let patterns: Vec<&str> = cx
            .principal
            .grants
            .iter()
            .filter(|g| g.role >= action.needs())
            .map(|g| g.pattern.as_str())
            .collect();
        self.store.namespaces_matching(&patterns, rid).await
    }

    /// The namespaces the caller's grants reach, with role and quota.
    async fn granted(&self, cx: &Context) -> Result<Vec<NamespaceAccess>, Error> {
        let patterns: Vec<&str> = cx.principal.grants.iter().map(|g| g.pattern.as_str()).collect();
        let names = self.store.namespaces_matching(&patterns, &cx.meta.request_id).await?;
        self.access_to(cx, names).await
    }

    /// The caller's role, teams and quota standing in each of `names`.
    async fn access_to(&self, cx: &Context, names: Vec<String>) -> Result<Vec<NamespaceAccess>, Error> {
        let mut accessible = Vec::with_capacity(names.len());
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
