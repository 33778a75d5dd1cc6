//! The Helm chart (`charts/krayne`) and the Dockerfile, checked without Helm
//! or Docker: values against the schema, templates through their static
//! parts, and the facts that tie them to the server.

use std::collections::BTreeSet;

use clap::CommandFactory as _;
use krayne_server::{auth::TeamMapping, config::Cli};
use krayne_tests::chart::{self, PLACEHOLDER, coalesce, static_documents, template_names, values_paths};
use serde_json::{Value, json};

fn schema_errors(values: &Value) -> Vec<String> {
    let schema = chart::yaml("values.schema.json");
    let validator = jsonschema::validator_for(&schema).expect("values.schema.json is a valid JSON schema");
    validator
        .iter_errors(values)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

fn defaults() -> Value {
    chart::yaml("values.yaml")
}

fn all_features() -> Value {
    let mut values = defaults();
    coalesce(&mut values, &chart::yaml("ci/all-features-values.yaml"));
    values
}

fn object<'a>(documents: &'a [Value], kind: &str) -> &'a Value {
    documents
        .iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

#[test]
fn default_and_all_features_values_pass_the_schema() {
    assert_eq!(schema_errors(&defaults()), Vec::<String>::new());
    let all = all_features();
    assert_eq!(schema_errors(&all), Vec::<String>::new());
    for switch in [
        "ingress",
        "autoscaling",
        "networkPolicy",
        "serviceMonitor",
        "podDisruptionBudget",
    ] {
        assert_eq!(
            all[switch]["enabled"], true,
            "{switch} is on in ci/all-features-values.yaml"
        );
    }
    assert!(all["rbac"]["namespaces"].as_array().is_some_and(|n| !n.is_empty()));
}

#[test]
fn the_schema_rejects_bad_values() {
    let cases = [
        (json!({"replicaCount": "2"}), "/replicaCount"),
        (json!({"replicaCount": 0}), "/replicaCount"),
        (json!({"replicas": 2}), "replicas"),
        (json!({"image": {"pullPolicy": "Sometimes"}}), "/image/pullPolicy"),
        (json!({"image": {"digest": "latest"}}), "/image/digest"),
        (json!({"server": {"apiPort": 70000}}), "/server/apiPort"),
        (json!({"server": {"corsOrigins": ["*"]}}), "/server/corsOrigins/0"),
        (json!({"auth": {"leewaySeconds": 600}}), "/auth/leewaySeconds"),
        (json!({"auth": {"algorithms": ["HS256"]}}), "/auth/algorithms/0"),
        (
            json!({"auth": {"publicKeys": {"keys": [{"file": "a.pem"}]}}}),
            "/auth/publicKeys/keys/0",
        ),
        (json!({"database": {"url": "mysql://db"}}), "/database/url"),
        (
            json!({"teams": {"mapping": {"teams": [{"name": "a", "namespaces": {"ml": "owner"}}]}}}),
            "/teams/mapping/teams/0/namespaces/ml",
        ),
        (
            json!({"teams": {"mapping": {"teams": [{"name": "a", "namespaces": {"ML_Team": "viewer"}}]}}}),
            "/teams/mapping/teams/0/namespaces",
        ),
        (json!({"teams": {"mapping": {"admins": {"group": ["x"]}}}}), "group"),
        (json!({"rbac": {"namespaces": "ml-team"}}), "/rbac/namespaces"),
        (
            json!({"podDisruptionBudget": {"minAvailable": "half"}}),
            "/podDisruptionBudget/minAvailable",
        ),
        (
            json!({"serviceMonitor": {"interval": "often"}}),
            "/serviceMonitor/interval",
        ),
        (json!({"ingress": {"enabled": true}}), "/ingress/hosts"),
    ];
    for (overlay, expected) in cases {
        let mut values = defaults();
        coalesce(&mut values, &overlay);
        let errors = schema_errors(&values);
        assert!(
            errors.iter().any(|e| e.contains(expected)),
            "{overlay} should be refused at {expected}; errors: {errors:?}"
        );
    }
}

/// Every field is described in the schema; with `additionalProperties:
/// false` everywhere, nothing in values.yaml escapes it.
#[test]
fn every_schema_field_is_described_and_closed() {
    fn walk(schema: &Value, path: &str, problems: &mut Vec<String>) {
        if schema.get("description").is_none() {
            problems.push(format!("{path}: no description"));
        }
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            if schema.get("additionalProperties") != Some(&json!(false)) {
                problems.push(format!("{path}: additionalProperties is not false"));
            }
            for (name, property) in properties {
                walk(property, &format!("{path}.{name}"), problems);
            }
        }
        if let Some(items) = schema.get("items").filter(|i| i.get("properties").is_some()) {
            walk(items, &format!("{path}[]"), problems);
        }
    }
    let mut problems = Vec::new();
    let schema = chart::yaml("values.schema.json");
    for (name, property) in schema["properties"].as_object().expect("properties") {
        walk(property, name, &mut problems);
    }
    assert_eq!(problems, Vec::<String>::new());
}

/// values.yaml documents each field with a comment right above it.
#[test]
fn every_field_of_values_yaml_has_a_comment() {
    let text = chart::read("values.yaml");
    let lines: Vec<&str> = text.lines().collect();
    let mut undocumented = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let is_key = !trimmed.starts_with('#')
            && !trimmed.starts_with('-')
            && trimmed
                .split_once(':')
                .is_some_and(|(k, _)| !k.is_empty() && !k.contains(' '));
        let previous = i.checked_sub(1).map(|p| lines[p].trim_start());
        if is_key && !previous.is_some_and(|p| p.starts_with('#')) {
            undocumented.push(format!("values.yaml:{}: {trimmed}", i + 1));
        }
    }
    assert_eq!(undocumented, Vec::<String>::new());
}

#[test]
fn team_mappings_in_values_parse_with_the_servers_parser() {
    for values in [defaults(), all_features()] {
        let text = serde_json::to_string(&values["teams"]["mapping"]).expect("json");
        TeamMapping::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    }
}

#[test]
fn every_value_the_templates_use_has_a_default() {
    let values = defaults();
    let mut missing = BTreeSet::new();
    let mut files: Vec<String> = template_names();
    files.extend(["_helpers.tpl".to_owned(), "NOTES.txt".to_owned()]);
    for file in files {
        for path in values_paths(&chart::read(&format!("templates/{file}"))) {
            let found = path.split('.').try_fold(&values, |v, key| v.get(key));
            if found.is_none() {
                missing.insert(format!("{file}: .Values.{path}"));
            }
        }
    }
    assert_eq!(missing, BTreeSet::new());
}

#[test]
fn templates_render_the_expected_kubernetes_objects() {
    let mut kinds = BTreeSet::new();
    for template in template_names() {
        let documents = static_documents(&template);
        assert!(!documents.is_empty(), "{template} renders nothing");
        for document in &documents {
            let (api, kind) = (&document["apiVersion"], &document["kind"]);
            assert!(
                api.is_string() && kind.is_string() && document["metadata"]["name"].is_string(),
                "{template}: every object has apiVersion, kind and metadata.name: {document}"
            );
            assert!(
                document["metadata"]["labels"].is_null() || document["metadata"]["labels"].is_object(),
                "{template}: labels"
            );
            kinds.insert(format!(
                "{}/{}",
                api.as_str().unwrap_or(""),
                kind.as_str().unwrap_or("")
            ));
        }
    }
    let expected = [
        "apps/v1/Deployment",
        "autoscaling/v2/HorizontalPodAutoscaler",
        "monitoring.coreos.com/v1/ServiceMonitor",
        "networking.k8s.io/v1/Ingress",
        "networking.k8s.io/v1/NetworkPolicy",
        "policy/v1/PodDisruptionBudget",
        "rbac.authorization.k8s.io/v1/ClusterRole",
        "rbac.authorization.k8s.io/v1/ClusterRoleBinding",
        "rbac.authorization.k8s.io/v1/Role",
        "rbac.authorization.k8s.io/v1/RoleBinding",
        "v1/ConfigMap",
        "v1/Secret",
        "v1/Service",
        "v1/ServiceAccount",
    ];
    assert_eq!(kinds, expected.iter().map(|k| (*k).to_owned()).collect());
}

#[test]
fn the_deployment_is_hardened_probed_and_rolls_on_config_changes() {
    let documents = static_documents("deployment.yaml");
    let deployment = object(&documents, "Deployment");
    let spec = &deployment["spec"];
    assert_eq!(spec["strategy"]["type"], "RollingUpdate");
    assert_eq!(spec["strategy"]["rollingUpdate"]["maxUnavailable"], 0);
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["runAsUser"], 65532);
    assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    let container = &pod["containers"][0];
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["runAsNonRoot"], true);
    assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(security["seccompProfile"]["type"], "RuntimeDefault");
    assert_eq!(container["args"][0], "serve");
    assert_eq!(
        container["readinessProbe"]["httpGet"],
        json!({"path": "/readyz", "port": "ops"})
    );
    assert_eq!(
        container["livenessProbe"]["httpGet"],
        json!({"path": "/healthz", "port": "ops"})
    );
    assert!(container["resources"].is_null() || container["resources"].is_object());
    let ports: Vec<&Value> = container["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .map(|p| &p["name"])
        .collect();
    assert_eq!(ports, [&json!("api"), &json!("ops")]);

    let annotations = &spec["template"]["metadata"]["annotations"];
    assert_eq!(annotations["checksum/config"], PLACEHOLDER);
    assert_eq!(annotations["checksum/secret"], PLACEHOLDER);
    let text = chart::read("templates/deployment.yaml");
    assert!(text.contains(r#"print $.Template.BasePath "/configmap.yaml""#));
    assert!(
        !text.contains("teams-configmap.yaml"),
        "the team mapping is hot-reloaded; its ConfigMap must not roll the pods"
    );
    let teams_mount = container["volumeMounts"]
        .as_array()
        .expect("volumeMounts")
        .iter()
        .find(|m| m["name"] == "teams")
        .expect("the teams volume is mounted");
    assert!(
        teams_mount.get("subPath").is_none(),
        "a subPath mount never sees ConfigMap updates"
    );
    assert_eq!(teams_mount["mountPath"], "/etc/krayne/teams");
}

/// The settings ConfigMap is the server's environment: every key is one of
/// `krayne-server serve`'s variables, and the team file is where the
/// Deployment mounts it.
#[test]
fn the_settings_configmap_speaks_the_servers_environment() {
    let mut known = BTreeSet::new();
    let cli = Cli::command();
    let serve = cli.find_subcommand("serve").expect("serve");
    for arg in cli.get_arguments().chain(serve.get_arguments()) {
        if let Some(env) = arg.get_env() {
            known.insert(env.to_string_lossy().into_owned());
        }
    }
    let text = chart::read("templates/configmap.yaml");
    let used: BTreeSet<String> = text
        .split(|c: char| !(c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit()))
        .filter(|w| w.starts_with("KRAYNE_") && *w != "KRAYNE_")
        .map(str::to_owned)
        .collect();
    let unknown: Vec<_> = used.difference(&known).collect();
    assert!(unknown.is_empty(), "not server variables: {unknown:?}");
    for required in [
        "KRAYNE_TEAMS_FILE",
        "KRAYNE_LISTEN",
        "KRAYNE_OPS_LISTEN",
        "KRAYNE_JWT_ISSUER",
    ] {
        assert!(used.contains(required), "{required}");
    }
    let documents = static_documents("configmap.yaml");
    let data = &object(&documents, "ConfigMap")["data"];
    assert_eq!(data["KRAYNE_TEAMS_FILE"], "/etc/krayne/teams/teams.yaml");
    // Helm reads numbers as float64 and prints 1048576 as 1.048576e+06,
    // which the server would refuse: numbers must go through int64/int.
    let values = defaults();
    for line in text.lines() {
        for path in values_paths(line) {
            let value = path.split('.').try_fold(&values, |v, key| v.get(key));
            if value.is_some_and(Value::is_number) {
                assert!(
                    line.contains("int64") || line.contains("(int "),
                    "{line}: a number printed as a float"
                );
            }
        }
    }
    let deployment = chart::read("templates/deployment.yaml");
    assert!(
        deployment.contains("name: KRAYNE_DATABASE_URL"),
        "the URL comes from a Secret"
    );
    assert!(!text.contains("KRAYNE_DATABASE_URL"), "no database URL in a ConfigMap");
}

#[test]
fn the_service_carries_rest_and_grpc_on_one_named_port() {
    let service = object(&static_documents("service.yaml"), "Service").clone();
    let ports = service["spec"]["ports"].as_array().expect("ports");
    assert_eq!(ports[0]["name"], "grpc-http");
    assert_eq!(ports[0]["targetPort"], "api");
    assert_eq!(ports[0]["appProtocol"], "kubernetes.io/h2c");
    assert_eq!(ports[1]["name"], "ops");
    let ingress = chart::read("templates/ingress.yaml");
    assert!(ingress.contains("name: grpc-http"));
}

/// Chart, image and crates carry one version, and the image's ports are
/// the server's and the chart's defaults.
#[test]
fn versions_and_ports_agree_across_chart_dockerfile_and_server() {
    let chart = chart::yaml("Chart.yaml");
    assert_eq!(chart["appVersion"], env!("CARGO_PKG_VERSION"));
    let dockerfile = std::fs::read_to_string(chart::chart_dir().join("../../Dockerfile")).expect("Dockerfile");
    assert!(dockerfile.contains(&format!("ARG VERSION={}", env!("CARGO_PKG_VERSION"))));
    assert!(dockerfile.contains("EXPOSE 8080 9090"));
    assert!(dockerfile.contains(r#"ENTRYPOINT ["krayne-server"]"#));
    assert!(dockerfile.contains(r#"CMD ["serve"]"#));
    let values = defaults();
    assert_eq!(values["server"]["apiPort"], 8080);
    assert_eq!(values["server"]["opsPort"], 9090);
    let cli = Cli::command();
    let serve = cli.find_subcommand("serve").expect("serve");
    let default_of = |name: &str| {
        serve
            .get_arguments()
            .find(|a| a.get_id() == name)
            .and_then(|a| a.get_default_values().first())
            .map(|v| v.to_string_lossy().into_owned())
    };
    assert_eq!(default_of("listen").as_deref(), Some("0.0.0.0:8080"));
    assert_eq!(default_of("ops_listen").as_deref(), Some("0.0.0.0:9090"));
}
