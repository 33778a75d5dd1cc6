//! Krayne config files: flags and `--set` over the file, dry runs, and the
//! same cluster as REST creates from the same file.

use std::path::PathBuf;

use krayne_tests::Env;
use serde_json::{Value, json};

use crate::support::Krayne;

fn reference(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/krayne-reference/configs")
        .join(name)
}

fn worker(manifest: &Value, i: usize) -> &Value {
    &manifest["spec"]["workerGroupSpecs"][i]
}

fn head_resources(manifest: &Value) -> &Value {
    &manifest["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
}

#[tokio::test]
async fn flags_override_the_file_and_set_overrides_flags() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.yaml");
    std::fs::write(
        &file,
        "name: from-file\nnamespace: ml-team\nhead: {cpus: 1, memory: 4Gi}\n\
         worker_groups:\n  - {name: cpu, replicas: 1, max_replicas: 2, gpus: 0}\n  - {name: extra, replicas: 1}\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();

    let plain = k
        .run(&["create", "--no-wait", "c", "-f", file, "--dry-run", "-o", "json"])
        .await
        .json();
    assert_eq!(
        plain["metadata"]["name"], "c",
        "the NAME argument replaces the file's name"
    );
    assert_eq!(
        plain["metadata"]["namespace"], "ml-team",
        "the file's namespace is used"
    );
    assert_eq!(worker(&plain, 0)["replicas"], 1);
    assert_eq!(head_resources(&plain)["cpu"], "1");

    // Issue 41: without NAME, the file's name.
    let named = k
        .run(&["create", "--no-wait", "-f", file, "--dry-run", "-o", "json"])
        .await
        .json();
    assert_eq!(named["metadata"]["name"], "from-file");
    let nameless = dir.path().join("nameless.yaml");
    std::fs::write(&nameless, "head: {cpus: 1}\n").unwrap();
    let refused = k
        .run(&["create", "--no-wait", "-f", nameless.to_str().unwrap(), "-n", "ml-team"])
        .await
        .code(2);
    assert!(
        refused.stderr().contains("has no `name:`; give the cluster's NAME"),
        "{}",
        refused.stderr()
    );

    let flagged = k
        .run(&[
            "create",
            "--no-wait",
            "c",
            "-f",
            file,
            "--workers",
            "3",
            "--max-workers",
            "4",
            "--gpus-per-worker",
            "1",
            "--cpus-in-head",
            "2",
            "--memory-in-head",
            "8Gi",
            "--no-autoscaling",
            "--dry-run",
            "-o",
            "json",
        ])
        .await
        .json();
    assert_eq!(
        worker(&flagged, 0)["groupName"],
        "cpu",
        "flags change the first group of the file"
    );
    assert_eq!(worker(&flagged, 0)["replicas"], 3);
    assert_eq!(worker(&flagged, 0)["maxReplicas"], 4);
    assert_eq!(
        worker(&flagged, 0)["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
        1
    );
    assert_eq!(worker(&flagged, 1)["groupName"], "extra", "other groups are kept");
    assert_eq!(head_resources(&flagged)["cpu"], "2");
    assert_eq!(head_resources(&flagged)["memory"], "8Gi");
    assert_ne!(flagged["spec"]["enableInTreeAutoscaling"], true, "--no-autoscaling");
    assert_eq!(plain["spec"]["enableInTreeAutoscaling"], true);

    let set = k
        .run(&[
            "create",
            "--no-wait",
            "c",
            "-f",
            file,
            "--workers",
            "3",
            "--set",
            "worker_groups[0].replicas=2",
            "--set",
            "worker_groups[1].name=renamed",
            "--set",
            "head.image=rayproject/ray:2.40.0",
            "--dry-run",
            "-o",
            "json",
        ])
        .await
        .json();
    assert_eq!(worker(&set, 0)["replicas"], 2, "--set wins over the flag");
    assert_eq!(worker(&set, 1)["groupName"], "renamed");
    assert_eq!(
        set["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"],
        "rayproject/ray:2.40.0"
    );

    let elsewhere = k
        .run(&[
            "create",
            "--no-wait",
            "c",
            "-f",
            file,
            "-n",
            "shared-data",
            "--dry-run",
            "-o",
            "json",
        ])
        .await
        .code(4);
    assert!(
        elsewhere.stderr().contains("editor role on namespace \"shared-data\""),
        "-n wins over the file"
    );
}

#[tokio::test]
async fn dry_run_prints_the_manifest_and_creates_nothing() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    let run = k
        .run(&["create", "--no-wait", "dry", "-n", "ml-team", "--dry-run"])
        .await
        .code(0);
    assert!(
        run.stdout().starts_with("apiVersion: ray.io/v1\n"),
        "YAML by default: {}",
        run.stdout()
    );
    assert!(run.stderr().contains("dry run"), "{}", run.stderr());
    k.run(&["get", "dry", "-n", "ml-team"]).await.code(3);
    // Nothing written in the namespace but the dry run (the server's own
    // Lease lives in its namespace, `default`).
    let writes: Vec<String> = env
        .sandbox
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.uri.contains("/namespaces/ml-team/") && !r.uri.contains("dryRun"))
        .map(|r| r.uri)
        .collect();
    assert!(writes.is_empty(), "{writes:?}");
}

#[tokio::test]
async fn a_file_with_errors_reports_its_paths() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    let bad = reference("91-error-unknown-top-level.yaml");
    let run = k
        .run(&["create", "--no-wait", "x", "-n", "ml-team", "-f", bad.to_str().unwrap()])
        .await
        .code(2);
    assert!(run.stderr().contains("unknown field"), "{}", run.stderr());
    let run = k
        .run(&["create", "--no-wait", "x", "-f", "/nonexistent/cluster.yaml"])
        .await
        .code(2);
    assert!(
        run.stderr().contains("cannot read /nonexistent/cluster.yaml"),
        "{}",
        run.stderr()
    );
}

#[tokio::test]
async fn a_krayne_file_creates_the_same_cluster_through_the_cli_and_rest() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    let rest = env.rest(&env.alice());
    for file in [
        "03-multi-worker-groups.yaml",
        "04-gpu-workers.yaml",
        "15-autoscaler-custom.yaml",
    ] {
        let path = reference(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let name = text
            .lines()
            .find_map(|l| l.strip_prefix("name: "))
            .unwrap()
            .trim()
            .to_owned();
        let via_cli = format!("{name}-cli");
        k.run(&[
            "create",
            "--no-wait",
            &via_cli,
            "-n",
            "ml-team",
            "-f",
            path.to_str().unwrap(),
        ])
        .await
        .code(0);
        let body: String = text
            .lines()
            .map(|l| match l.strip_prefix("name: ") {
                Some(_) => format!("name: {name}-rest\n"),
                None => format!("{l}\n"),
            })
            .collect();
        rest.post_yaml("/v1/namespaces/ml-team/clusters", &body)
            .await
            .expect(201);

        let cli = rest
            .get(&format!("/v1/namespaces/ml-team/clusters/{via_cli}/details"))
            .await
            .expect(200);
        let api = rest
            .get(&format!("/v1/namespaces/ml-team/clusters/{name}-rest/details"))
            .await
            .expect(200);
        for field in ["head", "worker_groups", "services", "ray_version"] {
            assert_eq!(cli.body[field], api.body[field], "{file}: {field}");
        }
        assert_eq!(
            cli.body["info"]["autoscaling_enabled"], api.body["info"]["autoscaling_enabled"],
            "{file}"
        );
        assert_ne!(cli.body["head"], json!(null));
    }
}

/// A file written for an older Krayne: an unknown key in a worker group, a
/// count and a flag as strings.
const LEGACY: &str = "name: legacy\nnamespace: ml-team\nworker_groups:\n  - name: cpu\n    replicas: \"2\"\n    \
                      accelerator: t4\nservices:\n  ssh: \"no\"\n";

#[tokio::test]
async fn field_validation_warns_on_stderr_refuses_when_strict_and_ignores_silently() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("legacy.yaml");
    std::fs::write(&file, LEGACY).unwrap();
    let file = file.to_str().unwrap();
    let warnings = [
        "Warning: worker_groups[0].accelerator: unknown field, ignored",
        "Warning: worker_groups[0].replicas: the string \"2\" read as 2",
        "Warning: services.ssh: the string \"no\" read as false",
    ];

    let warned = k
        .run(&["create", "--no-wait", "legacy", "-f", file, "--dry-run", "-o", "json"])
        .await;
    let stderr = warned.stderr();
    let manifest = warned.json();
    assert_eq!(worker(&manifest, 0)["replicas"], 2, "stdout is the manifest alone");
    let printed: Vec<&str> = stderr.lines().filter(|l| l.starts_with("Warning: ")).collect();
    assert_eq!(printed, warnings, "{stderr}");

    let strict = k
        .run(&[
            "create",
            "--no-wait",
            "legacy",
            "-f",
            file,
            "--dry-run",
            "--field-validation",
            "strict",
        ])
        .await
        .code(2);
    let stderr = strict.stderr();
    for path in [
        "worker_groups[0].accelerator",
        "worker_groups[0].replicas",
        "services.ssh",
    ] {
        assert!(stderr.contains(path), "{path} missing from: {stderr}");
    }
    assert!(strict.stdout().is_empty());

    let ignored = k
        .run(&[
            "create",
            "--no-wait",
            "legacy",
            "-f",
            file,
            "--field-validation",
            "ignore",
            "-o",
            "json",
        ])
        .await;
    let stderr = ignored.stderr();
    let created = ignored.json();
    assert!(!stderr.contains("Warning:"), "{stderr}");
    assert_eq!(created["name"], "legacy");

    let bad = k
        .run(&["create", "--no-wait", "other", "--field-validation", "lenient"])
        .await
        .code(2);
    assert!(bad.stderr().contains("strict, warn, ignore"), "{}", bad.stderr());
}

#[tokio::test]
async fn the_sdk_returns_the_warnings() {
    use krayne_client::{ClusterConfig, CreateOptions, proto::FieldValidation};
    let env = Env::start().await;
    let client = krayne_client::Client::builder(env.url())
        .token(env.alice())
        .connect()
        .await
        .unwrap();
    let config = ClusterConfig::from_yaml(LEGACY).unwrap();
    let dry = CreateOptions {
        dry_run: true,
        ..CreateOptions::default()
    };
    let warned = client.create_with(config.clone(), dry).await.unwrap();
    let fields: Vec<&str> = warned.warnings.iter().map(|w| w.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "worker_groups[0].accelerator",
            "worker_groups[0].replicas",
            "services.ssh"
        ]
    );
    let strict = CreateOptions {
        field_validation: FieldValidation::Strict,
        ..dry
    };
    let refused = client.create_with(config, strict).await.unwrap_err();
    assert_eq!(refused.code(), krayne_client::Code::InvalidArgument);
    assert_eq!(refused.violations().len(), 3, "{refused}");
}
