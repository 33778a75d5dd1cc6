//! A client nobody here wrote: the official Kubernetes Python client
//! (PyPI `kubernetes`, pinned in `.ci/run`) reads every kind the sandbox
//! serves. Its models refuse nulls and missing required fields, so this is
//! a check against Kubernetes' own schema for what it reads.

use std::path::Path;

use kube::api::PostParams;
use serde_json::Value;

use crate::{eventually, raycluster, rayclusters, start};

/// A Python with the `kubernetes` package (`$PYTHON`, else `python3`);
/// `None` (the test skips) only outside CI.
#[allow(clippy::print_stderr, reason = "a skipped test says so")]
pub(crate) fn python_with_client() -> Option<String> {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let has_client = std::process::Command::new(&python)
        .args(["-c", "import kubernetes"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_client {
        assert!(
            std::env::var_os("CI").is_none(),
            "the kubernetes Python client must be installed in CI (.ci/run does it)"
        );
        eprintln!("SKIPPED: the kubernetes Python client is not installed");
    }
    has_client.then_some(python)
}

#[tokio::test]
async fn the_official_python_client_reads_every_kind() {
    let Some(python) = python_with_client() else { return };
    let (sb, client) = start().await;
    rayclusters(&client, "ml")
        .create(
            &PostParams::default(),
            &raycluster("name: py\nnamespace: ml\nworker_groups: [{name: cpu, replicas: 1}]\n"),
        )
        .await
        .unwrap();
    let dir = std::env::temp_dir().join(format!("krayne-python-client-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    sb.write_kubeconfig(&kubeconfig).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sandbox/k8s_python_client.py");
    let read = eventually("the head and worker running, read by the Python client", || {
        let (python, script, kubeconfig) = (python.clone(), script.clone(), kubeconfig.clone());
        async move {
            let out = tokio::process::Command::new(&python)
                .arg(&script)
                .arg(&kubeconfig)
                .output()
                .await
                .unwrap();
            assert!(
                out.status.success(),
                "the Python client failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let read: Value = serde_json::from_slice(&out.stdout).unwrap();
            (read["running"] == 2).then_some(read)
        }
    })
    .await;
    assert_eq!(read["rayclusters"], serde_json::json!(["py"]));
    assert!(read["namespaces"].as_array().unwrap().contains(&"ml".into()), "{read}");
    assert!(
        read["services"].as_array().unwrap().iter().any(|s| s == "py-head-svc"),
        "{read}"
    );
    assert!(read["events"].as_u64().unwrap() > 0, "{read}");
    let image_ids = read["image_ids"].as_array().unwrap();
    assert!(
        image_ids.iter().all(|i| i.as_str().unwrap().contains("@sha256:")),
        "running containers have pulled images: {read}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_official_python_client_port_forwards() {
    let Some(python) = python_with_client() else { return };
    let (sb, client) = start().await;
    rayclusters(&client, "ml")
        .create(&PostParams::default(), &raycluster("name: pypf\nnamespace: ml\n"))
        .await
        .unwrap();
    let (pod, _) = crate::standins::head(&client, "pypf", None).await;
    let dir = std::env::temp_dir().join(format!("krayne-python-pf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    sb.write_kubeconfig(&kubeconfig).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sandbox/k8s_python_portforward.py");
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        tokio::process::Command::new(&python)
            .arg(&script)
            .arg(&kubeconfig)
            .args(["ml", &pod])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Python port-forward within 120 s")
    .unwrap();
    assert!(
        out.status.success(),
        "the Python client failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(seen["banner"].as_str().unwrap().starts_with("SSH-2.0-"), "{seen}");
    assert_eq!(seen["echoed_bytes"], 10 * 1024 * 1024, "{seen}");
    assert_eq!(seen["echoed_sha256"], seen["sent_sha256"], "{seen}");
    assert!(seen["version"].as_str().unwrap().contains("\"ray_version\""), "{seen}");
    assert!(seen["notebook"].as_str().unwrap().contains("Jupyter"), "{seen}");
    assert!(seen["code_server"].as_str().unwrap().contains("code-server"), "{seen}");
    assert!(seen["ray_client"].as_str().unwrap().contains("ray client"), "{seen}");
    let _ = std::fs::remove_dir_all(&dir);
}
