//! The create body's schema against the config model it is derived from:
//! the same keys at every level as `krayne_proto::config::keys` (which the
//! model reads and the SDK writes), only `name` required, and every default
//! the one the model applies.

use krayne_proto::config::keys;
use serde_json::{Value, json};

use crate::domain::ClusterSpec;

fn document() -> Value {
    serde_json::to_value(super::openapi()).unwrap()
}

/// The object schema `schema` stands for: through an array's `items`, a
/// nullable `oneOf`, an `allOf` that adds a description, or a `$ref`.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    let schema = match schema.get("items") {
        Some(items) => items,
        None => schema,
    };
    let schema = schema
        .get("oneOf")
        .and_then(|alts| alts.as_array()?.iter().find(|s| s.get("$ref").is_some()))
        .unwrap_or(schema);
    // An inlined section with its own description is `allOf [section, {description}]`.
    let schema = schema
        .get("allOf")
        .and_then(|parts| parts.as_array()?.iter().find(|s| s.get("properties").is_some()))
        .unwrap_or(schema);
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => doc
            .pointer(&r.replacen("#", "", 1))
            .unwrap_or_else(|| panic!("dangling {r}")),
        None => schema,
    }
}

/// The create body's schema (inline in the operation; see `ClusterSpec`).
fn config_schema(doc: &Value) -> &Value {
    let body = &doc["paths"]["/v1/namespaces/{namespace}/clusters"]["post"]["requestBody"]["content"];
    assert_eq!(body["application/json"]["schema"], body["application/yaml"]["schema"]);
    &body["application/json"]["schema"]
}

fn property_names(schema: &Value) -> Vec<String> {
    let mut names: Vec<String> = schema["properties"].as_object().unwrap().keys().cloned().collect();
    names.sort();
    names
}

fn sorted(keys: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
    names.sort();
    names
}

#[test]
fn the_config_schema_has_the_models_keys_at_every_level() {
    let doc = document();
    let top = config_schema(&doc);
    assert_eq!(property_names(top), sorted(keys::TOP));
    for (key, expected) in [
        ("head", keys::HEAD),
        ("worker_groups", keys::GROUP),
        ("services", keys::SERVICES),
        ("autoscaler", keys::AUTOSCALER),
    ] {
        let section = resolve(&doc, &top["properties"][key]);
        assert_eq!(property_names(section), sorted(expected), "{key}");
        assert_eq!(
            section.get("required"),
            None,
            "{key}: nothing below the top is required"
        );
        assert_eq!(section.get("additionalProperties"), None, "{key} takes unknown keys");
    }
    assert_eq!(top["required"], json!(["name"]));
    assert_eq!(
        top["additionalProperties"],
        json!(false),
        "unknown top-level keys are refused"
    );
}

#[test]
fn every_default_in_the_schema_is_the_one_the_model_applies() {
    let doc = document();
    let top = config_schema(&doc);
    let applied = ClusterSpec::from_value(&json!({"name": "n"})).unwrap().to_value();
    let mut checked = 0;
    for (key, schema) in top["properties"].as_object().unwrap() {
        if let Some(default) = schema.get("default") {
            assert_eq!(default, &applied[key], "{key}");
            checked += 1;
        }
    }
    for key in ["head", "services", "autoscaler"] {
        let section = resolve(&doc, &top["properties"][key]);
        for (field, schema) in section["properties"].as_object().unwrap() {
            match schema.get("default") {
                Some(default) => {
                    assert_eq!(default, &applied[key][field], "{key}.{field}");
                    checked += 1;
                }
                None => assert_eq!(field, "image", "{key}.{field} has no default"),
            }
        }
    }
    let group = resolve(&doc, &top["properties"]["worker_groups"]);
    for (field, schema) in group["properties"].as_object().unwrap() {
        match schema.get("default") {
            Some(default) => {
                assert_eq!(default, &applied["worker_groups"][0][field], "worker_groups[].{field}");
                checked += 1;
            }
            // Absent means the server's image, and any site's GPUs.
            None => assert!(
                matches!(field.as_str(), "image" | "gpu_type"),
                "worker_groups[].{field} has no default"
            ),
        }
    }
    assert_eq!(checked, 2 + 4 + 3 + 5 + 7);
}

#[test]
fn enums_list_the_models_words() {
    let doc = document();
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["UpscalingMode"]["enum"],
        json!(["Default", "Aggressive", "Conservative"])
    );
    assert_eq!(schemas["Role"]["enum"], json!(["viewer", "editor", "admin"]));
    let create = &doc["paths"]["/v1/namespaces/{namespace}/clusters"]["post"]["parameters"];
    let mode = create
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "field_validation")
        .unwrap();
    assert_eq!(
        resolve(&doc, &mode["schema"])["enum"],
        json!(["strict", "warn", "ignore"]),
        "{mode}"
    );
    let statuses = &schemas["ClusterStatus"]["anyOf"][0]["enum"];
    assert_eq!(statuses.as_array().unwrap().len(), 15);
    for status in ["image-pull-error", "suspending", "queued", "preempted", "evicted"] {
        assert!(statuses.as_array().unwrap().contains(&json!(status)), "{status}");
    }
}

#[test]
fn every_reference_resolves() {
    fn walk<'a>(v: &'a Value, refs: &mut Vec<&'a str>) {
        match v {
            Value::Object(map) => {
                if let Some(Value::String(r)) = map.get("$ref") {
                    refs.push(r);
                }
                map.values().for_each(|v| walk(v, refs));
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, refs)),
            _ => {}
        }
    }
    let doc = document();
    let mut refs = Vec::new();
    walk(&doc, &mut refs);
    assert!(refs.len() > 20);
    for r in refs {
        assert!(doc.pointer(&r.replacen('#', "", 1)).is_some(), "dangling {r}");
    }
}
