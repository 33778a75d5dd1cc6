//! One clear line and a distinct exit code per kind of failure.

use krayne_tests::Env;

use crate::support::Krayne;

#[tokio::test]
async fn each_kind_of_failure_has_its_exit_code() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    k.run(&["create", "--no-wait", "taken", "-n", "ml-team"]).await.code(0);

    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["get", "missing", "-n", "ml-team"],
            3,
            "error: cluster \"missing\" not found",
        ),
        (
            &["describe", "x", "-n", "nowhere"],
            4,
            "error: alice@example.com needs the viewer role",
        ),
        (&["get", "-n", "other-team"], 4, "krayne whoami"),
        (
            &["create", "--no-wait", "taken", "-n", "ml-team"],
            7,
            "error: cluster \"taken\" already exists",
        ),
        (
            &[
                "create",
                "--no-wait",
                "bad",
                "-n",
                "ml-team",
                "--workers",
                "1",
                "--min-workers",
                "2",
            ],
            2,
            "worker_groups[0].min_replicas: must be <= replicas (1)",
        ),
        // A group the cluster lacks is a bad value, named with the ones it
        // has (issue 56; it was "not found", exit 3).
        (
            &["scale", "taken", "-n", "ml-team", "-g", "nope", "-r", "1"],
            2,
            "no worker group \"nope\" in this cluster: its worker group is \"worker\"",
        ),
        (&["get", "--bogus"], 2, "unexpected argument '--bogus'"),
        (&["scale", "taken", "-n", "ml-team"], 2, "required"),
        (
            &["create", "--no-wait", "x", "--set", "novalue"],
            2,
            "expected KEY=VALUE",
        ),
        (&["wait", "x", "--timeout", "soon"], 2, "not a duration"),
        // A negative count is krayne's usage error, not an option clap
        // suggests to escape with `--`.
        (
            &["create", "--no-wait", "x", "--workers", "-1"],
            2,
            "-1 is negative; a count is 0 or more",
        ),
        (&["scale", "taken", "-n", "ml-team", "-r", "-3"], 2, "-3 is negative"),
        (
            &["scale", "taken", "-n", "ml-team", "--max", "two"],
            2,
            "\"two\" is not a whole number",
        ),
        (
            &["ssh", "taken", "-n", "ml-team", "--user=-oProxyCommand=true"],
            2,
            "\"-oProxyCommand=true\" is not a user name",
        ),
    ];
    for (args, code, message) in cases {
        let run = k.run(args).await.code(*code);
        assert!(run.stderr().contains(message), "{args:?}: {}", run.stderr());
        assert!(run.stdout().is_empty(), "{args:?}: data on stdout: {}", run.stdout());
    }

    // Several field problems: one per line, under one error line.
    let run = k
        .run(&[
            "create",
            "--no-wait",
            "bad",
            "-n",
            "ml-team",
            "--set",
            "head.cpus=lots",
            "--set",
            "head.memory=much",
            "--dry-run",
        ])
        .await
        .code(2);
    let stderr = run.stderr();
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(lines[0].starts_with("error: "), "{stderr}");
    for field in ["head.cpus", "head.memory"] {
        assert!(
            lines.iter().any(|l| l.starts_with(&format!("  {field}: "))),
            "{field}: {stderr}"
        );
    }
    assert!(!stderr.contains("; "), "problems joined on one line: {stderr}");

    let anonymous = Krayne::new(&env, "not-a-jwt");
    let run = anonymous.run(&["get"]).await.code(4);
    assert!(run.stderr().contains("krayne login"), "{}", run.stderr());

    let down = k.bare();
    let run = down.run(&["--server", "http://127.0.0.1:1", "get"]).await.code(5);
    assert!(run.stderr().contains("Connection refused"), "{}", run.stderr());
    let run = down.run(&["get"]).await.code(2);
    assert!(run.stderr().contains("no server given"), "{}", run.stderr());
    // Something that is not krayne (here krayne's own ops port).
    let ops = format!("http://{}", env.server.ops);
    let run = down.run(&["--server", &ops, "get", "-n", "ml-team"]).await.code(5);
    assert!(
        run.stderr().contains("it is not a krayne server") && run.stderr().contains("--server"),
        "{}",
        run.stderr()
    );
    assert!(!run.stderr().contains("grpc-status header missing"), "{}", run.stderr());
    let run = down.run(&["--server", "localhost:8080", "get"]).await.code(2);
    assert!(run.stderr().contains("http://"), "{}", run.stderr());
}

/// Issue 41: with the server and token in the environment, a usage line
/// does not show `--server <URL> --token <JWT>` as if they were needed.
#[tokio::test]
async fn usage_lines_leave_out_what_the_environment_gave() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    for line in [&["scale"][..], &["ssh"], &["jobs", "logs"]] {
        let run = k.run(line).await.code(2);
        let usage = run.stderr();
        assert!(usage.contains("Usage: krayne"), "{usage}");
        assert!(!usage.contains("--server") && !usage.contains("--token"), "{usage}");
    }
    // The environment still counts.
    k.run(&["whoami"]).await.code(0);
}

#[tokio::test]
async fn a_wait_that_times_out_exits_6_naming_the_status() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    let run = k
        .run(&[
            "create",
            "stuck",
            "-n",
            "ml-team",
            "--set",
            "head.cpus=64",
            "--wait",
            "--timeout",
            "2",
        ])
        .await
        .code(6);
    assert!(run.stderr().contains("last status: unschedulable"), "{}", run.stderr());
    let said_ready = |l: &&str| l.contains("unschedulable") && l.contains("workers ready");
    assert!(!run.stderr().lines().any(|l| said_ready(&l)), "{}", run.stderr());
    assert!(run.stdout().is_empty());
}

/// Issue 56 item 2: a head that cannot get ready by itself (an image that
/// cannot be pulled, a crash loop) ends `create`'s wait at once (the
/// default 5 minutes are never waited out), naming why and where to look;
/// while the head is down no line counts its workers as ready.
#[tokio::test]
async fn create_stops_waiting_on_a_head_that_cannot_get_ready() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    let cases = [
        (
            "img",
            "rayproject/ray:doesnotexist",
            "cannot get ready: its head's image cannot be pulled (Back-off pulling image \"rayproject/ray:doesnotexist\")",
            "image-pull-error",
        ),
        (
            "crashy",
            "example.com/crash-loop:1",
            "cannot get ready: its head keeps crashing (3 restarts",
            "crash-loop",
        ),
    ];
    for (name, image, why, status) in cases {
        let image = format!("head.image={image}");
        let run = k
            .run(&["create", name, "-n", "ml-team", "--set", &image, "--timeout", "10m"])
            .await
            .code(1);
        let err = run.stderr();
        assert!(err.contains(&format!("error: cluster ml-team/{name} {why}")), "{err}");
        let hint = format!(
            "hint: `krayne describe {name} -n ml-team` shows its events, `krayne logs {name} -n ml-team` the head's log"
        );
        assert!(err.contains(&hint), "{err}");
        assert!(
            err.lines()
                .any(|l| l.contains(&format!("{status} (the head is not running)"))),
            "{err}"
        );
        assert!(
            !err.lines().any(|l| l.contains(status) && l.contains("workers ready")),
            "{err}"
        );
        assert!(run.stdout().is_empty());
    }
    // `krayne wait` says the same.
    let run = k.run(&["wait", "img", "-n", "ml-team"]).await.code(1);
    assert!(
        run.stderr().contains("its head's image cannot be pulled"),
        "{}",
        run.stderr()
    );
}

#[tokio::test]
async fn debug_adds_the_code_and_request_id() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    let plain = k.run(&["get", "missing", "-n", "ml-team"]).await.code(3);
    assert_eq!(plain.stderr().lines().count(), 1, "{}", plain.stderr());
    let debug = k.run(&["get", "missing", "-n", "ml-team", "--debug"]).await.code(3);
    assert!(debug.stderr().contains("code: NotFound"), "{}", debug.stderr());
    assert!(debug.stderr().contains("request id: "), "{}", debug.stderr());
}
