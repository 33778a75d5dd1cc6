//! `ClusterSpec` → RayCluster (`ray.io/v1`), as Krayne 0.3.8 builds it.

use serde_json::{Map, Value, json};

use super::{
    ANNOTATION_CREATED_BY, ANNOTATION_RAY_AUTH_NONCE, KUBERAY_API_VERSION, LABEL_TEAM, RAYCLUSTER_KIND,
    bootstrap_script, head_ports,
};
use crate::domain::{ClusterSpec, Quantity, RenderedCluster, ServicesSpec};

/// Server-side settings the manifest depends on.
#[derive(Debug, Clone)]
pub struct ManifestSettings {
    /// Ray image for pods that name none; GPU pods get `<image>-gpu`
    /// unless [`Self::default_gpu_image`] says otherwise.
    pub default_image: String,
    /// Ray image for GPU pods that name none (needed when the default is
    /// pinned by digest, which no suffix can follow).
    pub default_gpu_image: Option<String>,
    /// When set, a cluster's notebook serves under its krayne proxy path
    /// (this prefix — the public URL's path, `""` at the root — then
    /// `/v1/namespaces/{ns}/clusters/{name}/services/notebook/proxy/`), as
    /// Jupyter must to work behind a proxy. `None` builds Krayne's manifest
    /// exactly (the notebook at `/`).
    pub notebook_behind: Option<String>,
    /// How the clusters' pods are secured.
    pub pod_security: PodSecurity,
    /// Whether clusters require Ray's token authentication
    /// (`spec.authOptions`, Ray ≥ 2.52; see [`crate::domain::ray_auth`]).
    pub ray_token_auth: bool,
}

/// The Ray image of pods whose config names none, unless the server is
/// told otherwise: a current Ray (token authentication needs ≥ 2.52).
pub const DEFAULT_RAY_IMAGE: &str = "rayproject/ray:2.60.0-py312";
/// The image Krayne 0.3.8 derives from the Ray installed beside it in its
/// recorded outputs (`testdata/krayne-reference`), which tests comparing
/// with Krayne pass explicitly.
pub const KRAYNE_REFERENCE_IMAGE: &str = "rayproject/ray:2.43.0-py312";

impl Default for ManifestSettings {
    fn default() -> Self {
        Self {
            default_image: DEFAULT_RAY_IMAGE.to_owned(),
            default_gpu_image: None,
            notebook_behind: None,
            pod_security: PodSecurity::default(),
            ray_token_auth: false,
        }
    }
}

/// How a cluster's pods are secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PodSecurity {
    /// As Krayne builds them: no security context (the image's user), and
    /// a head bootstrap that installs what the image lacks (`sudo`,
    /// `apt-get`, `pip`, a download). Passes the `baseline` Pod Security
    /// Standard; needs internet egress for what it installs.
    #[default]
    Krayne,
    /// What the `restricted` Pod Security Standard admits: every pod runs
    /// as the Ray images' user (uid 1000, gid 100), never as root, without
    /// privilege escalation or capabilities, under the runtime's default
    /// seccomp profile; the bootstrap installs nothing and needs no network
    /// (images with the services preinstalled; no SSH, which needs root).
    Restricted,
}

/// The pod-level security context of [`PodSecurity::Restricted`].
fn restricted_pod() -> Value {
    json!({
        "runAsNonRoot": true,
        "runAsUser": RAY_UID,
        "runAsGroup": RAY_GID,
        "fsGroup": RAY_GID,
        "seccompProfile": {"type": "RuntimeDefault"},
    })
}

/// The container-level security context of [`PodSecurity::Restricted`].
fn restricted_container() -> Value {
    json!({
        "allowPrivilegeEscalation": false,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": true,
        "seccompProfile": {"type": "RuntimeDefault"},
    })
}

/// The Ray images' user `ray` and its group `users`.
const RAY_UID: u32 = 1000;
const RAY_GID: u32 = 100;

/// A pod template's `spec` of `containers`, secured as `security` says.
fn pod_spec(containers: Vec<Value>, security: PodSecurity) -> Value {
    match security {
        PodSecurity::Krayne => json!({"containers": containers}),
        PodSecurity::Restricted => {
            let containers: Vec<Value> = containers
                .into_iter()
                .map(|mut c| {
                    c["securityContext"] = restricted_container();
                    c
                })
                .collect();
            json!({"securityContext": restricted_pod(), "containers": containers})
        }
    }
}

/// The head container's variable the bootstrap passes to Jupyter as its
/// base URL.
pub const NOTEBOOK_BASE_URL_ENV: &str = "KRAYNE_NOTEBOOK_BASE_URL";

/// Who asked for the cluster; recorded as metadata only.
#[derive(Debug, Clone, Copy, Default)]
pub struct Provenance<'a> {
    /// Subject of the creator (annotation).
    pub created_by: Option<&'a str>,
    /// Team the creator acted for (label; must be a valid label value).
    pub team: Option<&'a str>,
    /// The nonce the cluster's Ray token is derived with (annotation), and
    /// the Secret KubeRay gives its pods the token from, when it requires
    /// one.
    pub ray_auth: Option<RayAuthNames<'a>>,
}

/// What names a cluster's Ray token: its nonce and its Secret.
#[derive(Debug, Clone, Copy)]
pub struct RayAuthNames<'a> {
    /// The nonce (annotation `krayne.dev/ray-auth-nonce`).
    pub nonce: &'a str,
    /// The Secret (`spec.authOptions.secretName`).
    pub secret: &'a str,
}

/// The head never gets less than this (Krayne's floor).
const HEAD_MIN_CPUS: &str = "1";
const HEAD_MIN_MEMORY: &str = "4Gi";
const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// The RayCluster of `spec`, ready for the cluster-store port.
pub fn render(spec: &ClusterSpec, settings: &ManifestSettings, who: &Provenance) -> RenderedCluster {
    RenderedCluster::new(
        spec.namespace.clone(),
        spec.name.clone(),
        build_manifest(spec, settings, who),
    )
}

/// The RayCluster manifest of `spec`, as JSON (see [`render`]).
pub fn build_manifest(spec: &ClusterSpec, settings: &ManifestSettings, who: &Provenance) -> Value {
    let mut spec_json = Map::new();
    spec_json.insert("headGroupSpec".into(), head_group(spec, settings));
    spec_json.insert(
        "workerGroupSpecs".into(),
        spec.worker_groups
            .iter()
            .map(|g| {
                let mut group = json!({
                    "groupName": g.name,
                    "replicas": g.replicas,
                    "minReplicas": g.min_replicas,
                    "maxReplicas": g.max_replicas,
                    "rayStartParams": {},
                    "template": {"spec": pod_spec(vec![json!({
                        "name": "ray-worker",
                        "image": image(g.image.as_deref(), g.gpus, settings),
                        "resources": resources(g.cpus.as_str(), g.memory.as_str(), g.gpus),
                        "env": env(),
                    })], settings.pod_security)},
                });
                if let Some(t) = &g.gpu_type {
                    group["template"]["metadata"] = json!({"labels": {super::LABEL_GPU_TYPE: t}});
                }
                group
            })
            .collect(),
    );
    let a = &spec.autoscaler;
    if a.enabled {
        spec_json.insert("enableInTreeAutoscaling".into(), json!(true));
        let mut options = json!({
            "upscalingMode": a.upscaling_mode.as_str(),
            "idleTimeoutSeconds": a.idle_timeout_seconds,
            "resources": {
                "limits": {"cpu": a.cpu.as_str(), "memory": a.memory.as_str()},
                "requests": {"cpu": a.cpu.as_str(), "memory": a.memory.as_str()},
            },
        });
        // KubeRay's autoscaler sidecar takes its security context from here.
        if settings.pod_security == PodSecurity::Restricted {
            options["securityContext"] = restricted_container();
        }
        spec_json.insert("autoscalerOptions".into(), options);
    }
    if let Some(names) = who.ray_auth.filter(|_| settings.ray_token_auth) {
        spec_json.insert("authOptions".into(), super::auth_options(names.secret));
    }
    json!({
        "apiVersion": KUBERAY_API_VERSION,
        "kind": RAYCLUSTER_KIND,
        "metadata": metadata(spec, who),
        "spec": spec_json,
    })
}

fn metadata(spec: &ClusterSpec, who: &Provenance) -> Value {
    let mut labels = Map::new();
    labels.insert("app.kubernetes.io/managed-by".into(), json!("krayne"));
    labels.insert("app.kubernetes.io/name".into(), json!(spec.name));
    if let Some(team) = who.team {
        labels.insert(LABEL_TEAM.into(), json!(team));
    }
    let mut meta = Map::new();
    meta.insert("name".into(), json!(spec.name));
    meta.insert("namespace".into(), json!(spec.namespace));
    meta.insert("labels".into(), Value::Object(labels));
    let mut annotations = Map::new();
    if let Some(subject) = who.created_by {
        annotations.insert(ANNOTATION_CREATED_BY.into(), json!(subject));
    }
    if let Some(names) = who.ray_auth {
        annotations.insert(ANNOTATION_RAY_AUTH_NONCE.into(), json!(names.nonce));
    }
    if !annotations.is_empty() {
        meta.insert("annotations".into(), Value::Object(annotations));
    }
    Value::Object(meta)
}

fn head_group(spec: &ClusterSpec, settings: &ManifestSettings) -> Value {
    let head = &spec.head;
    let cpus = at_least(&head.cpus, HEAD_MIN_CPUS);
    let memory = at_least(&head.memory, HEAD_MIN_MEMORY);
    let num_cpus = if head.runs_tasks {
        cpus.to_decimal_string()
    } else {
        "0".to_owned()
    };
    let mut container = Map::new();
    container.insert("name".into(), json!("ray-head"));
    container.insert("image".into(), json!(image(head.image.as_deref(), head.gpus, settings)));
    container.insert(
        "ports".into(),
        json!([
            {"containerPort": head_ports::GCS, "name": "gcs-server"},
            {"containerPort": head_ports::DASHBOARD, "name": "dashboard"},
            {"containerPort": head_ports::CLIENT, "name": "client"},
        ]),
    );
    container.insert("resources".into(), resources(cpus.as_str(), memory.as_str(), head.gpus));
    let mut head_env = env();
    if let (true, Some(prefix), Value::Array(vars)) = (spec.services.notebook, &settings.notebook_behind, &mut head_env)
    {
        let base = format!(
            "{prefix}{}/",
            super::proxy_path(&spec.namespace, &spec.name, "notebook")
        );
        vars.push(json!({"name": NOTEBOOK_BASE_URL_ENV, "value": base}));
    }
    container.insert("env".into(), head_env);
    if spec.services.any() {
        container.insert(
            "lifecycle".into(),
            json!({"postStart": {"exec": {"command": [
                "/bin/sh", "-c", bootstrap_script(&spec.services, settings.pod_security),
            ]}}}),
        );
    }
    let mut service = Map::new();
    service.insert("type".into(), json!("ClusterIP"));
    let ports = service_ports(&spec.services);
    if !ports.is_empty() {
        service.insert("ports".into(), Value::Array(ports));
    }
    json!({
        "rayStartParams": {"dashboard-host": "0.0.0.0", "num-cpus": num_cpus},
        "headService": {"spec": service},
        "template": {"spec": pod_spec(vec![Value::Object(container)], settings.pod_security)},
    })
}

/// `value` unless it is below `floor`; the user's text wins a tie.
fn at_least(value: &Quantity, floor: &'static str) -> Quantity {
    match floor.parse::<Quantity>() {
        Ok(min) if *value < min => min,
        _ => value.clone(),
    }
}

fn image(explicit: Option<&str>, gpus: u32, settings: &ManifestSettings) -> String {
    match explicit {
        Some(image) => image.to_owned(),
        None if gpus > 0 => match &settings.default_gpu_image {
            Some(gpu) => gpu.clone(),
            None => format!("{}-gpu", settings.default_image),
        },
        None => settings.default_image.clone(),
    }
}

fn resources(cpu: &str, memory: &str, gpus: u32) -> Value {
    let mut amounts = Map::new();
    amounts.insert("cpu".into(), json!(cpu));
    amounts.insert("memory".into(), json!(memory));
    if gpus > 0 {
        amounts.insert(GPU_RESOURCE.into(), json!(gpus));
    }
    // requests == limits: Guaranteed QoS, as Krayne does.
    json!({"requests": amounts.clone(), "limits": amounts})
}

fn env() -> Value {
    json!([{
        "name": "RAY_RUNTIME_ENV_HOOK",
        "value": "ray._private.runtime_env.uv_runtime_env_hook.hook",
    }])
}

/// Head-service ports, in Krayne's order: notebook, ssh, code-server.
fn service_ports(services: &ServicesSpec) -> Vec<Value> {
    [
        (services.notebook, "notebook", head_ports::NOTEBOOK),
        (services.ssh, "ssh", head_ports::SSH),
        (services.code_server, "code-server", head_ports::CODE_SERVER),
    ]
    .into_iter()
    .filter(|(on, _, _)| *on)
    .map(|(_, name, port)| json!({"name": name, "port": port, "targetPort": port, "protocol": "TCP"}))
    .collect()
}
