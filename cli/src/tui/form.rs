//! The create and scale forms: labelled text fields and toggles, one in
//! focus, each able to show the server's complaint about it.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use krayne_client::{ClientError, ClusterSpecBuilder, Scale, WorkerGroupBuilder, proto::ClusterSpec};

/// A form on screen.
#[derive(Debug, Clone)]
pub(crate) struct Form {
    /// Its title, e.g. `Create a cluster in ml-team`.
    pub(crate) title: String,
    pub(crate) fields: Vec<Field>,
    pub(crate) focus: usize,
    /// A complaint about no field in particular.
    pub(crate) error: Option<String>,
    /// Sent, waiting for the answer.
    pub(crate) busy: bool,
    /// Edited by the user (details that arrive later do not overwrite it).
    pub(crate) touched: bool,
}

/// One field.
#[derive(Debug, Clone)]
pub(crate) struct Field {
    /// What the server's field paths end with, e.g. `replicas`.
    pub(crate) key: &'static str,
    pub(crate) label: &'static str,
    pub(crate) value: Value,
    /// Shown dimmed while the field is empty.
    pub(crate) hint: String,
    pub(crate) error: Option<String>,
}

/// A field's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    Text(String),
    Toggle(bool),
}

/// What a key did to a form.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Submit,
    Cancel,
    Stay,
}

fn text(key: &'static str, label: &'static str, value: &str, hint: impl Into<String>) -> Field {
    Field {
        key,
        label,
        value: Value::Text(value.to_owned()),
        hint: hint.into(),
        error: None,
    }
}

fn toggle(key: &'static str, label: &'static str) -> Field {
    Field {
        key,
        label,
        value: Value::Toggle(false),
        hint: String::new(),
        error: None,
    }
}

impl Form {
    fn new(title: String, fields: Vec<Field>) -> Self {
        Self {
            title,
            fields,
            focus: 0,
            error: None,
            busy: false,
            touched: false,
        }
    }

    /// The create form, for `namespace`. Fields left empty (and toggles
    /// left as they are) take Krayne's defaults, as `krayne create NAME`
    /// does; each hint says the default.
    pub(crate) fn create(namespace: &str) -> Self {
        use krayne_client::defaults as d;
        let default = |v: &dyn std::fmt::Display| format!("default {v}");
        let mut fields = vec![
            text("name", "Name", "", "lowercase letters, digits and '-'"),
            text("namespace", "Namespace", namespace, ""),
            text("replicas", "Workers", "", default(&d::REPLICAS)),
            text("min_replicas", "Min workers", "", default(&d::MIN_REPLICAS)),
            text("max_replicas", "Max workers", "", default(&d::MAX_REPLICAS)),
            text("gpus", "GPUs per worker", "", default(&d::GPUS)),
            text("head.cpus", "Head CPUs", "", default(&d::HEAD_CPUS)),
            text("head.memory", "Head memory", "", default(&d::HEAD_MEMORY)),
            toggle("autoscaling", "Autoscaling"),
            toggle("notebook", "Notebook"),
            toggle("code_server", "Code-server"),
            toggle("ssh", "SSH"),
        ];
        for field in &mut fields {
            let on = match field.key {
                "autoscaling" => d::AUTOSCALING,
                "notebook" | "code_server" | "ssh" => d::SERVICE_ON,
                _ => continue,
            };
            field.value = Value::Toggle(on);
        }
        Self::new("Create a cluster".into(), fields)
    }

    /// The scale form for a cluster's worker group.
    pub(crate) fn scale(cluster: &str, group: &str, replicas: u32) -> Self {
        Self::new(
            format!("Scale {cluster}"),
            vec![
                text("worker_group", "Worker group", group, ""),
                text("replicas", "Workers", &replicas.to_string(), ""),
                text("min_replicas", "Min workers", "", "unchanged"),
                text("max_replicas", "Max workers", "", "unchanged"),
            ],
        )
    }

    /// Sets a field's text (details that arrived after the form opened).
    pub(crate) fn fill(&mut self, key: &str, value: &str) {
        if let Some(Field {
            value: Value::Text(t), ..
        }) = self.fields.iter_mut().find(|f| f.key == key)
        {
            value.clone_into(t);
        }
    }

    /// Applies a key.
    pub(crate) fn on_key(&mut self, key: KeyEvent) -> Outcome {
        if self.busy {
            return if key.code == KeyCode::Esc {
                Outcome::Cancel
            } else {
                Outcome::Stay
            };
        }
        let last = self.fields.len().saturating_sub(1);
        match key.code {
            KeyCode::Esc => return Outcome::Cancel,
            KeyCode::Enter => return Outcome::Submit,
            KeyCode::Tab | KeyCode::Down => self.focus = if self.focus >= last { 0 } else { self.focus + 1 },
            KeyCode::BackTab | KeyCode::Up => self.focus = if self.focus == 0 { last } else { self.focus - 1 },
            code => {
                let Some(field) = self.fields.get_mut(self.focus) else {
                    return Outcome::Stay;
                };
                match (&mut field.value, code) {
                    (Value::Toggle(on), KeyCode::Char(' ')) => *on = !*on,
                    (Value::Text(t), KeyCode::Char(c)) if !key.modifiers.contains(KeyModifiers::CONTROL) => t.push(c),
                    (Value::Text(t), KeyCode::Backspace) => {
                        t.pop();
                    }
                    _ => return Outcome::Stay,
                }
                field.error = None;
                self.touched = true;
            }
        }
        Outcome::Stay
    }

    fn text(&self, key: &str) -> &str {
        self.fields
            .iter()
            .find(|f| f.key == key)
            .and_then(|f| match &f.value {
                Value::Text(t) => Some(t.trim()),
                Value::Toggle(_) => None,
            })
            .unwrap_or_default()
    }

    fn on(&self, key: &str) -> bool {
        self.fields
            .iter()
            .any(|f| f.key == key && f.value == Value::Toggle(true))
    }

    /// A whole number from a field; empty is `None`, anything else that is
    /// not a number marks the field.
    fn number(&mut self, key: &str) -> Result<Option<u32>, ()> {
        let text = self.text(key).to_owned();
        if text.is_empty() {
            return Ok(None);
        }
        text.parse().map(Some).map_err(|_| {
            self.mark(key, &format!("{text:?} is not a whole number"));
        })
    }

    fn mark(&mut self, key: &str, message: &str) {
        if let Some(f) = self.fields.iter_mut().find(|f| f.key == key) {
            f.error = Some(message.to_owned());
        }
    }

    fn clear_errors(&mut self) {
        self.error = None;
        for f in &mut self.fields {
            f.error = None;
        }
    }

    /// The create form's cluster, or `None` with the fields that are not
    /// numbers marked.
    pub(crate) fn cluster_spec(&mut self) -> Option<ClusterSpec> {
        self.clear_errors();
        let numbers = ["replicas", "min_replicas", "max_replicas", "gpus"].map(|k| self.number(k));
        let [Ok(replicas), Ok(min), Ok(max), Ok(gpus)] = numbers else {
            return None;
        };
        let mut group = WorkerGroupBuilder::new("worker");
        if let Some(n) = replicas {
            group = group.replicas(n);
        }
        if let Some(n) = min {
            group = group.min_replicas(n);
        }
        if let Some(n) = max {
            group = group.max_replicas(n);
        }
        if let Some(n) = gpus {
            group = group.gpus(n);
        }
        let mut spec = ClusterSpecBuilder::new(self.text("name")).namespace(self.text("namespace"));
        if !self.text("head.cpus").is_empty() {
            spec = spec.head_cpus(self.text("head.cpus"));
        }
        if !self.text("head.memory").is_empty() {
            spec = spec.head_memory(self.text("head.memory"));
        }
        let spec = spec
            .worker_group(group)
            .services(self.on("notebook"), self.on("code_server"), self.on("ssh"));
        Some(spec.autoscaling(self.on("autoscaling")).build())
    }

    /// The scale form's resize, or `None` with the wrong fields marked.
    pub(crate) fn scale_request(&mut self) -> Option<Scale> {
        self.clear_errors();
        let numbers = ["replicas", "min_replicas", "max_replicas"].map(|k| self.number(k));
        let [Ok(replicas), Ok(min_replicas), Ok(max_replicas)] = numbers else {
            return None;
        };
        Some(Scale {
            group: self.text("worker_group").to_owned(),
            replicas,
            min_replicas,
            max_replicas,
        })
    }

    /// Shows a refusal: each field violation next to its field, the rest
    /// under the form.
    pub(crate) fn refused(&mut self, error: &ClientError) {
        self.busy = false;
        let mut unplaced = Vec::new();
        for v in error.violations() {
            let field = self
                .fields
                .iter_mut()
                .filter(|f| field_is(&v.field, f.key))
                .max_by_key(|f| f.key.len());
            match field {
                Some(f) => f.error = Some(v.description.clone()),
                None => unplaced.push(format!("{}: {}", v.field, v.description)),
            }
        }
        self.error = if error.violations().is_empty() {
            Some(error.message().to_owned())
        } else if unplaced.is_empty() {
            None
        } else {
            Some(unplaced.join("; "))
        };
    }
}

/// Whether a server field path (`worker_groups[0].min_replicas`,
/// `head.cpus`, `name`) names the form field `key`.
fn field_is(path: &str, key: &str) -> bool {
    let path = path.replace("services.", "");
    if key.contains('.') {
        return path == key || path.ends_with(&format!(".{key}"));
    }
    if path.starts_with("head.") {
        return false;
    }
    path == key || path.ends_with(&format!(".{key}")) || path.ends_with(&format!("].{key}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn typed(form: &mut Form, text: &str) {
        for c in text.chars() {
            form.on_key(key(KeyCode::Char(c)));
        }
    }

    #[test]
    fn typing_edits_the_focused_field_and_tab_moves_on() {
        let mut form = Form::create("ml-team");
        typed(&mut form, "demo");
        form.on_key(key(KeyCode::Backspace));
        form.on_key(key(KeyCode::Tab));
        form.on_key(key(KeyCode::Tab));
        form.on_key(key(KeyCode::Backspace));
        typed(&mut form, "3");
        form.on_key(key(KeyCode::BackTab));
        form.on_key(key(KeyCode::BackTab));
        form.on_key(key(KeyCode::BackTab));
        assert_eq!(form.focus, form.fields.len() - 1, "wraps around");
        form.on_key(key(KeyCode::Char(' ')));
        assert_eq!(form.on_key(key(KeyCode::Enter)), Outcome::Submit);
        let spec = form.cluster_spec().unwrap();
        assert_eq!(spec.name, "dem");
        assert_eq!(spec.namespace.as_deref(), Some("ml-team"));
        assert_eq!(spec.worker_groups[0].replicas, Some(3));
        let services = spec.services.unwrap();
        assert_eq!(services.ssh, Some(false), "toggled off");
        assert_eq!((services.notebook, services.code_server), (Some(true), Some(true)));
        assert!(form.touched);
    }

    /// Issue 56 item 6: a name-only form asks for what `krayne create NAME`
    /// asks for: Krayne's defaults, which its hints name.
    #[test]
    fn an_untouched_form_takes_krayne_s_defaults_and_says_them() {
        let mut form = Form::create("ml-team");
        typed(&mut form, "demo");
        let spec = form.cluster_spec().unwrap();
        let group = &spec.worker_groups[0];
        assert_eq!(
            (group.replicas, group.min_replicas, group.max_replicas, group.gpus),
            (None, None, None, None)
        );
        assert_eq!((spec.head.as_ref().and_then(|h| h.cpus.clone())), None);
        assert_eq!(
            spec.autoscaler.and_then(|a| a.enabled),
            Some(krayne_client::defaults::AUTOSCALING)
        );
        let services = spec.services.unwrap();
        let on = Some(krayne_client::defaults::SERVICE_ON);
        assert_eq!((services.notebook, services.code_server, services.ssh), (on, on, on));
        let hint = |key: &str| form.fields.iter().find(|f| f.key == key).unwrap().hint.clone();
        assert_eq!(
            hint("head.cpus"),
            format!("default {}", krayne_client::defaults::HEAD_CPUS)
        );
        assert_eq!(
            hint("head.memory"),
            format!("default {}", krayne_client::defaults::HEAD_MEMORY)
        );
        assert_eq!(
            hint("max_replicas"),
            format!("default {}", krayne_client::defaults::MAX_REPLICAS)
        );
    }

    #[test]
    fn numbers_are_checked_before_sending() {
        let mut form = Form::create("ml-team");
        form.focus = 2;
        typed(&mut form, "x");
        assert!(form.cluster_spec().is_none());
        assert_eq!(form.fields[2].error.as_deref(), Some("\"x\" is not a whole number"));
        assert_eq!(form.on_key(key(KeyCode::Esc)), Outcome::Cancel);
    }

    #[test]
    fn the_servers_violations_land_on_their_fields() {
        let mut form = Form::create("ml-team");
        form.busy = true;
        let error = ClientError::invalid_field("worker_groups[0].min_replicas", "must be at most max_replicas");
        form.refused(&error);
        assert!(!form.busy);
        assert_eq!(form.fields[3].error.as_deref(), Some("must be at most max_replicas"));
        assert!(form.fields[4].error.is_none());
        assert!(field_is("head.cpus", "head.cpus"));
        assert!(!field_is("head.cpus", "gpus"));
        assert!(field_is("worker_groups[0].gpus", "gpus"));
        assert!(field_is("name", "name"));
    }

    #[test]
    fn a_scale_form_leaves_blank_bounds_unchanged() {
        let mut form = Form::scale("demo", "worker", 2);
        form.focus = 1;
        form.on_key(key(KeyCode::Backspace));
        typed(&mut form, "4");
        let scale = form.scale_request().unwrap();
        assert_eq!((scale.group.as_str(), scale.replicas), ("worker", Some(4)));
        assert_eq!((scale.min_replicas, scale.max_replicas), (None, None));
    }
}
