//! The lifecycle reaper's cost at 10 000 clusters: one pass, in process,
//! over the in-memory ports — RayClusters as krayne creates them (through
//! the create use case), each with a ready head pod; heads answering
//! Ray's cluster status and jobs in memory (`fakes::FakeHeads`, the
//! `RayHeads` port's fake: every question still opens a connection to the
//! head, counted and audited as in production, but no HTTP is spoken — the
//! HTTP adapter's cost under hostile heads is `krayne-tests`'
//! `hostile_heads` benchmark). For each policy: the pass's wall
//! time, its CPU time (this process's, from `/proc/self/stat`), requests
//! to heads, and writes to Kubernetes.
//!
//! With `--hanging P`, P % of the heads take requests and never answer
//! (issue 54): the first pass waits for them up to each head's deadline,
//! the next leaves them out; the resident memory after each pass shows
//! whether it stays flat.
//!
//! ```sh
//! cargo bench -p krayne-control --bench reaper [-- --clusters 10000] [--hanging 5]
//! ```
//!
//! The in-memory store parses every cluster from JSON on each list, which
//! the watch cache does not (it hands out shared objects): that share is
//! measured alone (`list only`) and is not the reaper's.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::panic,
    missing_docs
)]

use std::time::Instant;

use krayne_control::{
    Context, ControlPlane, ControlSettings, CreateInput, LifecycleMode,
    auth::{Authenticator, TeamMapping, TokenRules, Verifier, VerifyingKey},
    fakes::{FakeHeads, FixedLeadership, MemoryAudit, MemoryLedger, MemoryStore},
};
use krayne_core::domain::{
    ActivityLedger as _, ClusterUse, FieldValidation,
    audit::{RequestMeta, Transport},
};
use serde_json::json;

const TEAMS: &str = "admins: { groups: [platform-admins], subjects: [] }\nteams: []\n";

/// This process's resident memory, in MiB (`VmRSS`).
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

/// User and system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis; utime and stime are
    // the 14th and 15th of the whole line, in clock ticks (100 a second).
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn admin_context() -> Context {
    Context {
        principal: krayne_core::domain::Principal {
            subject: "bench".into(),
            email: None,
            groups: vec!["platform-admins".into()],
            teams: Vec::new(),
            global_admin: true,
            grants: Vec::new(),
            expires_at: None,
            issuer: None,
        },
        meta: RequestMeta {
            request_id: uuid::Uuid::now_v7().to_string().into(),
            correlation_id: None,
            transport: Transport::Grpc,
            source_ip: None,
            user_agent: None,
        },
    }
}

struct Row {
    policy: &'static str,
    pass: &'static str,
    wall_s: f64,
    cpu_s: f64,
    head_requests: usize,
    writes: usize,
    acted: usize,
    rss_mib: f64,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let clusters: usize = std::env::args()
        .skip_while(|a| a != "--clusters")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let hanging: usize = std::env::args()
        .skip_while(|a| a != "--hanging")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let store = MemoryStore::with_namespaces(&["ml-team"]);
    let heads = FakeHeads::new();
    let ledger = MemoryLedger::new();
    let auth = Authenticator::new(
        Verifier::new(
            vec![VerifyingKey::hs256(b"a bench's secret, 32 bytes or more")],
            TokenRules::default(),
        ),
        TeamMapping::parse(TEAMS).unwrap(),
    );
    let plane = ControlPlane::new(store.clone(), MemoryAudit::new(), ControlSettings::default())
        .with_upstream(heads.clone())
        .with_ray(heads.clone())
        .with_authenticator(auth.clone())
        .with_activity_ledger(ledger.clone(), std::time::Duration::from_secs(3600));
    let started = Instant::now();
    let cx = admin_context();
    for i in 0..clusters {
        let name = format!("c{i:05}");
        let input = CreateInput {
            config: json!({"name": name, "worker_groups": [{"name": "worker", "replicas": 1}]}),
            namespace: Some("ml-team".into()),
            dry_run: false,
            field_validation: FieldValidation::Strict,
            queue: None,
        };
        plane.create(&cx, input).await.unwrap();
        store.make_ready("ml-team", &name);
    }
    eprintln!(
        "{clusters} clusters created in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let mut rows = Vec::new();
    // What every pass pays before any policy: listing the clusters.
    let (wall, cpu) = (Instant::now(), cpu_seconds());
    let _ = krayne_core::domain::ClusterStore::list(&*store, None, &"bench".into())
        .await
        .unwrap();
    rows.push(Row {
        policy: "(none)",
        pass: "list only",
        wall_s: wall.elapsed().as_secs_f64(),
        cpu_s: cpu_seconds() - cpu,
        head_requests: 0,
        writes: 0,
        acted: 0,
        rss_mib: rss_mib(),
    });

    let leader = FixedLeadership(true);
    let mut measure = async |policy: &'static str, pass: &'static str| {
        heads.take_dial_count();
        let writes = store.writes();
        let (wall, cpu) = (Instant::now(), cpu_seconds());
        let done = plane.reap(LifecycleMode::Act, &leader, jiff::Timestamp::now()).await;
        eprintln!("{policy}, {pass}: {:.1} s", wall.elapsed().as_secs_f64());
        rows.push(Row {
            policy,
            pass,
            wall_s: wall.elapsed().as_secs_f64(),
            cpu_s: cpu_seconds() - cpu,
            head_requests: heads.take_dial_count(),
            writes: store.writes() - writes,
            acted: done.iter().filter(|r| r.action != "plan").count(),
            rss_mib: rss_mib(),
        });
    };
    let policy = |yaml: &str| {
        auth.set_mapping(TeamMapping::parse(&format!("{TEAMS}lifecycle:\n  ml-team: {yaml}\n")).unwrap());
    };

    policy("{ max_lifetime: 7d }");
    measure("max_lifetime 7d", "first (plans recorded)").await;
    measure("max_lifetime 7d", "steady").await;

    policy("{ idle_after: 2h }");
    let now = jiff::Timestamp::now();
    let uses: Vec<ClusterUse> = (0..clusters)
        .map(|i| ClusterUse {
            namespace: "ml-team".into(),
            name: format!("c{i:05}"),
            at: now,
        })
        .collect();
    ledger.record(&uses).await.unwrap();
    measure("idle_after 2h", "all in use through krayne").await;
    ledger
        .forget(
            jiff::Timestamp::now()
                .checked_add(jiff::SignedDuration::from_secs(1))
                .unwrap(),
        )
        .await
        .unwrap();
    for i in 0..clusters {
        heads.set_use(&format!("c{i:05}-head-x1"), 1.0, 0);
    }
    measure("idle_after 2h", "heads busy").await;
    for i in 0..clusters {
        heads.set_use(&format!("c{i:05}-head-x1"), 0.0, 600);
    }
    measure("idle_after 2h", "heads idle: first (idle times recorded)").await;
    measure("idle_after 2h", "heads idle: steady").await;
    if hanging > 0 {
        let every = 100 / hanging.min(100);
        for i in (0..clusters).step_by(every) {
            heads.hang(&format!("c{i:05}-head-x1"));
        }
        measure("idle_after 2h", "some heads hang: first").await;
        measure("idle_after 2h", "some heads hang: second").await;
        measure("idle_after 2h", "some heads hang: third").await;
    }

    let mut table = comfy_table::Table::new();
    table.load_style(comfy_table::presets::ASCII_MARKDOWN);
    table.set_header([
        "policy",
        "pass",
        "wall s",
        "CPU s",
        "requests to heads",
        "writes",
        "actions",
        "RSS MiB after",
    ]);
    for r in &rows {
        table.add_row([
            r.policy.to_owned(),
            r.pass.to_owned(),
            format!("{:.2}", r.wall_s),
            format!("{:.2}", r.cpu_s),
            r.head_requests.to_string(),
            r.writes.to_string(),
            r.acted.to_string(),
            format!("{:.0}", r.rss_mib),
        ]);
    }
    println!("{clusters} clusters ({hanging} % of heads hanging), one pass each\n\n{table}");
    let json: Vec<_> = rows
        .iter()
        .map(|r| {
            json!({"policy": r.policy, "pass": r.pass, "wall_s": r.wall_s, "cpu_s": r.cpu_s,
                   "head_requests": r.head_requests, "writes": r.writes, "actions": r.acted, "rss_mib": r.rss_mib})
        })
        .collect();
    println!("{}", json!({"bench": "reaper", "clusters": clusters, "passes": json}));
}
