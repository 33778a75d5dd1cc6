//! Every manifest the builder makes is valid against KubeRay's own
//! `rayclusters.ray.io` v1 schema — the reference configs and random valid
//! specs alike — and every RayJob against `rayjobs.ray.io`'s.

use std::sync::OnceLock;

use jsonschema::Validator;
use krayne_core::{
    domain::{ClusterSpec, FieldValidation, RunSpec},
    manifest::{ManifestSettings, PodSecurity, Provenance, RayAuthNames, build_manifest, build_rayjob},
};
use krayne_sandbox::{raycluster_schema, rayjob_schema};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

use crate::testdata;

/// The CRD's v1 `openAPIV3Schema`, made strict: objects with declared
/// properties reject unknown ones (Kubernetes would prune them silently,
/// which would hide a misspelt field).
fn validator() -> &'static Validator {
    static V: OnceLock<Validator> = OnceLock::new();
    V.get_or_init(|| jsonschema::validator_for(&raycluster_schema(true).unwrap()).unwrap())
}

fn schema_errors(manifest: &Value) -> Vec<String> {
    validator()
        .iter_errors(manifest)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// `rayjobs.ray.io`'s v1 schema, as strict as [`validator`].
fn rayjob_validator() -> &'static Validator {
    static V: OnceLock<Validator> = OnceLock::new();
    V.get_or_init(|| jsonschema::validator_for(&rayjob_schema(true).unwrap()).unwrap())
}

fn rayjob_errors(rayjob: &Value) -> Vec<String> {
    rayjob_validator()
        .iter_errors(rayjob)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// The RayJob of a run request with `config` as its cluster, rendered as
/// the server renders it: with the team's TTL, a deadline, Ray's token and
/// the pod security `security` asks for.
fn rayjob_of(config: &Value, job: &Value, security: PodSecurity) -> Value {
    let mut request = job.clone();
    let mut cluster = config.clone();
    for key in ["name", "namespace"] {
        if let Some(v) = cluster.as_object_mut().and_then(|c| c.remove(key)) {
            request[key] = v;
        }
    }
    request["cluster"] = cluster;
    let run = RunSpec::read(&request, FieldValidation::Strict)
        .unwrap_or_else(|e| panic!("{request}: {e}"))
        .spec;
    let who = Provenance {
        created_by: Some("alice@example.com"),
        team: Some("ml-research"),
        ray_auth: Some(RayAuthNames {
            nonce: "0123456789abcdef0123456789abcdef",
            secret: "train-ray-auth-0123456789",
        }),
    };
    let settings = ManifestSettings {
        pod_security: security,
        ray_token_auth: true,
        ..ManifestSettings::default()
    };
    build_rayjob(&run, 600, Some(86_400), &settings, &who)
}

fn manifest_of(config: &Value) -> Value {
    let spec = ClusterSpec::from_value(config).unwrap_or_else(|e| panic!("{config}: {e}"));
    let who = Provenance {
        created_by: Some("alice@example.com"),
        team: Some("ml-research"),
        ..Provenance::default()
    };
    build_manifest(&spec, &ManifestSettings::default(), &who)
}

#[test]
fn reference_manifests_satisfy_the_crd() {
    for entry in std::fs::read_dir(testdata("krayne-reference/configs")).unwrap() {
        let path = entry.unwrap().path();
        let Ok(spec) = ClusterSpec::from_yaml_str(&std::fs::read_to_string(&path).unwrap()) else {
            continue;
        };
        let m = build_manifest(&spec, &ManifestSettings::default(), &Provenance::default());
        assert_eq!(schema_errors(&m), Vec::<String>::new(), "{}", path.display());
    }
}

/// What the `restricted` Pod Security Standard refuses in `pod` (a pod
/// template's `spec`), as its checks are written
/// (kubernetes.io/docs/concepts/security/pod-security-standards): root,
/// privilege escalation, capabilities beyond `NET_BIND_SERVICE` (and not
/// all dropped), a seccomp profile other than `RuntimeDefault` or
/// `Localhost`, host namespaces, privileged containers, hostPath volumes.
fn restricted_violations(pod: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let at_pod = &pod["securityContext"];
    for host in ["hostNetwork", "hostPID", "hostIPC"] {
        if pod[host] == json!(true) {
            found.push(host.to_owned());
        }
    }
    if pod["volumes"]
        .as_array()
        .is_some_and(|v| v.iter().any(|v| v.get("hostPath").is_some()))
    {
        found.push("hostPath volume".into());
    }
    let containers = pod["containers"].as_array().cloned().unwrap_or_default();
    let init = pod["initContainers"].as_array().cloned().unwrap_or_default();
    for c in containers.iter().chain(&init) {
        let name = c["name"].as_str().unwrap_or("?");
        let own = &c["securityContext"];
        let either = |field: &str| {
            if own[field].is_null() {
                &at_pod[field]
            } else {
                &own[field]
            }
        };
        if own["privileged"] == json!(true) {
            found.push(format!("{name}: privileged"));
        }
        if own["allowPrivilegeEscalation"] != json!(false) {
            found.push(format!("{name}: allowPrivilegeEscalation is not false"));
        }
        if either("runAsNonRoot") != &json!(true) {
            found.push(format!("{name}: runAsNonRoot is not true"));
        }
        if either("runAsUser") == &json!(0) {
            found.push(format!("{name}: runAsUser 0"));
        }
        if !matches!(
            either("seccompProfile")["type"].as_str(),
            Some("RuntimeDefault" | "Localhost")
        ) {
            found.push(format!("{name}: no RuntimeDefault or Localhost seccomp profile"));
        }
        let drop = own["capabilities"]["drop"].as_array().cloned().unwrap_or_default();
        if !drop.contains(&json!("ALL")) {
            found.push(format!("{name}: capabilities not all dropped"));
        }
        let add = own["capabilities"]["add"].as_array().cloned().unwrap_or_default();
        if add.iter().any(|a| a != "NET_BIND_SERVICE") {
            found.push(format!("{name}: capabilities added {add:?}"));
        }
    }
    found
}

/// Every pod template of a RayCluster manifest: the head's, then the
/// worker groups'.
fn pod_templates(manifest: &Value) -> Vec<&Value> {
    let mut pods = vec![&manifest["spec"]["headGroupSpec"]["template"]["spec"]];
    for group in manifest["spec"]["workerGroupSpecs"].as_array().into_iter().flatten() {
        pods.push(&group["template"]["spec"]);
    }
    pods
}

#[test]
fn restricted_clusters_pass_the_restricted_standard_and_the_crd() {
    let settings = ManifestSettings {
        pod_security: PodSecurity::Restricted,
        ..ManifestSettings::default()
    };
    let mut checked = 0;
    for entry in std::fs::read_dir(testdata("krayne-reference/configs")).unwrap() {
        let path = entry.unwrap().path();
        let Ok(spec) = ClusterSpec::from_yaml_str(&std::fs::read_to_string(&path).unwrap()) else {
            continue;
        };
        let m = build_manifest(&spec, &settings, &Provenance::default());
        assert_eq!(schema_errors(&m), Vec::<String>::new(), "{}", path.display());
        for pod in pod_templates(&m) {
            assert_eq!(restricted_violations(pod), Vec::<String>::new(), "{}", path.display());
        }
        if !m["spec"]["autoscalerOptions"].is_null() {
            let sidecar = json!({"containers": [{"name": "autoscaler", "securityContext": m["spec"]["autoscalerOptions"]["securityContext"]}], "securityContext": m["spec"]["headGroupSpec"]["template"]["spec"]["securityContext"]});
            assert_eq!(
                restricted_violations(&sidecar),
                Vec::<String>::new(),
                "{}",
                path.display()
            );
        }
        let script = m["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["lifecycle"]["postStart"]["exec"]
            ["command"][2]
            .as_str()
            .unwrap_or_default();
        assert!(!script.contains("sudo") && !script.contains("pip install"), "{script}");
        checked += 1;
    }
    assert!(checked >= 3, "only {checked} reference configs");
    // Krayne's own manifests are what `restricted` refuses (they pass
    // `baseline`: nothing privileged, no host namespaces or paths).
    let krayne = manifest_of(&json!({"name": "as-krayne"}));
    let head = &krayne["spec"]["headGroupSpec"]["template"]["spec"];
    assert!(!restricted_violations(head).is_empty());
    assert!(head.get("hostNetwork").is_none() && head["containers"][0]["securityContext"].is_null());
}

#[test]
fn the_strict_schema_catches_mistakes() {
    let good = manifest_of(&json!({"name": "ok"}));
    assert!(schema_errors(&good).is_empty());
    let mut typo = good.clone();
    typo["spec"]["workerGroupSpecs"][0]["replica"] = json!(1);
    assert!(!schema_errors(&typo).is_empty(), "unknown field accepted");
    let mut wrong_type = good.clone();
    wrong_type["spec"]["workerGroupSpecs"][0]["replicas"] = json!("1");
    assert!(!schema_errors(&wrong_type).is_empty(), "wrong type accepted");
    let mut bad_mode = good;
    bad_mode["spec"]["autoscalerOptions"]["upscalingMode"] = json!("Fast");
    assert!(!schema_errors(&bad_mode).is_empty(), "bad enum accepted");
}

fn quantity(options: &'static [&'static str]) -> impl Strategy<Value = Value> {
    prop_oneof![
        proptest::sample::select(options).prop_map(|s| json!(s)),
        (1u32..=64).prop_map(|n| json!(n)),
    ]
}

fn group(i: usize) -> impl Strategy<Value = Value> {
    (
        "[a-z0-9]{0,6}",
        0u32..=50,
        0u32..=100,
        quantity(&["100m", "500m", "1", "4", "2500m"]),
        quantity(&["512Mi", "2Gi", "8G", "64Gi"]),
        0u32..=8,
        proptest::option::of("[a-z]{1,8}/ray:[0-9]\\.[0-9]{1,2}"),
    )
        .prop_flat_map(move |(suffix, replicas, max, cpus, memory, gpus, image)| {
            (0..=replicas).prop_map(move |min| {
                let mut g = Map::new();
                g.insert("name".into(), json!(format!("g{i}{suffix}")));
                g.insert("replicas".into(), json!(replicas));
                g.insert("min_replicas".into(), json!(min));
                g.insert("max_replicas".into(), json!(max));
                g.insert("cpus".into(), cpus.clone());
                g.insert("memory".into(), memory.clone());
                g.insert("gpus".into(), json!(gpus));
                if let Some(image) = &image {
                    g.insert("image".into(), json!(image));
                }
                Value::Object(g)
            })
        })
}

fn config() -> impl Strategy<Value = Value> {
    let head = (
        quantity(&["100m", "1", "2500m", "8"]),
        quantity(&["1Gi", "4Gi", "8G", "4096Mi"]),
        0u32..=4,
        any::<bool>(),
    )
        .prop_map(|(cpus, memory, gpus, runs_tasks)| {
            json!({"cpus": cpus, "memory": memory, "gpus": gpus, "runs_tasks": runs_tasks})
        });
    let groups = (0usize..=4).prop_flat_map(|n| (0..n).map(group).collect::<Vec<_>>());
    let services = (any::<bool>(), any::<bool>(), any::<bool>())
        .prop_map(|(n, c, s)| json!({"notebook": n, "code_server": c, "ssh": s}));
    let autoscaler = (
        any::<bool>(),
        0u32..=3600,
        proptest::sample::select(&["Default", "Aggressive", "Conservative"][..]),
        quantity(&["250m", "500m", "1"]),
        quantity(&["256Mi", "512Mi", "1Gi"]),
    )
        .prop_map(|(enabled, idle, mode, cpu, memory)| {
            json!({"enabled": enabled, "idle_timeout_seconds": idle, "upscaling_mode": mode,
                   "cpu": cpu, "memory": memory})
        });
    (
        "[a-z]([a-z0-9-]{0,40}[a-z0-9])?",
        "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?",
        head,
        groups,
        services,
        autoscaler,
    )
        .prop_map(|(name, namespace, head, groups, services, autoscaler)| {
            json!({"name": name, "namespace": namespace, "head": head, "worker_groups": groups,
                   "services": services, "autoscaler": autoscaler})
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_valid_specs_build_valid_manifests(config in config()) {
        let errors = schema_errors(&manifest_of(&config));
        prop_assert!(errors.is_empty(), "{config}\n{errors:#?}");
    }
}

/// A run's job fields, from the bare minimum to everything a run takes.
fn job_fields() -> impl Strategy<Value = Value> {
    (
        "[a-z]{1,8}( [a-z0-9.=-]{1,8}){0,3}",
        proptest::option::of("[a-z][a-z0-9_-]{0,20}"),
        proptest::collection::btree_map("[A-Z][A-Z0-9_]{0,8}", "[ -~]{0,16}", 0..4),
        proptest::collection::vec("[a-z]{1,8}(==[0-9]\\.[0-9])?", 0..3),
        any::<bool>(),
        proptest::option::of(0.0f64..8.0),
        any::<bool>(),
    )
        .prop_map(|(entrypoint, id, env, pip, working_dir, cpus, keep)| {
            let mut job = json!({"entrypoint": entrypoint,
                                 "runtime_env": {"env_vars": env, "pip": pip}});
            if working_dir {
                job["runtime_env"]["working_dir"] = json!("_ray_pkg_0123456789abcdef.zip");
            }
            if let Some(id) = id {
                job["submission_id"] = json!(id);
            }
            if let Some(cpus) = cpus {
                job["entrypoint_num_cpus"] = json!(cpus);
            }
            if keep {
                job["shutdown_after_job_finishes"] = json!(false);
            }
            job
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn random_valid_runs_build_rayjobs_kuberays_crd_accepts(
        config in config().prop_filter("KubeRay's RayJob names are at most 47 characters", |c| {
            c["name"].as_str().is_some_and(|n| n.len() <= 47)
        }),
        job in job_fields(),
        restricted in any::<bool>(),
    ) {
        let security = if restricted { PodSecurity::Restricted } else { PodSecurity::Krayne };
        let rayjob = rayjob_of(&config, &job, security);
        let errors = rayjob_errors(&rayjob);
        prop_assert!(errors.is_empty(), "{config}\n{job}\n{errors:#?}");
    }
}

#[test]
fn the_strict_rayjob_schema_catches_mistakes() {
    let good = rayjob_of(
        &json!({"name": "train", "namespace": "ml-team", "worker_groups": [{"replicas": 1, "gpus": 1}]}),
        &json!({"entrypoint": "python train.py",
                "runtime_env": {"working_dir": "_ray_pkg_0123456789abcdef.zip", "env_vars": {"EPOCHS": "3"}}}),
        PodSecurity::Restricted,
    );
    assert_eq!(rayjob_errors(&good), Vec::<String>::new());
    assert_eq!(good["spec"]["submissionMode"], "InteractiveMode");
    assert_eq!(good["spec"]["rayClusterSpec"]["authOptions"]["mode"], "token");
    let mut typo = good.clone();
    typo["spec"]["ttlSecondsAfterFinish"] = json!(1);
    assert!(!rayjob_errors(&typo).is_empty(), "unknown field accepted");
    let mut nested = good.clone();
    nested["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replica"] = json!(1);
    assert!(
        !rayjob_errors(&nested).is_empty(),
        "unknown field in the cluster accepted"
    );
    let mut wrong_type = good;
    wrong_type["spec"]["ttlSecondsAfterFinished"] = json!("600");
    assert!(!rayjob_errors(&wrong_type).is_empty(), "wrong type accepted");
}
