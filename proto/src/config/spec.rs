//! Config tree ⇄ [`ClusterSpec`].

use serde_json::{Map, Value, json};

use super::{
    ConfigError,
    keys::{AUTOSCALER, GROUP, HEAD, SERVICES, TOP},
    type_name, yaml11_bool,
};
use crate::v1::{AutoscalerSpec, ClusterSpec, HeadSpec, ServicesSpec, WorkerGroupSpec};

/// A structured spec as the Krayne config tree, with only the fields that
/// are set, so the server validates both forms with one set of rules.
pub fn spec_to_tree(s: &ClusterSpec) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(s.name));
    put(&mut m, "namespace", s.namespace.as_ref());
    if let Some(h) = &s.head {
        let mut head = Map::new();
        put(&mut head, "cpus", h.cpus.as_ref());
        put(&mut head, "memory", h.memory.as_ref());
        put(&mut head, "gpus", h.gpus);
        put(&mut head, "image", h.image.as_ref());
        put(&mut head, "runs_tasks", h.runs_tasks);
        m.insert("head".into(), Value::Object(head));
    }
    if !s.worker_groups.is_empty() {
        let groups = s
            .worker_groups
            .iter()
            .map(|g| {
                let mut group = Map::new();
                put(&mut group, "name", g.name.as_ref());
                put(&mut group, "replicas", g.replicas);
                put(&mut group, "min_replicas", g.min_replicas);
                put(&mut group, "max_replicas", g.max_replicas);
                put(&mut group, "cpus", g.cpus.as_ref());
                put(&mut group, "memory", g.memory.as_ref());
                put(&mut group, "gpus", g.gpus);
                put(&mut group, "image", g.image.as_ref());
                put(&mut group, "gpu_type", g.gpu_type.as_ref());
                Value::Object(group)
            })
            .collect();
        m.insert("worker_groups".into(), Value::Array(groups));
    }
    if let Some(sv) = &s.services {
        let mut services = Map::new();
        put(&mut services, "notebook", sv.notebook);
        put(&mut services, "code_server", sv.code_server);
        put(&mut services, "ssh", sv.ssh);
        m.insert("services".into(), Value::Object(services));
    }
    if let Some(a) = &s.autoscaler {
        let mut autoscaler = Map::new();
        put(&mut autoscaler, "enabled", a.enabled);
        put(&mut autoscaler, "idle_timeout_seconds", a.idle_timeout_seconds);
        put(&mut autoscaler, "upscaling_mode", a.upscaling_mode.as_ref());
        put(&mut autoscaler, "cpu", a.cpu.as_ref());
        put(&mut autoscaler, "memory", a.memory.as_ref());
        m.insert("autoscaler".into(), Value::Object(autoscaler));
    }
    put(&mut m, "site", s.site.as_ref());
    Value::Object(m)
}

fn put<T: serde::Serialize>(map: &mut Map<String, Value>, key: &str, value: Option<T>) {
    if let Some(v) = value {
        map.insert(key.to_owned(), json!(v));
    }
}

/// A Krayne config tree as a structured spec. Checks shapes only (known
/// keys, strings, whole numbers, booleans in PyYAML's spellings); the
/// server checks the values. A missing `name` becomes empty, which the
/// server rejects unless the caller fills it in.
pub fn tree_to_spec(tree: &Value) -> Result<ClusterSpec, ConfigError> {
    let root = Fields::new("", Some(tree), TOP)?.unwrap_or_default();
    let head = Fields::new("head", root.get("head"), HEAD)?
        .map(|h| {
            Ok::<_, ConfigError>(HeadSpec {
                cpus: h.quantity("cpus")?,
                memory: h.quantity("memory")?,
                gpus: h.count("gpus")?,
                image: h.string("image")?,
                runs_tasks: h.boolean("runs_tasks")?,
            })
        })
        .transpose()?;
    let worker_groups = match root.get("worker_groups") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let g = Fields::new(&format!("worker_groups[{i}]"), Some(item), GROUP)?.unwrap_or_default();
                Ok(WorkerGroupSpec {
                    name: g.string("name")?,
                    replicas: g.count("replicas")?,
                    min_replicas: g.count("min_replicas")?,
                    max_replicas: g.count("max_replicas")?,
                    cpus: g.quantity("cpus")?,
                    memory: g.quantity("memory")?,
                    gpus: g.count("gpus")?,
                    image: g.string("image")?,
                    gpu_type: g.string("gpu_type")?,
                })
            })
            .collect::<Result<_, ConfigError>>()?,
        Some(other) => return Err(wrong("worker_groups", "a list", other)),
    };
    let services = Fields::new("services", root.get("services"), SERVICES)?
        .map(|s| {
            Ok::<_, ConfigError>(ServicesSpec {
                notebook: s.boolean("notebook")?,
                code_server: s.boolean("code_server")?,
                ssh: s.boolean("ssh")?,
            })
        })
        .transpose()?;
    let autoscaler = Fields::new("autoscaler", root.get("autoscaler"), AUTOSCALER)?
        .map(|a| {
            Ok::<_, ConfigError>(AutoscalerSpec {
                enabled: a.boolean("enabled")?,
                idle_timeout_seconds: a.count("idle_timeout_seconds")?,
                upscaling_mode: a.string("upscaling_mode")?,
                cpu: a.quantity("cpu")?,
                memory: a.quantity("memory")?,
            })
        })
        .transpose()?;
    Ok(ClusterSpec {
        name: root.string("name")?.unwrap_or_default(),
        namespace: root.string("namespace")?,
        head,
        worker_groups,
        services,
        autoscaler,
        site: root.string("site")?,
    })
}

/// One mapping of the tree, with its path for error messages.
#[derive(Default)]
struct Fields<'v> {
    path: String,
    map: Option<&'v Map<String, Value>>,
}

impl<'v> Fields<'v> {
    /// `None` when absent or null; an error for a non-mapping or an
    /// unknown key.
    fn new(path: &str, value: Option<&'v Value>, known: &[&str]) -> Result<Option<Self>, ConfigError> {
        match value {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(map)) => {
                if let Some(key) = map.keys().find(|k| !known.contains(&k.as_str())) {
                    return Err(ConfigError::Field {
                        path: join(path, key),
                        reason: format!("unknown field; expected one of: {}", known.join(", ")),
                    });
                }
                Ok(Some(Self {
                    path: path.to_owned(),
                    map: Some(map),
                }))
            }
            Some(other) => Err(wrong(path, "a mapping", other)),
        }
    }

    fn get(&self, key: &str) -> Option<&'v Value> {
        self.map?.get(key).filter(|v| !v.is_null())
    }

    fn string(&self, key: &str) -> Result<Option<String>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(wrong(&join(&self.path, key), "a string", other)),
        }
    }

    /// A quantity: a string, or a number written as one (`cpus: 4`).
    fn quantity(&self, key: &str) -> Result<Option<String>, ConfigError> {
        match self.get(key) {
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            _ => self.string(key),
        }
    }

    fn count(&self, key: &str) -> Result<Option<u32>, ConfigError> {
        let Some(value) = self.get(key) else { return Ok(None) };
        let path = join(&self.path, key);
        let Value::Number(n) = value else {
            return Err(wrong(&path, "a whole number", value));
        };
        // YAML `2.0` is accepted as 2, as Krayne does.
        let whole = n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0).map(|f| f as u64));
        whole
            .and_then(|w| u32::try_from(w).ok())
            .map(Some)
            .ok_or(ConfigError::Field {
                path,
                reason: format!("must be a whole number from 0 to {}, not {n}", u32::MAX),
            })
    }

    fn boolean(&self, key: &str) -> Result<Option<bool>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::String(s)) if yaml11_bool(s).is_some() => Ok(yaml11_bool(s)),
            Some(other) => Err(wrong(&join(&self.path, key), "true or false", other)),
        }
    }
}

fn wrong(path: &str, expected: &str, got: &Value) -> ConfigError {
    ConfigError::Field {
        path: path.to_owned(),
        reason: format!("must be {expected}, not {}", type_name(got)),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{apply_overrides, parse_yaml};

    #[test]
    fn structured_specs_become_krayne_trees_with_only_what_is_set() {
        let spec = ClusterSpec {
            name: "c".into(),
            head: Some(HeadSpec {
                cpus: Some("2".into()),
                ..Default::default()
            }),
            worker_groups: vec![WorkerGroupSpec {
                replicas: Some(3),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            spec_to_tree(&spec),
            json!({"name": "c", "head": {"cpus": "2"}, "worker_groups": [{"replicas": 3}]})
        );
    }

    #[test]
    fn a_full_krayne_file_round_trips() {
        let text = "
name: full
namespace: ml
head: {cpus: 2, memory: 8Gi, gpus: 1, image: ray:x, runs_tasks: yes}
worker_groups:
  - {name: gpu, replicas: 2.0, min_replicas: 1, max_replicas: 4, cpus: '500m', memory: 4Gi, gpus: 1, image: ray:y}
services: {notebook: off, code_server: true, ssh: false}
autoscaler: {enabled: true, idle_timeout_seconds: 30, upscaling_mode: Aggressive, cpu: 1, memory: 1Gi}
";
        let spec = tree_to_spec(&parse_yaml(text).unwrap()).unwrap();
        assert_eq!(spec.head.as_ref().unwrap().cpus.as_deref(), Some("2"));
        assert_eq!(spec.head.as_ref().unwrap().runs_tasks, Some(true));
        assert_eq!(spec.worker_groups[0].replicas, Some(2));
        assert_eq!(spec.services.as_ref().unwrap().notebook, Some(false));
        assert_eq!(spec.autoscaler.as_ref().unwrap().cpu.as_deref(), Some("1"));
        let again = tree_to_spec(&spec_to_tree(&spec)).unwrap();
        assert_eq!(again, spec);
    }

    #[test]
    fn overrides_apply_before_conversion() {
        let mut tree = parse_yaml("name: a\nworker_groups: [{replicas: 1}]\n").unwrap();
        apply_overrides(&mut tree, &["head.cpus=4", "worker_groups[0].replicas=3"]).unwrap();
        let spec = tree_to_spec(&tree).unwrap();
        assert_eq!(spec.head.unwrap().cpus.as_deref(), Some("4"));
        assert_eq!(spec.worker_groups[0].replicas, Some(3));
    }

    #[test]
    fn shape_errors_name_the_field() {
        let cases = [
            ("name: [a]", "name: must be a string, not a list"),
            ("name: a\nhead: 3", "head: must be a mapping, not a number"),
            ("name: a\nhead: {cpu: 1}", "head.cpu: unknown field"),
            ("name: a\nworker_groups: {}", "worker_groups: must be a list"),
            (
                "name: a\nworker_groups: [{replicas: -1}]",
                "worker_groups[0].replicas: must be a whole number",
            ),
            (
                "name: a\nworker_groups: [{replicas: 1.5}]",
                "worker_groups[0].replicas: must be a whole number",
            ),
            ("name: a\nservices: {ssh: maybe}", "services.ssh: must be true or false"),
            ("name: a\nextra: 1", "extra: unknown field"),
        ];
        for (text, expected) in cases {
            let err = tree_to_spec(&parse_yaml(text).unwrap()).unwrap_err().to_string();
            assert!(err.starts_with(expected), "{text:?}: {err}");
        }
    }

    #[test]
    fn bad_yaml_is_a_syntax_error() {
        assert!(matches!(parse_yaml("a: [1"), Err(ConfigError::Syntax(_))));
        assert!(matches!(parse_yaml("a: 1\na: 2"), Err(ConfigError::Syntax(_))));
    }
}
