//! Starting the real server binary against a sandbox.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::Stdio,
    sync::{Arc, Mutex},
    time::Duration,
};

use jsonwebtoken::Algorithm;
use krayne_server::{
    auth::{MintRequest, mint},
    sandbox::{Sandbox, SandboxOptions},
};
use tokio::{
    io::{AsyncBufReadExt as _, BufReader},
    process::{Child, Command},
};

use crate::{Grpc, Rest};

/// The team mapping every test environment uses.
pub const TEAMS: &str = r#"
admins: { groups: [platform-admins], subjects: [] }
teams:
  - name: ml-research
    members: { groups: [ml-research], subjects: [alice@example.com] }
    namespaces: { ml-team: editor, "shared-*": viewer }
  - name: other
    members: { groups: [other-team] }
    namespaces: { other-team: editor }
"#;

/// `target/<profile>/krayne-server`, next to the test executable's
/// `deps/` folder. `cargo test --workspace` builds it before running tests
/// (it has integration tests of its own); `KRAYNE_SERVER_BIN` overrides.
pub fn server_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("KRAYNE_SERVER_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("current exe");
    let profile_dir = exe.parent().and_then(Path::parent).expect("target/<profile>");
    let bin = profile_dir.join("krayne-server");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p krayne-server` (cargo test --workspace does it)",
        bin.display()
    );
    bin
}

/// What `krayne-server serve` says on stderr when it refuses to start
/// with the team mapping `teams` and `extra` flags (in a folder of its
/// own, with an HS256 secret and no Kubernetes); asserts that it exits 1.
///
/// # Panics
/// When the server cannot be run, or exits otherwise.
pub fn serve_refusal(teams: &str, extra: &[&std::ffi::OsStr]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let teams_file = dir.path().join("teams.yaml");
    std::fs::write(&teams_file, teams).expect("teams file");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "s".repeat(40)).expect("secret");
    let out = std::process::Command::new(server_binary())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--ops-listen",
            "127.0.0.1:0",
            "--teams-file",
        ])
        .arg(&teams_file)
        .arg("--jwt-hs256-secret-file")
        .arg(&secret)
        .args(extra)
        .output()
        .expect("krayne-server runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    stderr
}

/// `target/<profile>/krayne`, the CLI (built by `cargo test --workspace`
/// for the client's tests); `KRAYNE_BIN` overrides.
pub fn krayne_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("KRAYNE_BIN") {
        return PathBuf::from(path);
    }
    let bin = server_binary().with_file_name("krayne");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p krayne-cli` (cargo test --workspace does it)",
        bin.display()
    );
    bin
}

/// A running `krayne-server` process; killed when dropped.
pub struct ServerProcess {
    child: Child,
    /// API address.
    pub api: SocketAddr,
    /// Ops address.
    pub ops: SocketAddr,
    /// Everything it logged so far.
    pub log: Arc<Mutex<String>>,
}

impl ServerProcess {
    /// Spawns the binary with `args` and waits for its "serving" line. It
    /// logs at debug level (`KRAYNE_TEST_LOG` overrides) unless `args` set
    /// `--log`, and its log is checked for secrets when it is dropped.
    /// `KRAYNE_SERVER_WRAPPER` runs it under a profiler (`heaptrack -o F`).
    pub async fn spawn(args: &[String]) -> Self {
        let wrapper = std::env::var("KRAYNE_SERVER_WRAPPER").unwrap_or_default();
        Self::spawn_under(&wrapper.split_whitespace().collect::<Vec<_>>(), args).await
    }

    /// [`ServerProcess::spawn`] under `wrapper` (a program and its
    /// arguments, e.g. `faketime -f +60s`), when not empty.
    pub async fn spawn_under(wrapper: &[&str], args: &[String]) -> Self {
        let mut args = args.to_vec();
        if !args.iter().any(|a| a == "--log") {
            let level = std::env::var("KRAYNE_TEST_LOG").unwrap_or_else(|_| "debug".into());
            args.extend(["--log".into(), level]);
        }
        let mut command = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(server_binary());
                c
            }
            None => Command::new(server_binary()),
        };
        let mut child = command
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn krayne-server");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let mut lines = BufReader::new(stderr).lines();
        let (mut api, mut ops) = (None, None);
        let started = tokio::time::timeout(Duration::from_secs(60), async {
            while let Ok(Some(line)) = lines.next_line().await {
                log.lock().unwrap().push_str(&format!("{line}\n"));
                if line.contains("krayne-server serving") {
                    api = field(&line, "api=");
                    ops = field(&line, "ops=");
                    return true;
                }
            }
            false
        })
        .await;
        assert!(
            matches!(started, Ok(true)),
            "krayne-server did not start:\n{}",
            log.lock().unwrap()
        );
        let sink = log.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                sink.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        Self {
            child,
            api: api.expect("api address"),
            ops: ops.expect("ops address"),
            log,
        }
    }

    /// Waits (at most 30 s) until `/readyz` answers 200, as a kubelet's
    /// readiness probe would before sending traffic: "serving" means
    /// listening, and the watch cache's first lists finish a few
    /// milliseconds later. A server that stays unready (a test of its
    /// dependencies) is used as it is after that.
    pub async fn until_ready(&self) {
        let url = format!("http://{}/readyz", self.ops);
        let client = reqwest::Client::new();
        let started = std::time::Instant::now();
        while started.elapsed() < Duration::from_secs(30) {
            if client
                .get(&url)
                .send()
                .await
                .is_ok_and(|r| r.status() == reqwest::StatusCode::OK)
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The last `n` lines the server logged whose text contains `what`.
    pub fn log_lines(&self, what: &str, n: usize) -> Vec<String> {
        let log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let lines: Vec<String> = log.lines().filter(|l| l.contains(what)).map(str::to_owned).collect();
        lines[lines.len().saturating_sub(n)..].to_vec()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("pid")
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        self.signal("TERM");
    }

    /// Sends a signal by name (`TERM`, `HUP`, …).
    pub fn signal(&self, name: &str) {
        let pid = self.child.id().expect("pid").to_string();
        let status = std::process::Command::new("kill")
            .args([&format!("-{name}"), &pid])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Waits for the process to exit and returns its exit code.
    pub async fn exit_code(&mut self) -> Option<i32> {
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .ok()?
            .ok()?
            .code()
    }
}

impl Drop for ServerProcess {
    // The test harness shows a failed test's server warnings on stderr,
    // where libtest captures them with the test's output.
    #[allow(clippy::print_stderr)]
    fn drop(&mut self) {
        let log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if std::thread::panicking() {
            // A failed test shows what the server warned about (the debug
            // log is too long to print whole), minus anything secret.
            let warnings: Vec<&str> = log
                .lines()
                .filter(|l| (l.contains("WARN") || l.contains("ERROR")) && crate::secrets_in(l).is_empty())
                .collect();
            let shown = &warnings[warnings.len().saturating_sub(40)..];
            eprintln!("krayne-server's last warnings and errors:\n{}", shown.join("\n"));
            return;
        }
        let found = crate::secrets_in(&log);
        assert!(found.is_empty(), "krayne-server logged secrets: {found:#?}");
    }
}

fn field(line: &str, key: &str) -> Option<SocketAddr> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key))
        .and_then(|v| v.parse().ok())
}

/// How to start a test environment.
pub struct EnvOptions {
    /// The simulated Kubernetes.
    pub sandbox: SandboxOptions,
    /// Extra `serve` flags.
    pub server_args: Vec<String>,
    /// Token flags replacing the default HS256 secret, when set.
    pub jwt_args: Option<Vec<String>>,
    /// The team mapping file's content.
    pub teams: String,
    /// The audit database; `None` is a SQLite file in the test's folder.
    pub database_url: Option<String>,
}

impl Default for EnvOptions {
    fn default() -> Self {
        let mut sandbox = SandboxOptions::fast();
        sandbox.namespaces = ["default", "ml-team", "shared-data", "other-team"]
            .map(str::to_owned)
            .to_vec();
        Self {
            sandbox,
            server_args: Vec::new(),
            jwt_args: None,
            teams: TEAMS.to_owned(),
            database_url: None,
        }
    }
}

impl EnvOptions {
    /// The default environment, the server started with `args` too.
    pub fn with_args(args: &[&str]) -> Self {
        Self {
            server_args: args.iter().map(|a| (*a).to_owned()).collect(),
            ..Self::default()
        }
    }

    /// The default environment, auditing to the database at `url`.
    pub fn with_database(url: &str) -> Self {
        Self {
            database_url: Some(url.to_owned()),
            ..Self::default()
        }
    }
}

/// A sandbox and a real server pointed at it.
pub struct Env {
    /// The server process.
    pub server: ServerProcess,
    /// The simulated Kubernetes (in this process).
    pub sandbox: Sandbox,
    secret: Vec<u8>,
    dir: tempfile::TempDir,
    /// The audit database URL the server uses.
    pub database: String,
    args: Vec<String>,
}

impl Env {
    /// Waits until the server's companion keeper has ended its first round
    /// (which begins once the cache has listed and reads Kubernetes for
    /// its own sake), so a test counts only what it caused.
    pub async fn keeper_first_round(&self) {
        let ops = Rest::new(&format!("http://{}", self.server.ops), None);
        let mut rounds = 0;
        while !ops
            .get("/metrics")
            .await
            .text
            .contains("krayne_companions_kept_clusters")
        {
            rounds += 1;
            assert!(rounds < 200, "the keeper's first round never ended");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The default environment.
    pub async fn start() -> Self {
        Self::start_with(EnvOptions::default()).await
    }

    /// An environment with `options`.
    pub async fn start_with(options: EnvOptions) -> Self {
        let sandbox = Sandbox::start(options.sandbox).await.expect("sandbox");
        // The server runs on this machine; on a cluster it is a pod, which
        // the clusters' NetworkPolicies admit by its labels.
        sandbox.add_krayne_pod().expect("krayne's pod");
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        sandbox.write_kubeconfig(&kubeconfig).expect("kubeconfig");
        let teams = dir.path().join("teams.yaml");
        std::fs::write(&teams, &options.teams).expect("teams");
        let secret = crate::secrets::E2E_SECRET.as_bytes().to_vec();
        let secret_file = dir.path().join("secret");
        std::fs::write(&secret_file, &secret).expect("secret");
        let session_secret_file = dir.path().join("session-secret");
        std::fs::write(&session_secret_file, crate::secrets::E2E_SESSION_SECRET).expect("session secret");
        let ray_auth_key_file = dir.path().join("ray-auth-key");
        std::fs::write(&ray_auth_key_file, crate::secrets::E2E_RAY_AUTH_KEY).expect("Ray token key");
        let path = |p: &Path| p.to_str().expect("utf-8 path").to_owned();
        let mut args: Vec<String> = vec![
            "serve".into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--ops-listen".into(),
            "127.0.0.1:0".into(),
            "--kubeconfig".into(),
            path(&kubeconfig),
            "--teams-file".into(),
            path(&teams),
            "--session-secret-file".into(),
            path(&session_secret_file),
            // Every cluster gets its NetworkPolicy, and requires Ray's
            // token, as the chart makes them.
            "--cluster-network-policy-namespace".into(),
            "krayne".into(),
            "--ray-auth-key-file".into(),
            path(&ray_auth_key_file),
        ];
        let database = options
            .database_url
            .clone()
            .unwrap_or_else(|| format!("sqlite://{}", dir.path().join("audit.db").display()));
        args.extend(["--database-url".into(), database.clone()]);
        match options.jwt_args {
            Some(jwt) => args.extend(jwt),
            None => args.extend(["--jwt-hs256-secret-file".into(), path(&secret_file)]),
        }
        args.extend(options.server_args);
        let server = ServerProcess::spawn(&args).await;
        server.until_ready().await;
        Self {
            server,
            sandbox,
            secret,
            dir,
            database,
            args,
        }
    }

    /// Stops the server (SIGTERM, then waits for it to exit); `start_server`
    /// brings it back on the same port.
    pub async fn stop_server(&mut self) {
        self.server.terminate();
        let code = self.server.exit_code().await;
        assert_eq!(code, Some(0), "krayne-server did not stop cleanly");
    }

    /// Starts the server again with the same arguments, on the same API and
    /// ops ports, so clients that were connected reconnect to it.
    pub async fn start_server(&mut self) {
        let (api, ops) = (self.server.api.to_string(), self.server.ops.to_string());
        let mut args = self.args.clone();
        for (flag, addr) in [("--listen", api), ("--ops-listen", ops)] {
            if let Some(i) = args.iter().position(|a| a == flag) {
                args[i + 1] = addr;
            }
        }
        self.server = ServerProcess::spawn(&args).await;
        self.server.until_ready().await;
    }

    /// Starts another server with this one's arguments plus `extra`, on
    /// fresh ports: a second replica, or one configured differently.
    pub async fn spawn_server(&self, extra: &[&str]) -> ServerProcess {
        let server = ServerProcess::spawn(&self.replica_args(extra)).await;
        server.until_ready().await;
        server
    }

    /// [`Env::spawn_server`] without waiting for `/readyz`: once it says it
    /// is serving. For measuring how long a replica takes to be ready.
    pub async fn spawn_server_unready(&self, extra: &[&str]) -> ServerProcess {
        ServerProcess::spawn(&self.replica_args(extra)).await
    }

    /// [`Env::spawn_server`] under `wrapper` (e.g. `faketime -f +60s`).
    pub async fn spawn_server_under(&self, wrapper: &[&str], extra: &[&str]) -> ServerProcess {
        let server = ServerProcess::spawn_under(wrapper, &self.replica_args(extra)).await;
        server.until_ready().await;
        server
    }

    /// This environment's server arguments for another replica: its own
    /// ports, `extra` added.
    fn replica_args(&self, extra: &[&str]) -> Vec<String> {
        let mut args = self.args.clone();
        for flag in ["--listen", "--ops-listen"] {
            if let Some(i) = args.iter().position(|a| a == flag) {
                args[i + 1] = "127.0.0.1:0".into();
            }
        }
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        args
    }

    /// Creates cluster `name` in `ml-team` (as alice, defaults only) and
    /// waits until it is ready.
    ///
    /// # Panics
    /// When it is not ready within 60 s.
    pub async fn ready_cluster(&self, name: &str) {
        let rest = self.rest(&self.alice());
        rest.post("/v1/namespaces/ml-team/clusters", &serde_json::json!({"name": name}))
            .await
            .expect(201);
        let waited = rest
            .get(&format!(
                "/v1/namespaces/ml-team/clusters/{name}/wait?timeout_seconds=60"
            ))
            .await
            .expect(200);
        assert_eq!(waited.body["status"], "ready", "{:?}", waited.body);
    }

    /// A token of ServiceAccount `account` in `namespace` for audience
    /// `krayne`, from the sandbox's TokenRequest, lasting `seconds` (the
    /// API server's default, an hour, when `None`).
    ///
    /// # Panics
    /// When the sandbox issues none.
    pub async fn service_account_token(&self, namespace: &str, account: &str, seconds: Option<u64>) -> String {
        let mut spec = serde_json::json!({"audiences": ["krayne"]});
        if let Some(seconds) = seconds {
            spec["expirationSeconds"] = seconds.into();
        }
        let answer: serde_json::Value = reqwest::Client::new()
            .post(format!(
                "{}/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
                self.sandbox.url()
            ))
            .json(&serde_json::json!({ "spec": spec }))
            .send()
            .await
            .expect("the sandbox")
            .json()
            .await
            .expect("a TokenRequest");
        answer["status"]["token"]
            .as_str()
            .unwrap_or_else(|| panic!("no token: {answer}"))
            .to_owned()
    }

    /// The sandbox's answer to `GET path` (`/apis/ray.io/v1/...`), as JSON:
    /// what Kubernetes itself holds, past krayne.
    ///
    /// # Panics
    /// When the sandbox does not answer JSON.
    pub async fn kube_get(&self, path: &str) -> serde_json::Value {
        reqwest::get(format!("{}{path}", self.sandbox.url()))
            .await
            .expect("the sandbox")
            .json()
            .await
            .expect("JSON")
    }

    /// Who holds the lifecycle Lease (`krayne-lifecycle` in `default`,
    /// which elects the reaper and the usage recorder): `""` when none
    /// does or it does not exist.
    pub async fn lease_holder(&self) -> String {
        let url = format!(
            "{}/apis/coordination.k8s.io/v1/namespaces/default/leases/krayne-lifecycle",
            self.sandbox.url()
        );
        let lease: serde_json::Value = reqwest::get(&url)
            .await
            .expect("the sandbox")
            .json()
            .await
            .expect("JSON");
        lease["spec"]["holderIdentity"].as_str().unwrap_or_default().to_owned()
    }

    /// SIGKILLs whichever of this environment's server and `second`
    /// holds the lifecycle Lease (it closes nothing, releases nothing);
    /// the API address of the other.
    ///
    /// # Panics
    /// When neither holds it.
    pub async fn kill_lease_holder(&self, second: &ServerProcess) -> SocketAddr {
        let holder = self.lease_holder().await;
        if holder.ends_with(&format!("-{}", self.server.pid())) {
            self.server.signal("KILL");
            second.api
        } else {
            assert!(holder.ends_with(&format!("-{}", second.pid())), "holder {holder}");
            second.signal("KILL");
            self.server.api
        }
    }

    /// The HS256 secret file the server trusts (default token options).
    pub fn secret_file(&self) -> PathBuf {
        self.dir.path().join("secret")
    }

    /// The team mapping file the server reads.
    pub fn teams_file(&self) -> PathBuf {
        self.dir.path().join("teams.yaml")
    }

    /// A valid token for `subject` in `groups`.
    pub fn token(&self, subject: &str, groups: &[&str]) -> String {
        self.token_for(subject, groups, 3600)
    }

    /// A token for `subject` in `groups` that expires in `ttl_seconds`.
    pub fn token_for(&self, subject: &str, groups: &[&str], ttl_seconds: i64) -> String {
        let request = MintRequest {
            subject: subject.to_owned(),
            email: None,
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            ttl_seconds,
            issuer: "krayne".into(),
            audience: "krayne".into(),
        };
        mint(&request, Algorithm::HS256, &self.secret).expect("mint")
    }

    /// A ready cluster of alice's in ml-team whose head's dashboard answers
    /// as the sandbox's hostile head `behaviour` does (`oversized`,
    /// `nested`, `paths`, `names`, `escapes`, `slow`, `endless`,
    /// `redirect`), made as another tool would (the create API takes no
    /// sandbox faults), with krayne's creator annotation so that policies
    /// apply to it.
    pub async fn hostile_cluster(&self, name: &str, behaviour: &str) {
        self.hostile_cluster_in("ml-team", name, behaviour).await;
    }

    /// [`Env::hostile_cluster`] in `namespace` (any of the sandbox's).
    pub async fn hostile_cluster_in(&self, namespace: &str, name: &str, behaviour: &str) {
        use std::time::{Duration, Instant};
        let ns = "/v1/namespaces/ml-team/clusters";
        let mut manifest = self
            .rest(&self.alice())
            .post(&format!("{ns}?dry_run=true"), &serde_json::json!({"name": name}))
            .await
            .expect(200)
            .body["manifest"]
            .clone();
        if !manifest["metadata"]["annotations"].is_object() {
            manifest["metadata"]["annotations"] = serde_json::json!({});
        }
        let annotations = &mut manifest["metadata"]["annotations"];
        annotations["krayne.dev/created-by"] = serde_json::json!("alice@example.com");
        annotations["sandbox.krayne.dev/fault"] =
            serde_json::json!(format!("{}{behaviour}", krayne_server::sandbox::HOSTILE_HEAD));
        manifest["metadata"]["namespace"] = serde_json::json!(namespace);
        let manifest = crate::made_elsewhere(manifest);
        let created = reqwest::Client::new()
            .post(format!(
                "{}/apis/ray.io/v1/namespaces/{namespace}/rayclusters",
                self.sandbox.url()
            ))
            .json(&manifest)
            .send()
            .await
            .expect("the sandbox");
        assert_eq!(created.status(), 201, "{}", created.text().await.unwrap_or_default());
        // Until the server's watch cache has it.
        let started = Instant::now();
        loop {
            let waited = self
                .rest(&self.admin())
                .get(&format!(
                    "/v1/namespaces/{namespace}/clusters/{name}/wait?timeout_seconds=60"
                ))
                .await;
            if waited.status == 200 {
                return;
            }
            assert!(
                waited.status == 404 && started.elapsed() < Duration::from_secs(10),
                "{}",
                waited.text
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A token of this server's development issuer carrying `claims`
    /// besides its `iss`, `aud`, `iat` and a 10-minute `exp`: an identity
    /// provider's token as it might be shaped.
    pub fn signed(&self, claims: &serde_json::Value) -> String {
        let now = jiff::Timestamp::now().as_second();
        let mut claims = claims.clone();
        for (k, v) in [
            ("iss", serde_json::json!("krayne")),
            ("aud", serde_json::json!("krayne")),
            ("iat", serde_json::json!(now)),
            ("exp", serde_json::json!(now + 600)),
        ] {
            claims[k] = v;
        }
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(Algorithm::HS256),
            &claims,
            &jsonwebtoken::EncodingKey::from_secret(&self.secret),
        )
        .expect("a token")
    }

    /// Token of alice (ml-research: editor on ml-team, viewer on shared-*).
    pub fn alice(&self) -> String {
        self.token("alice@example.com", &["ml-research"])
    }

    /// Token of a global admin.
    pub fn admin(&self) -> String {
        self.token("root@example.com", &["platform-admins"])
    }

    /// `http://<api>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.server.api)
    }

    /// The audit rows `query` (after `/v1/audit?`) finds, once there are
    /// at least `n` (rows are written in batches).
    ///
    /// # Panics
    /// When there are fewer within 10 s.
    pub async fn audit_rows_eventually(&self, query: &str, n: usize) -> Vec<serde_json::Value> {
        let admin = self.rest(&self.admin());
        for _ in 0..200 {
            let rows = admin.get(&format!("/v1/audit?{query}")).await.expect(200).body;
            let rows = rows["events"].as_array().cloned().unwrap_or_default();
            if rows.len() >= n {
                return rows;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("fewer than {n} audit rows for {query}");
    }

    /// A REST client with `token`.
    pub fn rest(&self, token: &str) -> Rest {
        Rest::new(&self.url(), Some(token.to_owned()))
    }

    /// A client of the ops listener (`/readyz`, `/metrics`).
    pub fn ops(&self) -> Rest {
        Rest::new(&format!("http://{}", self.server.ops), None)
    }

    /// The requests that changed RayClusters (POST, PUT, PATCH, DELETE), in
    /// the order the sandbox received them.
    pub fn raycluster_writes(&self) -> Vec<krayne_server::sandbox::RequestRecord> {
        let mut requests = self.sandbox.requests();
        requests.retain(|r| {
            r.uri.contains("/rayclusters") && ["POST", "PUT", "PATCH", "DELETE"].contains(&r.method.as_str())
        });
        requests
    }

    /// A metric's current value from `/metrics` (see [`crate::metric`]).
    pub async fn metric(&self, name: &str, labels: &str) -> f64 {
        crate::metric(&self.ops().get("/metrics").await.text, name, labels)
    }

    /// Waits (at most 10 s) until `name` reaches `at_least`.
    pub async fn await_metric(&self, name: &str, at_least: f64) {
        let started = std::time::Instant::now();
        while self.metric(name, "").await < at_least {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{name} stayed below {at_least}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A REST client without a token.
    pub fn anonymous(&self) -> Rest {
        Rest::new(&self.url(), None)
    }

    /// gRPC clients with `token`.
    pub async fn grpc(&self, token: &str) -> Grpc {
        Grpc::connect(&self.url(), token).await
    }
}
