//! The Helm chart's files, read the way the chart tests need them.
//!
//! These tests check templates through their static parts, without Helm:
//! lines that are only template actions are dropped, and actions inside a
//! line become [`PLACEHOLDER`]. What remains must be YAML. Helm's own
//! engine renders the chart in `charts/krayne/ci/helm_check.py` (the e2e
//! test `chart_helm`).

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
};

use serde_json::Value;

/// What an inline template action turns into.
pub const PLACEHOLDER: &str = "TEMPLATED";

/// `charts/krayne` of this checkout.
pub fn chart_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/krayne")
}

/// A file of the chart, by path relative to the chart.
///
/// # Panics
/// When the file cannot be read.
pub fn read(relative: &str) -> String {
    let path = chart_dir().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A file of the repository (not only the chart), by path relative to the
/// repository's root, e.g. `docs/operations.md`.
///
/// # Panics
/// When the file cannot be read.
pub fn repo_file(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A plain YAML file of the chart (no template actions), as JSON.
///
/// # Panics
/// When it cannot be read or parsed.
pub fn yaml(relative: &str) -> Value {
    serde_saphyr::from_str(&read(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// Names of the templates that render Kubernetes objects (`*.yaml`).
///
/// # Panics
/// When the templates directory cannot be read.
pub fn template_names() -> Vec<String> {
    let dir = chart_dir().join("templates");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".yaml"))
        .collect();
    names.sort();
    names
}

/// Template text with `{{/* … */}}` comments removed, action-only lines
/// dropped and the remaining actions replaced by [`PLACEHOLDER`].
pub fn static_parts(template: &str) -> String {
    let mut text = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{/*").or_else(|| rest.find("{{- /*")) {
        text.push_str(&rest[..start]);
        rest = rest[start..].find("*/}}").map_or("", |end| &rest[start + end + 4..]);
    }
    text.push_str(rest);
    text.lines()
        .filter_map(|line| {
            let replaced = replace_actions(line);
            let only_actions =
                replaced.trim().split(PLACEHOLDER).all(|s| s.trim().is_empty()) && line.trim_start().starts_with("{{");
            (!only_actions).then_some(replaced)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn replace_actions(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        match rest[start..].find("}}") {
            Some(end) => {
                out.push_str(PLACEHOLDER);
                rest = &rest[start + end + 2..];
            }
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// The objects a template's static parts describe (empty documents left
/// out).
///
/// # Panics
/// When the static parts are not YAML.
pub fn static_documents(template: &str) -> Vec<Value> {
    let text = read(&format!("templates/{template}"));
    let parts = static_parts(&text);
    let documents: Vec<Value> = serde_saphyr::from_multiple(&parts)
        .unwrap_or_else(|e| panic!("templates/{template}: static parts are not YAML: {e}\n{parts}"));
    documents.into_iter().filter(|d| !d.is_null()).collect()
}

/// The template actions of a text (what stands between `{{` and `}}`,
/// trimmed, without the `-` of whitespace trimming), leaving out
/// `{{/* … */}}` comments.
pub fn template_actions(text: &str) -> Vec<String> {
    let mut actions = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        if after.trim_start_matches('-').trim_start().starts_with("/*") {
            rest = after.find("*/}}").map_or("", |end| &after[end + 4..]);
            continue;
        }
        let Some(end) = after.find("}}") else {
            break;
        };
        actions.push(
            after[..end]
                .trim_start_matches('-')
                .trim_end_matches('-')
                .trim()
                .to_owned(),
        );
        rest = &after[end + 2..];
    }
    actions
}

/// The anchors GitHub gives the headings of a Markdown text (outside
/// fenced code blocks): lowercased, punctuation other than `-` and `_`
/// dropped, spaces made `-`.
pub fn markdown_anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let heading = line.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let anchor: String = heading
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        anchors.insert(anchor);
    }
    anchors
}

/// Every `.Values.a.b` path a text refers to, as `a.b`.
pub fn values_paths(text: &str) -> BTreeSet<String> {
    text.match_indices(".Values.")
        .map(|(at, needle)| {
            text[at + needle.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
                .collect::<String>()
                .trim_end_matches('.')
                .to_owned()
        })
        .filter(|path| !path.is_empty())
        .collect()
}

/// `overlay` over `base` as Helm coalesces values: maps merge key by key,
/// anything else replaces, and `null` removes a key.
pub fn coalesce(base: &mut Value, overlay: &Value) {
    match (base, overlay) {
        (Value::Object(base), Value::Object(overlay)) => {
            for (key, value) in overlay {
                if value.is_null() {
                    base.remove(key);
                } else if let Some(existing) = base.get_mut(key) {
                    coalesce(existing, value);
                } else {
                    base.insert(key.clone(), value.clone());
                }
            }
        }
        (base, overlay) => *base = overlay.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_are_dropped_or_replaced() {
        let template = "{{/* a\ncomment */}}\n{{- if .Values.a }}\nname: {{ include \"x\" . }}-b\n  {{- toYaml . | nindent 2 }}\n{{- end }}\nkey: value";
        assert_eq!(static_parts(template), "\nname: TEMPLATED-b\nkey: value");
    }

    #[test]
    fn values_paths_are_found_in_pipelines() {
        let paths = values_paths("{{ .Values.image.tag | default $.Values.x }} {{- with .Values.a_b.c }}");
        assert_eq!(paths.into_iter().collect::<Vec<_>>(), ["a_b.c", "image.tag", "x"]);
    }

    #[test]
    fn template_actions_leave_out_comments() {
        let text = "{{/* a {{ b }} */}}\nname: {{ include \"x\" . }}-y {{- if .Values.z -}}\n{{- /* c */}}{{ end }}";
        assert_eq!(template_actions(text), ["include \"x\" .", "if .Values.z", "end"]);
    }

    #[test]
    fn markdown_anchors_are_githubs() {
        let text = "# Operations\n## The edge\n```sh\n# not a heading\n```\n### A replica OOM-killed\n#### GitOps (Argo CD)\n#nope";
        let anchors: Vec<String> = markdown_anchors(text).into_iter().collect();
        assert_eq!(
            anchors,
            ["a-replica-oom-killed", "gitops-argo-cd", "operations", "the-edge"]
        );
    }

    #[test]
    fn coalesce_merges_maps_and_replaces_the_rest() {
        let mut base = serde_json::json!({"a": {"b": 1, "c": [1]}, "d": 1});
        coalesce(&mut base, &serde_json::json!({"a": {"c": [2]}, "d": null, "e": true}));
        assert_eq!(base, serde_json::json!({"a": {"b": 1, "c": [2]}, "e": true}));
    }
}
