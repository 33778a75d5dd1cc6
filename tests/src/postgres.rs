//! A fresh Postgres database per test: on the server `TEST_DATABASE_URL`
//! names, or else on a throwaway cluster started from the local PostgreSQL
//! binaries (stopped when the test process exits), or a clear failure.

use std::{path::PathBuf, process::Command, time::Duration};

use sqlx::{Connection as _, Executor as _, PgConnection};
use tokio::sync::OnceCell;

/// A database that exists for one test; dropped with it.
pub struct TestDb {
    /// Its URL.
    pub url: String,
    admin: String,
    name: String,
}

impl TestDb {
    /// A proxy in front of this database that a test can cut and restore,
    /// and the database's URL through it.
    ///
    /// # Panics
    /// When the URL names no `host:port`.
    pub async fn behind_proxy(&self) -> (crate::Proxy, String) {
        let target: std::net::SocketAddr = self
            .url
            .split('@')
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .and_then(|addr| addr.parse().ok())
            .expect("a database URL with host:port");
        let proxy = crate::Proxy::start(target).await;
        let url = self.url.replacen(&target.to_string(), &proxy.addr.to_string(), 1);
        (proxy, url)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let (admin, name) = (self.admin.clone(), self.name.clone());
        // Drop runs outside async code; a short-lived runtime does the work.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async {
                let mut c = PgConnection::connect(&admin).await.ok()?;
                c.execute(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                )))
                .await
                .ok()
            })
        })
        .join();
    }
}

/// A new, empty database.
pub async fn test_database() -> TestDb {
    let admin = admin_url().await;
    let name = format!("krayne_test_{}", uuid::Uuid::new_v4().simple());
    let mut c = PgConnection::connect(&admin)
        .await
        .unwrap_or_else(|e| panic!("cannot reach Postgres at {admin}: {e}"));
    c.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .await
        .expect("create database");
    let base = admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b);
    TestDb {
        url: format!("{base}/{name}"),
        admin,
        name,
    }
}

async fn admin_url() -> String {
    static URL: OnceCell<String> = OnceCell::const_new();
    URL.get_or_init(|| async {
        if let Ok(url) = std::env::var("TEST_DATABASE_URL") {
            return url;
        }
        throwaway_cluster().await
    })
    .await
    .clone()
}

fn pg_bin(name: &str) -> Option<PathBuf> {
    let dirs = std::fs::read_dir("/usr/lib/postgresql").ok()?;
    let mut versions: Vec<PathBuf> = dirs.filter_map(|d| d.ok().map(|d| d.path().join("bin"))).collect();
    versions.sort();
    versions.into_iter().rev().map(|d| d.join(name)).find(|p| p.exists())
}

/// Runs a shell command as `postgres` when this process is root
/// (PostgreSQL refuses to run as root), giving it `dir`.
fn sh_as_postgres(cmd: &str, dir: &std::path::Path) -> std::process::ExitStatus {
    let as_root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout == b"0\n")
        .unwrap_or(false);
    let line = if as_root {
        let _ = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(dir)
            .status();
        format!("runuser -u postgres -- sh -c '{cmd}'")
    } else {
        cmd.to_owned()
    };
    Command::new("sh").args(["-c", &line]).status().expect("sh")
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
    l.local_addr().expect("addr").port()
}

fn no_postgres() -> ! {
    panic!(
        "no Postgres for the tests: set TEST_DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/postgres) \
         or install PostgreSQL (its initdb and postgres under /usr/lib/postgresql/*/bin)"
    )
}

async fn accepts(url: &str) -> bool {
    for _ in 0..100 {
        if PgConnection::connect(url).await.is_ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Starts a private cluster on a free port; it stops when this process does.
async fn throwaway_cluster() -> String {
    let (Some(initdb), Some(postgres)) = (pg_bin("initdb"), pg_bin("postgres")) else {
        no_postgres()
    };
    let dir = std::env::temp_dir().join(format!("krayne-pg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("pg dir");
    let port = free_port();
    let data = dir.join("data");
    let status = sh_as_postgres(
        &format!(
            "{} -D {} -U postgres --auth=trust >/dev/null",
            initdb.display(),
            data.display()
        ),
        &dir,
    );
    assert!(status.success(), "initdb failed");
    // A watchdog stops the server when the test process exits (it checks
    // /proc: as `postgres` it may not signal a root-owned process).
    let me = std::process::id();
    let _ = sh_as_postgres(
        &format!(
            "{pg} -D {data} -p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off >{log} 2>&1 & \
             P=$!; (while [ -d /proc/{me} ]; do sleep 1; done; kill $P) >/dev/null 2>&1 &",
            pg = postgres.display(),
            data = data.display(),
            sock = dir.display(),
            log = dir.join("log").display(),
        ),
        &dir,
    );
    let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
    assert!(
        accepts(&url).await,
        "the throwaway Postgres did not start; see {}",
        dir.join("log").display()
    );
    url
}

/// A PostgreSQL server of one test's own, which it may stop and start
/// again (on the same port, with the same data): for outages. Needs the
/// local PostgreSQL binaries.
pub struct PgServer {
    /// `postgres://postgres[:password]@127.0.0.1:<port>/postgres`.
    pub url: String,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    dir: tempfile::TempDir,
    pg_ctl: PathBuf,
    tls: bool,
}

/// How a [`PgServer`] is set up beyond the defaults (trust everyone, no
/// TLS).
#[derive(Debug, Clone, Default)]
pub struct PgSetup {
    /// TCP connections must give a password (SCRAM); `postgres`'s is this.
    pub password: Option<String>,
    /// Serve TLS with a certificate for `localhost` and `127.0.0.1` signed
    /// by a CA of the server's own ([`PgServer::ca_file`]).
    pub tls: bool,
}

/// Runs `openssl` with `args` in `dir`.
fn openssl(dir: &std::path::Path, args: &[&str]) {
    let status = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl");
    assert!(status.success(), "openssl {args:?} failed");
}

/// A CA (`ca.crt`) and a server certificate it signed (`server.crt`,
/// `server.key`) for `localhost` and `127.0.0.1`, in `dir`.
fn certificates(dir: &std::path::Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-subj",
            "/CN=krayne test CA",
            "-days",
            "2",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ],
    );
    std::fs::write(dir.join("san.ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n").expect("san");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "san.ext",
        ],
    );
    // Postgres refuses a key others may read.
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(dir.join("server.key"), std::fs::Permissions::from_mode(0o600)).expect("chmod key");
}

/// A CA of its own (`<name>.crt`, `<name>.key` in `dir`) that signed
/// nothing: a certificate no server presents.
///
/// # Panics
/// When `openssl` fails.
pub fn unrelated_ca(dir: &std::path::Path, name: &str) -> PathBuf {
    let (key, crt) = (format!("{name}.key"), format!("{name}.crt"));
    let status = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &crt,
        ])
        .args(["-subj", "/CN=an unrelated CA", "-days", "1"])
        .current_dir(dir)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl");
    assert!(status.success(), "openssl failed");
    dir.join(crt)
}

impl PgServer {
    /// Creates the cluster and starts it.
    pub async fn start() -> Self {
        Self::start_with(PgSetup::default()).await
    }

    /// Creates the cluster as `setup` says and starts it.
    pub async fn start_with(setup: PgSetup) -> Self {
        let (Some(initdb), Some(pg_ctl)) = (pg_bin("initdb"), pg_bin("pg_ctl")) else {
            no_postgres()
        };
        let dir = tempfile::Builder::new().prefix("krayne-pg-").tempdir().expect("pg dir");
        let data = dir.path().join("data");
        let auth = match &setup.password {
            Some(password) => {
                std::fs::write(dir.path().join("pwfile"), password).expect("pwfile");
                format!(
                    "--auth-local=trust --auth-host=scram-sha-256 --pwfile={}",
                    dir.path().join("pwfile").display()
                )
            }
            None => "--auth=trust".to_owned(),
        };
        if setup.tls {
            certificates(dir.path());
        }
        let status = sh_as_postgres(
            &format!(
                "{} -D {} -U postgres {auth} >/dev/null",
                initdb.display(),
                data.display()
            ),
            dir.path(),
        );
        assert!(status.success(), "initdb failed");
        let port = free_port();
        let user = setup
            .password
            .as_ref()
            .map_or_else(|| "postgres".to_owned(), |p| format!("postgres:{p}"));
        let server = Self {
            url: format!("postgres://{user}@127.0.0.1:{port}/postgres"),
            port,
            dir,
            pg_ctl,
            tls: setup.tls,
        };
        // Stops the server if this process dies without dropping it.
        let me = std::process::id();
        let _ = sh_as_postgres(
            &format!(
                "(while [ -d /proc/{me} ]; do sleep 1; done; {} -D {} -m immediate stop) >/dev/null 2>&1 &",
                server.pg_ctl.display(),
                data.display()
            ),
            server.dir.path(),
        );
        server.resume().await;
        server
    }

    /// The CA that signed the server's certificate (with
    /// [`PgSetup::tls`]).
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    fn ctl(&self, action: &str) -> bool {
        let dir = self.dir.path();
        let mut options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            dir.display()
        );
        if self.tls {
            options.push_str(&format!(
                " -c ssl=on -c ssl_cert_file={0}/server.crt -c ssl_key_file={0}/server.key",
                dir.display()
            ));
        }
        sh_as_postgres(
            &format!(
                "{} -D {} -l {} -o \"{options}\" -w -t 30 {action} >/dev/null",
                self.pg_ctl.display(),
                dir.join("data").display(),
                dir.join("log").display()
            ),
            dir,
        )
        .success()
    }

    /// Stops the server (fast shutdown: open connections are closed).
    pub fn stop(&self) {
        assert!(self.ctl("-m fast stop"), "pg_ctl stop failed");
    }

    /// Starts the stopped server again and waits until it accepts.
    pub async fn resume(&self) {
        assert!(
            self.ctl("start"),
            "pg_ctl start failed; see {}",
            self.dir.path().join("log").display()
        );
        assert!(accepts(&self.url).await, "Postgres did not come back");
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let _ = self.ctl("-m immediate stop");
    }
}
