//! The simulated KubeRay's RayJob controller, driven by RayJobs the cluster
//! model renders: a job submitted to its cluster's head under the RayJob's
//! `jobId` is followed to its end, and the cluster goes after the TTL;
//! deadlines, validation, deletion, and HTTP mode's own submission.

use k8s_openapi::api::core::v1::{Event, Pod};
use krayne_core::{
    domain::{FieldValidation, RunSpec},
    manifest::{ManifestSettings, Provenance, build_rayjob},
};
use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams},
};
use serde_json::{Value, json};

use crate::{eventually, rayclusters, standins::head, start};

fn rayjobs(client: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("ray.io", "v1", "RayJob");
    Api::namespaced_with(
        client.clone(),
        "ml",
        &ApiResource::from_gvk_with_plural(&gvk, "rayjobs"),
    )
}

/// The RayJob krayne renders for a run request (`name` and `entrypoint`
/// plus `extra`), with its TTL and deadline.
fn rayjob(name: &str, extra: &Value, ttl: u32, deadline: Option<u64>) -> DynamicObject {
    let mut request = json!({"name": name, "namespace": "ml", "entrypoint": "python train.py"});
    for (k, v) in extra.as_object().unwrap() {
        request[k] = v.clone();
    }
    let run = RunSpec::read(&request, FieldValidation::Strict).unwrap().spec;
    let manifest = build_rayjob(
        &run,
        ttl,
        deadline,
        &ManifestSettings::default(),
        &Provenance::default(),
    );
    serde_json::from_value(manifest).unwrap()
}

/// The RayJob's status once `done` holds for it.
async fn status_when(client: &Client, name: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let api = rayjobs(client);
    eventually(&format!("{name}: {what}"), || async {
        let job = api.get(name).await.ok()?;
        let status = job.data["status"].clone();
        done(&status).then_some(status)
    })
    .await
}

fn deployment(status: &Value) -> &str {
    status["jobDeploymentStatus"].as_str().unwrap_or("")
}

async fn events(client: &Client, reason: &str) -> Vec<Event> {
    let events: Api<Event> = Api::namespaced(client.clone(), "ml");
    let all = events.list(&ListParams::default()).await.unwrap().items;
    all.into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

/// Waits until the RayCluster `cluster` is gone.
async fn gone(client: &Client, cluster: &str) {
    eventually(&format!("{cluster} to go"), || async {
        let left = rayclusters(client, "ml").get_opt(cluster).await.unwrap();
        left.is_none().then_some(())
    })
    .await;
}

/// Submits `entrypoint` to the cluster's head as krayne does in
/// InteractiveMode: through Ray's Jobs API, under the RayJob's job id.
async fn submit(client: &Client, cluster: &str, id: &str, entrypoint: &str) {
    let (_, ip) = head(client, cluster, None).await;
    let reply = reqwest::Client::new()
        .post(format!("http://{ip}:8265/api/jobs/"))
        .json(&json!({"entrypoint": entrypoint, "submission_id": id}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
}

#[tokio::test]
async fn an_interactive_job_is_followed_to_its_end_and_its_cluster_goes_after_the_ttl() {
    let (_sb, client) = start().await;
    let api = rayjobs(&client);
    for (name, exit) in [("ok", 0), ("three", 3)] {
        api.create(&PostParams::default(), &rayjob(name, &json!({}), 1, None))
            .await
            .unwrap();
        let running = status_when(&client, name, "Running", |s| deployment(s) == "Running").await;
        let cluster = running["rayClusterName"].as_str().unwrap().to_owned();
        assert!(
            cluster.starts_with(&format!("{name}-")) && cluster.len() == name.len() + 6,
            "{cluster}"
        );
        assert_eq!(running["jobId"], name);
        assert_eq!(
            running["dashboardURL"],
            format!("{cluster}-head-svc.ml.svc.cluster.local:8265")
        );
        assert_eq!(running["jobStatus"], "", "not submitted yet: KubeRay keeps waiting");
        let made = rayclusters(&client, "ml").get(&cluster).await.unwrap();
        let labels = made.metadata.labels.clone().unwrap();
        assert_eq!(labels["ray.io/originated-from-crd"], "RayJob");
        assert_eq!(labels["ray.io/originated-from-cr-name"], name);
        assert_eq!(
            labels["app.kubernetes.io/managed-by"], "krayne",
            "the RayJob's labels are copied"
        );
        let owner = &made.metadata.owner_references.clone().unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("RayJob", name));

        submit(&client, &cluster, name, &format!("echo hello; exit {exit}")).await;
        let ended = status_when(&client, name, "ended", |s| {
            ["Complete", "Failed"].contains(&deployment(s))
        })
        .await;
        if exit == 0 {
            assert_eq!(
                (deployment(&ended), &ended["jobStatus"]),
                ("Complete", &json!("SUCCEEDED"))
            );
            assert_eq!((&ended["succeeded"], &ended["failed"]), (&json!(1), &json!(0)));
        } else {
            assert_eq!((deployment(&ended), &ended["jobStatus"]), ("Failed", &json!("FAILED")));
            assert_eq!(ended["reason"], "AppFailed");
            assert!(ended["message"].as_str().unwrap().contains("exit code 3"), "{ended}");
            assert_eq!((&ended["succeeded"], &ended["failed"]), (&json!(0), &json!(1)));
        }
        assert!(ended["endTime"].is_string() && ended["rayJobInfo"]["endTime"].is_string());

        gone(&client, &cluster).await;
        let kept = api.get(name).await.unwrap();
        assert_eq!(deployment(&kept.data["status"]), deployment(&ended), "the RayJob stays");
    }
    assert_eq!(events(&client, "CreatedRayCluster").await.len(), 2);
    assert_eq!(events(&client, "DeletedRayCluster").await.len(), 2);
}

#[tokio::test]
async fn deadlines_fail_a_job_that_does_not_start_or_takes_too_long() {
    let (_sb, client) = start().await;
    let api = rayjobs(&client);
    let mut waiting = rayjob("no-id", &json!({}), 0, None);
    waiting.data["spec"].as_object_mut().unwrap().remove("jobId");
    waiting.data["spec"]["preRunningDeadlineSeconds"] = json!(2);
    api.create(&PostParams::default(), &waiting).await.unwrap();
    status_when(&client, "no-id", "Waiting", |s| deployment(s) == "Waiting").await;
    let failed = status_when(&client, "no-id", "Failed", |s| deployment(s) == "Failed").await;
    assert_eq!(failed["reason"], "PreRunningDeadlineExceeded");

    api.create(&PostParams::default(), &rayjob("slow", &json!({}), 0, Some(2)))
        .await
        .unwrap();
    let running = status_when(&client, "slow", "Running", |s| deployment(s) == "Running").await;
    let cluster = running["rayClusterName"].as_str().unwrap().to_owned();
    submit(&client, &cluster, "slow", "sleep 600").await;
    let failed = status_when(&client, "slow", "Failed", |s| deployment(s) == "Failed").await;
    assert_eq!(failed["reason"], "DeadlineExceeded");
    assert!(
        failed["message"].as_str().unwrap().contains("activeDeadlineSeconds"),
        "{failed}"
    );
    gone(&client, &cluster).await;
}

#[tokio::test]
async fn a_rayjob_kuberay_refuses_fails_validation_with_a_warning() {
    let (_sb, client) = start().await;
    let api = rayjobs(&client);
    let mut submitter = rayjob("submitter", &json!({}), 0, None);
    submitter.data["spec"]["submissionMode"] = json!("K8sJobMode");
    let mut kept_with_ttl = rayjob("kept", &json!({}), 0, None);
    kept_with_ttl.data["spec"]["shutdownAfterJobFinishes"] = json!(false);
    kept_with_ttl.data["spec"]["ttlSecondsAfterFinished"] = json!(60);
    for job in [submitter, kept_with_ttl] {
        api.create(&PostParams::default(), &job).await.unwrap();
    }
    let refused = status_when(&client, "submitter", "ValidationFailed", |s| {
        deployment(s) == "ValidationFailed"
    })
    .await;
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("K8sJobMode needs a submitter")
    );
    let refused = status_when(&client, "kept", "ValidationFailed", |s| {
        deployment(s) == "ValidationFailed"
    })
    .await;
    assert_eq!(refused["reason"], "ValidationFailed");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("cannot have TTLSecondsAfterFinished")
    );
    let warnings = events(&client, "InvalidRayJobSpec").await;
    assert_eq!(warnings.len(), 2);
    assert!(warnings.iter().all(|e| e.type_.as_deref() == Some("Warning")));
    assert!(
        rayclusters(&client, "ml")
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    let mut bad_type = rayjob("typed", &json!({}), 0, None);
    bad_type.data["spec"]["ttlSecondsAfterFinished"] = json!("soon");
    let e = api.create(&PostParams::default(), &bad_type).await.unwrap_err();
    assert_eq!(crate::api_error(e).1, 422, "the CRD's schema is the API server's");
}

#[tokio::test]
async fn deleting_a_rayjob_ends_its_job_and_removes_its_cluster() {
    let (_sb, client) = start().await;
    let api = rayjobs(&client);
    api.create(&PostParams::default(), &rayjob("doomed", &json!({}), 0, None))
        .await
        .unwrap();
    let running = status_when(&client, "doomed", "Running", |s| deployment(s) == "Running").await;
    let cluster = running["rayClusterName"].as_str().unwrap().to_owned();
    submit(&client, &cluster, "doomed", "sleep 600").await;
    status_when(&client, "doomed", "the job running", |s| s["jobStatus"] == "RUNNING").await;
    api.delete("doomed", &DeleteParams::default()).await.unwrap();
    assert!(rayclusters(&client, "ml").get_opt(&cluster).await.unwrap().is_none());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let left = pods
        .list(&ListParams::default().labels(&format!("ray.io/cluster={cluster}")))
        .await
        .unwrap();
    assert!(left.items.is_empty(), "the cluster's pods went with it");
}

#[tokio::test]
async fn http_mode_submits_the_job_itself() {
    let (_sb, client) = start().await;
    let mut job = rayjob(
        "by-http",
        &json!({"entrypoint": "sh -c 'echo $GREETING'", "runtime_env": {"env_vars": {"GREETING": "hi"}}}),
        0,
        None,
    );
    job.data["spec"]["submissionMode"] = json!("HTTPMode");
    rayjobs(&client).create(&PostParams::default(), &job).await.unwrap();
    let done = status_when(&client, "by-http", "Complete", |s| deployment(s) == "Complete").await;
    assert_eq!(done["jobStatus"], "SUCCEEDED");
    assert_eq!(done["jobId"], "by-http");
}

#[tokio::test]
async fn a_suspended_rayjob_makes_no_cluster_until_resumed_and_a_suspend_takes_its_cluster() {
    let (_sb, client) = start().await;
    let api = rayjobs(&client);
    let mut held = rayjob("held", &json!({}), 1, None);
    held.data["spec"]["suspend"] = json!(true);
    api.create(&PostParams::default(), &held).await.unwrap();
    // As KubeRay: New → Initializing → Suspending → Suspended, no cluster.
    let suspended = status_when(&client, "held", "Suspended", |s| deployment(s) == "Suspended").await;
    assert_eq!(suspended["rayClusterName"], "", "{suspended}");
    assert!(
        rayclusters(&client, "ml")
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // Resumed: Suspended → New → Initializing, a cluster made and run,
    // its start time anew (times are to the second).
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let resume = kube::api::Patch::Merge(json!({"spec": {"suspend": false}}));
    api.patch("held", &kube::api::PatchParams::default(), &resume)
        .await
        .unwrap();
    let running = status_when(&client, "held", "Running", |s| deployment(s) == "Running").await;
    let cluster = running["rayClusterName"].as_str().unwrap().to_owned();
    assert!(cluster.starts_with("held-"), "{cluster}");
    assert!(
        running["startTime"].as_str() > suspended["startTime"].as_str(),
        "{running}"
    );

    // Suspended while running: its cluster goes, the RayJob stays, reset.
    let suspend = kube::api::Patch::Merge(json!({"spec": {"suspend": true}}));
    api.patch("held", &kube::api::PatchParams::default(), &suspend)
        .await
        .unwrap();
    let again = status_when(&client, "held", "Suspended again", |s| deployment(s) == "Suspended").await;
    assert_eq!((&again["rayClusterName"], &again["jobId"]), (&json!(""), &json!("")));
    gone(&client, &cluster).await;

    // One that keeps its cluster may not be suspended (KubeRay's rule).
    let mut keeps = rayjob("keeps", &json!({"shutdown_after_job_finishes": false}), 0, None);
    keeps.data["spec"]["suspend"] = json!(true);
    api.create(&PostParams::default(), &keeps).await.unwrap();
    let refused = status_when(&client, "keeps", "ValidationFailed", |s| {
        deployment(s) == "ValidationFailed"
    })
    .await;
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("not allowed to be suspended"),
        "{refused}"
    );
}
