//! Every config of `krayne-reference/configs/` builds the manifest Krayne
//! built (bar the bootstrap script text), or is rejected at Krayne's path.

use krayne_core::{
    domain::{ClusterSpec, Error},
    manifest::{KRAYNE_REFERENCE_IMAGE, ManifestSettings, Provenance, RayAuthNames, build_manifest},
};
use pretty_assertions::assert_eq;
use serde_json::Value;

use crate::{read_json, testdata};

/// Inputs Krayne accepts that krayne deliberately rejects (DESIGN.md:
/// validation is stricter), with why. None of the current configs is one.
const STRICTER: &[(&str, &str)] = &[];

/// Replaces the postStart script with a marker: it is ours, not Krayne's.
fn without_script(mut manifest: Value) -> Value {
    let command =
        manifest.pointer_mut("/spec/headGroupSpec/template/spec/containers/0/lifecycle/postStart/exec/command/2");
    if let Some(script) = command {
        assert!(script.as_str().is_some_and(|s| !s.is_empty()));
        *script = Value::String("<bootstrap script>".into());
    }
    manifest
}

/// Krayne's pydantic `loc` (`["worker_groups", 0]`) in our notation.
fn krayne_path(loc: &[Value]) -> String {
    let mut path = String::new();
    for part in loc {
        match part {
            Value::Number(n) => path.push_str(&format!("[{n}]")),
            Value::String(s) if path.is_empty() => path.push_str(s),
            Value::String(s) => path.push_str(&format!(".{s}")),
            other => panic!("unexpected loc part {other}"),
        }
    }
    path
}

#[test]
fn every_reference_config_matches_krayne() {
    let mut configs: Vec<_> = std::fs::read_dir(testdata("krayne-reference/configs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    configs.sort();
    assert!(configs.len() >= 10, "reference configs missing");
    // The image Krayne derived from the Ray beside it; krayne's default
    // is the platform's (`--default-ray-image`).
    let settings = ManifestSettings {
        default_image: KRAYNE_REFERENCE_IMAGE.into(),
        ..ManifestSettings::default()
    };
    for path in configs {
        let stem = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let expected = read_json(&format!("krayne-reference/expected/{stem}.json"));
        let result = ClusterSpec::from_yaml_str(&std::fs::read_to_string(&path).unwrap());
        if let Some(why) = STRICTER.iter().find(|(s, _)| *s == stem).map(|(_, w)| w) {
            assert!(result.is_err(), "{stem}: expected krayne to reject it ({why})");
            continue;
        }
        match (expected.get("error"), result) {
            (None, Ok(spec)) => {
                let ours = without_script(build_manifest(&spec, &settings, &Provenance::default()));
                assert_eq!(ours, without_script(expected), "{stem}");
            }
            (Some(error), Err(Error::InvalidArgument(violations))) => {
                for e in error["pydantic_errors"].as_array().unwrap() {
                    let at = krayne_path(e["loc"].as_array().unwrap());
                    assert!(
                        violations.as_slice().iter().any(|v| v.field.starts_with(&at)),
                        "{stem}: Krayne rejects at {at}, we at {violations}"
                    );
                }
            }
            (None, Err(e)) => panic!("{stem}: Krayne accepts it, we reject: {e}"),
            (Some(e), Ok(_)) => panic!("{stem}: Krayne rejects it ({e}), we accept"),
            (Some(_), Err(e)) => panic!("{stem}: wrong error kind {e:?}"),
        }
    }
}

#[test]
fn provenance_adds_only_labels_and_annotations() {
    let spec = ClusterSpec::from_yaml_str("name: mine\n").unwrap();
    let settings = ManifestSettings::default();
    let plain = build_manifest(&spec, &settings, &Provenance::default());
    let who = Provenance {
        created_by: Some("alice@example.com"),
        team: Some("ml-research"),
        ..Provenance::default()
    };
    let mut marked = build_manifest(&spec, &settings, &who);
    assert_eq!(
        marked["metadata"]["annotations"]["krayne.dev/created-by"],
        "alice@example.com"
    );
    assert_eq!(marked["metadata"]["labels"]["krayne.dev/team"], "ml-research");
    let meta = marked["metadata"].as_object_mut().unwrap();
    meta.remove("annotations");
    meta["labels"].as_object_mut().unwrap().remove("krayne.dev/team");
    assert_eq!(marked, plain);
}

#[test]
fn the_default_image_is_server_configuration() {
    let spec = ClusterSpec::from_yaml_str(
        "name: img\nhead:\n  gpus: 1\nworker_groups:\n  - name: a\n    gpus: 2\n  - name: b\n  - name: c\n    gpus: 1\n    image: my/ray:1\n",
    )
    .unwrap();
    let settings = ManifestSettings {
        default_image: "registry.local/ray:2.50.0-py311".into(),
        ..ManifestSettings::default()
    };
    let m = build_manifest(&spec, &settings, &Provenance::default());
    let image = |p: &str| m.pointer(p).unwrap().as_str().unwrap().to_owned();
    assert_eq!(
        image("/spec/headGroupSpec/template/spec/containers/0/image"),
        "registry.local/ray:2.50.0-py311-gpu"
    );
    let worker = |i: usize| image(&format!("/spec/workerGroupSpecs/{i}/template/spec/containers/0/image"));
    assert_eq!(worker(0), "registry.local/ray:2.50.0-py311-gpu");
    assert_eq!(worker(1), "registry.local/ray:2.50.0-py311");
    assert_eq!(worker(2), "my/ray:1", "explicit images are used verbatim");
    let pinned = ManifestSettings {
        default_image: "rayproject/ray:2.60.0-py312@sha256:aa".into(),
        default_gpu_image: Some("rayproject/ray:2.60.0-py312-gpu@sha256:bb".into()),
        ..ManifestSettings::default()
    };
    let m = build_manifest(&spec, &pinned, &Provenance::default());
    let image = |p: &str| m.pointer(p).unwrap().as_str().unwrap().to_owned();
    assert_eq!(
        image("/spec/headGroupSpec/template/spec/containers/0/image"),
        "rayproject/ray:2.60.0-py312-gpu@sha256:bb",
        "a digest takes no suffix: GPU pods get their own image"
    );
    assert_eq!(
        image("/spec/workerGroupSpecs/1/template/spec/containers/0/image"),
        "rayproject/ray:2.60.0-py312@sha256:aa"
    );
    let head_res = m
        .pointer("/spec/headGroupSpec/template/spec/containers/0/resources")
        .unwrap();
    assert_eq!(head_res["limits"]["nvidia.com/gpu"], 1);
    assert_eq!(head_res["requests"]["nvidia.com/gpu"], 1);
}

#[test]
fn token_auth_adds_auth_options_and_the_nonce() {
    let spec = ClusterSpec::from_yaml_str("name: tok\nnamespace: ml\n").unwrap();
    let plain = build_manifest(&spec, &ManifestSettings::default(), &Provenance::default());
    assert!(plain["spec"].get("authOptions").is_none());
    assert_eq!(
        ManifestSettings::default().default_image,
        "rayproject/ray:2.60.0-py312",
        "a Ray with token authentication (>= 2.52)"
    );
    let settings = ManifestSettings {
        ray_token_auth: true,
        ..ManifestSettings::default()
    };
    let who = Provenance {
        ray_auth: Some(RayAuthNames {
            nonce: "n-1",
            secret: "tok-ray-auth-0123456789",
        }),
        ..Provenance::default()
    };
    let m = build_manifest(&spec, &settings, &who);
    assert_eq!(m["spec"]["authOptions"]["mode"], "token");
    assert_eq!(m["spec"]["authOptions"]["secretName"], "tok-ray-auth-0123456789");
    assert_eq!(m["metadata"]["annotations"]["krayne.dev/ray-auth-nonce"], "n-1");
}

/// krayne's one addition to the head (a server setting, so the comparison
/// above, with none, is of Krayne's model): the notebook's base URL, its
/// proxy path under the server's public prefix, so Jupyter works behind
/// the proxy and an ingress. Only when the notebook is on.
#[test]
fn the_notebook_serves_under_its_proxy_path_when_the_server_says_so() {
    let env_of = |yaml: &str, behind: Option<&str>| {
        let spec = ClusterSpec::from_yaml_str(yaml).unwrap();
        let settings = ManifestSettings {
            notebook_behind: behind.map(str::to_owned),
            ..ManifestSettings::default()
        };
        let m = build_manifest(&spec, &settings, &Provenance::default());
        m.pointer("/spec/headGroupSpec/template/spec/containers/0/env")
            .unwrap()
            .clone()
    };
    let with_notebook = "name: nb\nnamespace: ml-team\nservices:\n  notebook: true\n";
    let env = env_of(with_notebook, Some("/krayne"));
    assert_eq!(
        env[1],
        serde_json::json!({"name": "KRAYNE_NOTEBOOK_BASE_URL",
            "value": "/krayne/v1/namespaces/ml-team/clusters/nb/services/notebook/proxy/"})
    );
    assert_eq!(env_of(with_notebook, None).as_array().unwrap().len(), 1);
    let without = "name: nb\nservices:\n  notebook: false\n";
    assert_eq!(env_of(without, Some("")).as_array().unwrap().len(), 1);
}

#[test]
fn autoscaler_keys_only_when_enabled() {
    let spec = ClusterSpec::from_yaml_str("name: fixed\nautoscaler:\n  enabled: false\n").unwrap();
    let m = build_manifest(&spec, &ManifestSettings::default(), &Provenance::default());
    let keys: Vec<&String> = m["spec"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["headGroupSpec", "workerGroupSpecs"]);
}

#[test]
fn head_clamp_keeps_the_larger_original_text() {
    let cases = [
        ("500m", "1Gi", "1", "4Gi"),
        ("1000m", "4096Mi", "1000m", "4096Mi"),
        ("2", "4G", "2", "4Gi"),
        ("1.5", "8Gi", "1.5", "8Gi"),
    ];
    for (cpus, memory, want_cpus, want_memory) in cases {
        let yaml = format!("name: c\nhead:\n  cpus: \"{cpus}\"\n  memory: {memory}\n  runs_tasks: true\n");
        let spec = ClusterSpec::from_yaml_str(&yaml).unwrap();
        let m = build_manifest(&spec, &ManifestSettings::default(), &Provenance::default());
        let head = &m["spec"]["headGroupSpec"];
        let res = &head["template"]["spec"]["containers"][0]["resources"];
        assert_eq!(res["limits"]["cpu"], want_cpus, "{cpus}");
        assert_eq!(res["requests"]["memory"], want_memory, "{memory}");
        let num_cpus: krayne_core::domain::Quantity = want_cpus.parse().unwrap();
        assert_eq!(head["rayStartParams"]["num-cpus"], num_cpus.to_decimal_string());
    }
}
