//! `field_validation`, table-driven: unknown keys at every nesting level
//! and lax scalars of every field type, in each of the three modes.

use serde_json::{Value, json};

use super::*;
use crate::manifest::{ManifestSettings, Provenance, build_manifest};

/// A document with every section present, so every path below exists.
fn clean() -> Value {
    json!({
        "name": "lenient",
        "namespace": "ml-team",
        "head": {"cpus": "2", "memory": "8Gi", "gpus": 0, "runs_tasks": false},
        "worker_groups": [
            {"name": "cpu", "replicas": 2, "min_replicas": 1, "max_replicas": 4, "cpus": "1", "memory": "2Gi", "gpus": 0},
            {"name": "gpu", "replicas": 1, "gpus": 1},
        ],
        "services": {"notebook": true, "code_server": false, "ssh": true},
        "autoscaler": {"enabled": true, "idle_timeout_seconds": 60, "upscaling_mode": "Default"},
    })
}

/// Sets `path` (`head.gpus`, `worker_groups[1].gpus`) in `doc`.
fn put(doc: &mut Value, path: &str, value: Value) {
    let mut at = doc;
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        let (key, index) = match part.split_once('[') {
            Some((key, rest)) => (key, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        at = &mut at[key];
        if let Some(i) = index {
            at = &mut at[i];
        }
        if parts.peek().is_none() {
            *at = value;
            return;
        }
    }
}

fn with(path: &str, value: Value) -> Value {
    let mut doc = clean();
    put(&mut doc, path, value);
    doc
}

fn read(doc: &Value, mode: FieldValidation) -> ReadConfig {
    ClusterSpec::read(doc, mode).unwrap_or_else(|e| panic!("{mode:?} refused {doc}: {e:?}"))
}

fn refusal(doc: &Value, mode: FieldValidation) -> Vec<(String, String)> {
    match ClusterSpec::read(doc, mode) {
        Ok(r) => panic!("{mode:?} accepted {doc}: {r:?}"),
        Err(Error::InvalidArgument(v)) => v
            .as_slice()
            .iter()
            .map(|f| (f.field.clone(), f.description.clone()))
            .collect(),
        Err(other) => panic!("unexpected error {other:?}"),
    }
}

fn warnings(r: &ReadConfig) -> Vec<(String, String)> {
    r.warnings
        .iter()
        .map(|w| (w.field.clone(), w.description.clone()))
        .collect()
}

/// The three modes on one lenient input at `path`: strict refuses it there
/// (saying `strict_says`), warn accepts it with one warning there (saying
/// `warn_says`), ignore accepts it silently; both build `want`.
#[track_caller]
fn check_modes(doc: &Value, path: &str, strict_says: &str, warn_says: &str, want: &ClusterSpec) {
    let refused = refusal(doc, FieldValidation::Strict);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].0, path);
    assert!(
        refused[0].1.contains(strict_says),
        "{:?} lacks {strict_says:?}",
        refused[0].1
    );
    assert!(
        refused[0].1.ends_with("(field_validation=strict)"),
        "{:?}",
        refused[0].1
    );

    let warned = read(doc, FieldValidation::Warn);
    assert_eq!(warnings(&warned), [(path.to_owned(), warn_says.to_owned())], "{doc}");
    assert_eq!(&warned.spec, want, "{doc}");

    let ignored = read(doc, FieldValidation::Ignore);
    assert!(ignored.warnings.is_empty());
    assert_eq!(&ignored.spec, want);
}

#[test]
fn a_clean_document_reads_the_same_in_every_mode() {
    let want = read(&clean(), FieldValidation::Strict);
    assert!(want.warnings.is_empty());
    for mode in FieldValidation::ALL {
        assert_eq!(read(&clean(), mode), want, "{mode:?}");
    }
}

#[test]
fn unknown_keys_below_the_top_level_follow_the_mode() {
    let want = read(&clean(), FieldValidation::Strict).spec;
    for path in [
        "head.gpu_type",
        "worker_groups[0].accelerator",
        "worker_groups[1].ray_start_params",
        "services.vscode",
        "autoscaler.mode",
    ] {
        let doc = with(path, json!("from an older Krayne"));
        check_modes(
            &doc,
            path,
            "unknown field; expected one of",
            "unknown field, ignored",
            &want,
        );
    }
    // A nested mapping under an unknown key is ignored whole.
    let doc = with("head.resources", json!({"limits": {"cpu": 2}}));
    check_modes(&doc, "head.resources", "unknown field", "unknown field, ignored", &want);
}

/// Issue 56 item 9: a typo of a known key says which one it meant.
#[test]
fn a_mistyped_key_says_which_it_meant() {
    let mut doc = clean();
    doc["worker_groups"][0]["replica"] = json!(2);
    doc["worker_groups"][0]["gpu"] = json!(1);
    doc["head"]["cpu"] = json!(4);
    doc["head"]["gpu_type"] = json!("a100");
    let warned = read(&doc, FieldValidation::Warn).warnings;
    let said: Vec<(String, String)> = warned
        .iter()
        .map(|w| (w.field.clone(), w.description.clone()))
        .collect();
    for (field, meant) in [
        ("worker_groups[0].replica", "replicas"),
        ("worker_groups[0].gpu", "gpus"),
        ("head.cpu", "cpus"),
    ] {
        let want = format!("unknown field, ignored (did you mean `{meant}`?)");
        assert!(said.contains(&(field.to_owned(), want)), "{field}: {said:?}");
    }
    // No guess where nothing is close.
    assert!(
        said.contains(&("head.gpu_type".to_owned(), "unknown field, ignored".to_owned())),
        "{said:?}"
    );
    let refused = refusal(&doc, FieldValidation::Strict);
    assert!(
        refused.iter().any(|(f, m)| f == "worker_groups[0].replica"
            && m.starts_with("unknown field (did you mean `replicas`?); expected one of:")),
        "{refused:?}"
    );
}

#[test]
fn unknown_top_level_keys_are_an_error_in_every_mode() {
    let mut doc = clean();
    doc["workers"] = json!(3);
    for mode in FieldValidation::ALL {
        let refused = refusal(&doc, mode);
        assert_eq!(refused.len(), 1, "{mode:?}: {refused:?}");
        assert_eq!(refused[0].0, "workers");
        assert!(
            refused[0]
                .1
                .starts_with("unknown field (did you mean `worker_groups`?); expected one of: name, namespace"),
            "{refused:?}"
        );
        assert!(!refused[0].1.contains("field_validation"), "{mode:?}: {refused:?}");
    }
}

/// Every integer field of the model.
const INT_FIELDS: [&str; 9] = [
    "head.gpus",
    "worker_groups[0].replicas",
    "worker_groups[0].min_replicas",
    "worker_groups[0].max_replicas",
    "worker_groups[0].gpus",
    "worker_groups[1].replicas",
    "worker_groups[1].max_replicas",
    "worker_groups[1].gpus",
    "autoscaler.idle_timeout_seconds",
];

/// Every boolean field of the model.
const BOOL_FIELDS: [&str; 5] = [
    "head.runs_tasks",
    "services.notebook",
    "services.code_server",
    "services.ssh",
    "autoscaler.enabled",
];

#[test]
fn integers_convert_as_pydantic_lax_mode_does() {
    for path in INT_FIELDS {
        for (input, n, says) in [
            (json!("2"), 2, "the string \"2\" read as 2"),
            (json!(" 2 "), 2, "the string \" 2 \" read as 2"),
            (json!("2.0"), 2, "the string \"2.0\" read as 2"),
            (json!(2.0), 2, "2.0 read as 2"),
            (json!(true), 1, "true read as 1"),
        ] {
            // The clean equivalent: the same field as a plain integer.
            let want = read(&with(path, json!(n)), FieldValidation::Strict).spec;
            let doc = with(path, input.clone());
            check_modes(&doc, path, "must be a whole number, not", says, &want);
        }
        for refused in [json!(2.5), json!("2.5"), json!("two"), json!([2]), json!({"n": 2})] {
            for mode in FieldValidation::ALL {
                let found = refusal(&with(path, refused.clone()), mode);
                assert_eq!(found.len(), 1, "{path} = {refused} in {mode:?}: {found:?}");
                assert_eq!(found[0].0, path);
                assert!(found[0].1.starts_with("must be a whole number"), "{found:?}");
            }
        }
    }
}

#[test]
fn booleans_convert_as_pydantic_lax_mode_does() {
    for path in BOOL_FIELDS {
        for (input, b, says) in [
            (json!("true"), true, "the string \"true\" read as true"),
            (json!("yes"), true, "the string \"yes\" read as true"),
            (json!("Off"), false, "the string \"Off\" read as false"),
            (json!("0"), false, "the string \"0\" read as false"),
            (json!(1), true, "1 read as true"),
            (json!(0), false, "0 read as false"),
            (json!(1.0), true, "1.0 read as true"),
        ] {
            let want = read(&with(path, json!(b)), FieldValidation::Strict).spec;
            let doc = with(path, input.clone());
            check_modes(&doc, path, "must be true or false, not", says, &want);
        }
        for refused in [json!(2), json!("maybe"), json!(0.5), json!([true])] {
            for mode in FieldValidation::ALL {
                let found = refusal(&with(path, refused.clone()), mode);
                assert_eq!(found.len(), 1, "{path} = {refused} in {mode:?}: {found:?}");
                assert!(found[0].1.starts_with("must be true or false"), "{found:?}");
            }
        }
    }
}

#[test]
fn strings_are_never_converted_from_other_types() {
    for (path, value) in [
        ("name", json!(5)),
        ("namespace", json!(true)),
        ("head.image", json!(3)),
        ("worker_groups[0].name", json!(5)),
        ("autoscaler.upscaling_mode", json!(1)),
    ] {
        for mode in FieldValidation::ALL {
            let found = refusal(&with(path, value.clone()), mode);
            assert_eq!(found[0].0, path, "{mode:?}");
            assert!(found[0].1.starts_with("must be a string"), "{found:?}");
        }
    }
    // A number as a quantity is Krayne's own rule, not a conversion.
    let doc = with("head.cpus", json!(4));
    assert!(read(&doc, FieldValidation::Strict).warnings.is_empty());
}

#[test]
fn every_lenient_field_is_reported_section_by_section_and_refused_at_once() {
    let mut doc = clean();
    put(&mut doc, "head.gpus", json!("1"));
    put(&mut doc, "head.extra", json!(1));
    put(&mut doc, "worker_groups[1].replicas", json!(2.0));
    put(&mut doc, "services.ssh", json!("no"));
    let warned = read(&doc, FieldValidation::Warn);
    let paths: Vec<String> = warnings(&warned).into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        paths,
        ["head.extra", "head.gpus", "worker_groups[1].replicas", "services.ssh"]
    );
    let refused: Vec<String> = refusal(&doc, FieldValidation::Strict)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(refused, paths);
}

#[test]
fn the_manifest_of_a_lenient_document_is_the_clean_documents() {
    let mut lenient = clean();
    for (path, value) in [
        ("head.gpus", json!("0")),
        ("head.runs_tasks", json!("yes")),
        ("head.accelerator", json!("none")),
        ("worker_groups[0].replicas", json!(2.0)),
        ("worker_groups[0].min_replicas", json!(" 1 ")),
        ("worker_groups[0].max_replicas", json!("4")),
        ("worker_groups[0].node_selector", json!({"pool": "cpu"})),
        ("worker_groups[1].gpus", json!(true)),
        ("services.notebook", json!("on")),
        ("services.code_server", json!(0)),
        ("services.legacy_port", json!(8080)),
        ("autoscaler.enabled", json!("True")),
        ("autoscaler.idle_timeout_seconds", json!("1_0")),
        ("autoscaler.version", json!("v2")),
    ] {
        put(&mut lenient, path, value);
    }
    let mut clean_doc = clean();
    put(&mut clean_doc, "head.runs_tasks", json!(true));
    put(&mut clean_doc, "autoscaler.idle_timeout_seconds", json!(10));

    let settings = ManifestSettings::default();
    let who = Provenance::default();
    let from_clean = build_manifest(&read(&clean_doc, FieldValidation::Strict).spec, &settings, &who);
    for mode in [FieldValidation::Warn, FieldValidation::Ignore] {
        let read = read(&lenient, mode);
        assert_eq!(build_manifest(&read.spec, &settings, &who), from_clean, "{mode:?}");
    }
    assert_eq!(read(&lenient, FieldValidation::Warn).warnings.len(), 14);
    assert_eq!(refusal(&lenient, FieldValidation::Strict).len(), 14);
}

#[test]
fn modes_parse_in_any_case() {
    for (text, mode) in [
        ("strict", FieldValidation::Strict),
        ("Strict", FieldValidation::Strict),
        ("WARN", FieldValidation::Warn),
        ("Ignore", FieldValidation::Ignore),
    ] {
        assert_eq!(FieldValidation::parse(text), Some(mode));
    }
    assert_eq!(FieldValidation::parse("lenient"), None);
    assert_eq!(FieldValidation::default(), FieldValidation::Warn);
}

#[test]
fn reports_are_bounded_however_large_the_document() {
    let mut doc = clean();
    for i in 0..5_000 {
        doc["head"][format!("k{i}")] = json!(1);
    }
    doc["services"]["x".repeat(10_000)] = json!(1);
    let warned = read(&doc, FieldValidation::Warn);
    assert_eq!(warned.warnings.len(), limits::MAX_REPORTED + 1);
    let last = warned.warnings.last().unwrap();
    assert_eq!(
        (last.field.as_str(), last.description.as_str()),
        ("", "and 4901 more warnings")
    );
    let refused = refusal(&doc, FieldValidation::Strict);
    assert_eq!(refused.len(), limits::MAX_REPORTED + 1);
    assert_eq!(refused.last().unwrap().1, "and 4901 more problems");

    let long_key = with(&format!("services.{}", "\u{1b}".repeat(500)), json!(1));
    let w = &read(&long_key, FieldValidation::Warn).warnings[0];
    assert!(
        w.field.len() <= "services.".len() + limits::MAX_KEY_BYTES,
        "{}",
        w.field
    );
    assert!(!w.field.contains('\u{1b}'), "{}", w.field);

    let long_value = with("head.gpus", json!("9".repeat(100_000)));
    let found = refusal(&long_value, FieldValidation::Warn);
    assert!(found[0].1.len() < 200, "{}", found[0].1);
}
