//! `kubectl` works against the kubeconfig the sandbox writes.

use kube::api::PostParams;

use crate::{eventually, raycluster, rayclusters, start};

#[tokio::test]
async fn kubectl_gets_rayclusters_and_pods() {
    let Ok(kubectl) = which_kubectl() else {
        eprintln!("SKIPPED: kubectl is not installed, so `kubectl get` against the sandbox was not tried");
        return;
    };
    let (sb, client) = start().await;
    let rc = rayclusters(&client, "ml");
    rc.create(&PostParams::default(), &raycluster("name: kc\nnamespace: ml\n"))
        .await
        .unwrap();
    let dir = std::env::temp_dir().join(format!("krayne-kubectl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    sb.write_kubeconfig(&kubeconfig).unwrap();
    let output = eventually("kubectl to list the head pod", || {
        let kubectl = kubectl.clone();
        let kubeconfig = kubeconfig.clone();
        async move {
            let out = tokio::process::Command::new(&kubectl)
                .args([
                    "--kubeconfig",
                    kubeconfig.to_str().unwrap(),
                    "get",
                    "rayclusters,pods",
                    "-A",
                ])
                .env("HOME", std::env::temp_dir())
                .output()
                .await
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(
                out.status.success(),
                "kubectl failed: {}\n{stdout}",
                String::from_utf8_lossy(&out.stderr)
            );
            stdout.contains("kc-head-").then_some(stdout)
        }
    })
    .await;
    assert!(output.contains("raycluster.ray.io/kc"), "{output}");
    assert!(output.contains("ml"), "{output}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `kubectl logs` reads a pod's output (Ray's start lines) through the
/// sandbox's `pods/log`, and `kubectl auth can-i` is answered.
#[tokio::test]
async fn kubectl_logs_reads_a_heads_output() {
    let Ok(kubectl) = which_kubectl() else {
        eprintln!("SKIPPED: kubectl is not installed, so `kubectl logs` against the sandbox was not tried");
        return;
    };
    let (sb, client) = start().await;
    rayclusters(&client, "ml")
        .create(&PostParams::default(), &raycluster("name: kl\nnamespace: ml\n"))
        .await
        .unwrap();
    let (pod, _) = crate::standins::head(&client, "kl", None).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    sb.write_kubeconfig(&kubeconfig).unwrap();
    let out = tokio::process::Command::new(&kubectl)
        .args([
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "logs",
            "-n",
            "ml",
            &pod,
            "--tail",
            "2",
        ])
        .env("HOME", dir.path())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    assert!(stdout.contains("will now block forever"), "{stdout}");

    // `kubectl auth can-i` (a protobuf SelfSubjectAccessReview): yes,
    // unless the sandbox forbids it.
    sb.forbid("get", "pods/log");
    let can_i = |args: &'static [&'static str]| {
        let (kubectl, kubeconfig, home) = (kubectl.clone(), kubeconfig.clone(), dir.path().to_owned());
        async move {
            let mut all = vec!["--kubeconfig", kubeconfig.to_str().unwrap(), "auth", "can-i"];
            all.extend_from_slice(args);
            tokio::process::Command::new(&kubectl)
                .args(&all)
                .env("HOME", home)
                .output()
                .await
                .unwrap()
        }
    };
    let yes = can_i(&["get", "pods", "-n", "ml"]).await;
    assert_eq!(
        String::from_utf8_lossy(&yes.stdout).trim(),
        "yes",
        "{}",
        String::from_utf8_lossy(&yes.stderr)
    );
    let no = can_i(&["get", "pods", "--subresource", "log", "-n", "ml"]).await;
    let said = String::from_utf8_lossy(&no.stdout);
    assert!(said.starts_with("no - the sandbox forbids it"), "{said}");
    assert_eq!(no.status.code(), Some(1));
}

/// A SelfSubjectAccessReview (JSON) is answered: allowed, unless the
/// sandbox forbids that verb on that resource.
#[tokio::test]
async fn access_reviews_answer_what_the_sandbox_allows() {
    let (sb, _) = start().await;
    sb.forbid("get", "pods/log");
    let review = |resource: &str, sub: &str| {
        serde_json::json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"namespace": "ml", "verb": "get", "resource": resource, "subresource": sub}}})
    };
    let url = format!("{}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", sb.url());
    let http = reqwest::Client::new();
    let allowed: serde_json::Value = http
        .post(&url)
        .json(&review("pods", ""))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(allowed["status"]["allowed"], true, "{allowed}");
    let refused: serde_json::Value = http
        .post(&url)
        .json(&review("pods", "log"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(refused["status"]["allowed"], false, "{refused}");
}

fn which_kubectl() -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
        .ok_or(())
}
