//! One failing input per rule, each asserting the field path it reports.

use serde_json::{Value, json};

use super::*;

fn violations(v: Value) -> Vec<(String, String)> {
    match ClusterSpec::from_value(&v) {
        Ok(spec) => panic!("accepted {v}: {spec:?}"),
        Err(Error::InvalidArgument(vs)) => vs
            .as_slice()
            .iter()
            .map(|f| (f.field.clone(), f.description.clone()))
            .collect(),
        Err(other) => panic!("unexpected error {other:?}"),
    }
}

/// Asserts `v` is rejected with exactly one violation at `field`, whose
/// description contains `says`.
#[track_caller]
fn rejects(v: Value, field: &str, says: &str) {
    let found = violations(v);
    assert_eq!(found.len(), 1, "expected one violation, got {found:?}");
    assert_eq!(found[0].0, field, "{found:?}");
    assert!(found[0].1.contains(says), "{:?} does not say {says:?}", found[0].1);
}

fn ok(v: Value) -> ClusterSpec {
    ClusterSpec::from_value(&v).unwrap()
}

#[test]
fn name_only_takes_every_default() {
    let spec = ok(json!({"name": "minimal"}));
    assert_eq!(spec.namespace, "default");
    assert_eq!(spec.head.cpus.as_str(), "1");
    assert_eq!(spec.head.memory.as_str(), "4Gi");
    assert_eq!((spec.head.gpus, spec.head.runs_tasks), (0, false));
    assert_eq!(spec.head.image, None);
    assert_eq!(spec.worker_groups.len(), 1);
    let g = &spec.worker_groups[0];
    assert_eq!(g.name, "worker");
    assert_eq!((g.replicas, g.min_replicas, g.max_replicas), (0, 0, 1));
    assert_eq!((g.cpus.as_str(), g.memory.as_str(), g.gpus), ("1", "2Gi", 0));
    assert!(spec.services.notebook && spec.services.code_server && spec.services.ssh);
    let a = &spec.autoscaler;
    assert!(a.enabled);
    assert_eq!(a.idle_timeout_seconds, 60);
    assert_eq!(a.upscaling_mode, UpscalingMode::Default);
    assert_eq!((a.cpu.as_str(), a.memory.as_str()), ("500m", "512Mi"));
}

#[test]
fn the_spec_round_trips_through_krayne_format() {
    let spec = ok(json!({
        "name": "rt", "namespace": "ml", "head": {"cpus": 2, "gpus": 1, "image": "img:1"},
        "worker_groups": [{"name": "a", "replicas": 2}, {"name": "b", "cpus": "500m"}],
        "services": {"ssh": false}, "autoscaler": {"upscaling_mode": "Conservative"},
    }));
    assert_eq!(ClusterSpec::from_value(&spec.to_value()).unwrap(), spec);
}

#[test]
fn root_must_be_a_mapping() {
    rejects(json!(["name"]), "", "must be a mapping, not a list");
    rejects(json!(null), "", "must be a mapping, not null");
}

#[test]
fn unknown_top_level_keys_are_rejected() {
    rejects(json!({"name": "a", "workers": 3}), "workers", "unknown field");
}

#[test]
fn name_is_required() {
    rejects(json!({}), "name", "is required");
    rejects(json!({"name": null}), "name", "is required");
}

#[test]
fn name_must_be_a_string() {
    rejects(json!({"name": 5}), "name", "must be a string, not a number");
}

#[test]
fn name_must_be_a_dns1035_label() {
    rejects(json!({"name": "My_Cluster"}), "name", "lower case alphanumeric");
    rejects(json!({"name": "1cluster"}), "name", "start with an alphabetic");
}

#[test]
fn name_is_at_most_53_characters() {
    assert_eq!(ok(json!({"name": "a".repeat(53)})).name.len(), 53);
    rejects(json!({"name": "a".repeat(54)}), "name", "no more than 53");
}

#[test]
fn namespace_must_be_a_dns1123_label() {
    rejects(json!({"name": "a", "namespace": "ML Team"}), "namespace", "lower case");
    rejects(json!({"name": "a", "namespace": 7}), "namespace", "must be a string");
}

#[test]
fn sections_must_be_mappings() {
    rejects(
        json!({"name": "a", "head": "big"}),
        "head",
        "must be a mapping, not a string",
    );
    rejects(json!({"name": "a", "services": true}), "services", "must be a mapping");
    rejects(
        json!({"name": "a", "autoscaler": []}),
        "autoscaler",
        "must be a mapping",
    );
    rejects(
        json!({"name": "a", "worker_groups": {}}),
        "worker_groups",
        "must be a list",
    );
    rejects(
        json!({"name": "a", "worker_groups": [3]}),
        "worker_groups[0]",
        "must be a mapping",
    );
}

#[test]
fn quantities_must_parse() {
    rejects(
        json!({"name": "a", "head": {"cpus": "lots"}}),
        "head.cpus",
        "Kubernetes quantity",
    );
    rejects(
        json!({"name": "a", "head": {"memory": "4GB"}}),
        "head.memory",
        "Kubernetes quantity",
    );
    rejects(
        json!({"name": "a", "worker_groups": [{"cpus": "1 core"}]}),
        "worker_groups[0].cpus",
        "Kubernetes quantity",
    );
    rejects(
        json!({"name": "a", "worker_groups": [{"memory": true}]}),
        "worker_groups[0].memory",
        "must be a string, not a boolean",
    );
    rejects(
        json!({"name": "a", "autoscaler": {"cpu": "x"}}),
        "autoscaler.cpu",
        "quantity",
    );
    rejects(
        json!({"name": "a", "autoscaler": {"memory": "-1Gi"}}),
        "autoscaler.memory",
        "negative",
    );
}

#[test]
fn quantities_must_be_positive() {
    rejects(
        json!({"name": "a", "head": {"cpus": "0"}}),
        "head.cpus",
        "greater than zero",
    );
    rejects(
        json!({"name": "a", "worker_groups": [{"memory": 0}]}),
        "worker_groups[0].memory",
        "greater than zero",
    );
    rejects(
        json!({"name": "a", "head": {"cpus": "-2"}}),
        "head.cpus",
        "must not be negative",
    );
}

#[test]
fn quantities_have_sane_upper_bounds() {
    rejects(
        json!({"name": "a", "head": {"cpus": "2k"}}),
        "head.cpus",
        "at most 1024 CPUs",
    );
    rejects(
        json!({"name": "a", "worker_groups": [{"memory": "17Ti"}]}),
        "worker_groups[0].memory",
        "at most 16Ti",
    );
}

#[test]
fn numbers_are_coerced_to_quantity_strings() {
    let spec = ok(json!({
        "name": "a", "head": {"cpus": 4, "memory": 8589934592_u64},
        "worker_groups": [{"cpus": 0.5}],
    }));
    assert_eq!(spec.head.cpus.as_str(), "4");
    assert_eq!(spec.head.memory.as_str(), "8589934592");
    assert_eq!(spec.worker_groups[0].cpus.as_str(), "0.5");
    // Only quantities: a number is no `str` to pydantic (lax mode included).
    rejects(
        json!({"name": "a", "worker_groups": [{"name": 5}]}),
        "worker_groups[0].name",
        "must be a string",
    );
}

#[test]
fn counts_must_be_non_negative_whole_numbers() {
    rejects(
        json!({"name": "a", "worker_groups": [{"replicas": -1}]}),
        "worker_groups[0].replicas",
        "must not be negative",
    );
    rejects(
        json!({"name": "a", "worker_groups": [{"replicas": 1.5}]}),
        "worker_groups[0].replicas",
        "whole number",
    );
    rejects(
        json!({"name": "a", "worker_groups": [{"max_replicas": "3.5"}]}),
        "worker_groups[0].max_replicas",
        "must be a whole number, not the string \"3.5\"",
    );
    rejects(
        json!({"name": "a", "head": {"gpus": -1}}),
        "head.gpus",
        "must not be negative",
    );
    // YAML's `2.0` is a whole number (pydantic converts it).
    assert_eq!(
        ok(json!({"name": "a", "worker_groups": [{"replicas": 2.0}]})).worker_groups[0].replicas,
        2
    );
}

#[test]
fn counts_have_upper_bounds() {
    rejects(
        json!({"name": "a", "worker_groups": [{"replicas": 10_001}]}),
        "worker_groups[0].replicas",
        "at most 10000",
    );
    rejects(
        json!({"name": "a", "worker_groups": [{"max_replicas": 20_000}]}),
        "worker_groups[0].max_replicas",
        "at most 10000",
    );
    rejects(
        json!({"name": "a", "worker_groups": [{"replicas": 99_999_999_999_u64}]}),
        "worker_groups[0].replicas",
        "at most",
    );
    rejects(json!({"name": "a", "head": {"gpus": 17}}), "head.gpus", "at most 16");
    rejects(
        json!({"name": "a", "autoscaler": {"idle_timeout_seconds": 604_801}}),
        "autoscaler.idle_timeout_seconds",
        "at most 604800",
    );
}

#[test]
fn min_replicas_must_not_exceed_replicas() {
    rejects(
        json!({"name": "a", "worker_groups": [{}, {"name": "b", "replicas": 2, "min_replicas": 3}]}),
        "worker_groups[1].min_replicas",
        "must be <= replicas (2)",
    );
}

#[test]
fn max_replicas_is_raised_to_replicas() {
    let spec = ok(json!({"name": "a", "worker_groups": [{"replicas": 5, "min_replicas": 1, "max_replicas": 2}]}));
    let g = &spec.worker_groups[0];
    assert_eq!((g.replicas, g.min_replicas, g.max_replicas), (5, 1, 5));
    // After the raise min <= replicas <= max, so `min <= max` holds whenever
    // `min <= replicas` does: Krayne's separate min/max check cannot fail.
}

#[test]
fn group_names_are_unique_dns1123_labels() {
    rejects(
        json!({"name": "a", "worker_groups": [{"name": "GPU"}]}),
        "worker_groups[0].name",
        "lower case",
    );
    rejects(
        json!({"name": "a", "worker_groups": [{"name": "x"}, {"name": "y"}, {"name": "x"}]}),
        "worker_groups[2].name",
        "duplicate group name \"x\" (also worker_groups[0])",
    );
    // Two unnamed groups are both `worker`.
    rejects(
        json!({"name": "a", "worker_groups": [{}, {}]}),
        "worker_groups[1].name",
        "duplicate",
    );
}

#[test]
fn at_most_32_worker_groups() {
    let groups: Vec<Value> = (0..33).map(|i| json!({"name": format!("g{i}")})).collect();
    rejects(
        json!({"name": "a", "worker_groups": groups}),
        "worker_groups",
        "at most 32",
    );
}

#[test]
fn an_empty_group_list_means_no_workers() {
    assert!(ok(json!({"name": "a", "worker_groups": []})).worker_groups.is_empty());
}

#[test]
fn images_must_be_references() {
    rejects(json!({"name": "a", "head": {"image": ""}}), "head.image", "non-empty");
    rejects(
        json!({"name": "a", "worker_groups": [{"image": "ray latest"}]}),
        "worker_groups[0].image",
        "without spaces",
    );
    rejects(
        json!({"name": "a", "head": {"image": 3}}),
        "head.image",
        "must be a string",
    );
    rejects(
        json!({"name": "a", "head": {"image": "r".repeat(513)}}),
        "head.image",
        "at most 512",
    );
}

#[test]
fn flags_must_be_booleans() {
    rejects(
        json!({"name": "a", "head": {"runs_tasks": "sure"}}),
        "head.runs_tasks",
        "true or false",
    );
    rejects(
        json!({"name": "a", "services": {"ssh": 2}}),
        "services.ssh",
        "true or false",
    );
    rejects(
        json!({"name": "a", "autoscaler": {"enabled": "nope"}}),
        "autoscaler.enabled",
        "true or false",
    );
}

#[test]
fn upscaling_mode_is_one_of_three() {
    rejects(
        json!({"name": "a", "autoscaler": {"upscaling_mode": "aggressive"}}),
        "autoscaler.upscaling_mode",
        "must be one of: Default, Aggressive, Conservative",
    );
    let spec = ok(json!({"name": "a", "autoscaler": {"upscaling_mode": "Aggressive"}}));
    assert_eq!(spec.autoscaler.upscaling_mode, UpscalingMode::Aggressive);
}

#[test]
fn nulls_mean_defaults() {
    let spec = ok(json!({"name": "a", "head": null, "worker_groups": null, "services": {"ssh": null}}));
    assert_eq!(spec.head.cpus.as_str(), "1");
    assert_eq!(spec.worker_groups.len(), 1);
    assert!(spec.services.ssh);
}

#[test]
fn every_violation_is_reported_at_once() {
    let found = violations(json!({
        "name": "Bad_Name",
        "extra": 1,
        "head": {"cpus": "0"},
        "worker_groups": [{"replicas": 1, "min_replicas": 2}, {"name": "g", "gpus": -1}],
        "autoscaler": {"upscaling_mode": "Fast"},
    }));
    let fields: Vec<&str> = found.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        fields,
        [
            "extra",
            "name",
            "head.cpus",
            "worker_groups[0].min_replicas",
            "worker_groups[1].gpus",
            "autoscaler.upscaling_mode",
        ]
    );
}

#[test]
fn a_wrong_field_does_not_cascade() {
    // `replicas` is wrong, so the min <= replicas rule is not checked.
    rejects(
        json!({"name": "a", "worker_groups": [{"replicas": "many", "min_replicas": 2}]}),
        "worker_groups[0].replicas",
        "whole number",
    );
}

mod yaml {
    use super::*;

    #[test]
    fn a_krayne_file_loads_unchanged() {
        let spec = ClusterSpec::from_yaml_str(
            "# comment\nname: multi\nworker_groups:\n  - name: cpu-small\n    replicas: 2\n    cpus: \"4\"\n    memory: 8Gi\n  - name: spot\n    cpus: 500m\n    image: example.com/ray-custom:1.0\n",
        )
        .unwrap();
        assert_eq!(spec.worker_groups[0].cpus.as_str(), "4");
        assert_eq!(
            spec.worker_groups[1].image.as_deref(),
            Some("example.com/ray-custom:1.0")
        );
    }

    #[test]
    fn unquoted_numbers_become_quantity_strings() {
        let spec = ClusterSpec::from_yaml_str("name: n\nhead:\n  cpus: 2\n  memory: 1.0\n").unwrap();
        assert_eq!(spec.head.cpus.as_str(), "2");
        assert_eq!(spec.head.memory.as_str(), "1.0");
    }

    #[test]
    fn booleans_are_typed_as_pyyaml_types_them() {
        let spec = ClusterSpec::from_yaml_str(
            "name: n\nservices:\n  notebook: yes\n  code_server: Off\n  ssh: false\nworker_groups:\n  - name: y\n",
        )
        .unwrap();
        assert_eq!(spec.name, "n");
        assert_eq!(spec.worker_groups[0].name, "y");
        assert!(spec.services.notebook && !spec.services.code_server && !spec.services.ssh);
    }

    #[test]
    fn duplicate_keys_are_rejected() {
        let err = ClusterSpec::from_yaml_str("name: a\nname: b\n").unwrap_err();
        assert!(err.to_string().contains("not valid YAML"), "{err}");
    }

    #[test]
    fn json_is_yaml_too() {
        let spec = ClusterSpec::from_yaml_str(r#"{"name": "j", "services": {"ssh": false}}"#).unwrap();
        assert!(!spec.services.ssh);
    }

    #[test]
    fn syntax_errors_are_invalid_arguments() {
        let err = ClusterSpec::from_yaml_str("name: [unclosed\n").unwrap_err();
        assert_eq!(err.code(), "invalid_argument");
        assert!(err.to_string().contains("not valid YAML or JSON"), "{err}");
    }

    #[test]
    fn an_empty_document_is_not_a_mapping() {
        let err = ClusterSpec::from_yaml_str("").unwrap_err();
        assert!(err.to_string().contains("must be a mapping"), "{err}");
    }

    #[test]
    fn overrides_apply_before_validation() {
        let mut tree = parse_yaml("name: base\nhead:\n  cpus: 1\n").unwrap();
        krayne_proto::config::apply_overrides(
            &mut tree,
            &[
                "head.cpus=4",
                "worker_groups.0.replicas=3",
                "services.ssh=false",
                "name=renamed",
            ],
        )
        .unwrap();
        let spec = ClusterSpec::from_value(&tree).unwrap();
        assert_eq!(spec.name, "renamed");
        assert_eq!(spec.head.cpus.as_str(), "4");
        assert_eq!(spec.worker_groups[0].replicas, 3);
        assert_eq!(spec.worker_groups[0].max_replicas, 3);
        assert!(!spec.services.ssh);
    }

    #[test]
    fn an_override_with_a_bad_value_is_reported_at_its_field() {
        let mut tree = parse_yaml("name: base\n").unwrap();
        krayne_proto::config::apply_overrides(&mut tree, &["head.cpus=lots"]).unwrap();
        let err = ClusterSpec::from_value(&tree).unwrap_err();
        assert!(
            err.to_string().contains("head.cpus: must be a Kubernetes quantity"),
            "{err}"
        );
    }
}
