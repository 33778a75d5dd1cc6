//! Two sandboxes as two sites behind one server (docs/sites.md).

use krayne_server::sandbox::{Sandbox, SandboxOptions};

use crate::{Env, EnvOptions, TEAMS};

/// Two sites behind one server: `eu-1` is the Kubernetes the server runs against (heavier, a100);
/// `us-2` the second sandbox, through its own kubeconfig (h100). The
/// `other` team may use `us-2` alone. `quota` is ml-team's, when given;
/// `database_url` the audit database (a SQLite file when `None`); `extra`
/// more `serve` flags. Keep the
/// second sandbox and the folder (its kubeconfig) as long as the server.
///
/// # Panics
/// When a sandbox or the server cannot start.
pub async fn two_sites(
    quota: Option<&str>,
    database_url: Option<String>,
    extra: &[&str],
) -> (Env, Sandbox, tempfile::TempDir) {
    two_sites_tuned(quota, database_url, extra, |_| {}).await
}

/// [`two_sites`], with `tune` applied to both sandboxes' options (larger
/// nodes for a benchmark).
///
/// # Panics
/// When a sandbox or the server cannot start.
pub async fn two_sites_tuned(
    quota: Option<&str>,
    database_url: Option<String>,
    extra: &[&str],
    tune: impl Fn(&mut SandboxOptions),
) -> (Env, Sandbox, tempfile::TempDir) {
    let mut options = EnvOptions::default();
    tune(&mut options.sandbox);
    let mut second_options = EnvOptions::default().sandbox;
    tune(&mut second_options);
    let second = Sandbox::start(second_options).await.expect("second sandbox");
    second.add_krayne_pod().expect("krayne's pod");
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("us-2.kubeconfig");
    second.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let sites = dir.path().join("sites.yaml");
    std::fs::write(
        &sites,
        format!(
            "sites:\n  - name: eu-1\n    weight: 100\n    labels: {{ region: eu-west, gpu-types: [a100] }}\n  \
             - name: us-2\n    kubeconfig: {}\n    weight: 50\n    labels: {{ region: us-east, gpu-types: [h100, a100] }}\n",
            kubeconfig.display()
        ),
    )
    .expect("sites file");
    let teams = TEAMS.replace(
        "    namespaces: { other-team: editor }\n",
        "    namespaces: { other-team: editor }\n    sites: [us-2]\n",
    );
    let teams = match quota {
        Some(q) => format!("{teams}quotas:\n  ml-team: {q}\n"),
        None => teams,
    };
    let env = Env::start_with(EnvOptions {
        teams,
        database_url,
        server_args: vec![
            "--sites-file".into(),
            sites.to_str().expect("utf-8").to_owned(),
            "--rate-limit-per-second".into(),
            "0".into(),
        ]
        .into_iter()
        .chain(extra.iter().map(|a| (*a).to_owned()))
        .collect(),
        ..options
    })
    .await;
    (env, second, dir)
}
