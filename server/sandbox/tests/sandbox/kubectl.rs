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

/// `kubectl port-forward` reaches a head's dashboard: SPDY tunnelled
/// through a WebSocket (kubectl's first try since 1.31) and SPDY over an
/// HTTP upgrade (its fallback, forced here), several connections at once;
/// a port nothing serves is named on kubectl's stderr.
#[tokio::test]
async fn kubectl_port_forward_reaches_a_heads_dashboard() {
    let Ok(kubectl) = which_kubectl() else {
        eprintln!("SKIPPED: kubectl is not installed, so `kubectl port-forward` against the sandbox was not tried");
        return;
    };
    let (sb, client) = start().await;
    rayclusters(&client, "ml")
        .create(&PostParams::default(), &raycluster("name: pf\nnamespace: ml\n"))
        .await
        .unwrap();
    let (pod, _) = crate::standins::head(&client, "pf", None).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    sb.write_kubeconfig(&kubeconfig).unwrap();
    let http = reqwest::Client::new();
    for websockets in ["true", "false"] {
        let forward = PortForward::start(&kubectl, &kubeconfig, dir.path(), &pod, "8265", websockets).await;
        let url = format!("http://127.0.0.1:{}/api/version", forward.local_port);
        let answers = futures::future::join_all((0..4).map(|_| http.get(&url).send())).await;
        for answer in answers {
            let answer = answer.unwrap_or_else(|e| panic!("websockets={websockets}: {e}"));
            assert_eq!(answer.status(), 200);
            let version: serde_json::Value = answer.json().await.unwrap();
            assert_eq!(version["ray_commit"], "krayne-sandbox", "{version}");
        }
        // kubectl -v=4 says which way it went.
        let said = forward.stop().await;
        let tunnelled = said.contains("negotiated protocol: portforward.k8s.io");
        assert_eq!(tunnelled, websockets == "true", "websockets={websockets}:\n{said}");
    }

    let refused = PortForward::start(&kubectl, &kubeconfig, dir.path(), &pod, "9", "true").await;
    let _ = http
        .get(format!("http://127.0.0.1:{}/", refused.local_port))
        .send()
        .await;
    let stderr = refused.stop().await;
    assert!(stderr.contains("nothing listens on port 9"), "{stderr}");
}

/// A running `kubectl port-forward`, with the local port it chose.
struct PortForward {
    child: tokio::process::Child,
    local_port: u16,
}

impl PortForward {
    async fn start(
        kubectl: &std::path::Path,
        kubeconfig: &std::path::Path,
        home: &std::path::Path,
        pod: &str,
        port: &str,
        websockets: &str,
    ) -> Self {
        use tokio::io::AsyncBufReadExt as _;
        let mut child = tokio::process::Command::new(kubectl)
            .args([
                "--kubeconfig",
                kubeconfig.to_str().unwrap(),
                "-v=4",
                "port-forward",
                "-n",
                "ml",
            ])
            .args([format!("pod/{pod}"), format!(":{port}")])
            .env("HOME", home)
            .env("KUBECTL_PORT_FORWARD_WEBSOCKETS", websockets)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
            .await
            .expect("kubectl port-forward to say where it listens")
            .unwrap()
            .unwrap_or_default();
        // "Forwarding from 127.0.0.1:40123 -> 8265"
        let local_port = line
            .strip_prefix("Forwarding from 127.0.0.1:")
            .and_then(|rest| rest.split(' ').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("kubectl port-forward said {line:?}"));
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self { child, local_port }
    }

    /// Stops kubectl; what it wrote on stderr.
    async fn stop(mut self) -> String {
        use tokio::io::AsyncReadExt as _;
        let _ = self.child.start_kill();
        let mut stderr = String::new();
        if let Some(mut err) = self.child.stderr.take() {
            let _ = err.read_to_string(&mut stderr).await;
        }
        let _ = self.child.wait().await;
        stderr
    }
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

pub(crate) fn which_kubectl() -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
        .ok_or(())
}
