//! Snapshots of a few whole manifests, so any change to them is reviewed.

use krayne_core::{
    domain::ClusterSpec,
    manifest::{KRAYNE_REFERENCE_IMAGE, ManifestSettings, Provenance, build_manifest},
};

use crate::testdata;

fn manifest(yaml: &str, who: &Provenance) -> serde_json::Value {
    let spec = ClusterSpec::from_yaml_str(yaml).unwrap();
    // Krayne's own image, as its recorded outputs have it.
    let settings = ManifestSettings {
        default_image: KRAYNE_REFERENCE_IMAGE.into(),
        ..ManifestSettings::default()
    };
    build_manifest(&spec, &settings, who)
}

fn reference(stem: &str) -> String {
    std::fs::read_to_string(testdata(&format!("krayne-reference/configs/{stem}.yaml"))).unwrap()
}

#[test]
fn minimal_manifest() {
    insta::assert_json_snapshot!(manifest(&reference("01-minimal"), &Provenance::default()));
}

#[test]
fn gpu_workers_manifest() {
    insta::assert_json_snapshot!(manifest(&reference("04-gpu-workers"), &Provenance::default()));
}

#[test]
fn fixed_size_head_tasks_no_services_manifest() {
    let yaml = "name: batch\nnamespace: ml-team\nhead:\n  cpus: 4\n  memory: 16Gi\n  runs_tasks: true\n\
                services: {notebook: false, code_server: false, ssh: false}\n\
                autoscaler: {enabled: false}\n\
                worker_groups:\n  - {name: cpu, replicas: 3, min_replicas: 3, max_replicas: 3}\n";
    let who = Provenance {
        created_by: Some("pipeline@example.com"),
        team: Some("ml-research"),
        ..Provenance::default()
    };
    insta::assert_json_snapshot!(manifest(yaml, &who));
}
