//! The Helm chart (`charts/krayne`) and the Dockerfile, checked without Helm
//! or Docker: values against the schema, templates through their static
//! parts, and the facts that tie them to the server (`chart_helm.rs` has
//! Helm's own engine render it).

use std::collections::BTreeSet;

use clap::CommandFactory as _;
use krayne_server::{auth::TeamMapping, config::Cli};
use krayne_tests::chart::{
    self, PLACEHOLDER, coalesce, markdown_anchors, static_documents, template_actions, template_names, values_paths,
};
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

/// The production example of docs/operations.md (the Helm-engine check
/// keeps the two equal).
fn production() -> Value {
    let mut values = defaults();
    coalesce(&mut values, &chart::yaml("ci/production-values.yaml"));
    values
}

fn object<'a>(documents: &'a [Value], kind: &str) -> &'a Value {
    documents
        .iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

/// The object of `kind` whose static name is `name` (`TEMPLATED` for the
/// release's full name, `TEMPLATED-ops` for its `-ops` object).
fn named<'a>(documents: &'a [Value], kind: &str, name: &str) -> &'a Value {
    documents
        .iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// The `KRAYNE_*` variables `krayne-server <subcommand>` reads: its own
/// and the global ones.
fn server_env(subcommand: &str) -> BTreeSet<String> {
    let cli = Cli::command();
    let sub = cli
        .find_subcommand(subcommand)
        .unwrap_or_else(|| panic!("no subcommand {subcommand}"));
    cli.get_arguments()
        .chain(sub.get_arguments())
        .filter_map(|arg| arg.get_env())
        .map(|env| env.to_string_lossy().into_owned())
        .collect()
}

/// The `KRAYNE_*` variables of a nested subcommand such as `audit prune`:
/// its own, its parents' and the global ones.
fn server_env_of(path: &[&str]) -> BTreeSet<String> {
    let cli = Cli::command();
    let env_of = |command: &clap::Command| -> Vec<String> {
        command
            .get_arguments()
            .filter_map(|arg| arg.get_env())
            .map(|env| env.to_string_lossy().into_owned())
            .collect()
    };
    let mut variables: BTreeSet<String> = env_of(&cli).into_iter().collect();
    let mut command = &cli;
    for name in path {
        command = command
            .find_subcommand(name)
            .unwrap_or_else(|| panic!("no subcommand {name}"));
        variables.extend(env_of(command));
    }
    variables
}

/// Every `KRAYNE_*` word of a text.
fn krayne_variables(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit()))
        .filter(|w| w.starts_with("KRAYNE_") && *w != "KRAYNE_")
        .map(str::to_owned)
        .collect()
}

/// A hook's `helm.sh/hook-weight`, as a number.
fn hook_weight(hook: &Value) -> i64 {
    hook["metadata"]["annotations"]["helm.sh/hook-weight"]
        .as_str()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no hook weight: {hook}"))
}

/// A value of `values.yaml` as an integer.
fn int(values: &Value, path: &str) -> i64 {
    path.split('.')
        .try_fold(values, |v, key| v.get(key))
        .and_then(Value::as_i64)
        .unwrap_or_else(|| panic!("{path} is not an integer"))
}

/// Reliability 29j (issue 53, item 10): tenants' pods cannot read the
/// ops port's unauthenticated metrics (which name namespaces) by default.
#[test]
fn by_default_the_ops_port_admits_only_prometheus() {
    let values = defaults();
    assert_eq!(values["networkPolicy"]["enabled"], true);
    let ops_from = values["networkPolicy"]["opsFrom"].as_array().expect("opsFrom");
    assert!(!ops_from.is_empty(), "empty admits everyone");
    for peer in ops_from {
        assert!(
            peer["namespaceSelector"]["matchLabels"].is_object() && peer["podSelector"]["matchLabels"].is_object(),
            "each peer names a namespace and pods: {peer}"
        );
    }
}

#[test]
fn default_and_all_features_values_pass_the_schema() {
    assert_eq!(schema_errors(&defaults()), Vec::<String>::new());
    assert_eq!(schema_errors(&production()), Vec::<String>::new());
    let all = all_features();
    assert_eq!(schema_errors(&all), Vec::<String>::new());
    for switch in [
        "autoscaling",
        "networkPolicy",
        "serviceMonitor",
        "prometheusRule",
        "podDisruptionBudget",
        "gateway",
        "migrations",
    ] {
        assert_eq!(
            all[switch]["enabled"], true,
            "{switch} is on in ci/all-features-values.yaml"
        );
    }
    for edge in ["api", "grpc", "apps"] {
        assert_eq!(all["ingress"][edge]["enabled"], true, "ingress.{edge} is on");
    }
    assert_eq!(all["gateway"]["apps"]["enabled"], true);
    assert!(
        all["gateway"]["grpc"]["hostnames"]
            .as_array()
            .is_some_and(|h| !h.is_empty())
    );
    assert!(all["rbac"]["namespaces"].as_array().is_some_and(|n| !n.is_empty()));
    assert!(
        all["database"]["tls"]["caSecret"]["name"]
            .as_str()
            .is_some_and(|n| !n.is_empty())
    );
    assert!(all["migrations"]["grantTo"].as_str().is_some_and(|r| !r.is_empty()));
    // Defaults: namespaced RBAC, migrations as a hook, sessions off, and
    // no ingress, route or rule until asked for.
    let values = defaults();
    assert_eq!(values["rbac"]["clusterWide"], false);
    assert_eq!(values["migrations"]["enabled"], true);
    assert_eq!(values["server"]["sessions"]["existingSecret"], "");
    assert_eq!(values["server"]["sessions"]["secret"], "");
    assert_eq!(values["server"]["trustedProxies"], json!([]));
    assert_eq!(values["prometheusRule"]["enabled"], false);
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
        (
            json!({"teams": {"mapping": {"lifecycle": {"ml": {"idle_after": "soon"}}}}}),
            "/teams/mapping/lifecycle/ml/idle_after",
        ),
        (
            json!({"teams": {"mapping": {"lifecycle": {"ml": {"warn_before": "5m"}}}}}),
            "/teams/mapping/lifecycle/ml",
        ),
        (json!({"rbac": {"namespaces": "ml-team"}}), "/rbac/namespaces"),
        (
            json!({"podDisruptionBudget": {"minAvailable": "half"}}),
            "/podDisruptionBudget/minAvailable",
        ),
        (
            json!({"serviceMonitor": {"interval": "often"}}),
            "/serviceMonitor/interval",
        ),
        (json!({"ingress": {"api": {"enabled": true}}}), "/ingress/api/hosts"),
        (json!({"ingress": {"grpc": {"enabled": true}}}), "/ingress/grpc/hosts"),
        // The single Ingress of earlier charts is gone.
        (json!({"ingress": {"enabled": true}}), "enabled"),
        (json!({"gateway": {"enabled": true}}), "/gateway/parentRefs"),
        (
            json!({"gateway": {"api": {"timeouts": {"request": "forever"}}}}),
            "/gateway/api/timeouts/request",
        ),
        (json!({"rbac": {"clusterWide": "yes"}}), "/rbac/clusterWide"),
        (
            json!({"auth": {"oidcIssuerUrl": "https://idp.example.com", "hs256": {"existingSecret": "dev"}}}),
            "/auth/hs256/allowWithJwks",
        ),
        (
            json!({"auth": {"jwksUrl": "https://idp.example.com/jwks", "hs256": {"existingSecret": "dev"}}}),
            "/auth/hs256/allowWithJwks",
        ),
        (
            json!({"database": {"tls": {"caSecret": {"name": "a"}, "caConfigMap": {"name": "b"}}}}),
            "/database/tls",
        ),
        (
            json!({"server": {"sessions": {"secret": "short"}}}),
            "/server/sessions/secret",
        ),
        (
            json!({"server": {"shutdownDelaySeconds": -1}}),
            "/server/shutdownDelaySeconds",
        ),
        (
            json!({"migrations": {"database": {"url": "mysql://db"}}}),
            "/migrations/database/url",
        ),
        (
            json!({"migrations": {"grantTo": "krayne; DROP TABLE x"}}),
            "/migrations/grantTo",
        ),
        (
            json!({"autoscaling": {"scaleDown": {"pods": 0}}}),
            "/autoscaling/scaleDown/pods",
        ),
        (
            json!({"probes": {"startupFailureThreshold": 0}}),
            "/probes/startupFailureThreshold",
        ),
        (
            json!({"prometheusRule": {"runbookBaseUrl": "docs/operations.md"}}),
            "/prometheusRule/runbookBaseUrl",
        ),
        (
            json!({"server": {"defaultRayImage": "Ray:latest"}}),
            "/server/defaultRayImage",
        ),
        (
            json!({"server": {"defaultRayImage": "rayproject/ray:2.60.0-py312@sha256:abc"}}),
            "/server/defaultRayImage",
        ),
        (
            json!({"server": {"clusterNetworkPolicy": {"extraIngress": [{"peers": []}]}}}),
            "/server/clusterNetworkPolicy/extraIngress/0",
        ),
        (
            json!({"server": {"rayAuth": {"enabled": "yes"}}}),
            "/server/rayAuth/enabled",
        ),
        (
            json!({"audit": {"retention": {"olderThan": "3 months"}}}),
            "/audit/retention/olderThan",
        ),
        (
            json!({"audit": {"retention": {"batchSize": 0}}}),
            "/audit/retention/batchSize",
        ),
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
        "batch/v1/CronJob",
        "batch/v1/Job",
        "gateway.networking.k8s.io/v1/GRPCRoute",
        "gateway.networking.k8s.io/v1/HTTPRoute",
        "monitoring.coreos.com/v1/PrometheusRule",
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
fn the_deployment_is_probed_drains_and_rolls_on_config_changes() {
    let documents = static_documents("deployment.yaml");
    let deployment = object(&documents, "Deployment");
    let spec = &deployment["spec"];
    assert_eq!(spec["strategy"]["type"], "RollingUpdate");
    assert_eq!(spec["strategy"]["rollingUpdate"]["maxUnavailable"], 0);
    let pod = &spec["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(container["args"][0], "serve");
    // Startup and readiness on /readyz (503 only while starting or
    // draining), liveness on /healthz (whatever the dependencies do).
    assert_eq!(
        container["startupProbe"]["httpGet"],
        json!({"path": "/readyz", "port": "ops"})
    );
    assert_eq!(
        container["readinessProbe"]["httpGet"],
        json!({"path": "/readyz", "port": "ops"})
    );
    assert_eq!(
        container["livenessProbe"]["httpGet"],
        json!({"path": "/healthz", "port": "ops"})
    );
    let values = defaults();
    assert!(
        int(&values, "probes.startupPeriodSeconds") * int(&values, "probes.startupFailureThreshold") >= 60,
        "a minute at least for the watch cache's first sync"
    );
    // The server drains by itself: no preStop (the image has no `sleep`).
    assert!(container.get("lifecycle").is_none(), "no preStop hook");
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
    assert!(
        !text.contains("namespaces-configmap.yaml") && !text.contains("ray-auth-secret.yaml"),
        "adding a namespace must not roll the pods, nor a key drawn at render time"
    );
    let mounts = container["volumeMounts"].as_array().expect("volumeMounts");
    let mount = |name: &str| {
        mounts
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("the {name} volume is mounted"))
    };
    // Directories, not subPaths: a subPath mount never sees ConfigMap or
    // Secret updates (the mapping's reload, a rotated database password).
    for (name, path) in [
        ("teams", "/etc/krayne/teams"),
        ("database", "/etc/krayne/database"),
        ("namespaces", "/etc/krayne/namespaces"),
        ("ray-auth", "/etc/krayne/ray-auth"),
    ] {
        assert!(mount(name).get("subPath").is_none(), "{name}: no subPath");
        assert_eq!(mount(name)["mountPath"], path);
        assert_eq!(mount(name)["readOnly"], true);
    }
    let volumes = pod["volumes"].as_array().expect("volumes");
    let database = volumes
        .iter()
        .find(|v| v["name"] == "database")
        .expect("database volume");
    assert_eq!(database["secret"]["items"][0]["path"], "url");
    assert!(
        volumes.iter().any(|v| v["name"] == "database-ca"),
        "the database's CA can be mounted"
    );
}

/// terminationGracePeriodSeconds leaves room for the drain: the delay,
/// then the grace, then a margin for the audit rows.
#[test]
fn the_grace_period_exceeds_the_drain() {
    let text = chart::read("templates/deployment.yaml");
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("terminationGracePeriodSeconds:"))
        .expect("terminationGracePeriodSeconds");
    let actions = template_actions(line);
    let words: Vec<&str> = actions.first().expect("computed").split_whitespace().collect();
    assert_eq!(
        words.get(..3),
        Some(
            &[
                "add",
                ".Values.server.shutdownDelaySeconds",
                ".Values.server.shutdownGraceSeconds"
            ][..]
        ),
        "{line}"
    );
    let margin: i64 = words.get(3).and_then(|m| m.parse().ok()).expect("a margin");
    assert!(margin >= 5, "{line}");
    for values in [defaults(), all_features()] {
        let delay = int(&values, "server.shutdownDelaySeconds");
        let grace = int(&values, "server.shutdownGraceSeconds");
        assert!(delay > 0, "endpoints need time to stop sending new connections");
        let period = delay + grace + margin;
        assert!(
            period >= delay + grace + 5,
            "{period} s leaves no room after the delay ({delay} s) and grace ({grace} s)"
        );
    }
    assert!(
        !chart::read("templates/deployment.yaml").contains("preStop:"),
        "the server waits itself; distroless has no sleep"
    );
}

/// The pods and containers are hardened by default (values the platform
/// may override key by key), and the migration Job shares the settings.
#[test]
fn pods_are_hardened_by_default_and_the_migration_job_too() {
    let values = defaults();
    let pod = &values["podSecurityContext"];
    assert_eq!(pod["runAsNonRoot"], true);
    assert_eq!(pod["runAsUser"], 65532);
    assert_eq!(pod["runAsGroup"], 65532);
    assert_eq!(pod["seccompProfile"]["type"], "RuntimeDefault");
    let container = &values["containerSecurityContext"];
    assert_eq!(container["readOnlyRootFilesystem"], true);
    assert_eq!(container["allowPrivilegeEscalation"], false);
    assert_eq!(container["runAsNonRoot"], true);
    assert_eq!(container["privileged"], false);
    assert_eq!(container["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(container["seccompProfile"]["type"], "RuntimeDefault");
    let helpers = chart::read("templates/_helpers.tpl");
    assert!(helpers.contains("toYaml .Values.podSecurityContext"));
    assert!(helpers.contains("toYaml .Values.containerSecurityContext"));
    for template in ["deployment.yaml", "migrations.yaml", "audit-retention.yaml"] {
        let text = chart::read(&format!("templates/{template}"));
        for helper in [
            "include \"krayne.podSecurityContext\"",
            "include \"krayne.containerSecurityContext\"",
            "include \"krayne.image\"",
        ] {
            assert!(text.contains(helper), "{template} uses {helper}");
        }
        for document in static_documents(template) {
            let pod = &document["spec"]["template"]["spec"];
            if let Some(containers) = pod["containers"].as_array() {
                assert!(pod.get("securityContext").is_some(), "{template}: pod securityContext");
                for c in containers {
                    assert!(
                        c.get("securityContext").is_some(),
                        "{template}: container securityContext"
                    );
                }
            }
        }
    }
}

#[test]
fn migrations_run_as_a_hook_job_that_needs_nothing_the_release_makes() {
    let documents = static_documents("migrations.yaml");
    let job = object(&documents, "Job");
    let annotations = &job["metadata"]["annotations"];
    assert_eq!(annotations["helm.sh/hook"], "pre-install,pre-upgrade");
    assert_eq!(
        annotations["helm.sh/hook-delete-policy"],
        "before-hook-creation,hook-succeeded"
    );
    // A Secret the chart makes for the Job is a hook too, made first.
    let secret = object(&documents, "Secret");
    assert_eq!(
        secret["metadata"]["annotations"]["helm.sh/hook"],
        "pre-install,pre-upgrade"
    );
    assert_eq!(
        secret["metadata"]["annotations"]["helm.sh/hook-delete-policy"],
        "before-hook-creation,hook-succeeded"
    );
    assert!(
        hook_weight(secret) < hook_weight(job),
        "the Secret exists before the Job"
    );
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(pod["automountServiceAccountToken"], false);
    let container = &pod["containers"][0];
    assert_eq!(container["args"], json!(["migrate"]));
    assert!(
        container.get("envFrom").is_none(),
        "the settings ConfigMap does not exist yet when the hook runs"
    );
    let text = chart::read("templates/migrations.yaml");
    for made_by_the_release in [
        "include \"krayne.serviceAccountName\"",
        "include \"krayne.databaseSecret\"",
        "configMapRef",
        "include \"krayne.selectorLabels\"",
    ] {
        assert!(
            !text.contains(made_by_the_release),
            "the hook Job must not depend on {made_by_the_release}"
        );
    }
    assert!(text.contains("include \"krayne.migrationsPodLabels\""));
    let helpers = chart::read("templates/_helpers.tpl");
    assert!(
        helpers.contains("app.kubernetes.io/name: {{ include \"krayne.name\" . }}-migrate"),
        "the Job's pods are not selected by the API's Service, PDB or policy"
    );
    // The Job speaks `krayne-server migrate`'s environment.
    let used = krayne_variables(&text);
    let known = server_env("migrate");
    let unknown: Vec<_> = used.difference(&known).collect();
    assert!(unknown.is_empty(), "not `migrate` variables: {unknown:?}");
    for required in [
        "KRAYNE_DATABASE_URL",
        "KRAYNE_DATABASE_CA_FILE",
        "KRAYNE_MIGRATE_GRANT_TO",
    ] {
        assert!(used.contains(required), "{required}");
    }
    // And the server leaves migrations to it.
    let settings = chart::read("templates/configmap.yaml");
    assert!(settings.contains("KRAYNE_MIGRATE_ON_START: {{ not .Values.migrations.enabled | quote }}"));
}

/// Nothing is generated at render time (GitOps tools render without a
/// cluster: `lookup` gives nothing there, and random values change with
/// every sync) — except the Ray auth key (issue 55), drawn once when no
/// `server.rayAuth.existingSecret` is given, kept with `lookup` and
/// `helm.sh/resource-policy: keep`, in a template of its own.
#[test]
fn templates_generate_nothing_at_render_time() {
    const FORBIDDEN: [&str; 13] = [
        "lookup",
        "randAlphaNum",
        "randAlpha",
        "randNumeric",
        "randAscii",
        "randBytes",
        "randInt",
        "uuidv4",
        "genPrivateKey",
        "genCA",
        "genSelfSignedCert",
        "genSignedCert",
        "now",
    ];
    const RAY_AUTH: &str = "ray-auth-secret.yaml";
    let mut files = template_names();
    files.extend(["_helpers.tpl".to_owned(), "NOTES.txt".to_owned()]);
    let mut found = Vec::new();
    for file in files {
        for action in template_actions(&chart::read(&format!("templates/{file}"))) {
            let words: Vec<&str> = action
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .collect();
            let allowed: &[&str] = if file == RAY_AUTH {
                &["lookup", "randAlphaNum"]
            } else {
                &[]
            };
            if words.iter().any(|w| FORBIDDEN.contains(w) && !allowed.contains(w)) {
                found.push(format!("{file}: {{{{ {action} }}}}"));
            }
        }
    }
    assert_eq!(found, Vec::<String>::new());
    // The one exception: made only without an existing Secret, the stored
    // key kept on upgrades, the Secret left on uninstall.
    let ray_auth = chart::read(&format!("templates/{RAY_AUTH}"));
    assert!(
        ray_auth
            .starts_with("{{- if and .Values.server.rayAuth.enabled (not .Values.server.rayAuth.existingSecret) }}"),
        "{ray_auth}"
    );
    assert!(ray_auth.contains(r#"lookup "v1" "Secret" .Release.Namespace $name"#));
    let secret = object(&static_documents(RAY_AUTH), "Secret").clone();
    assert_eq!(secret["metadata"]["annotations"]["helm.sh/resource-policy"], "keep");
    assert_eq!(secret["data"]["key"], PLACEHOLDER);
    // Browser sessions need a secret given; without one they are off.
    let settings = chart::read("templates/configmap.yaml");
    assert!(settings.contains("{{- if include \"krayne.sessionsOn\" . }}\n  KRAYNE_SESSION_SECRET_FILE"));
}

/// The settings ConfigMap is the server's environment: every key is one of
/// `krayne-server serve`'s variables, and the team file is where the
/// Deployment mounts it.
#[test]
fn the_settings_configmap_speaks_the_servers_environment() {
    let known = server_env("serve");
    let text = chart::read("templates/configmap.yaml");
    let used = krayne_variables(&text);
    let unknown: Vec<_> = used.difference(&known).collect();
    assert!(unknown.is_empty(), "not server variables: {unknown:?}");
    for required in [
        "KRAYNE_TEAMS_FILE",
        "KRAYNE_LISTEN",
        "KRAYNE_OPS_LISTEN",
        "KRAYNE_JWT_ISSUER",
        "KRAYNE_DATABASE_URL_FILE",
        "KRAYNE_DATABASE_CA_FILE",
        "KRAYNE_MIGRATE_ON_START",
        "KRAYNE_SHUTDOWN_DELAY_SECONDS",
        "KRAYNE_SHUTDOWN_GRACE_SECONDS",
        "KRAYNE_ALLOW_HS256_WITH_JWKS",
        "KRAYNE_DEFAULT_RAY_IMAGE",
        "KRAYNE_DEFAULT_RAY_GPU_IMAGE",
        "KRAYNE_RAY_AUTH_KEY_FILE",
        "KRAYNE_CLUSTER_NETWORK_POLICY_EXTRA_INGRESS",
        "KRAYNE_CACHE_NAMESPACES_FILE",
        "KRAYNE_COMPANIONS_INTERVAL_SECONDS",
        "KRAYNE_RAYJOB_RETENTION_SECONDS",
    ] {
        assert!(used.contains(required), "{required}");
    }
    // The namespaces are a file of a ConfigMap outside the checksum, not a
    // setting: adding one must not roll the pods.
    assert!(
        !used.contains("KRAYNE_CACHE_NAMESPACES"),
        "KRAYNE_CACHE_NAMESPACES is in the checksummed ConfigMap"
    );
    let documents = static_documents("configmap.yaml");
    let data = &object(&documents, "ConfigMap")["data"];
    assert_eq!(data["KRAYNE_TEAMS_FILE"], "/etc/krayne/teams/teams.yaml");
    assert_eq!(data["KRAYNE_DATABASE_URL_FILE"], "/etc/krayne/database/url");
    assert_eq!(data["KRAYNE_DATABASE_CA_FILE"], "/etc/krayne/database-ca/ca.crt");
    assert_eq!(data["KRAYNE_RAY_AUTH_KEY_FILE"], "/etc/krayne/ray-auth/key");
    assert_eq!(
        data["KRAYNE_CACHE_NAMESPACES_FILE"],
        "/etc/krayne/namespaces/namespaces"
    );
    assert!(text.contains(
        "KRAYNE_CLUSTER_NETWORK_POLICY_EXTRA_INGRESS: {{ toJson .Values.server.clusterNetworkPolicy.extraIngress | quote }}"
    ));
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
    // The URL itself is only ever in a Secret, read as a mounted file
    // (re-read, so a rotated password needs no restart).
    assert!(
        data.get("KRAYNE_DATABASE_URL").is_none(),
        "no database URL in a ConfigMap"
    );
    let deployment = chart::read("templates/deployment.yaml");
    assert!(
        !krayne_variables(&deployment).contains("KRAYNE_DATABASE_URL"),
        "the server reads the URL from its file, not the environment"
    );
}

/// The API's Service carries REST and gRPC on one port and never the ops
/// port, which has a ClusterIP Service of its own that the ServiceMonitor
/// selects.
#[test]
fn the_api_and_ops_ports_have_services_of_their_own() {
    let documents = static_documents("service.yaml");
    let api = named(&documents, "Service", PLACEHOLDER);
    let ports = api["spec"]["ports"].as_array().expect("ports");
    assert_eq!(ports.len(), 1, "the API's Service has no ops port: {ports:?}");
    assert_eq!(ports[0]["name"], "grpc-http");
    assert_eq!(ports[0]["targetPort"], "api");
    assert_eq!(ports[0]["appProtocol"], "kubernetes.io/h2c");
    let ops = named(&documents, "Service", &format!("{PLACEHOLDER}-ops"));
    assert_eq!(
        ops["spec"]["type"], "ClusterIP",
        "never exposed, whatever service.type is"
    );
    let ports = ops["spec"]["ports"].as_array().expect("ports");
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0]["name"], "ops");
    assert_eq!(ports[0]["targetPort"], "ops");
    assert_eq!(ops["metadata"]["labels"]["app.kubernetes.io/component"], "ops");
    assert_ne!(api["metadata"]["labels"]["app.kubernetes.io/component"], "ops");
    let monitor = object(&static_documents("servicemonitor.yaml"), "ServiceMonitor").clone();
    assert_eq!(
        monitor["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"],
        "ops"
    );
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "ops");
}

/// The REST host, the gRPC host and the apps wildcard host each have an
/// Ingress (and a route) of their own, with their own annotations.
#[test]
fn each_kind_of_traffic_has_its_own_ingress_and_route() {
    let documents = static_documents("ingress.yaml");
    for (name, component) in [
        (PLACEHOLDER.to_owned(), "api"),
        (format!("{PLACEHOLDER}-grpc"), "grpc"),
        (format!("{PLACEHOLDER}-apps"), "apps"),
    ] {
        let ingress = named(&documents, "Ingress", &name);
        assert_eq!(ingress["metadata"]["labels"]["app.kubernetes.io/component"], component);
        let backend = &ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"];
        assert_eq!(backend["port"]["name"], "grpc-http", "{name}");
    }
    let text = chart::read("templates/ingress.yaml");
    for values in [".Values.ingress.api", ".Values.ingress.grpc", ".Values.ingress.apps"] {
        assert!(text.contains(values), "{values}");
    }
    assert!(text.contains(r#"(dict "ingress" . "role" "grpc")"#));
    // ingress-nginx defaults that keep uploads, tunnels and gRPC working.
    let helpers = chart::read("templates/_helpers.tpl");
    for default in [
        r#"nginx.ingress.kubernetes.io/backend-protocol: "GRPC""#,
        r#"nginx.ingress.kubernetes.io/proxy-body-size: "128m""#,
        r#"nginx.ingress.kubernetes.io/proxy-read-timeout: "3600""#,
        r#"nginx.ingress.kubernetes.io/proxy-send-timeout: "3600""#,
        r#"if eq .ingress.className "nginx""#,
    ] {
        assert!(helpers.contains(default), "{default}");
    }
    let routes = static_documents("gateway.yaml");
    assert_eq!(
        named(&routes, "HTTPRoute", PLACEHOLDER)["spec"]["rules"][0]["backendRefs"][0]["name"],
        PLACEHOLDER
    );
    assert!(named(&routes, "GRPCRoute", PLACEHOLDER)["spec"]["rules"].is_array());
    assert!(named(&routes, "HTTPRoute", &format!("{PLACEHOLDER}-apps"))["spec"]["hostnames"].is_array());
    // Behind an ingress without trusted proxies every client looks alike.
    let notes = chart::read("templates/NOTES.txt");
    assert!(notes.contains("(not .Values.server.trustedProxies)"));
    assert!(notes.contains("server.trustedProxies"));
}

/// Namespaced Roles by default; a ClusterRole with every rule only when
/// asked for, and the cache then watches every namespace.
#[test]
fn rbac_is_namespaced_unless_cluster_wide_is_chosen() {
    let rbac = chart::read("templates/rbac.yaml");
    assert!(rbac.contains("{{- if .Values.rbac.clusterWide }}\n  {{- $namespaced | nindent 2 }}"));
    assert!(rbac.contains("{{- if not .Values.rbac.clusterWide }}\n{{- range .Values.rbac.namespaces }}"));
    // The cache's namespaces (a ConfigMap of their own) only with Roles.
    let settings = chart::read("templates/configmap.yaml");
    assert!(settings.contains("{{- if include \"krayne.namespacesOn\" . }}\n"));
    let helpers = chart::read("templates/_helpers.tpl");
    assert!(helpers.contains("{{- if and (not .Values.rbac.clusterWide) .Values.rbac.namespaces }}true{{ end }}"));
    assert!(
        chart::read("templates/namespaces-configmap.yaml").starts_with("{{- if include \"krayne.namespacesOn\" . }}")
    );
    // Neither set: the chart stops and says what to choose.
    assert!(helpers.contains("{{- if and (not .Values.rbac.clusterWide) (not .Values.rbac.namespaces) }}"));
    assert_eq!(defaults()["rbac"]["clusterWide"], false);
}

#[test]
fn the_autoscaler_scales_down_slowly() {
    let documents = static_documents("hpa.yaml");
    let hpa = object(&documents, "HorizontalPodAutoscaler");
    let down = &hpa["spec"]["behavior"]["scaleDown"];
    assert_eq!(down["stabilizationWindowSeconds"], PLACEHOLDER);
    assert_eq!(down["policies"][0]["type"], "Pods");
    assert_eq!(down["selectPolicy"], "Min");
    let values = defaults();
    assert!(int(&values, "autoscaling.scaleDown.stabilizationWindowSeconds") >= 300);
    assert_eq!(int(&values, "autoscaling.scaleDown.pods"), 1);
    assert!(int(&values, "autoscaling.scaleDown.periodSeconds") >= 60);
    assert_eq!(defaults()["podDisruptionBudget"]["enabled"], true);
}

/// Every alert has a severity and a runbook link whose anchor is a heading
/// of docs/operations.md, and every metric the alerts use is documented
/// there.
#[test]
fn every_alert_links_to_its_runbook() {
    let operations = chart::repo_file("docs/operations.md");
    let anchors = markdown_anchors(&operations);
    let documents = static_documents("prometheusrule.yaml");
    let rule = object(&documents, "PrometheusRule");
    let mut alerts = BTreeSet::new();
    for group in rule["spec"]["groups"].as_array().expect("groups") {
        for alert in group["rules"].as_array().expect("rules") {
            let name = alert["alert"].as_str().expect("an alert name");
            assert!(alerts.insert(name.to_owned()), "{name} twice");
            assert!(alert["expr"].is_string(), "{name}: expr");
            assert!(
                matches!(alert["labels"]["severity"].as_str(), Some("critical" | "warning")),
                "{name}: severity"
            );
            let runbook = alert["annotations"]["runbook_url"].as_str().expect("runbook_url");
            let anchor = runbook
                .strip_prefix(&format!("{PLACEHOLDER}#"))
                .unwrap_or_else(|| panic!("{name}: runbook_url is runbookBaseUrl#anchor: {runbook}"));
            assert!(
                anchors.contains(anchor),
                "{name}: no heading #{anchor} in docs/operations.md"
            );
            assert!(operations.contains(name), "{name} is listed in docs/operations.md");
        }
    }
    for expected in [
        "KrayneAuditDatabaseDown",
        "KrayneKubernetesUnreachable",
        "KrayneAuditRowsDropped",
        "KrayneTeamMappingReloadFailed",
        "KrayneHighErrorRatio",
        "KrayneKubernetesRequestErrors",
        "KrayneWatchCacheNotSynced",
        "KrayneReplicaOOMKilled",
    ] {
        assert!(alerts.contains(expected), "{expected}");
    }
    for expected in ["KrayneAuditSchemaBehind", "KrayneAuditRetentionFailing"] {
        assert!(alerts.contains(expected), "{expected}");
    }
    for section in [
        "audit-schema-behind",
        "audit-retention-failing",
        "sizing",
        "audit-retention",
        "backup-and-restore",
        "restoring-in-order",
        "upgrades-between-chart-versions",
        "onboarding-a-team",
        "postgres-down",
        "api-server-slow-or-down",
        "a-replica-oom-killed",
        "a-bad-team-mapping",
        "audit-rows-dropped",
        "watch-cache-not-synced",
    ] {
        assert!(anchors.contains(section), "runbook section #{section}");
    }
    let text = chart::read("templates/prometheusrule.yaml");
    let metrics: BTreeSet<&str> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("krayne_") && w.len() > "krayne_".len())
        .map(|w| w.trim_end_matches("_sum").trim_end_matches("_count"))
        .collect();
    let undocumented: Vec<_> = metrics
        .iter()
        .filter(|m| !operations.contains(&format!("`{m}`")))
        .collect();
    assert!(undocumented.is_empty(), "not in docs/operations.md: {undocumented:?}");
    assert!(
        defaults()["prometheusRule"]["runbookBaseUrl"]
            .as_str()
            .is_some_and(|u| u.ends_with("docs/operations.md"))
    );
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
    assert!(
        dockerfile.contains("-p krayne-server --no-default-features"),
        "the image leaves the sandbox out"
    );
    // Base images are build arguments, so releases pin them by digest
    // (docs/operations.md, "Images and supply chain"); the image runs as
    // the distroless `nonroot` user the chart's securityContext names.
    assert!(dockerfile.contains("FROM ${BUILD_IMAGE} AS build"));
    assert!(dockerfile.contains("FROM ${RUNTIME_IMAGE} AS runtime"));
    assert!(dockerfile.contains("USER 65532:65532"));
    assert!(dockerfile.contains("--sbom=true --provenance=mode=max"));
    // Deploying by digest: it wins over the tag, for the server and the
    // migration Job alike (both use the helper).
    let helpers = chart::read("templates/_helpers.tpl");
    assert!(helpers.contains(r#"printf "%s@%s" .Values.image.repository .Values.image.digest"#));
    assert!(markdown_anchors(&chart::repo_file("docs/operations.md")).contains("images-and-supply-chain"));
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

/// Every `.rs` file under `dir`, concatenated.
fn rust_sources(dir: &std::path::Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            text.push_str(&rust_sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            text.push_str(&std::fs::read_to_string(&path).unwrap());
        }
    }
    text
}

/// The Grafana dashboard is valid JSON and shows only series the server
/// exports, each described in docs/operations.md.
#[test]
fn the_dashboard_shows_only_documented_series_the_server_exports() {
    let dashboard: Value = serde_json::from_str(&chart::read("files/dashboard.json")).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(panels.len() >= 10, "{} panels", panels.len());
    let operations = chart::repo_file("docs/operations.md");
    let server = rust_sources(&chart::chart_dir().join("../../server"));
    let mut series = BTreeSet::new();
    for panel in panels {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            assert!(
                expr.contains("$namespace"),
                "{}: not filtered by namespace: {expr}",
                panel["title"]
            );
            series.extend(
                expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .filter(|w| w.starts_with("krayne_") && w.len() > "krayne_".len())
                    .map(|w| w.trim_end_matches("_sum").trim_end_matches("_count").to_owned()),
            );
        }
    }
    for name in &series {
        assert!(
            operations.contains(&format!("`{name}`")),
            "{name} is not in docs/operations.md"
        );
        assert!(
            server.contains(&format!("\"{name}\"")),
            "{name} is exported by no server code"
        );
    }
    let template = chart::read("templates/dashboard.yaml");
    assert!(template.contains(".Files.Get \"files/dashboard.json\""), "{template}");
}

/// Issue 55, item 6: audit retention is a CronJob that prunes in batches
/// as the migration Job's (owner) role — the runtime role has no DELETE —
/// one run at a time, hardened like the other pods, speaking `krayne-server
/// audit prune`'s flags and environment.
#[test]
fn audit_retention_is_a_cronjob_that_prunes_in_batches_as_the_owner() {
    let values = defaults();
    let retention = &values["audit"]["retention"];
    assert_eq!(retention["enabled"], true);
    assert_eq!(retention["olderThan"], "90d");
    assert_eq!(int(&values, "audit.retention.batchSize"), 5000);
    assert_eq!(retention["schedule"], "17 3 * * *");
    let documents = static_documents("audit-retention.yaml");
    let cron = object(&documents, "CronJob");
    let spec = &cron["spec"];
    assert_eq!(spec["concurrencyPolicy"], "Forbid");
    assert_eq!(spec["jobTemplate"]["spec"]["backoffLimit"], PLACEHOLDER);
    assert_eq!(spec["jobTemplate"]["spec"]["activeDeadlineSeconds"], PLACEHOLDER);
    let pod = &spec["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert!(pod.get("securityContext").is_some(), "pod securityContext");
    let container = &pod["containers"][0];
    assert_eq!(
        container["args"],
        json!([
            "audit",
            "prune",
            "--older-than",
            PLACEHOLDER,
            "--batch-size",
            PLACEHOLDER
        ])
    );
    assert!(container.get("securityContext").is_some());
    assert!(container.get("resources").is_some());
    // The flags parse as the server's own.
    let parsed = <Cli as clap::Parser>::try_parse_from([
        "krayne-server",
        "audit",
        "prune",
        "--older-than",
        "90d",
        "--batch-size",
        "5000",
    ]);
    assert!(parsed.is_ok(), "{:?}", parsed.err().map(|e| e.to_string()));
    let text = chart::read("templates/audit-retention.yaml");
    assert!(
        text.contains("name: {{ printf \"%s-audit-retention\" (include \"krayne.fullname\" .) | trunc 52"),
        "a CronJob's name is at most 52 characters"
    );
    let used = krayne_variables(&text);
    let known = server_env_of(&["audit", "prune"]);
    let unknown: Vec<_> = used.difference(&known).collect();
    assert!(unknown.is_empty(), "not `audit prune` variables: {unknown:?}");
    for required in ["KRAYNE_DATABASE_URL", "KRAYNE_DATABASE_CA_FILE"] {
        assert!(used.contains(required), "{required}");
    }
    // The owner's URL: the migration Job's Secret first, never the
    // runtime role's when an owner is named.
    assert!(text.contains("include \"krayne.retentionSecret\""));
    let helpers = chart::read("templates/_helpers.tpl");
    assert!(
        helpers.contains(
            "{{- define \"krayne.retentionSecret\" -}}\n{{- if .Values.migrations.database.existingSecret }}"
        )
    );
    for made_for_the_server in [
        "include \"krayne.serviceAccountName\"",
        "configMapRef",
        "include \"krayne.selectorLabels\"",
    ] {
        assert!(!text.contains(made_for_the_server), "{made_for_the_server}");
    }
    assert!(text.contains("include \"krayne.retentionPodLabels\""));
}

/// Issue 55, item 4: the ClusterRole, ClusterRoleBinding and the Roles in
/// other namespaces carry the release's namespace in their names, so two
/// releases of one name in two namespaces do not collide (the Helm-engine
/// check renders two and compares every object).
#[test]
fn objects_outside_the_release_namespace_carry_it_in_their_name() {
    let helpers = chart::read("templates/_helpers.tpl");
    assert!(
        helpers
            .contains(r#"printf "%s-%s" .Release.Namespace (include "krayne.fullname" .) | trunc 63 | trimSuffix "-""#)
    );
    let rbac = chart::read("templates/rbac.yaml");
    let mut checked = 0;
    for document in rbac.split("\n---\n") {
        let kind = document.lines().find_map(|l| l.strip_prefix("kind: ")).unwrap_or("");
        let name = document
            .lines()
            .find_map(|l| l.trim_start().strip_prefix("name: "))
            .unwrap_or("");
        let elsewhere =
            matches!(kind, "ClusterRole" | "ClusterRoleBinding") || document.contains("\n  namespace: {{ . }}\n");
        if elsewhere {
            assert!(name.starts_with("{{ $global }}"), "{kind} {name}");
            checked += 1;
        }
    }
    assert!(checked >= 5, "{checked} objects outside the release's namespace");
    // The issuer's discovery documents, bound explicitly when
    // ServiceAccount tokens are trusted.
    assert!(rbac.contains("{{- if .Values.auth.serviceAccountTokens.enabled }}\n---\n"));
    assert!(rbac.contains("  name: system:service-account-issuer-discovery\n"));
}

/// Issue 55, items 1, 3 and 5: Ray's token auth on by default with its key
/// mounted as a directory; the default Ray image current and pinnable by
/// digest; the cache's namespaces in a ConfigMap of their own.
#[test]
fn ray_auth_default_image_and_namespaces_are_wired() {
    let values = defaults();
    assert_eq!(values["server"]["rayAuth"]["enabled"], true);
    assert_eq!(values["server"]["rayAuth"]["existingSecret"], "");
    assert_eq!(values["server"]["defaultRayImage"], "rayproject/ray:2.60.0-py312");
    assert_eq!(values["server"]["clusterNetworkPolicy"]["extraIngress"], json!([]));
    let production = production();
    assert!(
        production["server"]["defaultRayImage"]
            .as_str()
            .is_some_and(|i| i.starts_with("rayproject/ray:2.60.0-py312@sha256:")),
        "the production example pins Ray by digest"
    );
    assert!(
        production["server"]["defaultRayGpuImage"]
            .as_str()
            .is_some_and(|i| i.contains("@sha256:"))
    );
    let helpers = chart::read("templates/_helpers.tpl");
    assert!(
        helpers.contains(r#"(contains "@" .Values.server.defaultRayImage) (not .Values.server.defaultRayGpuImage)"#)
    );
    let settings = chart::read("templates/configmap.yaml");
    assert!(settings.contains("{{- if .Values.server.rayAuth.enabled }}"));
    let deployment = chart::read("templates/deployment.yaml");
    assert!(deployment.contains("secretName: {{ include \"krayne.rayAuthSecret\" . }}"));
    assert!(deployment.contains("name: {{ include \"krayne.namespacesConfigMap\" . }}"));
    let namespaces = object(&static_documents("namespaces-configmap.yaml"), "ConfigMap").clone();
    assert_eq!(namespaces["data"]["namespaces"], PLACEHOLDER);
    assert!(chart::read("templates/namespaces-configmap.yaml").contains(r#"(join "\n" .Values.rbac.namespaces)"#));
}

/// Issue 55, item 7: NOTES.txt warns of the choices that leave heads open
/// or act on clusters, and of a LoadBalancer serving plain HTTP.
#[test]
fn notes_warn_of_risky_choices() {
    let notes = chart::read("templates/NOTES.txt");
    for condition in [
        "{{- if not .Values.server.clusterNetworkPolicy.enabled }}",
        "{{- if not .Values.server.rayAuth.enabled }}",
        r#"{{- if eq .Values.server.lifecycle.mode "act" }}"#,
        r#"{{- if eq .Values.service.type "LoadBalancer" }}"#,
    ] {
        assert!(notes.contains(condition), "{condition}");
    }
    // And values.yaml no longer says the reaper does not act.
    assert!(!chart::read("values.yaml").contains("does not act on them"));
}
