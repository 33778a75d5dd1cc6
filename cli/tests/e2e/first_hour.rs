//! Issue 56: what a new user and a Krayne user tripped over in their first
//! hour, each through the binary.

use krayne_tests::Env;

use crate::support::Krayne;

/// Item 8: the natural forms work — `jobs NAME` lists, `scale --workers`
/// scales a cluster's only group — and a guess that cannot be taken names
/// the real choices.
#[tokio::test]
async fn natural_forms_work_and_wrong_guesses_name_the_choices() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    k.run(&["create", "one", "-n", "ml-team"]).await.code(0);
    let listed = k.run(&["jobs", "list", "one", "-n", "ml-team"]).await.code(0).stdout();
    let natural = k.run(&["jobs", "one", "-n", "ml-team"]).await.code(0).stdout();
    assert_eq!(natural, listed);
    let bare = k.run(&["jobs"]).await.code(2);
    assert!(
        bare.stderr().contains("`krayne jobs NAME` lists its jobs"),
        "{}",
        bare.stderr()
    );

    let scaled = k
        .run(&["scale", "one", "-n", "ml-team", "--workers", "2"])
        .await
        .code(0);
    assert!(scaled.stderr().contains("group worker scaled"), "{}", scaled.stderr());
    let got = k.run(&["get", "one", "-n", "ml-team", "-o", "json"]).await.json();
    assert_eq!(got["num_workers"], 2, "{got}");

    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        file.path(),
        "name: two\nworker_groups:\n  - {name: cpu, replicas: 1}\n  - {name: gpu, replicas: 0}\n",
    )
    .unwrap();
    let path = file.path().to_str().unwrap();
    k.run(&["create", "-f", path, "-n", "ml-team", "--no-wait"])
        .await
        .code(0);
    let unnamed = k.run(&["scale", "two", "-n", "ml-team", "-r", "2"]).await.code(2);
    assert!(
        unnamed
            .stderr()
            .contains("cluster two has 2 worker groups (cpu, gpu): name one with -g GROUP"),
        "{}",
        unnamed.stderr()
    );
    let guessed = k
        .run(&["scale", "two", "-n", "ml-team", "-g", "worker", "-r", "2"])
        .await
        .code(2);
    assert!(
        guessed
            .stderr()
            .contains("no worker group \"worker\" in this cluster: its worker groups are \"cpu\", \"gpu\""),
        "{}",
        guessed.stderr()
    );
}

/// Item 9: typos in nested fields say what they meant and that `--strict`
/// exists; under `--strict` the dry run fails (exit 2) naming each.
#[tokio::test]
async fn typos_say_what_they_meant_and_strict_makes_a_dry_run_fail() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        file.path(),
        "name: typo\nhead: {cpu: 4}\nworker_groups:\n  - {name: worker, replica: 2, gpu: 1}\n",
    )
    .unwrap();
    let path = file.path().to_str().unwrap();
    let warned = k
        .run(&["create", "-f", path, "-n", "ml-team", "--dry-run"])
        .await
        .code(0);
    let err = warned.stderr();
    for line in [
        "Warning: head.cpu: unknown field, ignored (did you mean `cpus`?)",
        "Warning: worker_groups[0].replica: unknown field, ignored (did you mean `replicas`?)",
        "Warning: worker_groups[0].gpu: unknown field, ignored (did you mean `gpus`?)",
        "hint: --strict refuses these (exit 2)",
        "dry run: ml-team/typo is valid with the 3 warnings above",
    ] {
        assert!(err.contains(line), "{line}: {err}");
    }
    let strict = k
        .run(&["create", "-f", path, "-n", "ml-team", "--dry-run", "--strict"])
        .await
        .code(2);
    let err = strict.stderr();
    assert!(
        err.contains("worker_groups[0].replica: unknown field (did you mean `replicas`?)"),
        "{err}"
    );
    assert!(err.contains("head.cpu: unknown field (did you mean `cpus`?)"), "{err}");
    assert!(strict.stdout().is_empty());
    let both = k
        .run(&["create", "-f", path, "--strict", "--field-validation", "warn"])
        .await
        .code(2);
    assert!(both.stderr().contains("cannot be used with"), "{}", both.stderr());
}

/// Item 10: a quota refusal says what the cluster and the namespace would
/// hold, not only the increase.
#[tokio::test]
async fn a_quota_refusal_says_what_the_cluster_and_namespace_would_hold() {
    let env = Env::start_with(krayne_tests::EnvOptions {
        teams: format!("{}quotas:\n  ml-team: {{ gpus: 8 }}\n", krayne_tests::TEAMS),
        ..krayne_tests::EnvOptions::default()
    })
    .await;
    let k = Krayne::new(&env, &env.alice());
    k.run(&[
        "create",
        "big",
        "-n",
        "ml-team",
        "--no-wait",
        "--no-autoscaling",
        "--workers",
        "3",
        "--gpus-per-worker",
        "1",
    ])
    .await
    .code(0);
    let refused = k
        .run(&["scale", "big", "-n", "ml-team", "--workers", "10"])
        .await
        .code(1);
    assert!(
        refused.stderr().contains(
            "quota exceeded in namespace ml-team: gpus: the cluster would hold 10 (7 more), the namespace 10 of its limit 8 (3 in use)"
        ),
        "{}",
        refused.stderr()
    );
}

/// Item 11: a service the cluster was created without is said to be off,
/// with how clusters get it, not "not found".
#[tokio::test]
async fn opening_a_service_the_cluster_lacks_says_it_is_off() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    k.run(&["create", "lean", "-n", "ml-team", "--set", "services.code_server=false"])
        .await
        .code(0);
    let refused = k.run(&["open", "lean", "code-server", "-n", "ml-team"]).await.code(1);
    assert!(
        refused.stderr().contains(
            "code-server is not enabled on this cluster (it has dashboard, client, notebook, ssh): clusters have it \
             unless created with services.code_server: false"
        ),
        "{}",
        refused.stderr()
    );
    let unknown = k.run(&["open", "lean", "jupyterlab", "-n", "ml-team"]).await.code(3);
    assert!(
        unknown.stderr().contains("service \"jupyterlab\" not found"),
        "{}",
        unknown.stderr()
    );
}

/// Item 12: `jobs logs -f` ends as `submit` does (the status, exit 1 for a
/// failed job); list and get spell a status alike (Ray's); suspending a
/// cluster with jobs says their history goes with the head.
#[tokio::test]
async fn jobs_end_spell_and_warn_alike() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    k.run(&["create", "jobby", "-n", "ml-team"]).await.code(0);
    let dir = tempfile::tempdir().unwrap();
    let wd = dir.path().to_str().unwrap();
    let ns = ["-n", "ml-team"];
    let submit = |id: &'static str, line: &'static str| {
        let k = &k;
        async move {
            let args = [
                "submit",
                "jobby",
                "-n",
                "ml-team",
                "--working-dir",
                wd,
                "--submission-id",
                id,
                "--no-wait",
            ];
            k.run(&[&args[..], &["--", "sh", "-c", line]].concat()).await.code(0);
        }
    };
    submit("fails", "echo about-to-fail; exit 3").await;
    submit("works", "echo fine").await;

    let failed = k
        .run(&[&["jobs", "logs", "jobby", "fails", "-f"][..], &ns].concat())
        .await
        .code(1);
    assert!(failed.stdout().contains("about-to-fail"), "{}", failed.stdout());
    assert!(
        failed.stderr().contains("error: job 'fails' FAILED: "),
        "{}",
        failed.stderr()
    );
    let worked = k
        .run(&[&["jobs", "logs", "jobby", "works", "-f"][..], &ns].concat())
        .await
        .code(0);
    assert!(worked.stderr().contains("job 'works' succeeded"), "{}", worked.stderr());

    let listed = k.run(&[&["jobs", "jobby"][..], &ns].concat()).await.code(0).stdout();
    let got = k
        .run(&[&["jobs", "get", "jobby", "fails"][..], &ns].concat())
        .await
        .code(0)
        .stdout();
    assert!(listed.contains("FAILED") && listed.contains("SUCCEEDED"), "{listed}");
    assert!(
        !listed.contains("failed") && !listed.contains("succeeded"),
        "one spelling: {listed}"
    );
    assert!(got.contains("FAILED"), "{got}");

    let suspended = k.run(&[&["suspend", "jobby"][..], &ns].concat()).await.code(0);
    assert!(
        suspended
            .stderr()
            .contains("Warning: cluster jobby has 2 Ray jobs: suspending deletes its head, and Ray's job history and logs go with it"),
        "{}",
        suspended.stderr()
    );
}

/// Item 13: what docs/cli.md says of the namespace without `-n` is what
/// the binary does, in its words; docs/sandbox.md says whom the head's
/// SSH runs commands as, and that it gives a terminal.
#[tokio::test]
async fn the_docs_say_what_the_binary_does_about_namespaces_and_the_sandboxs_ssh() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    let run = k.run(&["get"]).await.code(0);
    let said = run.stderr();
    let reason = said
        .lines()
        .find_map(|l| l.strip_prefix("Namespace: ml-team ("))
        .and_then(|r| r.split(';').next())
        .unwrap_or_else(|| panic!("the binary says which namespace: {said}"));
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // Words as a reader sees them, whatever the line breaks.
    let flat = |text: String| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let cli = flat(std::fs::read_to_string(root.join("docs/cli.md")).unwrap());
    assert!(cli.contains(reason), "docs/cli.md names the binary's reason {reason:?}");
    assert!(cli.contains("never falls back to `default` by itself"));
    assert!(!cli.contains("used when `-n` is not given; else `default`"));
    let sandbox = flat(std::fs::read_to_string(root.join("docs/sandbox.md")).unwrap());
    assert!(sandbox.contains("as `nobody` when the sandbox runs as root"));
    assert!(sandbox.contains("gets a pseudo-terminal"));
    assert!(!sandbox.contains("a pty request is refused"));
}

/// Item 18: `create` ends with the cluster's addresses, `submit --no-wait`
/// with the commands that follow the job, and the "Coming from Krayne"
/// table gives the exit code the binary gives for each case the issue met.
#[tokio::test]
async fn create_lists_addresses_submit_says_what_next_and_the_exit_codes_are_documented() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    let created = k.run(&["create", "addr", "-n", "ml-team"]).await.code(0).stdout();
    for part in [
        "SERVICE",
        "OPEN IT WITH",
        "/v1/namespaces/ml-team/clusters/addr/services/dashboard/proxy/",
        "krayne open addr -n ml-team",
        "krayne open addr notebook -n ml-team",
        "krayne ssh addr -n ml-team",
    ] {
        assert!(created.contains(part), "{part}: {created}");
    }
    let json = k.run(&["create", "addr2", "-n", "ml-team", "-o", "json"]).await.json();
    assert_eq!(json["name"], "addr2", "-o json is the cluster alone");

    let dir = tempfile::tempdir().unwrap();
    let wd = dir.path().to_str().unwrap();
    let submitted = k
        .run(&[
            "submit",
            "addr",
            "-n",
            "ml-team",
            "--working-dir",
            wd,
            "--submission-id",
            "later",
            "--no-wait",
            "--",
            "true",
        ])
        .await
        .code(0);
    assert_eq!(submitted.stdout().trim(), "later");
    for next in [
        "krayne jobs logs addr later -f -n ml-team",
        "krayne jobs get addr later -n ml-team",
        "krayne jobs stop addr later -n ml-team",
    ] {
        assert!(submitted.stderr().contains(next), "{next}: {}", submitted.stderr());
    }

    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let docs = std::fs::read_to_string(root.join("docs/cli.md")).unwrap();
    let cases: [(&[&str], i32, &str); 4] = [
        (
            &["get", "missing", "-n", "ml-team"],
            3,
            "| the cluster (or job, service) does not exist | 1 | 3 |",
        ),
        (
            &["get", "-n", "default"],
            4,
            "| `get -n NS` where you have no role | 0, an empty table | 4,",
        ),
        (
            &[
                "create",
                "slow",
                "-n",
                "ml-team",
                "--set",
                "head.cpus=64",
                "--timeout",
                "1",
            ],
            6,
            "| `create` still not ready after `--timeout` | 0 | 6,",
        ),
        (
            &["create", "addr", "-n", "ml-team", "--no-wait"],
            7,
            "| `create` of a name that exists | 1 | 7 |",
        ),
    ];
    for (args, code, row) in cases {
        k.run(args).await.code(code);
        assert!(docs.contains(row), "docs/cli.md lacks {row:?}");
    }
}

/// Item 19: the small ones, through the binary.
#[tokio::test]
async fn the_small_ones() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    let version = k.run(&["--version"]).await.code(0).stdout();
    assert_eq!(version.trim(), "krayne 0.1.0 (krayne-cli, Rust; replaces Krayne 0.3.x)");

    let help = k.run(&["get", "--help"]).await.code(0).stdout();
    let (own, global) = help.split_once("Global options:").expect("a heading of their own");
    assert!(own.contains("--namespace") && !own.contains("--server"), "{help}");
    assert!(global.contains("--server") && global.contains("--token"), "{help}");
    let login = k.run(&["login", "--help"]).await.code(0).stdout();
    assert_eq!(login.matches("KRAYNE_LOGIN_CLIENT_SECRET").count(), 1, "{login}");

    k.run(&["create", "nap", "-n", "ml-team", "--workers", "2", "--no-autoscaling"])
        .await
        .code(0);
    k.run(&["suspend", "nap", "-n", "ml-team"]).await.code(0);
    for _ in 0..100 {
        let got = k.run(&["get", "nap", "-n", "ml-team", "-o", "json"]).await.json();
        if got["status"] == "suspended" {
            assert_eq!(got["ready_workers"], 0, "a suspended cluster has no workers: {got}");
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let wd = dir.path().to_str().unwrap();
    let refused = k
        .run(&["submit", "nap", "-n", "ml-team", "--working-dir", wd, "--", "true"])
        .await
        .code(1);
    assert!(
        refused
            .stderr()
            .contains("It is suspended: `krayne resume nap -n ml-team --wait` first."),
        "{}",
        refused.stderr()
    );
}
