//! RayCluster (+ pods, events) → `ClusterInfo` / `ClusterDetails`.

use super::{
    ANNOTATION_CREATED_BY, LABEL_GROUP, LABEL_NODE_TYPE, ManifestSettings, ObservedCluster, ObservedEvent, ObservedPod,
    head_ports::SERVICE_PORTS, status::derive_status,
};
use crate::domain::observed::{Container, ObservedCondition, PodTemplate};
use crate::domain::{Atom, atom::owned, lifecycle::LifecycleAction};
use crate::domain::{ClusterDetails, ClusterInfo, Condition, EventInfo, HeadDetails, PodInfo, WorkerGroupDetails};

/// How many events `describe` returns at most (the newest).
const MAX_EVENTS: usize = 50;

/// The services `describe` reports, in Krayne's order.
pub const SERVICE_NAMES: [&str; 5] = {
    let mut names = [""; 5];
    let mut i = 0;
    while i < SERVICE_PORTS.len() {
        names[i] = SERVICE_PORTS[i].0;
        i += 1;
    }
    names
};

/// The cluster's summary. `pods` is `None` when they were not looked at.
pub fn cluster_info(cluster: &ObservedCluster, pods: Option<&[&ObservedPod]>) -> ClusterInfo {
    let status = &cluster.status;
    let head_ip = [&status.head.pod_ip, &status.head.service_ip]
        .into_iter()
        .flatten()
        .find(|ip| !ip.is_empty())
        .map(String::from);
    let services = services(cluster);
    let url = |service: &str| {
        let (_, scheme, port) = SERVICE_PORTS.iter().find(|(name, ..)| *name == service)?;
        let ip = head_ip.as_ref()?;
        services
            .iter()
            .any(|s| s == service)
            .then(|| format!("{scheme}://{ip}:{port}"))
    };
    let spec = &cluster.spec;
    let lifecycle = lifecycle_of(cluster);
    let queue = queue_of(cluster);
    let num_workers = spec
        .worker_group_specs
        .iter()
        .map(|g| count(g.replicas))
        .fold(0u32, u32::saturating_add);
    let derived = derive_status(cluster, pods);
    // KubeRay's count lags a suspend: a suspended cluster has no workers.
    let ready_workers = if derived == crate::domain::ClusterStatus::Suspended {
        0
    } else {
        count(status.ready_worker_replicas)
    };
    ClusterInfo {
        name: cluster.metadata.name.to_string(),
        namespace: cluster.metadata.namespace.to_string(),
        status: derived,
        dashboard_url: head_ip.as_ref().map(|ip| format!("http://{ip}:8265")),
        client_url: head_ip.as_ref().map(|ip| format!("ray://{ip}:10001")),
        notebook_url: url("notebook"),
        code_server_url: url("code-server"),
        ssh_url: url("ssh"),
        head_ip,
        num_workers,
        autoscaling_enabled: spec.enable_in_tree_autoscaling.unwrap_or(false),
        created_at: owned(cluster.metadata.creation_timestamp.as_ref()),
        ready_workers,
        suspended: spec.suspend.unwrap_or(false),
        created_by: owned(cluster.metadata.annotations.get(ANNOTATION_CREATED_BY)),
        resource_version: owned(cluster.metadata.resource_version.as_ref()),
        lifecycle: lifecycle.text,
        lifecycle_warned_at: lifecycle.warned_at,
        idle_since: lifecycle.idle_since,
        suspends_at: lifecycle.suspends_at,
        expires_at: lifecycle.expires_at,
        kept_until: lifecycle.kept_until,
        queue_position: queue.position,
        queued_since: queue.since,
        queue_reason: queue.reason,
        site: cluster.site.name().to_owned(),
        site_unavailable_since: None,
    }
}

/// A summary's queue fields: set only while it waits in line.
#[derive(Default)]
struct QueueFields {
    position: Option<u32>,
    since: Option<String>,
    reason: Option<String>,
}

/// Where the cluster stands in its namespace's line, from the annotations
/// the admitter (and the create or resume that queued it) wrote.
fn queue_of(cluster: &ObservedCluster) -> QueueFields {
    let Some(since) = cluster.queued_since() else {
        return QueueFields::default();
    };
    let annotation = |key: &str| cluster.metadata.annotations.get(key).map(|a| a.as_str());
    QueueFields {
        position: annotation(super::ANNOTATION_QUEUE_POSITION).and_then(|p| p.parse().ok()),
        since: Some(since.to_string()),
        reason: annotation(super::ANNOTATION_QUEUE_REASON).map(str::to_owned),
    }
}

/// A summary's lifecycle fields.
struct LifecycleFields {
    text: Option<String>,
    warned_at: Option<String>,
    idle_since: Option<String>,
    suspends_at: Option<String>,
    expires_at: Option<String>,
    kept_until: Option<String>,
}

/// The lifecycle fields of a summary, from the annotations the reaper
/// (and `krayne keep`) wrote.
fn lifecycle_of(cluster: &ObservedCluster) -> LifecycleFields {
    let annotation = |key: &str| owned(cluster.metadata.annotations.get(key));
    let lifecycle = annotation(super::ANNOTATION_LIFECYCLE);
    let planned = lifecycle.as_deref().and_then(crate::domain::lifecycle::parse_plan_text);
    let at = |wanted: LifecycleAction| {
        planned
            .filter(|(action, _, _)| *action == wanted)
            .map(|(_, at, _)| at.to_string())
    };
    LifecycleFields {
        suspends_at: at(LifecycleAction::Suspend),
        expires_at: at(LifecycleAction::Delete),
        text: lifecycle,
        warned_at: annotation(super::ANNOTATION_WARNED_AT),
        idle_since: annotation(super::ANNOTATION_IDLE_SINCE),
        kept_until: annotation(super::ANNOTATION_KEEP_UNTIL),
    }
}

/// The cluster's full picture, with its pods and recent events.
pub fn cluster_details(
    cluster: &ObservedCluster,
    pods: &[&ObservedPod],
    events: &[&ObservedEvent],
    settings: &ManifestSettings,
) -> ClusterDetails {
    let head_spec = &cluster.spec.head_group_spec;
    let head = first_container(&head_spec.template);
    let head_image = image_of(head, settings);
    let num_cpus = head_spec
        .ray_start_params
        .get("num-cpus")
        .map(Atom::to_string)
        .unwrap_or_default();
    let mut pod_infos: Vec<PodInfo> = pods.iter().map(|p| pod_info(p)).collect();
    pod_infos.sort_by(|a, b| (a.node_type != "head", &a.name).cmp(&(b.node_type != "head", &b.name)));
    let mut event_infos: Vec<EventInfo> = events.iter().map(|e| event_info(e)).collect();
    event_infos.sort_by(|a, b| a.last_seen.cmp(&b.last_seen));
    let skip = event_infos.len().saturating_sub(MAX_EVENTS);
    ClusterDetails {
        info: cluster_info(cluster, Some(pods)),
        head: HeadDetails {
            cpus: request(head, "cpu"),
            memory: request(head, "memory"),
            gpus: gpus(head),
            runs_tasks: !matches!(num_cpus.as_str(), "0" | "0.0" | ""),
            image: head_image.clone(),
        },
        worker_groups: cluster
            .spec
            .worker_group_specs
            .iter()
            .map(|g| {
                let c = first_container(&g.template);
                WorkerGroupDetails {
                    name: g.group_name.to_string(),
                    replicas: count(g.replicas),
                    min_replicas: count(g.min_replicas),
                    max_replicas: count(g.max_replicas),
                    cpus: request(c, "cpu"),
                    memory: request(c, "memory"),
                    gpus: gpus(c),
                    image: image_of(c, settings),
                }
            })
            .collect(),
        ray_version: ray_version(&head_image),
        python_version: "unknown".to_owned(),
        services: services(cluster),
        conditions: cluster.status.conditions.iter().map(condition).collect(),
        pods: pod_infos,
        events: event_infos.split_off(skip),
        proxy_urls: std::collections::BTreeMap::new(),
    }
}

/// Service names whose port the head container or head service declares.
fn services(cluster: &ObservedCluster) -> Vec<String> {
    let head = &cluster.spec.head_group_spec;
    let names: Vec<&str> = head
        .template
        .spec
        .containers
        .iter()
        .flat_map(|c| c.ports.iter())
        .chain(head.head_service.spec.ports.iter())
        .filter_map(|p| p.name.as_deref())
        .collect();
    SERVICE_PORTS
        .iter()
        .filter(|(name, ..)| names.contains(name))
        .map(|(name, ..)| (*name).to_owned())
        .collect()
}

fn first_container(template: &PodTemplate) -> Option<&Container> {
    template.spec.containers.first()
}

fn image_of(c: Option<&Container>, settings: &ManifestSettings) -> String {
    c.and_then(|c| c.image.as_deref())
        .filter(|i| !i.is_empty())
        .map_or_else(|| settings.default_image.clone(), str::to_owned)
}

fn request(c: Option<&Container>, resource: &str) -> String {
    c.and_then(|c| c.resources.requests.get(resource))
        .map_or_else(|| "0".to_owned(), Atom::to_string)
}

fn gpus(c: Option<&Container>) -> u32 {
    let value = c.and_then(|c| c.resources.requests.get("nvidia.com/gpu"));
    value.and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn count(n: Option<i64>) -> u32 {
    n.and_then(|n| u32::try_from(n).ok()).unwrap_or(0)
}

/// `rayproject/ray:2.43.0-py312` → `2.43.0` (a digest after the tag is
/// left out); no tag → `unknown`.
pub fn ray_version(image: &str) -> String {
    let image = image.split_once('@').map_or(image, |(named, _)| named);
    match image.rsplit_once(':').filter(|(_, tag)| !tag.contains('/')) {
        Some((_, tag)) if !tag.is_empty() => tag.split('-').next().unwrap_or(tag).to_owned(),
        _ => "unknown".to_owned(),
    }
}

fn condition(c: &ObservedCondition) -> Condition {
    Condition {
        type_: c.type_.to_string(),
        status: c.status.to_string(),
        reason: owned(c.reason.as_ref()),
        message: owned(c.message.as_ref()),
        last_transition_time: owned(c.last_transition_time.as_ref()),
    }
}

fn pod_info(p: &ObservedPod) -> PodInfo {
    let labels = &p.metadata.labels;
    let node_type = labels.get(LABEL_NODE_TYPE).map(Atom::to_string).unwrap_or_default();
    let (reason, message) = pod_reason(p);
    PodInfo {
        name: p.metadata.name.to_string(),
        group: if node_type == "head" {
            String::new()
        } else {
            labels.get(LABEL_GROUP).map(Atom::to_string).unwrap_or_default()
        },
        node_type,
        phase: p.status.phase.as_deref().unwrap_or("Unknown").to_owned(),
        ready: p.status.conditions.ready,
        reason,
        message,
        pod_ip: owned(p.status.pod_ip.as_ref()),
        node_name: owned(p.spec.node_name.as_ref()),
        restarts: p
            .status
            .container_statuses
            .iter()
            .map(|c| count(c.restart_count))
            .fold(0, u32::saturating_add),
        created_at: owned(p.metadata.creation_timestamp.as_ref()),
    }
}

/// The most telling reason a pod gives: an unscheduled condition, else the
/// first waiting or terminated container.
fn pod_reason(p: &ObservedPod) -> (Option<String>, Option<String>) {
    if let Some(u) = &p.status.conditions.unscheduled {
        return (owned(u.reason.as_ref()), owned(u.message.as_ref()));
    }
    let state = p.status.container_statuses.iter().find_map(|cs| {
        cs.state
            .waiting
            .as_ref()
            .or(cs.state.terminated.as_ref())
            .filter(|s| s.reason.is_some())
    });
    state.map_or((None, None), |s| (owned(s.reason.as_ref()), owned(s.message.as_ref())))
}

fn event_info(e: &ObservedEvent) -> EventInfo {
    EventInfo {
        type_: e.type_.as_deref().unwrap_or("Normal").to_owned(),
        reason: owned(e.reason.as_ref()).unwrap_or_default(),
        message: owned(e.message.as_ref()).unwrap_or_default(),
        object_kind: owned(e.involved_object.kind.as_ref()).unwrap_or_default(),
        object_name: owned(e.involved_object.name.as_ref()).unwrap_or_default(),
        count: count(e.count).max(1),
        last_seen: e
            .last_timestamp
            .as_deref()
            .or(e.event_time.as_deref())
            .or(e.metadata.creation_timestamp.as_deref())
            .map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suspended_cluster_has_no_ready_workers_whatever_kuberay_last_counted() {
        let cluster: ObservedCluster = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"suspend": true, "workerGroupSpecs": [{"groupName": "w", "replicas": 6}]},
            "status": {"state": "suspended", "readyWorkerReplicas": 6},
        }))
        .unwrap();
        let info = cluster_info(&cluster, Some(&[]));
        assert_eq!((info.ready_workers, info.num_workers), (0, 6));
    }

    #[test]
    fn ray_version_comes_from_the_tag() {
        assert_eq!(ray_version("rayproject/ray:2.41.0-py312"), "2.41.0");
        assert_eq!(ray_version("rayproject/ray:latest"), "latest");
        assert_eq!(ray_version("rayproject/ray:2.60.0-py312@sha256:0123abcd"), "2.60.0");
        assert_eq!(ray_version("registry:5000/ray"), "unknown");
        assert_eq!(ray_version("rayproject/ray"), "unknown");
        assert_eq!(ray_version("ray:"), "unknown");
    }
}
