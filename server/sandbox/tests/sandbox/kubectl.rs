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

fn which_kubectl() -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
        .ok_or(())
}
