//! The use cases in process, over the in-memory ports (`fakes`): no
//! server, no sandbox, no database. Clusters, quotas, jobs and tunnels each
//! checked for what they decide — who may, what is written, what is
//! charged, what is audited — in milliseconds.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use bytes::Bytes;
use futures::{SinkExt as _, StreamExt as _};
use krayne_core::domain::{
    Action, Authorized, ClusterRef, FieldValidation, PageRequest,
    audit::{Outcome, RequestMeta, Transport},
    quota::QuotaResource,
};

use krayne_control::{
    Context, ControlPlane, ControlSettings, CreateInput, Ended, ResumeInput, ScaleInput, TunnelVia,
    auth::{Authenticator, MintRequest, TeamMapping, TokenRules, Verifier, VerifyingKey, mint},
    background::{BackgroundWork, Driver},
    fakes::{DownLock, FakeHeads, MemoryAudit, MemoryStore},
};
use serde_json::{Value, json};

/// Someone else's write to Kubernetes (another tool, `kubectl`): not
/// krayne's authorization, so the test vouches for it.
fn kubectl(namespace: &str, name: &str) -> Authorized<ClusterRef> {
    Authorized::vouched(ClusterRef::new(namespace, name), Action::Mutate)
}

const SECRET: &[u8] = b"an in-process test's secret, 32+ bytes long";

const TEAMS: &str = r#"
admins: { groups: [platform-admins], subjects: [] }
teams:
  - name: ml-research
    members: { groups: [ml-research] }
    namespaces: { ml-team: editor, "shared-*": viewer }
  - name: other
    members: { groups: [other-team] }
    namespaces: { other-team: editor }
"#;

/// A control plane over in-memory ports, and the callers' tokens.
struct World {
    plane: ControlPlane,
    store: Arc<MemoryStore>,
    audit: Arc<MemoryAudit>,
    upstream: Arc<FakeHeads>,
    auth: Authenticator,
    /// The background driver, for tests that need its tasks.
    background: Option<Driver>,
}

impl World {
    fn new(quotas: &str) -> Self {
        Self::with_settings(quotas, ControlSettings::default())
    }

    /// [`World::new`] with these service settings.
    fn with_settings(quotas: &str, settings: ControlSettings) -> Self {
        let store = MemoryStore::with_namespaces(&["ml-team", "other-team", "shared-data"]);
        let audit = MemoryAudit::new();
        let upstream = FakeHeads::new();
        let mapping = TeamMapping::parse(&format!("{TEAMS}{quotas}")).unwrap();
        let verifier = Verifier::new(vec![VerifyingKey::hs256(SECRET)], TokenRules::default());
        let auth = Authenticator::new(verifier, mapping);
        let plane = ControlPlane::new(store.clone(), audit.clone(), settings)
            .with_upstream(upstream.clone())
            .with_ray(upstream.clone())
            .with_authenticator(auth.clone());
        Self {
            plane,
            store,
            audit,
            upstream,
            auth,
            background: None,
        }
    }

    /// Starts the plane's background work, as the server does.
    fn start_background(&mut self) {
        self.background = Some(self.plane.start_background(BackgroundWork::default()));
    }

    /// A caller as the edge makes one: a token, authenticated.
    async fn caller(&self, subject: &str, groups: &[&str]) -> Context {
        let token = mint(
            &MintRequest {
                subject: subject.to_owned(),
                email: Some(subject.to_owned()),
                groups: groups.iter().map(|g| (*g).to_owned()).collect(),
                ttl_seconds: 3600,
                issuer: "krayne".to_owned(),
                audience: "krayne".to_owned(),
            },
            jsonwebtoken::Algorithm::HS256,
            SECRET,
        )
        .unwrap();
        let principal = self.auth.authenticate(Some(&format!("Bearer {token}"))).await.unwrap();
        Context {
            principal,
            meta: RequestMeta {
                request_id: uuid::Uuid::now_v7().to_string().into(),
                correlation_id: None,
                transport: Transport::Grpc,
                source_ip: Some("192.0.2.1".to_owned()),
                user_agent: Some("in-process".to_owned()),
            },
        }
    }

    async fn alice(&self) -> Context {
        self.caller("alice@example.com", &["ml-research"]).await
    }

    async fn bob(&self) -> Context {
        self.caller("bob@example.com", &["other-team"]).await
    }
}

fn create(config: Value) -> CreateInput {
    CreateInput {
        config,
        namespace: Some("ml-team".to_owned()),
        dry_run: false,
        field_validation: FieldValidation::Strict,
        queue: None,
    }
}

fn scale(group: &str, replicas: u32) -> ScaleInput {
    ScaleInput {
        worker_group: group.to_owned(),
        replicas: Some(replicas),
        min_replicas: None,
        max_replicas: None,
    }
}

mod clusters {
    use super::*;

    #[tokio::test]
    async fn an_editor_creates_reads_scales_and_deletes_and_each_write_is_audited() {
        let w = World::new("");
        let alice = w.alice().await;
        let created = w
            .plane
            .create(
                &alice,
                create(
                    json!({"name": "demo", "worker_groups": [{"name": "worker", "replicas": 1, "max_replicas": 4}]}),
                ),
            )
            .await
            .unwrap();
        assert_eq!(created.cluster.name, "demo");
        assert_eq!(created.manifest["kind"], "RayCluster");
        let stored = w.store.object("ml-team", "demo").unwrap();
        assert_eq!(stored["spec"]["workerGroupSpecs"][0]["replicas"], 1);

        let got = w.plane.get(&alice, &ClusterRef::new("ml-team", "demo")).await.unwrap();
        assert_eq!((got.name.as_str(), got.num_workers), ("demo", 1));
        let page = w
            .plane
            .list(&alice, Some("ml-team"), &PageRequest::new(10, "").unwrap())
            .await
            .unwrap();
        assert_eq!(page.items.len(), 1);

        let scaled = w
            .plane
            .scale(&alice, &ClusterRef::new("ml-team", "demo"), scale("worker", 3))
            .await
            .unwrap();
        assert_eq!(scaled.num_workers, 3);
        let stored = w.store.object("ml-team", "demo").unwrap();
        assert_eq!(stored["spec"]["workerGroupSpecs"][0]["replicas"], 3);

        w.plane
            .delete(&alice, &ClusterRef::new("ml-team", "demo"))
            .await
            .unwrap();
        assert!(w.store.object("ml-team", "demo").is_none());
        let missing = w
            .plane
            .get(&alice, &ClusterRef::new("ml-team", "demo"))
            .await
            .unwrap_err();
        assert_eq!(missing.code(), "not_found");

        for action in ["cluster.create", "cluster.scale", "cluster.delete"] {
            let rows = w.audit.of(action);
            assert_eq!(rows.len(), 1, "{action}: {rows:?}");
            assert_eq!(rows[0].outcome, Outcome::Succeeded, "{action}");
            assert_eq!(rows[0].subject, "alice@example.com");
            assert_eq!(rows[0].cluster.as_deref(), Some("demo"));
        }
    }

    #[tokio::test]
    async fn a_caller_without_the_role_is_refused_writes_nothing_and_is_audited() {
        let w = World::new("");
        let bob = w.bob().await;
        let refused = w
            .plane
            .create(&bob, create(json!({"name": "theirs"})))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), "permission_denied");
        assert_eq!(w.store.writes(), 0);
        let rows = w.audit.of("cluster.create");
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].outcome, Outcome::Denied);

        // A viewer reads but does not write.
        let alice = w.alice().await;
        let viewer = w
            .plane
            .create(
                &alice,
                CreateInput {
                    namespace: Some("shared-data".to_owned()),
                    ..create(json!({"name": "shared"}))
                },
            )
            .await
            .unwrap_err();
        assert_eq!(viewer.code(), "permission_denied");
        assert!(
            w.plane
                .list(&alice, Some("shared-data"), &PageRequest::new(10, "").unwrap())
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn bad_input_is_refused_with_the_field_named_before_kubernetes_is_asked() {
        let w = World::new("");
        let alice = w.alice().await;
        let bad = w
            .plane
            .create(&alice, create(json!({"name": "Not_A_Name"})))
            .await
            .unwrap_err();
        assert_eq!(bad.code(), "invalid_argument");
        assert!(bad.to_string().contains("name"), "{bad}");
        let taken = {
            w.plane.create(&alice, create(json!({"name": "once"}))).await.unwrap();
            w.plane
                .create(&alice, create(json!({"name": "once"})))
                .await
                .unwrap_err()
        };
        assert_eq!(taken.code(), "already_exists");
        let no_group = w
            .plane
            .scale(&alice, &ClusterRef::new("ml-team", "once"), scale("nope", 1))
            .await
            .unwrap_err();
        // A bad value naming the groups there are (issue 56).
        assert_eq!(no_group.code(), "invalid_argument");
        assert!(
            no_group.to_string().contains("its worker group is \"worker\""),
            "{no_group}"
        );
        assert_eq!(w.store.writes(), 1, "only the first create was written");
    }
}

mod quotas {
    use super::*;

    const GPUS: &str = "quotas:\n  ml-team: { gpus: 4, clusters: 2 }\n";

    fn gpu_cluster(name: &str, gpus: u32) -> Value {
        json!({"name": name, "worker_groups": [{"name": "gpu", "replicas": 1, "max_replicas": 1, "gpus": gpus}]})
    }

    /// Queued admission against the ports' fakes (issue 61): what does not
    /// fit waits in line with its place; the admitter (a background task)
    /// admits it once a delete frees the quota, audited as krayne's own.
    #[tokio::test]
    async fn a_waiting_cluster_is_admitted_in_order_once_quota_frees() {
        let mut w = World::new("quotas:\n  ml-team: { gpus: 4 }\n");
        let alice = w.alice().await;
        let queued = |name: &str| CreateInput {
            queue: Some(true),
            ..create(gpu_cluster(name, 2))
        };
        for name in ["a", "b"] {
            let made = w.plane.create(&alice, queued(name)).await.unwrap();
            assert_eq!(made.cluster.status.as_str(), "creating", "{name} fits");
        }
        let mut places = Vec::new();
        for name in ["c", "d"] {
            let waits = w.plane.create(&alice, queued(name)).await.unwrap().cluster;
            assert_eq!(waits.status.as_str(), "queued");
            places.push((waits.queue_position, waits.queue_reason));
        }
        let short = Some("gpus: needs 2, 0 of 4 free".to_owned());
        assert_eq!(places, [(Some(1), short.clone()), (Some(2), short)]);
        w.start_background();
        w.plane.delete(&alice, &ClusterRef::new("ml-team", "a")).await.unwrap();
        let mut admitted = Vec::new();
        for _ in 0..100 {
            admitted = w.audit.of("queue.admit");
            if !admitted.is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let names: Vec<_> = admitted.iter().map(|r| r.cluster.clone()).collect();
        assert_eq!(names, [Some("c".to_owned())], "the first in line, once");
        assert_eq!(w.store.object("ml-team", "c").unwrap()["spec"]["suspend"], false);
        let mut d = None;
        for _ in 0..100 {
            let now = w.plane.get(&alice, &ClusterRef::new("ml-team", "d")).await.unwrap();
            let moved = now.queue_position == Some(1);
            d = Some(now);
            if moved {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let d = d.unwrap();
        assert_eq!((d.status.as_str(), d.queue_position), ("queued", Some(1)), "d moved up");
    }

    #[tokio::test]
    async fn growth_past_the_quota_is_refused_with_the_numbers_and_nothing_is_written() {
        let w = World::new(GPUS);
        let alice = w.alice().await;
        w.plane.create(&alice, create(gpu_cluster("two", 2))).await.unwrap();
        let refused = w
            .plane
            .create(&alice, create(gpu_cluster("three", 3)))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), "quota_exceeded");
        let text = refused.to_string();
        assert!(text.contains("gpus"), "{text}");
        assert_eq!(w.store.writes(), 1);
        assert!(w.store.object("ml-team", "three").is_none());

        let quota = w.plane.quota(&alice, "ml-team").await.unwrap();
        let gpus = quota.lines.iter().find(|l| l.resource == QuotaResource::Gpus).unwrap();
        assert_eq!((gpus.used.as_str(), gpus.limit.as_deref()), ("2", Some("4")));
    }

    #[tokio::test]
    async fn a_scale_is_charged_what_its_patch_writes() {
        let w = World::new(GPUS);
        let alice = w.alice().await;
        w.plane.create(&alice, create(gpu_cluster("g", 2))).await.unwrap();
        let before = w.store.writes();
        // 1 → 3 workers of 2 GPUs is 6 > 4: refused, not written.
        let refused = w
            .plane
            .scale(&alice, &ClusterRef::new("ml-team", "g"), scale("gpu", 3))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), "quota_exceeded");
        assert_eq!(w.store.writes(), before);
        // 1 → 2 workers is 4: fits, and is written as charged.
        w.plane
            .scale(&alice, &ClusterRef::new("ml-team", "g"), scale("gpu", 2))
            .await
            .unwrap();
        let stored = w.store.object("ml-team", "g").unwrap();
        assert_eq!(stored["spec"]["workerGroupSpecs"][0]["replicas"], 2);
        let quota = w.plane.quota(&alice, "ml-team").await.unwrap();
        let gpus = quota.lines.iter().find(|l| l.resource == QuotaResource::Gpus).unwrap();
        assert_eq!(gpus.used, "4");
    }

    #[tokio::test]
    async fn with_the_shared_admission_lock_down_nothing_under_a_quota_is_admitted() {
        let mut w = World::new(GPUS);
        w.plane = w.plane.clone().with_quota_lock(Arc::new(DownLock));
        let alice = w.alice().await;
        let refused = w.plane.create(&alice, create(gpu_cluster("g", 1))).await.unwrap_err();
        assert_eq!(refused.code(), "unavailable");
        assert_eq!(w.store.writes(), 0, "fail closed: nothing written");
        let rows = w.audit.of("cluster.create");
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].http_status, Some(503));
        // A namespace without a quota takes no lock.
        let other = w.caller("carol@example.com", &["other-team"]).await;
        w.plane
            .create(
                &other,
                CreateInput {
                    namespace: Some("other-team".to_owned()),
                    ..create(json!({"name": "free"}))
                },
            )
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn the_cluster_count_is_a_quota_too_and_a_dry_run_is_checked_the_same() {
        let w = World::new(GPUS);
        let alice = w.alice().await;
        for name in ["a", "b"] {
            w.plane.create(&alice, create(json!({"name": name}))).await.unwrap();
        }
        let dry = w
            .plane
            .create(
                &alice,
                CreateInput {
                    dry_run: true,
                    ..create(json!({"name": "c"}))
                },
            )
            .await
            .unwrap_err();
        assert_eq!(dry.code(), "quota_exceeded");
        w.plane.delete(&alice, &ClusterRef::new("ml-team", "a")).await.unwrap();
        w.plane.create(&alice, create(json!({"name": "c"}))).await.unwrap();
    }
}

mod tunnels {
    use super::*;

    async fn ready(w: &World, ctx: &Context, name: &str) {
        w.plane.create(ctx, create(json!({"name": name}))).await.unwrap();
        w.store.make_ready("ml-team", name);
    }

    #[tokio::test]
    async fn an_editor_tunnels_to_a_ready_head_bytes_flow_and_the_row_counts_them() {
        let w = World::new("");
        let alice = w.alice().await;
        ready(&w, &alice, "tun").await;
        let tunnel = w
            .plane
            .open_tunnel(
                &alice,
                &ClusterRef::new("ml-team", "tun"),
                "client",
                TunnelVia::WebSocket,
            )
            .await
            .unwrap();
        assert_eq!((tunnel.service.as_str(), tunnel.port), ("client", 10001));
        let dialled = w.upstream.dialled();
        assert_eq!(dialled.len(), 1);
        assert_eq!((dialled[0].pod.as_str(), dialled[0].port), ("tun-head-x1", 10001));

        let incoming = futures::stream::iter([Ok::<_, String>(Bytes::from_static(b"ping through krayne"))]);
        let (outgoing, mut answers) = futures::channel::mpsc::unbounded::<Bytes>();
        let finished = tunnel
            .run(incoming, outgoing.sink_map_err(|_| ()), true, std::future::pending())
            .await;
        assert_eq!(finished.ended, Ended::ServiceClosed);
        assert_eq!((finished.flowed.to_service, finished.flowed.to_client), (19, 19));
        let mut echoed = Vec::new();
        while let Some(chunk) = answers.next().await {
            echoed.extend_from_slice(&chunk);
        }
        assert_eq!(echoed, b"ping through krayne");

        let rows = w.audit.of("service.connect");
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].outcome, Outcome::Succeeded);
        assert_eq!(rows[0].summary["bytes_to_service"], 19);
        assert_eq!(rows[0].summary["service"], "client");
    }

    #[tokio::test]
    async fn no_tunnel_without_the_editor_role_a_serving_head_or_a_declared_service() {
        let w = World::new("");
        let alice = w.alice().await;
        w.plane.create(&alice, create(json!({"name": "cold"}))).await.unwrap();
        let pending = w
            .plane
            .open_tunnel(
                &alice,
                &ClusterRef::new("ml-team", "cold"),
                "dashboard",
                TunnelVia::WebSocket,
            )
            .await
            .err()
            .unwrap();
        assert_eq!(pending.code(), "failed_precondition", "{pending}");

        ready(&w, &alice, "warm").await;
        let bob = w.bob().await;
        let refused = w
            .plane
            .open_tunnel(
                &bob,
                &ClusterRef::new("ml-team", "warm"),
                "dashboard",
                TunnelVia::WebSocket,
            )
            .await
            .err()
            .unwrap();
        assert_eq!(refused.code(), "permission_denied");
        let unknown = w
            .plane
            .open_tunnel(
                &alice,
                &ClusterRef::new("ml-team", "warm"),
                "gopher",
                TunnelVia::WebSocket,
            )
            .await
            .err()
            .unwrap();
        assert_eq!(unknown.code(), "not_found");
        assert!(w.upstream.dialled().is_empty(), "nothing was dialled");
    }
}

mod jobs {
    use krayne_control::PackageBody;
    use krayne_core::domain::{JobStatus, JobSubmission, RuntimeEnv};

    use super::*;

    const PACKAGE: &str = "_ray_pkg_6bb64f4d946aae18.zip";

    async fn ready(w: &World, ctx: &Context, name: &str) {
        w.plane.create(ctx, create(json!({"name": name}))).await.unwrap();
        w.store.make_ready("ml-team", name);
    }

    fn submission(id: &str) -> JobSubmission {
        JobSubmission {
            entrypoint: "python train.py".to_owned(),
            submission_id: Some(id.to_owned()),
            runtime_env: RuntimeEnv {
                working_dir: Some(format!("gcs://{PACKAGE}")),
                ..RuntimeEnv::default()
            },
            ..JobSubmission::default()
        }
    }

    fn bytes(n: usize, chunk: usize) -> PackageBody {
        let chunks: Vec<Result<Bytes, std::io::Error>> = (0..n.div_ceil(chunk))
            .map(|_| Ok(Bytes::from(vec![b'z'; chunk])))
            .collect();
        futures::stream::iter(chunks).boxed()
    }

    #[tokio::test]
    async fn a_job_is_submitted_once_read_and_stopped_on_the_clusters_ray() {
        let w = World::new("");
        let alice = w.alice().await;
        ready(&w, &alice, "jobs").await;
        let first = w
            .plane
            .submit_job(&alice, &ClusterRef::new("ml-team", "jobs"), submission("train-1"))
            .await
            .unwrap();
        assert!(first.created);
        assert_eq!(first.job.status, JobStatus::Pending);
        // The same submission id again: the job that is there, not a second.
        let again = w
            .plane
            .submit_job(&alice, &ClusterRef::new("ml-team", "jobs"), submission("train-1"))
            .await
            .unwrap();
        assert!(!again.created);
        let ray = w.upstream.ray("jobs-head-x1");
        assert_eq!(ray.jobs.len(), 1);
        assert_eq!(
            ray.submissions["train-1"].runtime_env.working_dir,
            Some(format!("gcs://{PACKAGE}"))
        );

        let listed = w.plane.jobs(&alice, &ClusterRef::new("ml-team", "jobs")).await.unwrap();
        assert_eq!(listed.len(), 1);
        let stopped = w
            .plane
            .stop_job(&alice, &ClusterRef::new("ml-team", "jobs"), "train-1")
            .await
            .unwrap();
        assert!(stopped.stopped);
        assert_eq!(
            w.plane
                .job(&alice, &ClusterRef::new("ml-team", "jobs"), "train-1")
                .await
                .unwrap()
                .status,
            JobStatus::Stopped
        );

        let submits = w.audit.of("job.submit");
        assert_eq!(submits.len(), 2);
        assert!(submits.iter().all(|r| r.outcome == Outcome::Succeeded));
        assert_eq!(submits[0].summary["package"], PACKAGE);
        assert_eq!(w.audit.of("job.stop").len(), 1);
    }

    #[tokio::test]
    async fn a_viewer_reads_jobs_but_submits_none_and_bad_submissions_never_reach_ray() {
        let w = World::new("");
        let alice = w.alice().await;
        ready(&w, &alice, "jobs").await;
        let bob = w.bob().await;
        let refused = w
            .plane
            .submit_job(&bob, &ClusterRef::new("ml-team", "jobs"), submission("theirs"))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), "permission_denied");
        let empty = JobSubmission {
            entrypoint: "  ".to_owned(),
            ..submission("empty")
        };
        let invalid = w
            .plane
            .submit_job(&alice, &ClusterRef::new("ml-team", "jobs"), empty)
            .await
            .unwrap_err();
        assert_eq!(invalid.code(), "invalid_argument");
        assert!(invalid.to_string().contains("entrypoint"), "{invalid}");
        assert!(w.upstream.dialled().is_empty(), "Ray was never asked");
        let rows = w.audit.of("job.submit");
        assert_eq!(
            rows.iter().map(|r| r.outcome).collect::<Vec<_>>(),
            [Outcome::Denied, Outcome::Invalid]
        );
    }

    #[tokio::test]
    async fn a_package_is_uploaded_within_the_limit_and_refused_past_it() {
        let w = World::new("");
        let alice = w.alice().await;
        ready(&w, &alice, "pkgs").await;
        let limit = ControlSettings::default().package_limit;

        let small = w
            .plane
            .upload_package(
                &alice,
                &ClusterRef::new("ml-team", "pkgs"),
                PACKAGE,
                Some(4096),
                bytes(4096, 1024),
            )
            .await
            .unwrap();
        assert_eq!(
            (small.working_dir.as_str(), small.bytes),
            ("gcs://_ray_pkg_6bb64f4d946aae18.zip", 4096)
        );
        assert!(
            w.plane
                .has_package(&alice, &ClusterRef::new("ml-team", "pkgs"), PACKAGE)
                .await
                .unwrap()
        );

        // Declared over the limit: refused before the head is dialled.
        let dialled = w.upstream.dialled().len();
        let declared = w
            .plane
            .upload_package(
                &alice,
                &ClusterRef::new("ml-team", "pkgs"),
                "_ray_pkg_00000000000000aa.zip",
                Some(limit + 1),
                bytes(1, 1),
            )
            .await
            .unwrap_err();
        assert_eq!(declared.code(), "payload_too_large");
        assert_eq!(declared.http_status(), 413);
        assert_eq!(w.upstream.dialled().len(), dialled);

        // Streamed past it with no size declared: cut, and the head keeps
        // nothing.
        let streamed = w
            .plane
            .upload_package(
                &alice,
                &ClusterRef::new("ml-team", "pkgs"),
                "_ray_pkg_00000000000000bb.zip",
                None,
                bytes(usize::try_from(limit).unwrap() + 1024 * 1024, 1024 * 1024),
            )
            .await
            .unwrap_err();
        assert_eq!(streamed.code(), "payload_too_large");
        assert_eq!(streamed.grpc_code().1, "RESOURCE_EXHAUSTED");
        let kept = w.upstream.ray("pkgs-head-x1").packages;
        assert_eq!(kept.keys().collect::<Vec<_>>(), [PACKAGE]);
        let rows = w.audit.of("package.upload");
        assert_eq!(rows.len(), 3, "{rows:?}");
        // Refused before acting (invalid), then cut while acting (failed);
        // both answered 413.
        let outcomes: Vec<_> = rows.iter().map(|r| (r.outcome, r.http_status)).collect();
        assert_eq!(
            outcomes,
            [
                (Outcome::Succeeded, Some(200)),
                (Outcome::Invalid, Some(413)),
                (Outcome::Failed, Some(413))
            ]
        );
    }
}

/// A replica's readiness, without a server: ready once Kubernetes has
/// answered, its dependencies reported, not ready once draining.
mod lifecycle {
    use super::*;

    #[tokio::test]
    async fn ready_until_it_drains_with_its_dependencies_reported() {
        let mut world = World::new("");
        let readiness = world.plane.readiness().await;
        assert!(
            readiness.ready() && !readiness.starting && !readiness.draining,
            "{readiness:?}"
        );
        world.start_background();
        let tasks = world.background.as_ref().unwrap().tasks();
        assert_eq!(
            tasks,
            ["quota-gauges", "dependency-probes", "denial-windows", "queue-admitter"]
        );
        let mut reported = Vec::new();
        for _ in 0..100 {
            reported = world.plane.readiness().await.dependencies;
            if reported.iter().all(|d| d.up.is_some()) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let names: Vec<(&str, Option<bool>)> = reported.iter().map(|d| (d.name, d.up)).collect();
        assert_eq!(names, [("kubernetes", Some(true)), ("audit_database", Some(true))]);

        world.plane.begin_drain();
        let draining = world.plane.readiness().await;
        assert!(draining.draining && !draining.ready(), "{draining:?}");
        world.plane.close_tunnels();
        let stopped = world.background.take().unwrap().stop(std::time::Duration::from_secs(2));
        tokio::time::timeout(std::time::Duration::from_secs(3), stopped)
            .await
            .expect("the driver stops its tasks");
    }
}

/// Cost control (issue 44): suspend and resume, the reaper over idle
/// clusters with a fixed clock, and keep.
mod cost_control {
    use std::time::Duration;

    use krayne_control::{
        KeepInput, LifecycleMode,
        fakes::{FixedLeadership, MemoryLedger},
    };

    use super::*;

    const POLICY: &str = "lifecycle:\n  ml-team: { idle_after: 1h, warn_before: 10m, keep_max: 1d }\n";

    /// A world whose uses are recorded in memory, with `names` ready.
    async fn world(names: &[&str]) -> (World, Arc<MemoryLedger>) {
        let mut w = World::new(POLICY);
        let ledger = MemoryLedger::new();
        w.plane = w
            .plane
            .clone()
            .with_activity_ledger(ledger.clone(), Duration::from_secs(10));
        w.start_background();
        let alice = w.alice().await;
        for name in names {
            w.plane.create(&alice, create(json!({"name": name}))).await.unwrap();
            w.store.make_ready("ml-team", name);
        }
        (w, ledger)
    }

    fn minutes(t: jiff::Timestamp, m: i64) -> jiff::Timestamp {
        t.checked_add(jiff::SignedDuration::from_mins(m)).unwrap()
    }

    #[tokio::test]
    async fn suspend_and_resume_are_for_editors_and_audited() {
        let (w, _) = world(&["parked"]).await;
        let (alice, bob) = (w.alice().await, w.bob().await);
        let parked = ClusterRef::new("ml-team", "parked");
        assert!(w.plane.suspend(&bob, &parked).await.is_err(), "another team's");
        let suspended = w.plane.suspend(&alice, &parked).await.unwrap();
        assert!(suspended.suspended);
        assert_eq!(w.store.object("ml-team", "parked").unwrap()["spec"]["suspend"], true);
        let resumed = w.plane.resume(&alice, &parked, ResumeInput::default()).await.unwrap();
        assert!(!resumed.suspended);
        let outcomes = |action: &str| -> Vec<Outcome> { w.audit.of(action).iter().map(|r| r.outcome).collect() };
        assert_eq!(outcomes("cluster.suspend"), [Outcome::Denied, Outcome::Succeeded]);
        assert_eq!(outcomes("cluster.resume"), [Outcome::Succeeded]);
    }

    #[tokio::test]
    async fn an_idle_cluster_is_warned_then_suspended_and_one_in_use_is_not() {
        let (w, ledger) = world(&["idle", "busy", "tunnelled"]).await;
        w.upstream.set_use("idle-head-x1", 0.0, 7200);
        w.upstream.set_use("busy-head-x1", 1.0, 0);
        w.upstream.set_use("tunnelled-head-x1", 0.0, 7200);
        let t0 = jiff::Timestamp::now();
        use krayne_core::domain::ActivityLedger as _;
        ledger
            .record(&[krayne_core::domain::ClusterUse {
                namespace: "ml-team".into(),
                name: "tunnelled".into(),
                at: t0,
            }])
            .await
            .unwrap();

        // Not the leader: nothing is written.
        let writes = w.store.writes();
        let done = w.plane.reap(LifecycleMode::Act, &FixedLeadership(false), t0).await;
        assert!(done.is_empty() && w.store.writes() == writes, "{done:?}");

        let leader = FixedLeadership(true);
        let done = w.plane.reap(LifecycleMode::Act, &leader, t0).await;
        let actions: Vec<(&str, &str)> = done.iter().map(|r| (r.cluster.name(), r.action)).collect();
        assert_eq!(actions, [("idle", "warn")], "{done:?}");
        let warned = w.store.object("ml-team", "idle").unwrap();
        let annotations = &warned["metadata"]["annotations"];
        assert!(annotations["krayne.dev/idle-since"].is_string(), "{warned}");
        assert!(
            annotations["krayne.dev/lifecycle"]
                .as_str()
                .unwrap()
                .ends_with(": idle 1h"),
            "{warned}"
        );

        // Within warn_before of the warning: nothing more (the tunnel's
        // cluster, closed since t0, is planned for: idle since then).
        w.upstream.set_use("idle-head-x1", 0.0, 7200 + 300);
        let done = w.plane.reap(LifecycleMode::Act, &leader, minutes(t0, 5)).await;
        let actions: Vec<(&str, &str)> = done.iter().map(|r| (r.cluster.name(), r.action)).collect();
        assert_eq!(actions, [("tunnelled", "plan")], "{done:?}");
        // Then suspended, once; the others never.
        w.upstream.set_use("idle-head-x1", 0.0, 7200 + 660);
        let done = w.plane.reap(LifecycleMode::Act, &leader, minutes(t0, 11)).await;
        let actions: Vec<(&str, &str)> = done.iter().map(|r| (r.cluster.name(), r.action)).collect();
        assert_eq!(actions, [("idle", "suspend")], "{done:?}");
        assert_eq!(w.store.object("ml-team", "idle").unwrap()["spec"]["suspend"], true);
        for name in ["busy", "tunnelled"] {
            let object = w.store.object("ml-team", name).unwrap();
            assert!(object["spec"]["suspend"].is_null(), "{name}: {object}");
        }
        let suspend = w.audit.of("cluster.suspend");
        assert_eq!(suspend.len(), 1);
        assert_eq!(suspend[0].subject, "system:krayne-lifecycle");
        assert!(
            suspend[0].summary["reason"].as_str().unwrap().starts_with("idle 2h"),
            "{:?}",
            suspend[0].summary
        );
        let events: Vec<String> = w
            .store
            .created_events()
            .iter()
            .map(|e| format!("{} {}", e["involvedObject"]["name"], e["reason"]))
            .collect();
        assert_eq!(
            events,
            ["\"idle\" \"LifecycleWarning\"", "\"idle\" \"LifecycleSuspended\""]
        );
    }

    /// Reliability 29h (issue 53, item 8): a viewer's long-lived stream of
    /// a cluster is no use of it; an editor's is.
    #[tokio::test]
    async fn the_driver_writes_the_uses_it_holds_when_it_stops() {
        let (mut w, ledger) = world(&["held"]).await;
        let alice = w.alice().await;
        let tasks = w.background.as_ref().unwrap().tasks();
        assert!(tasks.contains(&"activity-recorder"), "{tasks:?}");
        let using = w
            .plane
            .proxied_response_guard(&alice, &ClusterRef::new("ml-team", "held"));
        use krayne_core::domain::ActivityLedger as _;
        let last_use = async || ledger.last_uses().await.unwrap().first().map(|u| u.at);
        let mut first = None;
        for _ in 0..100 {
            first = last_use().await;
            if first.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let first = first.expect("a first use is written soon, not a period later");
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(using);
        let closed = jiff::Timestamp::now();
        w.background.take().unwrap().stop(Duration::from_secs(2)).await;
        let last = last_use().await.unwrap();
        assert!(
            last > first && last <= closed,
            "the close, written at the stop: {first} {last} {closed}"
        );
    }

    #[tokio::test]
    async fn only_those_who_may_edit_a_cluster_keep_it_in_use() {
        let (w, ledger) = world(&["edited"]).await;
        let admin = w.caller("root@example.com", &["platform-admins"]).await;
        let in_shared = CreateInput {
            namespace: Some("shared-data".to_owned()),
            ..create(json!({"name": "viewed"}))
        };
        w.plane.create(&admin, in_shared).await.unwrap();
        let alice = w.alice().await;
        let viewing = w
            .plane
            .proxied_response_guard(&alice, &ClusterRef::new("shared-data", "viewed"));
        let editing = w
            .plane
            .proxied_response_guard(&alice, &ClusterRef::new("ml-team", "edited"));
        use krayne_core::domain::ActivityLedger as _;
        let mut used = Vec::new();
        for _ in 0..50 {
            used = ledger.last_uses().await.unwrap().into_iter().map(|u| u.name).collect();
            if !used.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(used, ["edited"], "the viewer's stream is no use");
        drop((viewing, editing));
    }

    /// Leads, and has the cluster deleted and created again under its name
    /// just before the reaper's first action is fenced: the race between a
    /// reaper's look and its write.
    struct RecreatedMeanwhile {
        store: Arc<MemoryStore>,
        done: std::sync::atomic::AtomicBool,
    }

    #[async_trait::async_trait]
    impl krayne_core::domain::Leadership for RecreatedMeanwhile {
        async fn leading(&self) {}

        async fn holds(&self) -> bool {
            if !self.done.swap(true, std::sync::atomic::Ordering::SeqCst) {
                self.store.recreate("ml-team", "doomed");
            }
            true
        }
    }

    /// Reliability 29e (issue 53, item 5): the reaper deletes only the
    /// very cluster it decided on.
    #[tokio::test]
    async fn a_cluster_created_again_since_the_reapers_look_is_not_deleted() {
        let w = World::new("lifecycle:\n  ml-team: { max_lifetime: 1h, on_expiry: delete, warn_before: 10m }\n");
        let alice = w.alice().await;
        w.plane.create(&alice, create(json!({"name": "doomed"}))).await.unwrap();
        w.store.make_ready("ml-team", "doomed");
        let created: jiff::Timestamp = "2026-11-25T12:00:00Z".parse().unwrap();
        let t0 = minutes(created, 120);
        let done = w.plane.reap(LifecycleMode::Act, &FixedLeadership(true), t0).await;
        assert_eq!(done.iter().map(|r| r.action).collect::<Vec<_>>(), ["warn"], "{done:?}");

        let racing = RecreatedMeanwhile {
            store: w.store.clone(),
            done: false.into(),
        };
        let done = w.plane.reap(LifecycleMode::Act, &racing, minutes(t0, 11)).await;
        assert!(done.is_empty(), "nothing deleted: {done:?}");
        let survivor = w.store.object("ml-team", "doomed").expect("the new cluster stands");
        assert_ne!(survivor["metadata"]["uid"], "uid-1", "{survivor}");
        let deletes: Vec<Outcome> = w.audit.of("cluster.delete").iter().map(|r| r.outcome).collect();
        assert_eq!(deletes, [Outcome::Failed], "the refused delete is on record");
    }

    #[tokio::test]
    async fn keep_postpones_within_keep_max_and_is_audited() {
        let (w, _) = world(&["kept"]).await;
        w.upstream.set_use("kept-head-x1", 0.0, 7200);
        let alice = w.alice().await;
        let kept = ClusterRef::new("ml-team", "kept");
        let too_long = KeepInput {
            for_: Some("2d".into()),
            until: None,
        };
        let refused = w.plane.keep(&alice, &kept, &too_long).await.unwrap_err();
        assert!(refused.to_string().contains("longest keep"), "{refused}");
        let four_hours = KeepInput {
            for_: Some("4h".into()),
            until: None,
        };
        let info = w.plane.keep(&alice, &kept, &four_hours).await.unwrap();
        let until: jiff::Timestamp = info.kept_until.unwrap().parse().unwrap();
        let t0 = jiff::Timestamp::now();
        let leader = FixedLeadership(true);
        // Idle for 2 h, yet nothing is warned or done while it is kept.
        for m in [0, 30, 200] {
            let done = w.plane.reap(LifecycleMode::Act, &leader, minutes(t0, m)).await;
            assert!(done.iter().all(|r| r.action == "plan"), "{m} min: {done:?}");
        }
        let object = w.store.object("ml-team", "kept").unwrap();
        assert!(object["spec"]["suspend"].is_null());
        let planned = object["metadata"]["annotations"]["krayne.dev/lifecycle"]
            .as_str()
            .unwrap();
        assert!(
            planned.contains(&until.to_string()),
            "the plan waits for the keep: {planned}"
        );
        let keeps: Vec<Outcome> = w.audit.of("cluster.keep").iter().map(|r| r.outcome).collect();
        assert_eq!(keeps, [Outcome::Invalid, Outcome::Succeeded]);
    }
}

/// Issue 55: what krayne keeps beside the clusters it makes — each
/// create's own token Secret, owned by its cluster, and the NetworkPolicy
/// the keeper backfills — decided in process.
mod companions {
    use krayne_control::KeptClusters;
    use krayne_core::{
        domain::{ClusterSpec, ClusterStore as _, Companion, ray_auth::RayAuthKey},
        manifest::{self, PolicyPeers, Provenance},
    };

    use super::*;

    fn world() -> World {
        let settings = ControlSettings {
            network_policy: Some(PolicyPeers {
                namespace: "krayne".into(),
                pod_labels: [("app.kubernetes.io/name".to_owned(), "krayne".to_owned())].into(),
                extra_ingress: Vec::new(),
            }),
            ray_auth: Some(RayAuthKey::new(&[7; 32]).unwrap()),
            ..ControlSettings::default()
        };
        World::with_settings("", settings)
    }

    fn owner(object: &Value) -> &Value {
        &object["metadata"]["ownerReferences"][0]["uid"]
    }

    #[tokio::test]
    async fn a_create_of_a_taken_name_leaves_the_existing_clusters_secret_alone() {
        let w = world();
        let alice = w.alice().await;
        let first = w.plane.create(&alice, create(json!({"name": "tok"}))).await.unwrap();
        let secrets = w.store.companions(Companion::Secret);
        assert_eq!(secrets.len(), 1, "{secrets:?}");
        let uid = w.store.object("ml-team", "tok").unwrap()["metadata"]["uid"].clone();
        assert_eq!(owner(&secrets[0]), &uid, "owned by its cluster");
        assert_eq!(
            first.manifest["spec"]["authOptions"]["secretName"],
            secrets[0]["metadata"]["name"]
        );

        let again = w.plane.create(&alice, create(json!({"name": "tok"}))).await;
        assert!(again.is_err(), "the name is taken");
        assert_eq!(
            w.store.companions(Companion::Secret),
            secrets,
            "the second create's staged Secret is gone; the first's untouched"
        );
    }

    #[tokio::test]
    async fn the_keeper_backfills_krayne_clusters_only_and_leaves_what_is_not_its() {
        let w = world();
        let alice = w.alice().await;
        for name in ["mine", "shared-name"] {
            w.plane.create(&alice, create(json!({"name": name}))).await.unwrap();
        }
        // A policy gone (as before policies were on), one of krayne's name
        // that someone else made, and a cluster another tool made.
        let policy = |name: &str| manifest::network_policy_name(name);
        let rid = "t".into();
        w.store
            .delete_companion(
                &kubectl("ml-team", "mine"),
                Companion::NetworkPolicy,
                &policy("mine"),
                &rid,
            )
            .await
            .unwrap();
        let theirs = json!({"metadata": {"name": policy("shared-name"), "labels": {"owner": "platform"}},
                            "spec": {"podSelector": {}}});
        w.store
            .apply_companion(
                &kubectl("ml-team", "shared-name"),
                Companion::NetworkPolicy,
                &policy("shared-name"),
                &theirs,
                &rid,
            )
            .await
            .unwrap();
        let foreign = ClusterSpec::from_yaml_str("name: foreign\nnamespace: ml-team\n").unwrap();
        let rendered = manifest::render(&foreign, &Default::default(), &Provenance::default());
        w.store
            .create(&kubectl("ml-team", "foreign"), &rendered, false, &rid)
            .await
            .unwrap();

        let mut seen = KeptClusters::default();
        assert_eq!(w.plane.keep_all_companions(&mut seen).await.unwrap(), 1);
        let policies = w.store.policies();
        let named = |name: &str| policies.iter().find(|p| p["metadata"]["name"] == policy(name)).cloned();
        let mine = named("mine").expect("backfilled");
        assert_eq!(
            owner(&mine),
            &w.store.object("ml-team", "mine").unwrap()["metadata"]["uid"]
        );
        assert_eq!(named("shared-name"), Some(theirs), "not krayne's: left alone");
        assert_eq!(named("foreign"), None, "a cluster krayne did not make: left alone");
        let rows = w.audit.of("cluster.protect");
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].cluster.as_deref(), Some("mine"));
        assert_eq!(rows[0].meta.transport, Transport::System);
        assert_eq!(rows[0].outcome, Outcome::Succeeded, "done, not pending");

        // Nothing changed: the next round writes nothing.
        let writes = w.store.writes();
        assert_eq!(w.plane.keep_all_companions(&mut seen).await.unwrap(), 0);
        assert_eq!(w.store.writes(), writes);
    }
}
