//! `krayne keep`: an owner postpones what the lifecycle policy would do to
//! a cluster, for a while no longer than the policy's `keep_max`.

use jiff::Timestamp;
use serde_json::json;

use super::{Context, ControlPlane, clusters::views};
use crate::{
    domain::{
        ClusterInfo, ClusterRef, Error, Violations,
        audit::AuditAction,
        lifecycle::{keep_limit, parse_duration},
    },
    manifest::{self, keep_patch},
};

/// How long to keep a cluster: for a while, or until a time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeepInput {
    /// `4h`, `90m`, `1d`.
    pub for_: Option<String>,
    /// RFC 3339.
    pub until: Option<String>,
}

/// The time `input` asks for, asked at `now`.
fn asked_until(input: &KeepInput, now: Timestamp) -> Result<Timestamp, Error> {
    let invalid = |field: &str, why: String| {
        let mut v = Violations::default();
        v.push(field, why);
        Error::InvalidArgument(v)
    };
    let until = match (&input.for_, &input.until) {
        (Some(d), None) => {
            let d = parse_duration(d).map_err(|why| invalid("for", why))?;
            now.checked_add(d).map_err(|e| invalid("for", e.to_string()))?
        }
        (None, Some(t)) => t.parse::<Timestamp>().map_err(|_| {
            invalid(
                "until",
                format!("{t:?} is not a time; give RFC 3339, e.g. 2026-11-27T18:00:00Z"),
            )
        })?,
        _ => {
            return Err(invalid(
                "for",
                "give for (e.g. 4h) or until (RFC 3339), one of them".into(),
            ));
        }
    };
    if until <= now {
        return Err(invalid("until", format!("{until} is not in the future")));
    }
    Ok(Timestamp::from_second(until.as_second()).unwrap_or(until))
}

impl ControlPlane {
    /// Keeps a cluster from its namespace's lifecycle policy until the time
    /// asked (editor), within the policy's `keep_max` from now; its warning
    /// goes, and the reaper plans again from then. Audited `cluster.keep`.
    pub async fn keep(&self, cx: &Context, cluster: &ClusterRef, input: &KeepInput) -> Result<ClusterInfo, Error> {
        let (namespace, name) = (cluster.namespace(), cluster.name());
        let target = self.authorize_cluster(cx, AuditAction::ClusterKeep, cluster).await?;
        let now = Timestamp::now();
        let rid = &cx.meta.request_id;
        let checked = async {
            let until = asked_until(input, now)?;
            let policy = self
                .authenticator
                .as_ref()
                .and_then(|a| a.lifecycle(namespace))
                .ok_or_else(|| {
                    Error::FailedPrecondition(format!(
                        "namespace {namespace} has no lifecycle policy: nothing would suspend or delete {name}"
                    ))
                })?;
            let limit = keep_limit(&policy, now).ok_or_else(|| {
                Error::FailedPrecondition(format!(
                    "the lifecycle policy of namespace {namespace} lets no one keep clusters (it sets no keep_max)"
                ))
            })?;
            if until > limit {
                let mut v = Violations::default();
                let max = policy.keep_max.map(|d| d.0.as_secs()).unwrap_or_default();
                v.push(
                    "until",
                    format!("{until} is past the longest keep the policy allows ({max} s from now: until {limit})"),
                );
                return Err(Error::InvalidArgument(v));
            }
            let latest = self
                .store
                .get_latest(&target, rid)
                .await
                .map_err(|e| e.in_namespace(namespace))?;
            Ok((until, latest))
        };
        let (until, latest) = match checked.await {
            Ok(found) => found,
            Err(e) => {
                self.record_refusal(cx, AuditAction::ClusterKeep, Some(namespace), Some(name), &e)
                    .await;
                return Err(e);
            }
        };
        let until_text = until.to_string();
        let updated = self
            .audited(cx, AuditAction::ClusterKeep, namespace, name, json!({"until": until_text}), || async {
                let Some(patch) = keep_patch(&latest, &until_text) else {
                    return Err(Error::FailedPrecondition(format!(
                        "cluster {name} was not created through krayne (it has no annotations), so the lifecycle policy never acts on it"
                    )));
                };
                self.store
                    .patch(&target, &patch, rid)
                    .await
                    .map_err(|e| e.in_namespace(namespace))
            })
            .await?;
        let pods = self.store.cluster_pods(&target, rid).await?;
        Ok(manifest::cluster_info(&updated, Some(&views(&pods))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(for_: Option<&str>, until: Option<&str>) -> KeepInput {
        KeepInput {
            for_: for_.map(str::to_owned),
            until: until.map(str::to_owned),
        }
    }

    #[test]
    fn a_keep_is_for_a_while_or_until_a_time() {
        let now: Timestamp = "2026-11-26T10:00:00.5Z".parse().unwrap();
        assert_eq!(
            asked_until(&input(Some("4h"), None), now).unwrap().to_string(),
            "2026-11-26T14:00:00Z"
        );
        assert_eq!(
            asked_until(&input(None, Some("2026-11-27T18:00:00Z")), now)
                .unwrap()
                .to_string(),
            "2026-11-27T18:00:00Z"
        );
        let refused = |i: KeepInput| asked_until(&i, now).unwrap_err().to_string();
        assert!(refused(input(None, None)).contains("one of them"));
        assert!(refused(input(Some("4h"), Some("2026-11-27T18:00:00Z"))).contains("one of them"));
        assert!(refused(input(Some("soon"), None)).contains("try 30s"));
        assert!(refused(input(None, Some("tomorrow"))).contains("RFC 3339"));
        assert!(refused(input(None, Some("2026-11-26T09:00:00Z"))).contains("not in the future"));
    }
}
