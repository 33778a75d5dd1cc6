//! Who is calling, and what they may do where.

use std::fmt;

/// A role on a namespace; each includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Get, list, describe, wait.
    Viewer,
    /// Also create, scale, delete.
    Editor,
    /// Also read the namespace's audit log.
    Admin,
}

impl Role {
    /// `viewer`, `editor`, `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Viewer => "viewer",
            Self::Editor => "editor",
            Self::Admin => "admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a request wants to do, and the role it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Read clusters.
    Read,
    /// Create, scale or delete clusters.
    Mutate,
    /// Read the audit log.
    ReadAudit,
}

impl Action {
    /// The least role that allows it.
    pub fn needs(self) -> Role {
        match self {
            Self::Read => Role::Viewer,
            Self::Mutate => Role::Editor,
            Self::ReadAudit => Role::Admin,
        }
    }
}

/// A grant of the team mapping.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct Grant {
    /// Team.
    pub team: String,
    /// Namespace or `prefix*`.
    pub pattern: String,
    /// Role.
    pub role: Role,
    /// The sites the team's clusters may go to (docs/sites.md); empty:
    /// every site (as gRPC's repeated field says it).
    #[serde(serialize_with = "every_site_empty")]
    #[cfg_attr(feature = "schema", schema(value_type = Vec<String>))]
    pub sites: Option<Vec<String>>,
}

/// `None` (every site) as an empty list, as gRPC sends it.
fn every_site_empty<S: serde::Serializer>(sites: &Option<Vec<String>>, s: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(sites.as_deref().unwrap_or_default(), s)
}

impl Grant {
    /// Whether the pattern covers `namespace`.
    pub fn matches(&self, namespace: &str) -> bool {
        pattern_covers(&self.pattern, namespace)
    }
}

/// Whether a mapping pattern (a namespace, or a prefix ending in `*`)
/// covers `namespace`.
pub fn pattern_covers(pattern: &str, namespace: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => namespace.starts_with(prefix),
        None => pattern == namespace,
    }
}

/// An authenticated caller with the grants the team mapping gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Token subject.
    pub subject: String,
    /// E-mail, when the token has one.
    pub email: Option<String>,
    /// Groups from the token.
    pub groups: Vec<String>,
    /// Teams the caller belongs to.
    pub teams: Vec<String>,
    /// Whether the caller may do everything everywhere.
    pub global_admin: bool,
    /// Grants that apply to the caller.
    pub grants: Vec<Grant>,
    /// When the caller's credential (token or browser session) expires,
    /// in Unix seconds: a long-lived stream ends then.
    pub expires_at: Option<i64>,
    /// The issuer that vouched for the caller (the token's `iss`).
    pub issuer: Option<String>,
}

impl Principal {
    /// The highest role any grant gives on `namespace`; `None` is no access.
    pub fn role_in(&self, namespace: &str) -> Option<Role> {
        if self.global_admin {
            return Some(Role::Admin);
        }
        self.grants
            .iter()
            .filter(|g| g.matches(namespace))
            .map(|g| g.role)
            .max()
    }

    /// Whether `action` is allowed on `namespace`.
    pub fn may(&self, action: Action, namespace: &str) -> bool {
        self.role_in(namespace).is_some_and(|r| r >= action.needs())
    }

    /// The sites the caller may create clusters in, in `namespace`: those
    /// of every team that makes them an editor there; `None` is every site
    /// (a global admin, or a team that names none).
    pub fn sites_for(&self, namespace: &str) -> Option<Vec<String>> {
        if self.global_admin {
            return None;
        }
        let mut sites: Vec<String> = Vec::new();
        for grant in self
            .grants
            .iter()
            .filter(|g| g.role >= Role::Editor && g.matches(namespace))
        {
            sites.extend(grant.sites.clone()?);
        }
        sites.sort();
        sites.dedup();
        Some(sites)
    }

    /// Teams whose grants cover `namespace`.
    pub fn teams_for(&self, namespace: &str) -> Vec<String> {
        let mut teams: Vec<String> = self
            .grants
            .iter()
            .filter(|g| g.matches(namespace))
            .map(|g| g.team.clone())
            .collect();
        teams.dedup();
        teams
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> Principal {
        Principal {
            subject: "alice".into(),
            email: None,
            groups: vec![],
            teams: vec!["ml".into()],
            global_admin: false,
            grants: vec![
                Grant {
                    team: "ml".into(),
                    pattern: "ml-team".into(),
                    role: Role::Editor,
                    sites: None,
                },
                Grant {
                    team: "ml".into(),
                    pattern: "shared-*".into(),
                    role: Role::Viewer,
                    sites: None,
                },
                Grant {
                    team: "ops".into(),
                    pattern: "shared-ops".into(),
                    role: Role::Admin,
                    sites: None,
                },
            ],
            expires_at: None,
            issuer: None,
        }
    }

    #[test]
    fn the_highest_matching_role_wins_and_no_match_denies() {
        let a = alice();
        assert_eq!(a.role_in("ml-team"), Some(Role::Editor));
        assert_eq!(a.role_in("shared-data"), Some(Role::Viewer));
        assert_eq!(a.role_in("shared-ops"), Some(Role::Admin));
        assert_eq!(a.role_in("other"), None);
        assert_eq!(a.role_in("ml-team-2"), None, "exact names match exactly");
        assert!(a.may(Action::Mutate, "ml-team"));
        assert!(!a.may(Action::Mutate, "shared-data"));
        assert!(!a.may(Action::ReadAudit, "ml-team"));
        assert_eq!(a.teams_for("shared-ops"), ["ml", "ops"]);
    }

    #[test]
    fn global_admins_may_do_everything() {
        let admin = Principal {
            global_admin: true,
            grants: vec![],
            ..alice()
        };
        assert!(admin.may(Action::ReadAudit, "anything"));
    }
}
