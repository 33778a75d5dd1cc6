//! Clusters, details and an app at a fixed time, for the UI's tests.

use krayne_client::proto::{
    ClusterDetails, ClusterInfo, EventInfo, HeadDetails, HeadService, Job, JobStatus, NamespaceAccess, NamespaceQuota,
    QuotaLine, Role, ServiceState, WorkerGroupDetails,
};

use super::app::{App, Msg};

/// 2026-11-24T12:00:00Z.
pub(crate) const NOW: i64 = 1_795_521_600;

fn at(seconds_ago: i64) -> Option<prost_types::Timestamp> {
    Some(prost_types::Timestamp {
        seconds: NOW - seconds_ago,
        nanos: 0,
    })
}

/// A cluster summary.
pub(crate) fn cluster(namespace: &str, name: &str, status: &str, workers: (u32, u32), age: i64) -> ClusterInfo {
    let ip = "127.0.0.9";
    ClusterInfo {
        name: name.into(),
        namespace: namespace.into(),
        status: status.into(),
        head_ip: (status == "ready").then(|| ip.into()),
        dashboard_url: Some(format!("http://{ip}:8265")),
        client_url: Some(format!("ray://{ip}:10001")),
        notebook_url: (name == "demo").then(|| format!("http://{ip}:8888")),
        ready_workers: workers.0,
        num_workers: workers.1,
        created_at: at(age),
        created_by: Some("alice".into()),
        lifecycle: None,
        ..ClusterInfo::default()
    }
}

/// Three clusters in two namespaces.
pub(crate) fn clusters() -> Vec<ClusterInfo> {
    vec![
        cluster("ml-team", "demo", "ready", (2, 2), 300),
        cluster("ml-team", "train-gpu", "pods-pending", (0, 4), 3 * 3600),
        cluster("data-team", "etl", "running", (1, 1), 3 * 86_400),
    ]
}

/// An app over `namespace` at [`NOW`], synced with `clusters`.
pub(crate) fn app(namespace: Option<&str>, clusters: Vec<ClusterInfo>) -> App {
    let (mut app, _) = App::new(namespace.map(str::to_owned), "ml-team".into(), Vec::new());
    app.now = jiff::Timestamp::from_second(NOW).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let clusters = clusters
        .into_iter()
        .filter(|c| namespace.is_none_or(|n| c.namespace == n))
        .collect();
    app.on_msg(Msg::Synced(clusters));
    app
}

/// The `ml-team` quota: CPU nearly used up.
pub(crate) fn quota() -> NamespaceQuota {
    let line = |resource: &str, limit: &str, used: &str| QuotaLine {
        resource: resource.into(),
        limit: Some(limit.into()),
        used: used.into(),
        remaining: None,
        used_fraction: None,
        site: None,
    };
    NamespaceQuota {
        namespace: "ml-team".into(),
        resources: vec![
            line("cpu", "16", "14"),
            line("memory", "64Gi", "28Gi"),
            line("nvidia.com/gpu", "8", "4"),
        ],
        kueue_local_queue: None,
    }
}

/// The namespaces alice may use.
pub(crate) fn namespaces() -> Vec<NamespaceAccess> {
    ["ml-team", "data-team", "shared"]
        .into_iter()
        .map(|n| NamespaceAccess {
            namespace: n.into(),
            role: if n == "shared" { Role::Viewer } else { Role::Editor }.into(),
            via_teams: vec!["ml".into()],
            quota: Vec::new(),
        })
        .collect()
}

/// `demo`'s details.
pub(crate) fn details() -> ClusterDetails {
    let event = |kind: &str, reason: &str, object: &str, message: &str, ago: i64| EventInfo {
        r#type: kind.into(),
        reason: reason.into(),
        message: message.into(),
        object_kind: "Pod".into(),
        object_name: object.into(),
        count: 1,
        last_seen: at(ago),
    };
    ClusterDetails {
        info: Some(cluster("ml-team", "demo", "ready", (2, 2), 300)),
        head: Some(HeadDetails {
            cpus: "2".into(),
            memory: "8Gi".into(),
            gpus: 0,
            image: "rayproject/ray:2.41.0".into(),
            runs_tasks: false,
        }),
        worker_groups: vec![WorkerGroupDetails {
            name: "worker".into(),
            replicas: 2,
            min_replicas: 1,
            max_replicas: 4,
            cpus: "4".into(),
            memory: "16Gi".into(),
            gpus: 1,
            image: "rayproject/ray:2.41.0".into(),
        }],
        ray_version: "2.41.0".into(),
        python_version: "3.11".into(),
        services: vec!["dashboard".into(), "client".into(), "notebook".into()],
        proxy_urls: ["dashboard", "notebook"]
            .map(|s| {
                let url = format!("http://127.0.0.1:8080/v1/namespaces/ml-team/clusters/demo/services/{s}/proxy/");
                (s.to_owned(), url)
            })
            .into(),
        conditions: Vec::new(),
        pods: Vec::new(),
        events: vec![
            event("Normal", "Scheduled", "demo-head", "Assigned to node sandbox-1", 290),
            event("Warning", "BackOff", "demo-worker-0", "Back-off pulling image", 200),
            event(
                "Normal",
                "Started",
                "demo-worker-0",
                "Started container ray-worker",
                120,
            ),
        ],
    }
}

/// `demo`'s services.
pub(crate) fn services() -> Vec<HeadService> {
    [
        ("dashboard", 8265, "http", ServiceState::Available),
        ("client", 10001, "tcp", ServiceState::Available),
        ("notebook", 8888, "http", ServiceState::Unreachable),
    ]
    .into_iter()
    .map(|(name, port, protocol, state)| HeadService {
        name: name.into(),
        port,
        protocol: protocol.into(),
        state: state.into(),
        tunnel_path: format!("/v1/namespaces/ml-team/clusters/demo/services/{name}/tunnel"),
        in_cluster_url: String::new(),
        proxy_url: if protocol == "http" {
            format!("http://127.0.0.1:8080/v1/namespaces/ml-team/clusters/demo/services/{name}/proxy/")
        } else {
            String::new()
        },
        base_path: "/".into(),
    })
    .collect()
}

/// `demo`'s jobs.
pub(crate) fn jobs() -> Vec<Job> {
    let job = |id: &str, status: JobStatus, entrypoint: &str, ago: i64| Job {
        id: id.into(),
        submission_id: id.into(),
        kind: "SUBMISSION".into(),
        entrypoint: entrypoint.into(),
        status: status.into(),
        start_time: at(ago),
        ..Job::default()
    };
    vec![
        job(
            "raysubmit_train01",
            JobStatus::Running,
            "python train.py --epochs 10",
            60,
        ),
        job("raysubmit_prep001", JobStatus::Succeeded, "python prep.py", 240),
    ]
}
