//! Login and the config file, delete confirmation, completions, version,
//! help.

use krayne_tests::Env;

use crate::support::Krayne;

#[tokio::test]
async fn login_writes_a_private_config_file_that_later_commands_use() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    let bare = k.bare();
    let config = bare.config_home().join("krayne").join("config.yaml");

    let run = bare
        .run(&["login", "--server", &env.url(), "--token", "wrong", "-n", "ml-team"])
        .await
        .code(4);
    assert!(run.stderr().contains("invalid token"), "{}", run.stderr());
    assert!(!config.exists(), "a rejected token is not saved");

    let run = bare
        .run(&[
            "login",
            "--server",
            &env.url(),
            "--token",
            &env.alice(),
            "-n",
            "ml-team",
        ])
        .await
        .code(0);
    assert!(
        run.stderr().contains("authenticated as alice@example.com"),
        "{}",
        run.stderr()
    );
    assert!(run.stdout().is_empty());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&config), 0o600);
        assert_eq!(mode(config.parent().unwrap()), 0o700);
    }
    let saved = std::fs::read_to_string(&config).unwrap();
    assert!(
        saved.contains(&env.url()) && saved.contains("namespace: ml-team"),
        "{saved}"
    );

    // Server, token and namespace now come from the file.
    bare.run(&["create", "--no-wait", "from-config"]).await.code(0);
    let one = bare.run(&["get", "from-config", "-o", "json"]).await.json();
    assert_eq!(one["namespace"], "ml-team");
    // Flags still win over the file.
    bare.run(&["--token", "junk", "get"]).await.code(4);
}

/// Without -n, KRAYNE_NAMESPACE or a config file, commands use the
/// namespace the caller may use, and say which; someone who may use none
/// is told so (exit 4), never sent to `default`.
#[tokio::test]
async fn without_a_namespace_commands_use_the_one_the_caller_may_use() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    let run = k.run(&["create", "--no-wait", "picked"]).await.code(0);
    assert!(
        run.stderr()
            .contains("Namespace: ml-team (the first namespace where you are an editor; -n NAMESPACE for another)"),
        "{}",
        run.stderr()
    );
    let listed = k.run(&["get", "-o", "json"]).await.json();
    assert_eq!(listed[0]["namespace"], "ml-team", "{listed}");
    k.run(&["quota"]).await.code(0);

    // KRAYNE_NAMESPACE wins over the pick, quietly.
    let run = k
        .run_with(&["get", "picked"], &[("KRAYNE_NAMESPACE", "other-team".into())])
        .await
        .code(4);
    assert!(run.stderr().contains("other-team"), "{}", run.stderr());

    let nobody = Krayne::new(&env, &env.token("nobody@example.com", &[]));
    let run = nobody.run(&["get"]).await.code(4);
    assert!(
        run.stderr()
            .contains("nobody@example.com may not use any namespace yet: ask a platform admin"),
        "{}",
        run.stderr()
    );
}

#[tokio::test]
async fn delete_asks_first_and_refuses_without_a_terminal() {
    let env = Env::start().await;
    let k = Krayne::new(&env, &env.alice());
    k.run(&["create", "--no-wait", "keep", "-n", "ml-team"]).await.code(0);
    let run = k.run(&["delete", "keep", "-n", "ml-team"]).await.code(2);
    assert!(run.stderr().contains("pass --yes"), "{}", run.stderr());
    k.run(&["get", "keep", "-n", "ml-team"]).await.code(0);
    k.run(&["delete", "keep", "-n", "ml-team", "--yes"]).await.code(0);
    k.run(&["get", "keep", "-n", "ml-team"]).await.code(3);
}

#[tokio::test]
async fn offline_commands_need_no_server() {
    let env = Env::start().await;
    let bare = Krayne::new(&env, "unused").bare();
    let version = bare.run(&["version"]).await.code(0).stdout();
    assert_eq!(
        version,
        format!(
            "krayne {} (krayne-cli, Rust; replaces Krayne 0.3.x)\n",
            env!("CARGO_PKG_VERSION")
        )
    );
    let version = bare.run(&["version", "-o", "json"]).await.json();
    assert_eq!(version["client"], env!("CARGO_PKG_VERSION"));
    assert!(bare.run(&["--version"]).await.code(0).stdout().starts_with("krayne "));
    // With a server: both versions, as kubectl prints them; `--client` asks
    // no server.
    let k = Krayne::new(&env, "unused");
    let both = k.run(&["version"]).await.code(0).stdout();
    let v = env!("CARGO_PKG_VERSION");
    assert!(
        both.starts_with(&format!(
            "Client: krayne {v}\nServer: krayne-server {v} (API v1, commit "
        )),
        "{both}"
    );
    let json = k.run(&["version", "-o", "json"]).await.json();
    assert_eq!(json["server"]["server_version"], v);
    assert_eq!(json["server"]["api_version"], "v1");
    let client = k.run(&["version", "--client"]).await.code(0).stdout();
    assert_eq!(
        client,
        format!("krayne {v} (krayne-cli, Rust; replaces Krayne 0.3.x)\n")
    );
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let script = bare.run(&["completions", shell]).await.code(0).stdout();
        assert!(script.contains("krayne"), "{shell}");
    }
    bare.run(&["completions", "tcsh"]).await.code(2);
    let help = bare.run(&["--help"]).await.code(0).stdout();
    for expected in ["create", "describe", "Exit codes:", "krayne login"] {
        assert!(help.contains(expected), "{expected}:\n{help}");
    }
    let help = bare.run(&["create", "--help"]).await.code(0).stdout();
    for expected in [
        "--workers",
        "--no-autoscaling",
        "--set <KEY=VALUE>",
        "--dry-run",
        "Examples:",
    ] {
        assert!(help.contains(expected), "{expected}:\n{help}");
    }
}
