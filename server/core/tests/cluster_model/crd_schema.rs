//! Every manifest the builder makes is valid against KubeRay's own
//! `rayclusters.ray.io` v1 schema — the reference configs and random valid
//! specs alike.

use std::sync::OnceLock;

use jsonschema::Validator;
use krayne_core::{
    domain::ClusterSpec,
    manifest::{ManifestSettings, Provenance, build_manifest},
};
use krayne_sandbox::raycluster_schema;
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

fn manifest_of(config: &Value) -> Value {
    let spec = ClusterSpec::from_value(config).unwrap_or_else(|e| panic!("{config}: {e}"));
    let who = Provenance {
        created_by: Some("alice@example.com"),
        team: Some("ml-research"),
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
