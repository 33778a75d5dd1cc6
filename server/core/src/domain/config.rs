//! Reading Krayne's `ClusterConfig` (JSON or YAML) into a [`ClusterSpec`].
//!
//! Accepts what Krayne 0.3.8 accepts by default: unknown keys below the
//! top level are ignored and scalars convert as in pydantic's lax mode,
//! each reported as a warning; [`FieldValidation`] makes them errors or
//! silent, as Kubernetes' `fieldValidation` does. Names, quantities and
//! counts are checked more closely than Krayne does, and every problem is
//! reported with its field path rather than only the first.

use krayne_proto::config::{keys, type_name};
use serde_json::{Map, Value};

use super::{
    AutoscalerSpec, ClusterSpec, Error, FieldViolation, HeadSpec, Quantity, ServicesSpec, UpscalingMode, Violations,
    WorkerGroupSpec,
    lax::{self, Lax},
    names::{MAX_CLUSTER_NAME_LEN, check_dns1035_label, check_dns1123_label},
    text::{bounded, escape_controls},
};

/// What to do with what Krayne accepts but a clean document would not
/// say: an unknown key below the top level, or a scalar converted as
/// pydantic's lax mode does (`"2"` for an integer, `"yes"` for a boolean).
/// Unknown top-level keys are an error in every mode, as in Krayne.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema), schema(rename_all = "lowercase"))]
pub enum FieldValidation {
    /// Refuse them, each with its field path.
    Strict,
    /// Accept them and report each as a warning (the default).
    #[default]
    Warn,
    /// Accept them silently, as Krayne does.
    Ignore,
}

impl FieldValidation {
    /// Every mode.
    pub const ALL: [Self; 3] = [Self::Strict, Self::Warn, Self::Ignore];

    /// `strict`, `warn` or `ignore`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Strict => "strict",
            Self::Warn => "warn",
            Self::Ignore => "ignore",
        }
    }

    /// Reads a mode in any ASCII case (Kubernetes spells them `Strict`,
    /// `Warn`, `Ignore`).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str().eq_ignore_ascii_case(s))
    }
}

/// A document read into a spec, with what it took to read it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadConfig {
    /// The cluster.
    pub spec: ClusterSpec,
    /// Ignored keys and converted values, section by section (a section's
    /// unknown keys first), at most [`limits::MAX_REPORTED`] and then a
    /// count of the rest; empty unless the mode was [`FieldValidation::Warn`].
    pub warnings: Vec<FieldViolation>,
}

/// Upper bounds that keep one request from asking for the absurd.
pub mod limits {
    /// Worker groups per cluster.
    pub const MAX_WORKER_GROUPS: usize = 32;
    /// Replicas (and min/max) per group.
    pub const MAX_REPLICAS: u32 = 10_000;
    /// GPUs per pod.
    pub const MAX_GPUS: u32 = 16;
    /// CPUs per pod, in cores.
    pub const MAX_CPUS: u128 = 1_024;
    /// Memory per pod, in bytes (16 TiB).
    pub const MAX_MEMORY_BYTES: u128 = 16 << 40;
    /// Autoscaler idle timeout, in seconds (7 days).
    pub const MAX_IDLE_TIMEOUT_SECONDS: u32 = 7 * 24 * 3600;
    /// Image reference length.
    pub const MAX_IMAGE_LEN: usize = 512;
    /// Violations, and warnings, listed for one document; the rest are
    /// counted in a last entry (a 1 MiB body can hold 150 000 keys).
    pub const MAX_REPORTED: usize = 100;
    /// Bytes of an unknown key quoted in a field path.
    pub const MAX_KEY_BYTES: usize = 128;
}

/// The known key a mistyped one most likely meant (`replica` →
/// `replicas`), as clap suggests a flag: Jaro-Winkler similarity above 0.8.
fn did_you_mean<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|k| (strsim::jaro_winkler(key, k), *k))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

/// Krayne's defaults (shared with the SDK, the CLI and the TUI).
pub use krayne_proto::defaults;

/// Which kind of resource a quantity is, for its bounds.
#[derive(Clone, Copy)]
enum Resource {
    Cpu,
    Memory,
}

impl ClusterSpec {
    /// Reads a Krayne config tree, reporting every violation, or every
    /// ignored key and converted value as `mode` says.
    pub fn read(value: &Value, mode: FieldValidation) -> Result<ReadConfig, Error> {
        let mut r = Reader {
            mode,
            ..Reader::default()
        };
        let spec = r.cluster(value);
        r.count_unlisted();
        match spec {
            Some(spec) if r.violations.is_empty() => Ok(ReadConfig {
                spec,
                warnings: r.warnings,
            }),
            _ => Err(Error::InvalidArgument(r.violations)),
        }
    }

    /// Reads a Krayne config tree as Krayne does (warnings dropped).
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        Self::read(value, FieldValidation::Ignore).map(|r| r.spec)
    }

    /// Parses YAML (JSON is YAML) text into a config tree; see
    /// [`ClusterSpec::from_value`].
    pub fn from_yaml_str(text: &str) -> Result<Self, Error> {
        Self::from_value(&parse_yaml(text)?)
    }
}

/// Checks a worker group's counts after a change (scaling) with the rules
/// of create; returns `(replicas, min, max)` with `max` raised to
/// `replicas` when lower, as Krayne does.
pub fn check_worker_counts(group: usize, replicas: u32, min: u32, max: u32) -> Result<(u32, u32, u32), Error> {
    let mut g = WorkerGroupSpec {
        name: String::new(),
        replicas,
        min_replicas: min,
        max_replicas: max,
        cpus: Quantity::one(),
        memory: Quantity::one(),
        gpus: 0,
        image: None,
        gpu_type: None,
    };
    let mut v = Violations::new();
    check_group_counts(&format!("worker_groups[{group}]"), &mut g, &mut v);
    v.into_result((g.replicas, g.min_replicas, g.max_replicas))
}

/// A count as a scale request reads it: a JSON whole number from 0 to
/// `max`; `2.0` is 2 and `-0` is 0. (A cluster config's counts also take
/// pydantic's lax conversions, under `field_validation`.)
pub fn whole_count(value: &Value, max: u32) -> Result<u32, String> {
    let Value::Number(n) = value else {
        return Err(format!("must be a whole number, not {}", type_name(value)));
    };
    let whole = n.as_i64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 1e15)
            .map(|f| f as i64)
    });
    match whole {
        None if n.as_u64().is_some() => Err(format!("must be at most {max}")),
        None => Err(format!("must be a whole number, not {n}")),
        Some(i) => within(i128::from(i), max),
    }
}

/// A whole number as a count from 0 to `max`.
fn within(count: i128, max: u32) -> Result<u32, String> {
    match u32::try_from(count) {
        Ok(c) if c <= max => Ok(c),
        _ if count < 0 => Err("must not be negative".into()),
        _ => Err(format!("must be at most {max}")),
    }
}

/// Parses YAML or JSON text into a tree, as a request body or config file.
pub fn parse_yaml(text: &str) -> Result<Value, Error> {
    krayne_proto::config::parse_yaml(text).map_err(|e| Error::invalid("", e.to_string()))
}

fn check_group_counts(path: &str, g: &mut WorkerGroupSpec, v: &mut Violations) {
    for (field, value) in [
        ("replicas", g.replicas),
        ("min_replicas", g.min_replicas),
        ("max_replicas", g.max_replicas),
    ] {
        if value > limits::MAX_REPLICAS {
            v.push(
                format!("{path}.{field}"),
                format!("must be at most {}", limits::MAX_REPLICAS),
            );
        }
    }
    // Krayne compatibility: a max below replicas is raised, not rejected.
    g.max_replicas = g.max_replicas.max(g.replicas);
    if g.min_replicas > g.replicas {
        v.push(
            format!("{path}.min_replicas"),
            format!("must be <= replicas ({})", g.replicas),
        );
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Walks the tree, collecting violations; a `None` result means the field
/// was wrong (and reported), so rules that need it are skipped.
#[derive(Default)]
struct Reader {
    mode: FieldValidation,
    violations: Violations,
    warnings: Vec<FieldViolation>,
    unlisted_violations: usize,
    unlisted_warnings: usize,
}

impl Reader {
    fn fail(&mut self, path: &str, description: impl Into<String>) {
        if self.violations.as_slice().len() < limits::MAX_REPORTED {
            self.violations.push(path, description);
        } else {
            self.unlisted_violations += 1;
        }
    }

    fn warn(&mut self, path: &str, description: String) {
        if self.warnings.len() < limits::MAX_REPORTED {
            self.warnings.push(FieldViolation {
                field: path.to_owned(),
                description,
            });
        } else {
            self.unlisted_warnings += 1;
        }
    }

    /// Ends each list with how many it left out, if any.
    fn count_unlisted(&mut self) {
        if self.unlisted_violations > 0 {
            let more = format!("and {} more problems", self.unlisted_violations);
            self.violations.push("", more);
        }
        if self.unlisted_warnings > 0 {
            let more = format!("and {} more warnings", self.unlisted_warnings);
            self.warnings.push(FieldViolation {
                field: String::new(),
                description: more,
            });
        }
    }

    /// Something Krayne accepts that a clean document would not say:
    /// `strict` refuses it, `warn` reports it, `ignore` lets it pass.
    fn lenient(&mut self, path: &str, warning: String, refusal: impl FnOnce() -> String) {
        match self.mode {
            FieldValidation::Strict => self.fail(path, format!("{} (field_validation=strict)", refusal())),
            FieldValidation::Warn => self.warn(path, warning),
            FieldValidation::Ignore => {}
        }
    }

    fn wrong_type(&mut self, path: &str, expected: &str, got: &Value) {
        self.fail(path, format!("must be {expected}, not {}", type_name(got)));
    }

    /// A mapping whose `known` keys are read. `null` counts as an empty
    /// mapping. Other keys are an error at the top level (`path` empty)
    /// and ignored below it, as Krayne's models do.
    fn object<'v>(
        &mut self,
        path: &str,
        value: Option<&'v Value>,
        known: &[&str],
    ) -> Option<Option<&'v Map<String, Value>>> {
        match value {
            None | Some(Value::Null) => Some(None),
            Some(Value::Object(map)) => {
                for key in map.keys().filter(|k| !known.contains(&k.as_str())) {
                    let at = join(path, &bounded(&escape_controls(key), limits::MAX_KEY_BYTES));
                    let guess = did_you_mean(key, known)
                        .map(|k| format!(" (did you mean `{k}`?)"))
                        .unwrap_or_default();
                    let expected = || format!("unknown field{guess}; expected one of: {}", known.join(", "));
                    if path.is_empty() {
                        self.fail(&at, expected());
                    } else {
                        self.lenient(&at, format!("unknown field, ignored{guess}"), expected);
                    }
                }
                Some(Some(map))
            }
            Some(other) => {
                self.wrong_type(path, "a mapping", other);
                None
            }
        }
    }

    fn string(&mut self, path: &str, value: Option<&Value>) -> Option<Option<String>> {
        match value {
            None | Some(Value::Null) => Some(None),
            Some(Value::String(s)) => Some(Some(s.clone())),
            Some(other) => {
                self.wrong_type(path, "a string", other);
                None
            }
        }
    }

    /// A quantity's text: a string, or a number written as one (Krayne
    /// coerces `cpus: 4`; the schema allows both).
    fn quantity_text(&mut self, path: &str, value: Option<&Value>) -> Option<Option<String>> {
        match value {
            Some(Value::Number(n)) => Some(Some(n.to_string())),
            other => self.string(path, other),
        }
    }

    fn boolean(&mut self, path: &str, value: Option<&Value>, default: bool) -> Option<bool> {
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return Some(default);
        };
        match lax::boolean(value) {
            Lax::Exact(b) => Some(b),
            Lax::Converted(b) => {
                let got = lax::describe(value);
                self.lenient(path, format!("{got} read as {b}"), || {
                    format!("must be true or false, not {got}")
                });
                Some(b)
            }
            Lax::Invalid(why) => {
                self.fail(path, why);
                None
            }
        }
    }

    fn count(&mut self, path: &str, value: Option<&Value>, default: u32, max: u32) -> Option<u32> {
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return Some(default);
        };
        let count = match lax::int(value) {
            Lax::Exact(i) => i,
            Lax::Converted(i) => {
                let got = lax::describe(value);
                self.lenient(path, format!("{got} read as {i}"), || {
                    format!("must be a whole number, not {got}")
                });
                i
            }
            Lax::Invalid(why) => {
                self.fail(path, why);
                return None;
            }
        };
        match within(count, max) {
            Ok(c) => Some(c),
            Err(why) => {
                self.fail(path, why);
                None
            }
        }
    }

    fn quantity(&mut self, path: &str, value: Option<&Value>, default: &str, resource: Resource) -> Option<Quantity> {
        let text = self.quantity_text(path, value)?;
        let text = text.as_deref().unwrap_or(default);
        let q = match text.parse::<Quantity>() {
            Ok(q) => q,
            Err(e) => {
                self.fail(path, e.to_string());
                return None;
            }
        };
        let (max, unit) = match resource {
            Resource::Cpu => (limits::MAX_CPUS * 1_000_000_000, "1024 CPUs"),
            Resource::Memory => (limits::MAX_MEMORY_BYTES * 1_000_000_000, "16Ti"),
        };
        if q.is_zero() {
            self.fail(path, "must be greater than zero");
            None
        } else if q.nanos() > max {
            self.fail(path, format!("must be at most {unit}"));
            None
        } else {
            Some(q)
        }
    }

    fn image(&mut self, path: &str, value: Option<&Value>) -> Option<Option<String>> {
        let image = self.string(path, value)?;
        if let Some(image) = &image {
            if image.is_empty() || image.chars().any(|c| c.is_whitespace() || c.is_control()) {
                self.fail(path, "must be a non-empty image reference without spaces");
                return None;
            }
            if image.len() > limits::MAX_IMAGE_LEN {
                self.fail(path, format!("must be at most {} characters", limits::MAX_IMAGE_LEN));
                return None;
            }
        }
        Some(image)
    }

    fn cluster(&mut self, value: &Value) -> Option<ClusterSpec> {
        let Value::Object(_) = value else {
            self.fail("", format!("must be a mapping, not {}", type_name(value)));
            return None;
        };
        let map = self.object("", Some(value), keys::TOP)??;
        let name = self.cluster_name(map.get("name"));
        let namespace = self.namespace(map.get("namespace"));
        let head = self.head(map.get("head"));
        let worker_groups = self.worker_groups(map.get("worker_groups"));
        let services = self.services(map.get("services"));
        let autoscaler = self.autoscaler(map.get("autoscaler"));
        let site = self.label("site", map.get("site"));
        Some(ClusterSpec {
            name: name?,
            namespace: namespace?,
            head: head?,
            worker_groups: worker_groups?,
            services: services?,
            autoscaler: autoscaler?,
            site: site?,
        })
    }

    fn cluster_name(&mut self, value: Option<&Value>) -> Option<String> {
        let Some(name) = self.string("name", value)? else {
            self.fail("name", "is required");
            return None;
        };
        match check_dns1035_label(&name, MAX_CLUSTER_NAME_LEN) {
            Ok(()) => Some(name),
            Err(e) => {
                self.fail("name", e);
                None
            }
        }
    }

    fn namespace(&mut self, value: Option<&Value>) -> Option<String> {
        let ns = self
            .string("namespace", value)?
            .unwrap_or_else(|| defaults::NAMESPACE.to_owned());
        match check_dns1123_label(&ns) {
            Ok(()) => Some(ns),
            Err(e) => {
                self.fail("namespace", e);
                None
            }
        }
    }

    fn head(&mut self, value: Option<&Value>) -> Option<HeadSpec> {
        let map = self.object("head", value, keys::HEAD)?;
        let get = |k: &str| map.and_then(|m| m.get(k));
        let cpus = self.quantity("head.cpus", get("cpus"), defaults::HEAD_CPUS, Resource::Cpu);
        let memory = self.quantity("head.memory", get("memory"), defaults::HEAD_MEMORY, Resource::Memory);
        let gpus = self.count("head.gpus", get("gpus"), 0, limits::MAX_GPUS);
        let image = self.image("head.image", get("image"));
        let runs_tasks = self.boolean("head.runs_tasks", get("runs_tasks"), false);
        Some(HeadSpec {
            cpus: cpus?,
            memory: memory?,
            gpus: gpus?,
            image: image?,
            runs_tasks: runs_tasks?,
        })
    }

    fn worker_groups(&mut self, value: Option<&Value>) -> Option<Vec<WorkerGroupSpec>> {
        let items = match value {
            None | Some(Value::Null) => {
                return self.worker_group("worker_groups[0]", None).map(|g| vec![g]);
            }
            Some(Value::Array(items)) => items,
            Some(other) => {
                self.wrong_type("worker_groups", "a list", other);
                return None;
            }
        };
        if items.len() > limits::MAX_WORKER_GROUPS {
            self.fail(
                "worker_groups",
                format!("must have at most {} groups", limits::MAX_WORKER_GROUPS),
            );
            return None;
        }
        let groups: Vec<Option<WorkerGroupSpec>> = items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let path = format!("worker_groups[{i}]");
                match item {
                    Value::Object(_) => self.worker_group(&path, Some(item)),
                    other => {
                        self.wrong_type(&path, "a mapping", other);
                        None
                    }
                }
            })
            .collect();
        let mut seen = std::collections::HashMap::new();
        for (i, g) in groups.iter().enumerate() {
            let Some(g) = g else { continue };
            if let Some(first) = seen.get(&g.name) {
                self.fail(
                    &format!("worker_groups[{i}].name"),
                    format!("duplicate group name {:?} (also worker_groups[{first}])", g.name),
                );
            } else {
                seen.insert(g.name.clone(), i);
            }
        }
        groups.into_iter().collect()
    }

    fn worker_group(&mut self, path: &str, value: Option<&Value>) -> Option<WorkerGroupSpec> {
        let map = self.object(path, value, keys::GROUP)?;
        let get = |k: &str| map.and_then(|m| m.get(k));
        let at = |k: &str| format!("{path}.{k}");
        let name = self.group_name(&at("name"), get("name"));
        // Bounds are checked with the relations below, in `check_group_counts`.
        let replicas = self.count(&at("replicas"), get("replicas"), defaults::REPLICAS, u32::MAX);
        let min = self.count(
            &at("min_replicas"),
            get("min_replicas"),
            defaults::MIN_REPLICAS,
            u32::MAX,
        );
        let max = self.count(
            &at("max_replicas"),
            get("max_replicas"),
            defaults::MAX_REPLICAS,
            u32::MAX,
        );
        let cpus = self.quantity(&at("cpus"), get("cpus"), defaults::WORKER_CPUS, Resource::Cpu);
        let memory = self.quantity(&at("memory"), get("memory"), defaults::WORKER_MEMORY, Resource::Memory);
        let gpus = self.count(&at("gpus"), get("gpus"), 0, limits::MAX_GPUS);
        let image = self.image(&at("image"), get("image"));
        let gpu_type = self.label(&at("gpu_type"), get("gpu_type"));
        let mut group = WorkerGroupSpec {
            name: name?,
            replicas: replicas?,
            min_replicas: min?,
            max_replicas: max?,
            cpus: cpus?,
            memory: memory?,
            gpus: gpus?,
            image: image?,
            gpu_type: gpu_type?,
        };
        let before = self.violations.as_slice().len();
        check_group_counts(path, &mut group, &mut self.violations);
        (self.violations.as_slice().len() == before).then_some(group)
    }

    /// An optional DNS-1123 label (a site, a GPU type).
    fn label(&mut self, path: &str, value: Option<&Value>) -> Option<Option<String>> {
        let label = self.string(path, value)?;
        if let Some(l) = &label
            && let Err(e) = check_dns1123_label(l)
        {
            self.fail(path, e);
            return None;
        }
        Some(label)
    }

    fn group_name(&mut self, path: &str, value: Option<&Value>) -> Option<String> {
        let name = self
            .string(path, value)?
            .unwrap_or_else(|| defaults::GROUP_NAME.to_owned());
        match check_dns1123_label(&name) {
            Ok(()) => Some(name),
            Err(e) => {
                self.fail(path, e);
                None
            }
        }
    }

    fn services(&mut self, value: Option<&Value>) -> Option<ServicesSpec> {
        let map = self.object("services", value, keys::SERVICES)?;
        let get = |k: &str| map.and_then(|m| m.get(k));
        let notebook = self.boolean("services.notebook", get("notebook"), defaults::SERVICE_ON);
        let code_server = self.boolean("services.code_server", get("code_server"), defaults::SERVICE_ON);
        let ssh = self.boolean("services.ssh", get("ssh"), defaults::SERVICE_ON);
        Some(ServicesSpec {
            notebook: notebook?,
            code_server: code_server?,
            ssh: ssh?,
        })
    }

    fn autoscaler(&mut self, value: Option<&Value>) -> Option<AutoscalerSpec> {
        let map = self.object("autoscaler", value, keys::AUTOSCALER)?;
        let get = |k: &str| map.and_then(|m| m.get(k));
        let enabled = self.boolean("autoscaler.enabled", get("enabled"), defaults::AUTOSCALING);
        let idle = self.count(
            "autoscaler.idle_timeout_seconds",
            get("idle_timeout_seconds"),
            defaults::IDLE_TIMEOUT_SECONDS,
            limits::MAX_IDLE_TIMEOUT_SECONDS,
        );
        let mode = self.upscaling_mode(get("upscaling_mode"));
        let cpu = self.quantity("autoscaler.cpu", get("cpu"), defaults::AUTOSCALER_CPU, Resource::Cpu);
        let memory = self.quantity(
            "autoscaler.memory",
            get("memory"),
            defaults::AUTOSCALER_MEMORY,
            Resource::Memory,
        );
        Some(AutoscalerSpec {
            enabled: enabled?,
            idle_timeout_seconds: idle?,
            upscaling_mode: mode?,
            cpu: cpu?,
            memory: memory?,
        })
    }

    fn upscaling_mode(&mut self, value: Option<&Value>) -> Option<UpscalingMode> {
        let path = "autoscaler.upscaling_mode";
        let Some(text) = self.string(path, value)? else {
            return Some(UpscalingMode::Default);
        };
        let mode = UpscalingMode::parse(&text);
        if mode.is_none() {
            let names: Vec<&str> = UpscalingMode::ALL.iter().map(|m| m.as_str()).collect();
            self.fail(path, format!("must be one of: {}", names.join(", ")));
        }
        mode
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "field_validation_tests.rs"]
mod field_validation_tests;
