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
pub fn parse_yaml(text: &str) -> Result<Value, ConfigError> {
    serde_saphyr::from_str_with_options::<Value>(text, yaml_options()).map_err(|e| ConfigError::Syntax(e.to_string()))
}

/// Typing as close to PyYAML's (which reads Krayne's files) as the parser
/// allows: only `true`/`false` are booleans while parsing (PyYAML keeps `y`
/// and `n` as strings), and boolean fields accept PyYAML's other spellings
/// (see [`yaml11_bool`]). Duplicate keys are an error, not last-wins.
pub fn yaml_options() -> serde_saphyr::Options {
    let mut options = serde_saphyr::Options::default();
    options.strict_booleans = true;
    options.duplicate_keys = serde_saphyr::options::DuplicateKeyPolicy::Error;
    options
}

/// The keys of each mapping of a Krayne config, in the order Krayne
/// documents them.
pub mod keys {
    /// Top level.
    pub const TOP: &[&str] = &["name", "namespace", "head", "worker_groups", "services", "autoscaler"];
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
