//! `krayne ssh` to a real OpenSSH server (issue 38): Debian's
//! `openssh-server` and `sudo` in the head's image (`.ci/run` unpacks
//! them), sshd started by the cluster's own rendered `postStart` script as
//! the Ray images' user with the script's options, in the pod's own
//! namespaces and files; `krayne ssh NAME -- COMMAND` runs on the head in
//! both upstream modes, and this machine's accounts and sshd are as they
//! were.

use std::{path::Path, time::Duration};

use krayne_tests::{
    Env, EnvOptions,
    heads::{RealDaemons, head_image},
};
use serde_json::json;

use crate::support::{Krayne, Run};

/// The files the script's `sudo passwd -d`, `ssh-keygen -A` and
/// `mkdir /run/sshd` would change, were they this machine's.
const MACHINE: [&str; 4] = ["/etc/passwd", "/etc/shadow", "/etc/group", "/etc/ssh"];

fn machine() -> Vec<(String, Option<Vec<u8>>)> {
    let mut seen = Vec::new();
    for path in MACHINE.iter().map(Path::new) {
        if path.is_dir() {
            let mut names: Vec<_> = std::fs::read_dir(path).unwrap().map(|e| e.unwrap().path()).collect();
            names.sort();
            seen.extend(
                names
                    .into_iter()
                    .map(|p| (p.display().to_string(), std::fs::read(&p).ok())),
            );
        } else {
            seen.push((path.display().to_string(), std::fs::read(path).ok()));
        }
    }
    seen.push(("/run/sshd".to_owned(), Path::new("/run/sshd").exists().then(Vec::new)));
    seen
}

/// `krayne ssh sshd -- ARGS…`, once sshd answers (it starts with the pod,
/// after ssh-keygen).
async fn krayne_ssh(krayne: &Krayne, args: &[&str]) -> Run {
    let mut command = vec![
        "ssh",
        "sshd",
        "-n",
        "ml-team",
        "--",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=10",
    ];
    command.extend_from_slice(args);
    let mut last = None;
    for _ in 0..60 {
        let run = krayne.run(&command).await;
        if run.0.status.success() {
            return run;
        }
        last = Some(run.stderr());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("krayne ssh never got in: {}", last.unwrap_or_default());
}

async fn krayne_ssh_runs_a_command_on_a_real_head(mode: &str) {
    let Some(image) = head_image() else {
        return;
    };
    let before = machine();
    let mut options = EnvOptions::with_args(&["--service-upstream", mode]);
    options.sandbox.real_daemons = Some(RealDaemons {
        path: Vec::new(),
        image: vec![image],
    });
    let env = Env::start_with(options).await;
    let rest = env.rest(&env.alice());
    rest.post(
        "/v1/namespaces/ml-team/clusters",
        &json!({"name": "sshd", "services": {"notebook": false, "code_server": false, "ssh": true}}),
    )
    .await
    .expect(201);
    rest.get("/v1/namespaces/ml-team/clusters/sshd/wait?timeout_seconds=60")
        .await
        .expect(200);
    let details = rest
        .get("/v1/namespaces/ml-team/clusters/sshd/details")
        .await
        .expect(200)
        .body;
    let head = details["pods"][0]["name"].as_str().unwrap().to_owned();

    let krayne = Krayne::new(&env, &env.alice());
    let on_head = krayne_ssh(&krayne, &["hostname; id -un; pwd"]).await;
    assert_eq!(on_head.lines(), [head.as_str(), "ray", "/home/ray"]);

    // Another user than the bootstrap let in is refused by sshd itself.
    let refused = krayne
        .run(&[
            "ssh",
            "sshd",
            "-n",
            "ml-team",
            "-l",
            "root",
            "--",
            "-o",
            "BatchMode=yes",
            "true",
        ])
        .await
        .code(255);
    assert!(refused.stderr().contains("Permission denied"), "{}", refused.stderr());

    // Bob's team has no access to ml-team: the tunnel under ssh is refused.
    let bob = Krayne::new(&env, &env.token("bob@example.com", &["other-team"]));
    let refused = bob
        .run(&["ssh", "sshd", "-n", "ml-team", "--", "-o", "BatchMode=yes", "true"])
        .await
        .code(255);
    assert!(
        refused
            .stderr()
            .contains(r#"bob@example.com needs the editor role on namespace "ml-team""#),
        "{}",
        refused.stderr()
    );

    assert!(
        before == machine(),
        "the head's script changed this machine's accounts or sshd"
    );
}

#[tokio::test]
async fn krayne_ssh_runs_a_command_on_a_real_head_through_port_forward() {
    krayne_ssh_runs_a_command_on_a_real_head("port-forward").await;
}

#[tokio::test]
async fn krayne_ssh_runs_a_command_on_a_real_head_direct() {
    krayne_ssh_runs_a_command_on_a_real_head("direct").await;
}
