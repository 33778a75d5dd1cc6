//! The team mapping: who belongs to which team, and which role each team
//! has on which namespaces.

use std::collections::{BTreeMap, HashSet};

use serde::Deserialize;

use crate::domain::{
    Grant, Role, check_dns1123_label, check_dns1123_subdomain, lifecycle::LifecyclePolicy, queue::QueuePolicy,
    quota::Quota,
};

/// The mapping of the design documents (`docs/auth.md`): global admins by
/// group, and one team with an editor namespace and a viewer pattern. The
/// sandbox runs with it.
pub const EXAMPLE_MAPPING: &str = r#"
admins: { groups: [platform-admins], subjects: [] }
teams:
  - name: ml-research
    members: { groups: [ml-research], subjects: [alice@example.com, "system:serviceaccount:ml-team:default"] }
    namespaces: { ml-team: editor, "shared-*": viewer }
quotas:
  ml-team: { clusters: 10, cpus: 64, memory: 256Gi, gpus: 8 }
"#;

/// Members of a team (or the global admins): by token group or subject.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Members {
    /// Token groups whose members belong.
    #[serde(default)]
    pub groups: Vec<String>,
    /// Subjects (or e-mails) that belong.
    #[serde(default)]
    pub subjects: Vec<String>,
}

impl Members {
    fn include(&self, subject: &str, email: Option<&str>, groups: &[String]) -> bool {
        self.subjects.iter().any(|s| s == subject || Some(s.as_str()) == email)
            || self.groups.iter().any(|g| groups.contains(g))
    }
}

/// One team.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Team {
    /// Team name.
    pub name: String,
    /// Who belongs.
    #[serde(default)]
    pub members: Members,
    /// Namespace or trailing-`*` pattern → role.
    #[serde(default)]
    pub namespaces: BTreeMap<String, Role>,
    /// The sites its clusters may go to (docs/sites.md); absent: every
    /// site.
    #[serde(default)]
    pub sites: Option<Vec<String>>,
}

/// The whole mapping file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamMapping {
    /// Global admins.
    #[serde(default)]
    pub admins: Members,
    /// Teams.
    #[serde(default)]
    pub teams: Vec<Team>,
    /// Namespace or trailing-`*` pattern → the quota of each namespace it
    /// names (a namespace's own entry wins over patterns, a longer pattern
    /// over a shorter one).
    #[serde(default)]
    pub quotas: BTreeMap<String, Quota>,
    /// Namespace or trailing-`*` pattern → the lifecycle policy of each
    /// namespace it names (matched as quotas are).
    #[serde(default)]
    pub lifecycle: BTreeMap<String, LifecyclePolicy>,
    /// Namespace or trailing-`*` pattern → the queueing policy of each
    /// namespace it names (matched as quotas are; docs/quotas.md).
    #[serde(default)]
    pub queueing: BTreeMap<String, QueuePolicy>,
    /// Namespace or trailing-`*` pattern → the Kueue LocalQueue its
    /// clusters wait in (matched as quotas are; docs/kueue.md): Kueue
    /// admits them, and krayne's quota there is informational.
    #[serde(default)]
    pub queues: BTreeMap<String, String>,
}

/// What the mapping gives one caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Membership {
    /// Teams the caller is in.
    pub teams: Vec<String>,
    /// Whether a global admin.
    pub global_admin: bool,
    /// Their grants.
    pub grants: Vec<Grant>,
}

impl TeamMapping {
    /// Parses and fully checks a mapping; the error names the line or field.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mapping: Self = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        mapping.check()?;
        Ok(mapping)
    }

    fn check(&self) -> Result<(), String> {
        for (section, pattern) in self
            .quotas
            .keys()
            .map(|p| ("quotas", p))
            .chain(self.lifecycle.keys().map(|p| ("lifecycle", p)))
            .chain(self.queueing.keys().map(|p| ("queueing", p)))
            .chain(self.queues.keys().map(|p| ("queues", p)))
        {
            if !is_namespace_pattern(pattern) {
                return Err(format!(
                    "{section}: {pattern:?} is neither a namespace name nor a prefix ending in '*'"
                ));
            }
        }
        for (pattern, quota) in &self.quotas {
            quota.check().map_err(|why| format!("quotas.{pattern}: {why}"))?;
            for site in quota.sites.keys() {
                check_dns1123_label(site).map_err(|why| format!("quotas.{pattern}.sites: {site:?}: {why}"))?;
            }
        }
        for (pattern, policy) in &self.lifecycle {
            policy.check().map_err(|why| format!("lifecycle.{pattern}: {why}"))?;
        }
        for (pattern, policy) in &self.queueing {
            policy.check().map_err(|why| format!("queueing.{pattern}: {why}"))?;
        }
        for (pattern, queue) in &self.queues {
            check_dns1123_subdomain(queue).map_err(|why| format!("queues.{pattern}: {queue:?}: {why}"))?;
        }
        let mut names = HashSet::new();
        for (i, team) in self.teams.iter().enumerate() {
            if team.name.trim().is_empty() {
                return Err(format!("teams[{i}].name: must not be empty"));
            }
            if !names.insert(team.name.as_str()) {
                return Err(format!("teams[{i}].name: duplicate team {:?}", team.name));
            }
            if team.sites.as_ref().is_some_and(Vec::is_empty) {
                // Grants say "every site" with an empty list (REST, gRPC):
                // a team of no site would read as one of every site.
                return Err(format!(
                    "teams[{i}].sites: an empty list gives the team no site; leave `sites` out for every site, \
                     or take the team's namespaces away"
                ));
            }
            for site in team.sites.iter().flatten() {
                check_dns1123_label(site).map_err(|why| format!("teams[{i}].sites: {site:?}: {why}"))?;
            }
            for pattern in team.namespaces.keys() {
                if !is_namespace_pattern(pattern) {
                    return Err(format!(
                        "teams[{i}].namespaces: {pattern:?} is neither a namespace name nor a prefix ending in '*'"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Checks that every site the mapping names (a team's `sites`, a
    /// quota's caps) is one of `sites`, the sites file's; with none (no
    /// sites file), the one site there is, `local`.
    pub fn check_sites(&self, sites: &[String]) -> Result<(), String> {
        let local = [crate::domain::Site::LOCAL.to_owned()];
        let (sites, known) = if sites.is_empty() {
            (&local[..], ": without a sites file the one site is local".to_owned())
        } else {
            (
                sites,
                format!(" in the sites file; its sites are: {}", sites.join(", ")),
            )
        };
        let unknown = |field: String, site: &str| format!("{field}: no site {site:?}{known}");
        for (i, team) in self.teams.iter().enumerate() {
            if let Some(site) = team.sites.iter().flatten().find(|s| !sites.contains(s)) {
                return Err(unknown(format!("teams[{i}].sites"), site));
            }
        }
        for (pattern, quota) in &self.quotas {
            if let Some(site) = quota.sites.keys().find(|s| !sites.contains(s)) {
                return Err(unknown(format!("quotas.{pattern}.sites"), site));
            }
        }
        Ok(())
    }

    /// The quota of `namespace`, if the mapping gives it one.
    pub fn quota(&self, namespace: &str) -> Option<&Quota> {
        for_namespace(&self.quotas, namespace)
    }

    /// The teams with an editor's role in `namespace` (by its name or a
    /// pattern), by name: whose its usage is.
    pub fn editors_of(&self, namespace: &str) -> Vec<String> {
        let matches = |pattern: &str| match pattern.strip_suffix('*') {
            Some(prefix) => namespace.starts_with(prefix),
            None => pattern == namespace,
        };
        let mut teams: Vec<String> = self
            .teams
            .iter()
            .filter(|t| {
                t.namespaces
                    .iter()
                    .any(|(pattern, role)| *role >= Role::Editor && matches(pattern))
            })
            .map(|t| t.name.clone())
            .collect();
        teams.sort();
        teams.dedup();
        teams
    }

    /// The lifecycle policy of `namespace`, if the mapping gives it one.
    pub fn lifecycle(&self, namespace: &str) -> Option<&LifecyclePolicy> {
        for_namespace(&self.lifecycle, namespace)
    }

    /// The queueing policy of `namespace` (the default when the mapping
    /// gives it none: wait only when asked, strict order, no limit).
    pub fn queueing(&self, namespace: &str) -> QueuePolicy {
        for_namespace(&self.queueing, namespace).copied().unwrap_or_default()
    }

    /// The Kueue LocalQueue of `namespace`, if the mapping gives it one.
    pub fn kueue_queue(&self, namespace: &str) -> Option<&str> {
        for_namespace(&self.queues, namespace).map(String::as_str)
    }

    /// The teams and grants of a caller.
    pub fn membership(&self, subject: &str, email: Option<&str>, groups: &[String]) -> Membership {
        let mut m = Membership {
            global_admin: self.admins.include(subject, email, groups),
            ..Membership::default()
        };
        for team in self.teams.iter().filter(|t| t.members.include(subject, email, groups)) {
            m.teams.push(team.name.clone());
            m.grants.extend(team.namespaces.iter().map(|(pattern, role)| Grant {
                team: team.name.clone(),
                pattern: pattern.clone(),
                role: *role,
                sites: team.sites.clone(),
            }));
        }
        m
    }
}

/// A namespace name, or a prefix of one ending in `*`.
/// `namespace`'s own entry, else the longest pattern naming it.
fn for_namespace<'a, T>(entries: &'a BTreeMap<String, T>, namespace: &str) -> Option<&'a T> {
    if let Some(own) = entries.get(namespace) {
        return Some(own);
    }
    entries
        .iter()
        .filter_map(|(pattern, t)| {
            let prefix = pattern.strip_suffix('*')?;
            namespace.starts_with(prefix).then_some((prefix.len(), t))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, t)| t)
}

fn is_namespace_pattern(pattern: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
        None => check_dns1123_label(pattern).is_ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_design_example_parses_and_grants() {
        let m = TeamMapping::parse(EXAMPLE_MAPPING).unwrap();
        let alice = m.membership("u-1", Some("alice@example.com"), &[]);
        assert_eq!(alice.teams, ["ml-research"]);
        assert!(!alice.global_admin);
        assert_eq!(alice.grants.len(), 2);
        let admin = m.membership("bob", None, &["platform-admins".to_owned()]);
        assert!(admin.global_admin && admin.teams.is_empty());
        assert_eq!(m.membership("eve", None, &[]), Membership::default());
    }

    #[test]
    fn bad_files_are_refused_with_the_place() {
        let unknown = TeamMapping::parse("admins: {}\nteem: []\n").unwrap_err();
        assert!(unknown.contains("teem"), "{unknown}");
        let role = TeamMapping::parse("teams:\n  - name: a\n    namespaces: {x: owner}\n").unwrap_err();
        assert!(role.contains("owner"), "{role}");
        let pattern = TeamMapping::parse("teams:\n  - name: a\n    namespaces: {\"a*b\": viewer}\n").unwrap_err();
        assert!(pattern.contains("teams[0].namespaces"), "{pattern}");
        let dup = TeamMapping::parse("teams:\n  - name: a\n  - name: a\n").unwrap_err();
        assert!(dup.contains("duplicate"), "{dup}");
        let quantity = TeamMapping::parse("quotas:\n  ml: { gpus: many }\n").unwrap_err();
        assert!(quantity.contains("many"), "{quantity}");
        let place = TeamMapping::parse("quotas:\n  \"a*b\": { gpus: 1 }\n").unwrap_err();
        let none = TeamMapping::parse("teams:\n  - name: a\n    sites: []\n").unwrap_err();
        assert!(none.contains("teams[0].sites: an empty list"), "{none}");
        let sites = ["eu-1".to_owned(), "us-2".to_owned()];
        let typo = TeamMapping::parse("teams:\n  - name: a\n    sites: [eu-1, us2]\n").unwrap();
        let err = typo.check_sites(&sites).unwrap_err();
        assert!(
            err.contains("teams[0].sites") && err.contains("\"us2\"") && err.contains("eu-1, us-2"),
            "{err}"
        );
        let alone = typo.check_sites(&[]).unwrap_err();
        assert!(alone.contains("without a sites file the one site is local"), "{alone}");
        let local = TeamMapping::parse("quotas:\n  ml: { gpus: 8, sites: { local: { gpus: 1 } } }\n").unwrap();
        assert!(local.check_sites(&[]).is_ok());
        let cap = TeamMapping::parse("quotas:\n  ml: { gpus: 8, sites: { mars: { gpus: 1 } } }\n").unwrap();
        assert!(cap.check_sites(&sites).unwrap_err().contains("quotas.ml.sites"));
        let nested = TeamMapping::parse("quotas:\n  ml: { sites: { a: { sites: { b: {} } } } }\n").unwrap_err();
        assert!(nested.contains("quotas.ml: sites.a"), "{nested}");
        assert!(place.contains("quotas"), "{place}");
    }

    #[test]
    fn a_namespace_gets_its_own_quota_else_the_longest_pattern() {
        let m = TeamMapping::parse(
            "quotas:\n  \"team-*\": { gpus: 2 }\n  \"team-ml-*\": { gpus: 4 }\n  team-ml-x: { gpus: 8 }\n",
        )
        .unwrap();
        let gpus = |ns: &str| m.quota(ns).and_then(|q| q.gpus.as_ref()).map(ToString::to_string);
        assert_eq!(gpus("team-ml-x").as_deref(), Some("8"));
        assert_eq!(gpus("team-ml-y").as_deref(), Some("4"));
        assert_eq!(gpus("team-b").as_deref(), Some("2"));
        assert_eq!(gpus("other"), None);
        let example = TeamMapping::parse(EXAMPLE_MAPPING).unwrap();
        assert_eq!(example.quota("ml-team").and_then(|q| q.clusters), Some(10));
    }

    #[test]
    fn queueing_policies_are_checked_and_matched_as_quotas_are() {
        use crate::domain::queue::{QueueMode, QueueOrder};
        let m = TeamMapping::parse(
            "queueing:\n  \"ml-*\": { queue: default }\n  ml-batch: { order: best-effort, max_wait: 2h, on_max_wait: delete }\n",
        )
        .unwrap();
        assert_eq!(m.queueing("ml-a").queue, QueueMode::Default);
        assert_eq!(m.queueing("ml-batch").order, QueueOrder::BestEffort);
        assert_eq!(m.queueing("ml-batch").queue, QueueMode::OnRequest);
        assert_eq!(m.queueing("other"), QueuePolicy::default());
        let bad = TeamMapping::parse("queueing:\n  ml: { on_max_wait: delete }\n").unwrap_err();
        assert!(bad.contains("queueing.ml: on_max_wait needs max_wait"), "{bad}");
        let order = TeamMapping::parse("queueing:\n  ml: { order: fifo }\n").unwrap_err();
        assert!(order.contains("fifo"), "{order}");
        let kueue = TeamMapping::parse("queues:\n  \"ml-*\": team-queue\n").unwrap();
        assert_eq!(kueue.kueue_queue("ml-a"), Some("team-queue"));
        assert_eq!(kueue.kueue_queue("other"), None);
        let bad = TeamMapping::parse("queues:\n  ml: \"Not A Queue\"\n").unwrap_err();
        assert!(bad.contains("queues.ml"), "{bad}");
    }

    #[test]
    fn lifecycle_policies_are_checked_and_matched_as_quotas_are() {
        let m = TeamMapping::parse(
            "lifecycle:\n  \"team-*\": { idle_after: 2h }\n  team-ml: { max_lifetime: 7d, on_expiry: delete, keep_max: 1d }\n",
        )
        .unwrap();
        assert!(m.lifecycle("team-b").is_some_and(|p| p.idle_after.is_some()));
        assert!(m.lifecycle("team-ml").is_some_and(|p| p.idle_after.is_none()));
        assert!(m.lifecycle("other").is_none());
        let late = TeamMapping::parse("lifecycle:\n  ml: { idle_after: 10m, warn_before: 10m }\n").unwrap_err();
        assert!(
            late.contains("lifecycle.ml: warn_before (10m) must be shorter"),
            "{late}"
        );
        let bad = TeamMapping::parse("lifecycle:\n  ml: { idle_after: later }\n").unwrap_err();
        assert!(bad.contains("later"), "{bad}");
        let place = TeamMapping::parse("lifecycle:\n  \"a*b\": { idle_after: 2h }\n").unwrap_err();
        assert!(place.starts_with("lifecycle:"), "{place}");
    }
}
