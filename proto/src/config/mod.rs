//! Krayne's config-file format, shared by the server, the SDK and the CLI.
//!
//! A Krayne `ClusterConfig` file (YAML or JSON) is read into a tree, changed
//! by dot-notation overrides (`head.cpus=4`), and turned into a
//! [`ClusterSpec`](crate::v1::ClusterSpec) or back. The rules on values
//! (name patterns, quantities, replica bounds) are the server's; this
//! module only checks that each field has the right shape, so a file's
//! mistakes are reported by the server at the same paths on every
//! transport.

mod overrides;
mod spec;

use serde_json::Value;

pub use overrides::{apply_override, apply_overrides};
pub use spec::{spec_to_tree, tree_to_spec};

/// What can be wrong with a config document before the server sees it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The text is not YAML or JSON.
    #[error("not valid YAML or JSON: {0}")]
    Syntax(String),
    /// An override could not be applied.
    #[error("override {assignment:?}: {reason}")]
    Override {
        /// The `key=value` text as given.
        assignment: String,
        /// Why it was refused.
        reason: String,
    },
    /// A field has the wrong shape (a list where a number belongs, an
    /// unknown key).
    #[error("{path}: {reason}")]
    Field {
        /// Path of the field, e.g. `worker_groups[0].replicas`.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

/// Parses YAML or JSON text into a tree, as a request body or config file.
///
/// Scalars are typed as PyYAML (which reads Krayne's files) types them:
/// a plain `yes`, `No`, `ON` or `off` is a boolean, while `y`, `n` and
/// every quoted string stay strings. The parser knows only one of those
/// two sets, so the text is read with each and the trees merged.
pub fn parse_yaml(text: &str) -> Result<Value, ConfigError> {
    let mut tree = serde_saphyr::from_str_with_options::<Value>(text, yaml_options())
        .map_err(|e| ConfigError::Syntax(e.to_string()))?;
    let mut yaml11 = yaml_options();
    yaml11.strict_booleans = false;
    if let Ok(with_yaml11) = serde_saphyr::from_str_with_options::<Value>(text, yaml11) {
        pyyaml_booleans(&mut tree, &with_yaml11);
    }
    Ok(tree)
}

/// Turns into booleans the strings that the YAML 1.1 reading typed as
/// booleans (so they were plain scalars) and that PyYAML's resolver
/// spells as booleans.
fn pyyaml_booleans(tree: &mut Value, yaml11: &Value) {
    match (tree, yaml11) {
        (v @ Value::String(_), Value::Bool(b)) if v.as_str().is_some_and(is_pyyaml_bool) => {
            *v = Value::Bool(*b);
        }
        (Value::Array(items), Value::Array(others)) => {
            for (item, other) in items.iter_mut().zip(others) {
                pyyaml_booleans(item, other);
            }
        }
        (Value::Object(map), Value::Object(others)) => {
            for (key, item) in map.iter_mut() {
                if let Some(other) = others.get(key) {
                    pyyaml_booleans(item, other);
                }
            }
        }
        _ => {}
    }
}

/// PyYAML's boolean words: `yes|Yes|YES|no|No|NO|true|True|TRUE|false|…|on|…|off|…`.
fn is_pyyaml_bool(s: &str) -> bool {
    ["yes", "no", "true", "false", "on", "off"].iter().any(|w| {
        let mut title = (*w).to_owned();
        title[..1].make_ascii_uppercase();
        s == *w || s == title || s == w.to_ascii_uppercase()
    })
}

/// Parser options: only `true`/`false` are booleans (see [`parse_yaml`]
/// for PyYAML's other spellings); a plain number with a leading zero is
/// octal, as in YAML 1.1 and PyYAML (`010` is 8). Duplicate keys are an
/// error, not last-wins.
pub fn yaml_options() -> serde_saphyr::Options {
    let mut options = serde_saphyr::Options::default();
    options.strict_booleans = true;
    options.legacy_octal_numbers = true;
    options.duplicate_keys = serde_saphyr::options::DuplicateKeyPolicy::Error;
    options
}

/// The keys of each mapping of a Krayne config, in the order Krayne
/// documents them.
pub mod keys {
    /// Top level.
    pub const TOP: &[&str] = &[
        "name",
        "namespace",
        "head",
        "worker_groups",
        "services",
        "autoscaler",
        "site",
    ];
    /// `head`.
    pub const HEAD: &[&str] = &["cpus", "memory", "gpus", "image", "runs_tasks"];
    /// Each item of `worker_groups`.
    pub const GROUP: &[&str] = &[
        "name",
        "replicas",
        "min_replicas",
        "max_replicas",
        "cpus",
        "memory",
        "gpus",
        "image",
        "gpu_type",
    ];
    /// `services`.
    pub const SERVICES: &[&str] = &["notebook", "code_server", "ssh"];
    /// `autoscaler`.
    pub const AUTOSCALER: &[&str] = &["enabled", "idle_timeout_seconds", "upscaling_mode", "cpu", "memory"];
}

/// What kind of value this is, for messages: `a list`, `a string`, …
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// PyYAML's YAML 1.1 spellings of a boolean (`yes`, `off`, …).
pub fn yaml11_bool(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "yes" | "on" | "true" => Some(true),
        "no" | "off" | "false" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::parse_yaml;

    #[test]
    fn scalars_are_typed_as_pyyaml_types_them() {
        let tree = parse_yaml("a: yes\nb: 'yes'\nc: y\nd: Off\ne: \"on\"\nf: [YES, n, No]\ng: oN\nh: true\n").unwrap();
        assert_eq!(
            tree,
            json!({"a": true, "b": "yes", "c": "y", "d": false, "e": "on", "f": [true, "n", false], "g": "oN", "h": true})
        );
        let json = parse_yaml(r#"{"services": {"ssh": "yes", "notebook": "true", "code_server": false}}"#).unwrap();
        assert_eq!(
            json,
            json!({"services": {"ssh": "yes", "notebook": "true", "code_server": false}})
        );
        let numbers = parse_yaml("a: 010\nb: '010'\nc: 10\nd: 0\ne: -07\n").unwrap();
        assert_eq!(numbers, json!({"a": 8, "b": "010", "c": 10, "d": 0, "e": -7}));
    }
}
