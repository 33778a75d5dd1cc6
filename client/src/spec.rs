//! Building cluster specs in code, or loading Krayne config files.

use std::path::Path;

use krayne_proto::config;
use serde_json::{Map, Value};
use tonic::Code;

use crate::{
    ClientError,
    proto::{AutoscalerSpec, ClusterSpec, HeadSpec, ServicesSpec, WorkerGroupSpec},
};

/// Builds a [`ClusterSpec`]; every field left unset takes the server's
/// documented default.
///
/// ```
/// use krayne_client::{ClusterSpecBuilder, WorkerGroupBuilder};
/// let spec = ClusterSpecBuilder::new("train")
///     .namespace("ml-team")
///     .head_cpus("2")
///     .worker_group(WorkerGroupBuilder::new("gpu").replicas(2).gpus(1))
///     .autoscaling(false)
///     .build();
/// assert_eq!(spec.worker_groups[0].replicas, Some(2));
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct ClusterSpecBuilder {
    spec: ClusterSpec,
}

impl ClusterSpecBuilder {
    /// A cluster called `name` in the `default` namespace.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            spec: ClusterSpec {
                name: name.into(),
                ..ClusterSpec::default()
            },
        }
    }

    /// The Kubernetes namespace.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.spec.namespace = Some(namespace.into());
        self
    }

    fn head(&mut self) -> &mut HeadSpec {
        self.spec.head.get_or_insert_with(HeadSpec::default)
    }

    /// Head CPU as a Kubernetes quantity (`"2"`, `"500m"`).
    pub fn head_cpus(mut self, cpus: impl Into<String>) -> Self {
        self.head().cpus = Some(cpus.into());
        self
    }

    /// Head memory as a Kubernetes quantity (`"8Gi"`).
    pub fn head_memory(mut self, memory: impl Into<String>) -> Self {
        self.head().memory = Some(memory.into());
        self
    }

    /// GPUs on the head.
    pub fn head_gpus(mut self, gpus: u32) -> Self {
        self.head().gpus = Some(gpus);
        self
    }

    /// The head's container image.
    pub fn head_image(mut self, image: impl Into<String>) -> Self {
        self.head().image = Some(image.into());
        self
    }

    /// Whether Ray schedules tasks on the head.
    pub fn head_runs_tasks(mut self, runs_tasks: bool) -> Self {
        self.head().runs_tasks = Some(runs_tasks);
        self
    }

    /// Adds a worker group; without any, the server adds one called `worker`.
    pub fn worker_group(mut self, group: WorkerGroupBuilder) -> Self {
        self.spec.worker_groups.push(group.build());
        self
    }

    /// Which services run on the head (each is on by default).
    pub fn services(mut self, notebook: bool, code_server: bool, ssh: bool) -> Self {
        self.spec.services = Some(ServicesSpec {
            notebook: Some(notebook),
            code_server: Some(code_server),
            ssh: Some(ssh),
        });
        self
    }

    fn autoscaler(&mut self) -> &mut AutoscalerSpec {
        self.spec.autoscaler.get_or_insert_with(AutoscalerSpec::default)
    }

    /// Turns Ray's autoscaler on or off (on by default).
    pub fn autoscaling(mut self, enabled: bool) -> Self {
        self.autoscaler().enabled = Some(enabled);
        self
    }

    /// Seconds an idle worker is kept before the autoscaler removes it.
    pub fn idle_timeout_seconds(mut self, seconds: u32) -> Self {
        self.autoscaler().idle_timeout_seconds = Some(seconds);
        self
    }

    /// The finished spec.
    pub fn build(self) -> ClusterSpec {
        self.spec
    }
}

/// Builds one [`WorkerGroupSpec`].
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct WorkerGroupBuilder {
    group: WorkerGroupSpec,
}

impl WorkerGroupBuilder {
    /// A group called `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            group: WorkerGroupSpec {
                name: Some(name.into()),
                ..WorkerGroupSpec::default()
            },
        }
    }

    /// Desired workers.
    pub fn replicas(mut self, replicas: u32) -> Self {
        self.group.replicas = Some(replicas);
        self
    }

    /// Autoscaler lower bound.
    pub fn min_replicas(mut self, min: u32) -> Self {
        self.group.min_replicas = Some(min);
        self
    }

    /// Autoscaler upper bound.
    pub fn max_replicas(mut self, max: u32) -> Self {
        self.group.max_replicas = Some(max);
        self
    }

    /// CPU per worker as a Kubernetes quantity.
    pub fn cpus(mut self, cpus: impl Into<String>) -> Self {
        self.group.cpus = Some(cpus.into());
        self
    }

    /// Memory per worker as a Kubernetes quantity.
    pub fn memory(mut self, memory: impl Into<String>) -> Self {
        self.group.memory = Some(memory.into());
        self
    }

    /// GPUs per worker.
    pub fn gpus(mut self, gpus: u32) -> Self {
        self.group.gpus = Some(gpus);
        self
    }

    /// Container image.
    pub fn image(mut self, image: impl Into<String>) -> Self {
        self.group.image = Some(image.into());
        self
    }

    /// The finished group.
    pub fn build(self) -> WorkerGroupSpec {
        self.group
    }
}

/// A Krayne config document (the YAML files Krayne users keep), changed by
/// dot-notation overrides before it is sent.
///
/// ```
/// use krayne_client::ClusterConfig;
/// let spec = ClusterConfig::from_yaml("name: train\nworker_groups: [{replicas: 1}]\n")?
///     .set("head.cpus=4")?
///     .set("worker_groups[0].replicas=3")?
///     .to_spec()?;
/// assert_eq!(spec.head.unwrap().cpus.as_deref(), Some("4"));
/// assert_eq!(spec.worker_groups[0].replicas, Some(3));
/// # Ok::<(), krayne_client::ClientError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    tree: Value,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            tree: Value::Object(Map::new()),
        }
    }
}

impl ClusterConfig {
    /// Parses YAML or JSON text.
    pub fn from_yaml(text: &str) -> Result<Self, ClientError> {
        match config::parse_yaml(text)? {
            Value::Null => Ok(Self::default()),
            tree @ Value::Object(_) => Ok(Self { tree }),
            _ => Err(ClientError::new(
                Code::InvalidArgument,
                "a cluster config must be a mapping (name: …, head: …)",
            )),
        }
    }

    /// Reads and parses a file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ClientError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ClientError::new(Code::InvalidArgument, format!("cannot read {}: {e}", path.display())))?;
        Self::from_yaml(&text)
    }

    /// Applies one `key=value` override (`head.cpus=4`,
    /// `worker_groups[0].replicas=3`); values are typed as YAML scalars and
    /// an empty value resets the field to its default.
    pub fn set(mut self, assignment: &str) -> Result<Self, ClientError> {
        config::apply_override(&mut self.tree, assignment)?;
        Ok(self)
    }

    /// Applies overrides in order.
    pub fn set_all<S: AsRef<str>>(mut self, assignments: &[S]) -> Result<Self, ClientError> {
        config::apply_overrides(&mut self.tree, assignments)?;
        Ok(self)
    }

    /// The cluster name, replacing the file's.
    pub fn name(mut self, name: &str) -> Self {
        self.put("name", Value::String(name.to_owned()));
        self
    }

    /// The namespace, replacing the file's.
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.put("namespace", Value::String(namespace.to_owned()));
        self
    }

    fn put(&mut self, key: &str, value: Value) {
        if let Value::Object(map) = &mut self.tree {
            map.insert(key.to_owned(), value);
        }
    }

    /// A top-level string field (`name`, `namespace`), when set.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.tree.get(key).and_then(Value::as_str)
    }

    /// The document as a structured spec; fields of the wrong shape are
    /// reported with their path, and values are checked by the server.
    pub fn to_spec(&self) -> Result<ClusterSpec, ClientError> {
        Ok(config::tree_to_spec(&self.tree)?)
    }

    /// The document as a tree.
    pub fn tree(&self) -> &Value {
        &self.tree
    }
}

/// Loads a Krayne config file into a [`ClusterSpec`], applying
/// dot-notation overrides first.
pub fn load_cluster_spec<S: AsRef<str>>(path: impl AsRef<Path>, overrides: &[S]) -> Result<ClusterSpec, ClientError> {
    ClusterConfig::from_file(path)?.set_all(overrides)?.to_spec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builders_set_only_what_is_asked() {
        let spec = ClusterSpecBuilder::new("c")
            .head_memory("8Gi")
            .idle_timeout_seconds(30)
            .build();
        assert_eq!(spec.name, "c");
        assert_eq!(spec.namespace, None);
        assert_eq!(spec.head.unwrap().memory.as_deref(), Some("8Gi"));
        assert_eq!(spec.autoscaler.unwrap().idle_timeout_seconds, Some(30));
        assert!(spec.worker_groups.is_empty());
        assert!(spec.services.is_none());
    }

    #[test]
    fn a_config_file_loads_with_overrides() {
        let dir = std::env::temp_dir().join(format!("krayne-client-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("c.yaml");
        std::fs::write(&file, "name: a\nhead: {cpus: 1}\n").unwrap();
        let spec = load_cluster_spec(&file, &["head.cpus=4", "services.ssh=false"]).unwrap();
        assert_eq!(spec.head.unwrap().cpus.as_deref(), Some("4"));
        assert_eq!(spec.services.unwrap().ssh, Some(false));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_documents_are_invalid_arguments() {
        assert_eq!(
            ClusterConfig::from_yaml("- a\n- b\n").unwrap_err().code(),
            Code::InvalidArgument
        );
        let e = ClusterConfig::from_yaml("name: a\n")
            .unwrap()
            .set("head.cpus")
            .unwrap_err();
        assert_eq!(e.violations()[0].field, "overrides");
        let missing = ClusterConfig::from_file("/nonexistent/c.yaml").unwrap_err();
        assert!(missing.message().contains("/nonexistent/c.yaml"), "{missing}");
    }

    #[test]
    fn name_and_namespace_replace_the_files() {
        let c = ClusterConfig::from_yaml("name: a\nnamespace: x\n")
            .unwrap()
            .name("b")
            .namespace("y");
        assert_eq!(c.get_str("name"), Some("b"));
        assert_eq!(c.get_str("namespace"), Some("y"));
        assert!(ClusterConfig::from_yaml("").unwrap().to_spec().unwrap().name.is_empty());
    }
}
