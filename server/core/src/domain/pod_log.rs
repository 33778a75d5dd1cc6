//! A cluster's pod logs (the Kubernetes API's `pods/log`): which pod and
//! container, and how much of the log.

use serde::Serialize;

use super::{Error, ObservedPod, Violations, observed::container_names};

/// The most a log answer carries; a longer one is cut (its start kept out).
pub const MAX_LOG_BYTES: u64 = 4 * 1024 * 1024;
/// The most lines `tail_lines` may ask for.
pub const MAX_TAIL_LINES: u32 = 100_000;

/// Which of a cluster's pods: one named, the head, or a worker (of a
/// group).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodChoice {
    /// The head pod (the default).
    Head,
    /// The first worker pod, of `group` when given.
    Worker(Option<String>),
    /// A pod by name; it must be one of the cluster's.
    Named(String),
}

/// What a caller asks of a cluster's pod logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodLogQuery {
    /// Which pod.
    pub pod: PodChoice,
    /// Which container [default: the pod's first, Ray's].
    pub container: Option<String>,
    /// Only the last lines.
    pub tail_lines: Option<u32>,
    /// Only what was written this many seconds back.
    pub since_seconds: Option<u32>,
    /// The previous (crashed) container's log: what a crash loop needs.
    pub previous: bool,
}

/// A query's parts as both transports take them: empty strings for what
/// was not given.
#[derive(Debug, Clone, Default)]
pub struct PodLogParts<'a> {
    /// A pod by name.
    pub pod: &'a str,
    /// `head`, `worker`, or empty.
    pub node_type: &'a str,
    /// A worker group.
    pub group: &'a str,
    /// A container.
    pub container: &'a str,
    /// Only the last lines.
    pub tail_lines: Option<u32>,
    /// Only this many seconds back.
    pub since_seconds: Option<u32>,
    /// The previous container's.
    pub previous: bool,
}

impl PodLogQuery {
    /// The query the parts make, validated.
    pub fn from_parts(parts: &PodLogParts<'_>) -> Result<Self, Error> {
        let mut v = Violations::new();
        let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        let pod = match (some(parts.pod), parts.node_type, some(parts.group)) {
            (Some(pod), "", None) => PodChoice::Named(pod),
            (Some(_), _, _) => {
                v.push("pod", "name a pod, or a node type (and group), not both");
                PodChoice::Head
            }
            (None, "head" | "", None) => PodChoice::Head,
            (None, "worker" | "", group) => PodChoice::Worker(group),
            (None, "head", Some(_)) => {
                v.push("group", "a worker group goes with node type worker");
                PodChoice::Head
            }
            (None, other, _) => {
                v.push("node_type", format!("{other:?} is not a node type: head or worker"));
                PodChoice::Head
            }
        };
        v.into_result(())?;
        Self {
            pod,
            container: some(parts.container),
            tail_lines: parts.tail_lines,
            since_seconds: parts.since_seconds,
            previous: parts.previous,
        }
        .validated()
    }

    /// The query, or why its numbers make no sense.
    pub fn validated(self) -> Result<Self, Error> {
        let mut v = Violations::new();
        if self.tail_lines.is_some_and(|n| n > MAX_TAIL_LINES) {
            v.push("tail_lines", format!("must be at most {MAX_TAIL_LINES}"));
        }
        if self.since_seconds == Some(0) {
            v.push("since_seconds", "must be at least 1");
        }
        match &self.pod {
            PodChoice::Named(name) if name.is_empty() => v.push("pod", "must not be empty"),
            PodChoice::Worker(Some(group)) if group.is_empty() => v.push("group", "must not be empty"),
            _ => {}
        }
        v.into_result(self)
    }

    /// The pod of `pods` this query names, and the container to read; only
    /// a pod of cluster `cluster` (its label, and its controller `owner`,
    /// the cluster's uid, when both are known) counts. `Err` says what is
    /// there instead.
    pub fn resolve<'a>(
        &self,
        cluster: &str,
        owner: Option<&str>,
        pods: &[&'a ObservedPod],
    ) -> Result<(&'a ObservedPod, String), Error> {
        let pods: Vec<&'a ObservedPod> = pods
            .iter()
            .copied()
            .filter(|p| p.cluster_name() == Some(cluster))
            // The label is anyone's to set: only a pod the cluster controls
            // is its pod.
            .filter(|p| match (owner, p.metadata.controller.as_deref()) {
                (Some(owner), Some(controller)) => owner == controller,
                _ => false,
            })
            .collect();
        let pods = pods.as_slice();
        let node_type = |p: &ObservedPod| {
            p.metadata
                .labels
                .get(crate::manifest::LABEL_NODE_TYPE)
                .map(|a| a.as_str().to_owned())
        };
        let group = |p: &ObservedPod| {
            p.metadata
                .labels
                .get(crate::manifest::LABEL_GROUP)
                .map(|a| a.as_str().to_owned())
        };
        let found = match &self.pod {
            PodChoice::Head => pods.iter().find(|p| node_type(p).as_deref() == Some("head")),
            PodChoice::Worker(wanted) => pods.iter().find(|p| {
                node_type(p).as_deref() == Some("worker")
                    && wanted.as_ref().is_none_or(|g| group(p).as_ref() == Some(g))
            }),
            PodChoice::Named(name) => pods.iter().find(|p| p.metadata.name.as_str() == name),
        };
        let Some(pod) = found.copied() else {
            let names: Vec<&str> = pods.iter().map(|p| p.metadata.name.as_str()).collect();
            let what = match &self.pod {
                PodChoice::Head => "no head pod".to_owned(),
                PodChoice::Worker(None) => "no worker pod".to_owned(),
                PodChoice::Worker(Some(g)) => format!("no worker pod of group {g:?}"),
                PodChoice::Named(n) => format!("no pod {n:?}"),
            };
            let have = if names.is_empty() {
                "none yet".to_owned()
            } else {
                names.join(", ")
            };
            return Err(Error::invalid(
                "pod",
                format!("cluster {cluster} has {what} (its pods: {have})"),
            ));
        };
        let (containers, init) = container_names(pod);
        let container = match &self.container {
            None => containers
                .first()
                .cloned()
                .ok_or_else(|| Error::invalid("container", "the pod has no containers"))?,
            Some(c) if containers.contains(c) || init.contains(c) => c.clone(),
            Some(c) => {
                let all: Vec<&str> = containers.iter().chain(&init).map(String::as_str).collect();
                return Err(Error::invalid(
                    "container",
                    format!(
                        "pod {} has no container {c:?} (it has: {})",
                        pod.metadata.name.as_str(),
                        all.join(", ")
                    ),
                ));
            }
        };
        Ok((pod, container))
    }
}

/// What the store reads: one container of one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodLogOptions {
    /// The container.
    pub container: String,
    /// Only the last lines.
    pub tail_lines: Option<u32>,
    /// Only this many seconds back.
    pub since_seconds: Option<u32>,
    /// The previous container's.
    pub previous: bool,
    /// At most this many bytes.
    pub limit_bytes: u64,
    /// The site the pod is in (docs/sites.md), when known: the log is
    /// read there.
    pub site: Option<super::Site>,
}

/// A pod's log, as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct PodLog {
    /// The pod.
    pub pod: String,
    /// The container.
    pub container: String,
    /// The text.
    pub text: String,
}

/// A Ray node's log files, as its dashboard lists them: by component
/// (`raylet`, `gcs_server`, `worker`…), directories ending with `/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct RayLogFiles {
    /// The node's id (56 hex digits).
    pub node_id: String,
    /// The node's IP.
    pub node_ip: String,
    /// Whether it is the head node.
    pub is_head_node: bool,
    /// Files by component.
    pub files: std::collections::BTreeMap<String, Vec<String>>,
}

/// Whether `name` can be a Ray log file's name: a plain path under the
/// node's log directory (`raylet.out`, `events/event_GCS.log`).
pub fn check_log_file_name(name: &str) -> Result<(), Error> {
    let fine = !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('/')
        && !name
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..")
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "._-/:@+".contains(c));
    if fine {
        Ok(())
    } else {
        Err(Error::invalid(
            "file",
            format!("{name:?} is not a Ray log file's name (a path under the node's log directory)"),
        ))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn log_file_names_stay_in_the_log_directory() {
        for fine in ["raylet.out", "events/event_GCS.log", "job-driver-raysubmit_x1.log"] {
            assert!(check_log_file_name(fine).is_ok(), "{fine}");
        }
        for bad in ["", "/etc/passwd", "../x", "a/../b", "a//b", "a b", "x?y"] {
            assert!(check_log_file_name(bad).is_err(), "{bad:?}");
        }
    }

    use super::*;

    /// A pod as Kubernetes writes it: KubeRay's labels, its controller
    /// (the RayCluster), Ray's container and an init container.
    fn pod(name: &str, cluster: &str, node_type: &str, group: &str, owner: &str) -> ObservedPod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ml-team", "uid": format!("{name}-uid"),
                "labels": {"ray.io/cluster": cluster, "ray.io/node-type": node_type, "ray.io/group": group},
                "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": cluster,
                                     "uid": owner, "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"initContainers": [{"name": "wait-gcs-ready", "image": "rayproject/ray:2.43.0"}],
                     "containers": [{"name": format!("ray-{node_type}"), "image": "rayproject/ray:2.43.0"}]},
        }))
        .unwrap()
    }

    #[test]
    fn only_the_clusters_own_pods_and_containers_are_read() {
        let pods = [
            pod("demo-head-a", "demo", "head", "headgroup", "demo-uid"),
            pod("demo-gpu-worker-b", "demo", "worker", "gpu", "demo-uid"),
            pod("other-head-c", "other", "head", "headgroup", "other-uid"),
            // Labelled as demo's, but another owner's: not demo's.
            pod("impostor", "demo", "worker", "gpu", "someone-else"),
        ];
        let views: Vec<&ObservedPod> = pods.iter().collect();
        let query = |pod, container: Option<&str>| PodLogQuery {
            pod,
            container: container.map(str::to_owned),
            tail_lines: None,
            since_seconds: None,
            previous: false,
        };
        let resolve = |q: PodLogQuery| {
            q.resolve("demo", Some("demo-uid"), &views)
                .map(|(p, c)| (p.metadata.name.as_str().to_owned(), c))
        };
        assert_eq!(
            resolve(query(PodChoice::Head, None)).unwrap(),
            ("demo-head-a".into(), "ray-head".into())
        );
        assert_eq!(
            resolve(query(PodChoice::Worker(Some("gpu".into())), Some("wait-gcs-ready"))).unwrap(),
            ("demo-gpu-worker-b".into(), "wait-gcs-ready".into())
        );
        let mut ownerless = pod("labelled", "demo", "worker", "gpu", "demo-uid");
        ownerless.metadata.controller = None;
        let with_ownerless: Vec<&ObservedPod> = views.iter().copied().chain([&ownerless]).collect();
        let named = query(PodChoice::Named("labelled".into()), None);
        assert!(
            named.resolve("demo", Some("demo-uid"), &with_ownerless).is_err(),
            "reliability 29k (issue 53, item 11): a pod with the cluster's label and no controller is not its pod"
        );
        assert!(
            query(PodChoice::Head, None).resolve("demo", None, &views).is_err(),
            "a cluster whose uid is not known has no pod to read"
        );
        for refused in [
            query(PodChoice::Named("other-head-c".into()), None),
            query(PodChoice::Named("impostor".into()), None),
            query(PodChoice::Worker(Some("cpu".into())), None),
            query(PodChoice::Head, Some("sidecar")),
        ] {
            assert!(matches!(resolve(refused), Err(Error::InvalidArgument(_))));
        }
    }

    #[test]
    fn parts_name_a_pod_or_a_node_type_and_group() {
        let q = |parts: PodLogParts<'_>| PodLogQuery::from_parts(&parts).map(|q| q.pod);
        assert_eq!(q(PodLogParts::default()).unwrap(), PodChoice::Head);
        let worker = PodLogParts {
            node_type: "worker",
            group: "gpu",
            ..PodLogParts::default()
        };
        assert_eq!(q(worker).unwrap(), PodChoice::Worker(Some("gpu".into())));
        let named = PodLogParts {
            pod: "demo-head-x",
            ..PodLogParts::default()
        };
        assert_eq!(q(named).unwrap(), PodChoice::Named("demo-head-x".into()));
        for wrong in [
            PodLogParts {
                pod: "p",
                node_type: "head",
                ..PodLogParts::default()
            },
            PodLogParts {
                node_type: "gpu",
                ..PodLogParts::default()
            },
            PodLogParts {
                node_type: "head",
                group: "g",
                ..PodLogParts::default()
            },
        ] {
            assert!(matches!(q(wrong), Err(Error::InvalidArgument(_))));
        }
    }

    #[test]
    fn numbers_out_of_range_are_refused_by_field() {
        let q = PodLogQuery {
            pod: PodChoice::Named(String::new()),
            container: None,
            tail_lines: Some(MAX_TAIL_LINES + 1),
            since_seconds: Some(0),
            previous: false,
        };
        let Err(Error::InvalidArgument(v)) = q.validated() else {
            panic!("refused");
        };
        let fields: Vec<&str> = v.as_slice().iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["tail_lines", "since_seconds", "pod"]);
    }
}
