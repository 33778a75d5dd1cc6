//! The layering of docs/architecture.md, as Cargo resolves it: this test
//! reads `cargo metadata` (and `cargo tree` for one crate's own features)
//! and fails when a crate depends on what its layer may not. Normal
//! dependencies only: what is linked in. Build tools (krayne-proto's code
//! generator) and tests may use anything.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    process::Command,
};

use serde_json::Value;

/// Normal dependencies by package name, and which of them are
/// workspace members under `server/`.
struct Graph {
    deps: BTreeMap<String, BTreeSet<String>>,
    server_crates: BTreeSet<String>,
}

/// The host's target triple: metadata for other platforms would need
/// crates (Windows ones) that were never downloaded.
fn host() -> String {
    let out = Command::new("rustc").arg("-vV").output().expect("rustc -vV");
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("a host line")
        .to_owned()
}

fn graph() -> Graph {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--locked",
            "--filter-platform",
        ])
        .arg(host())
        .current_dir(&root)
        .output()
        .expect("cargo metadata");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let server_dir = root.join("server").canonicalize().unwrap();
    let server_crates = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            let manifest = Path::new(p["manifest_path"].as_str().unwrap());
            manifest.canonicalize().is_ok_and(|m| m.starts_with(&server_dir))
        })
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for node in meta["resolve"]["nodes"].as_array().unwrap() {
        let name = names[node["id"].as_str().unwrap()].to_owned();
        let runtime = node["deps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["dep_kinds"].as_array().unwrap().iter().any(|k| k["kind"].is_null()));
        let entry = deps.entry(name).or_default();
        for d in runtime {
            entry.insert(names[d["pkg"].as_str().unwrap()].to_owned());
        }
    }
    Graph { deps, server_crates }
}

/// `cargo tree` of normal dependencies for the host with `args`, one
/// package name per line (`None`: `-i` named a package not in the tree).
fn cargo_tree(args: &[&str]) -> Option<BTreeSet<String>> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--offline", "--locked", "-e", "normal", "--prefix", "none"])
        .args(args)
        .args(["--target", &host()])
        .current_dir(workspace)
        .output()
        .expect("cargo tree");
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        assert!(why.contains("did not match any packages"), "{why}");
        return None;
    }
    Some(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_owned)
            .collect(),
    )
}

impl Graph {
    /// The packages in `root`'s tree that depend on `name` directly.
    fn dependents_within(&self, root: &str, name: &str) -> BTreeSet<String> {
        let mut users = cargo_tree(&["--depth", "1", "-p", root, "-i", name]).unwrap_or_default();
        users.remove(name);
        users
    }

    fn direct(&self, name: &str) -> &BTreeSet<String> {
        self.deps.get(name).unwrap_or_else(|| panic!("no package {name}"))
    }

    /// Everything `name` depends on, with the features it alone turns on
    /// (`cargo metadata` unifies features across the workspace, so a
    /// crate's optional dependencies that another member enables would
    /// show up as its own; `cargo tree -p` resolves for that crate only).
    fn transitive(&self, name: &str) -> BTreeSet<String> {
        let mut all = cargo_tree(&["-p", name]).unwrap_or_else(|| panic!("no package {name}"));
        all.remove(name);
        all
    }
}

#[test]
fn the_core_has_no_runtime_and_no_adapter() {
    let g = graph();
    let all = g.transitive("krayne-core");
    assert!(all.contains("serde_json") && all.contains("krayne-proto"), "{all:?}");
    for banned in ["tokio", "tonic", "axum", "hyper", "kube", "sqlx"] {
        let found: Vec<&String> = all.iter().filter(|d| d.starts_with(banned)).collect();
        assert!(found.is_empty(), "krayne-core depends on {found:?}");
    }
}

#[test]
fn the_use_cases_know_no_transport() {
    let g = graph();
    let all = g.transitive("krayne-control");
    assert!(all.contains("krayne-core") && all.contains("jsonwebtoken"), "{all:?}");
    // reqwest (the JWKS fetch) brings tower-http along; nothing of ours
    // may use it.
    let users = g.dependents_within("krayne-control", "tower-http");
    assert!(users.iter().all(|u| u == "reqwest"), "tower-http is used by {users:?}");
    for banned in [
        "axum",
        "tonic",
        "utoipa",
        "kube",
        "sqlx",
        "krayne-api",
        "krayne-kube",
        "krayne-store",
        "krayne-sandbox",
        "krayne-ray",
    ] {
        let found: Vec<&String> = all.iter().filter(|d| d.starts_with(banned)).collect();
        assert!(found.is_empty(), "krayne-control depends on {found:?}");
    }
}

#[test]
fn the_api_never_reaches_kubernetes_or_sql() {
    let g = graph();
    let all = g.transitive("krayne-api");
    assert!(all.contains("axum") && all.contains("tonic"), "{all:?}");
    for banned in [
        "kube",
        "sqlx",
        "krayne-kube",
        "krayne-store",
        "krayne-sandbox",
        "krayne-ray",
    ] {
        let found: Vec<&String> = all.iter().filter(|d| d.starts_with(banned)).collect();
        assert!(found.is_empty(), "krayne-api depends on {found:?}");
    }
}

#[test]
fn ray_is_reached_only_through_its_port() {
    let g = graph();
    for krate in &g.server_crates {
        assert!(
            !g.direct(krate).contains("krayne-ray") || krate == "krayne-server",
            "{krate} depends on krayne-ray; only the composition root wires it in"
        );
    }
    let ours: Vec<&String> = g
        .direct("krayne-ray")
        .iter()
        .filter(|d| d.starts_with("krayne-"))
        .collect();
    assert_eq!(ours, ["krayne-core"], "the Ray adapter stands on the core alone");
    let control = g.direct("krayne-control");
    for banned in ["hyper", "hyper-util", "http-body-util", "tokio-tungstenite"] {
        assert!(
            !control.contains(banned),
            "krayne-control speaks HTTP to heads itself ({banned})"
        );
    }
    let mut speaking = Vec::new();
    for dir in SERVER_SOURCES.into_iter().filter(|d| *d != "server/ray/src") {
        for (file, text) in sources(dir) {
            let code = without_tests(&text);
            if ["\"/api/jobs", "\"/api/v0/", "\"/api/cluster_status", "\"/api/packages/"]
                .iter()
                .any(|path| code.contains(path))
            {
                speaking.push(format!("{dir}/{file}"));
            }
        }
    }
    assert!(
        speaking.is_empty(),
        "Ray's paths outside its adapter (server/ray): {speaking:?}"
    );
}

#[test]
fn one_crate_on_kube_one_on_sqlx() {
    let g = graph();
    assert!(g.server_crates.len() >= 6, "{:?}", g.server_crates);
    for krate in &g.server_crates {
        let direct = g.direct(krate);
        let on = |prefix: &str| {
            direct
                .iter()
                .any(|d| d == prefix || d.starts_with(&format!("{prefix}-")))
        };
        assert!(
            !on("kube") || krate == "krayne-kube",
            "{krate} depends on kube-rs; only krayne-kube may"
        );
        assert!(
            !on("sqlx") || krate == "krayne-store",
            "{krate} depends on sqlx; only krayne-store may"
        );
    }
    assert!(!g.transitive("krayne-sandbox").contains("krayne-api"));
}

#[test]
fn the_client_speaks_only_the_contract() {
    let g = graph();
    let ours: Vec<String> = g
        .transitive("krayne-client")
        .into_iter()
        .filter(|d| d.starts_with("krayne-"))
        .collect();
    assert_eq!(ours, ["krayne-proto"], "krayne-client depends on {ours:?}");
}

/// What only the `krayne` CLI and its terminal UI use: a pipeline that
/// adds the SDK gets none of it. (etcetera, the config directory, is not
/// here: the SDK finds the sign-in `krayne login` keeps, as the CLI does.)
const CLI_ONLY: [&str; 8] = [
    "clap",
    "ratatui",
    "crossterm",
    "dialoguer",
    "indicatif",
    "comfy-table",
    "nucleo-matcher",
    "open",
];

#[test]
fn the_sdk_has_no_cli_in_it() {
    let g = graph();
    let all = g.transitive("krayne-client");
    assert!(all.contains("tonic"), "{all:?}");
    let found: Vec<&String> = all
        .iter()
        .filter(|d| CLI_ONLY.iter().any(|c| *d == c || d.starts_with(&format!("{c}_"))))
        .collect();
    assert!(found.is_empty(), "krayne-client depends on {found:?}");
}

#[test]
fn the_cli_is_a_user_of_the_sdk() {
    let g = graph();
    let direct = g.direct("krayne-cli");
    let ours: Vec<&String> = direct.iter().filter(|d| d.starts_with("krayne-")).collect();
    assert_eq!(ours, ["krayne-client"], "krayne-cli depends on {ours:?}");
    assert!(direct.contains("clap") && direct.contains("ratatui"), "{direct:?}");
}

/// The server's crates' sources (the sandbox's apart: it plays
/// Kubernetes and Ray's heads, so it speaks their paths).
const SERVER_SOURCES: [&str; 7] = [
    "server/core/src",
    "server/control/src",
    "server/api/src",
    "server/kube/src",
    "server/ray/src",
    "server/store/src",
    "server/src",
];

/// The Rust sources under `dir` (relative to the workspace), with their
/// paths relative to it.
fn sources(dir: &str) -> Vec<(String, String)> {
    fn walk(root: &Path, at: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let name = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.push((name, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir);
    let mut out = Vec::new();
    walk(&root, &root, &mut out);
    assert!(!out.is_empty(), "no sources under {dir}");
    out.sort();
    out
}

/// A source without its `#[cfg(test)]` module (by convention the file's
/// last), so tests may do what the code may not.
fn without_tests(text: &str) -> &str {
    text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text)
}

#[test]
fn only_the_authorization_check_vouches_for_a_cluster() {
    let mut vouching = Vec::new();
    for dir in SERVER_SOURCES {
        for (file, text) in sources(dir) {
            if without_tests(&text).contains("Authorized::vouched(") {
                vouching.push(format!("{dir}/{file}"));
            }
        }
    }
    assert_eq!(
        vouching,
        ["server/control/src/authz.rs"],
        "an Authorized proof is made only where callers are authorized"
    );
}

/// The public functions of `code`: each name with its parameter list.
fn public_fns(code: &str) -> Vec<(&str, &str)> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("pub ") {
        let rest = &code[at + 4..];
        let rest = rest.strip_prefix("async ").unwrap_or(rest);
        let Some(rest) = rest.strip_prefix("fn ") else {
            continue;
        };
        let (Some(open), Some(close)) = (rest.find('('), rest.find(')')) else {
            continue;
        };
        let name = rest[..open].split('<').next().unwrap_or_default();
        if open < close {
            found.push((name, &rest[open + 1..close]));
        }
    }
    found
}

#[test]
fn no_use_case_takes_a_namespace_and_a_name() {
    let mut loose = Vec::new();
    // The in-memory fakes' test helpers (`make_ready(namespace, name)`)
    // stand for Kubernetes, not for a use case.
    for (file, text) in sources("server/control/src")
        .into_iter()
        .filter(|(f, _)| f != "fakes.rs")
    {
        for (name, params) in public_fns(without_tests(&text)) {
            if params.contains("namespace: &str") && params.contains("name: &str") {
                loose.push(format!("{file}: {name}"));
            }
        }
    }
    assert!(
        loose.is_empty(),
        "a cluster is one ClusterRef, not two strings: {loose:?}"
    );
    let mine = public_fns("pub async fn get(&self, cx: &Context, namespace: &str, name: &str) -> X");
    assert_eq!(mine, [("get", "&self, cx: &Context, namespace: &str, name: &str")]);
}

/// Where the use cases may start a task of their own, each for a reason
/// that is not background work: it lives as long as one request or one
/// value. Every periodic or elected task is the driver's.
const REQUEST_SCOPED_SPAWNS: [(&str, &str); 6] = [
    ("watch/mod.rs", "one live watch's sender, as long as its caller"),
    (
        "connection.rs",
        "a closed connection's audit row, written from its Drop",
    ),
    (
        "tunnels.rs",
        "a tunnel's audit row when its client left, written from a Drop",
    ),
    (
        "lifecycle.rs",
        "a readiness request's probe refresh: one round, at most three seconds",
    ),
    ("watch/hub.rs", "the watch hub's feeder, as long as the hub"),
    ("wait.rs", "one wait's watch, as long as its caller"),
];

#[test]
fn background_work_is_started_only_by_the_driver() {
    let mut spawning = Vec::new();
    for (file, text) in sources("server/control/src") {
        let code = without_tests(&text);
        if (code.contains("spawn(") || code.contains("spawn_blocking("))
            && !file.starts_with("background/")
            && file != "fakes.rs"
            && !REQUEST_SCOPED_SPAWNS.iter().any(|(f, _)| *f == file)
        {
            spawning.push(file);
        }
    }
    assert!(
        spawning.is_empty(),
        "tasks started outside the background driver (add them to background/tasks.rs): {spawning:?}"
    );
    let driver = sources("server/control/src/background");
    assert!(driver.iter().any(|(_, text)| text.contains("tokio::spawn(")));
}

#[test]
fn a_production_build_leaves_the_sandbox_out() {
    let with = cargo_tree(&["-p", "krayne-server"]).unwrap();
    assert!(with.contains("krayne-sandbox"), "the sandbox is a default feature");
    let without = cargo_tree(&["-p", "krayne-server", "--no-default-features"]).unwrap();
    assert!(!without.contains("krayne-sandbox"), "{without:?}");
    assert!(
        without.contains("krayne-api") && without.contains("krayne-kube"),
        "{without:?}"
    );
}
