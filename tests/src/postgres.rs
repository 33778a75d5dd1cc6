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
    /// `postgres://postgres@127.0.0.1:<port>/postgres`.
    pub url: String,
    dir: tempfile::TempDir,
    pg_ctl: PathBuf,
    port: u16,
}

impl PgServer {
    /// Creates the cluster and starts it.
    pub async fn start() -> Self {
        let (Some(initdb), Some(pg_ctl)) = (pg_bin("initdb"), pg_bin("pg_ctl")) else {
            no_postgres()
        };
        let dir = tempfile::Builder::new().prefix("krayne-pg-").tempdir().expect("pg dir");
        let data = dir.path().join("data");
        let status = sh_as_postgres(
            &format!(
                "{} -D {} -U postgres --auth=trust >/dev/null",
                initdb.display(),
                data.display()
            ),
            dir.path(),
        );
        assert!(status.success(), "initdb failed");
        let port = free_port();
        let server = Self {
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
            dir,
            pg_ctl,
            port,
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

    fn ctl(&self, action: &str) -> bool {
        let dir = self.dir.path();
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            dir.display()
        );
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
