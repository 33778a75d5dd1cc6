//! `krayne-server sandbox`: everything on one machine, nothing to install.

use std::time::Duration;

use jsonwebtoken::Algorithm;

use crate::{
    app::{self, Parts},
    auth::{
        Authenticator, EXAMPLE_MAPPING, KeyRefresh, MintRequest, SessionKeys, TeamMapping, TokenRules, Verifier,
        VerifyingKey, load_mapping, mint, watch_mapping,
    },
    config::SandboxArgs,
    k8s,
    sandbox::{Sandbox, SandboxOptions},
    store::{self, DatabaseOptions, QueueOptions, Upkeep},
};

fn token(secret: &[u8], subject: &str, groups: &[&str]) -> Result<String, String> {
    let request = MintRequest {
        subject: subject.to_owned(),
        email: Some(subject.to_owned()),
        groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        ttl_seconds: 12 * 3600,
        issuer: "krayne".into(),
        audience: "krayne".into(),
    };
    mint(&request, Algorithm::HS256, secret)
}

/// Runs the sandbox until SIGINT/SIGTERM.
#[expect(clippy::print_stdout)]
pub(crate) async fn run(args: SandboxArgs) -> Result<(), String> {
    let sandbox = start_sandbox(&args).await?;
    let kubeconfig = args
        .kubeconfig_out
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("krayne-sandbox-{}.kubeconfig", std::process::id())));
    sandbox
        .write_kubeconfig(&kubeconfig)
        .map_err(|e| format!("cannot write {}: {e}", kubeconfig.display()))?;
    // The server is krayne's pod here, which clusters' NetworkPolicies
    // admit by its labels (its connections come from 127.0.0.1).
    sandbox
        .add_krayne_pod()
        .map_err(|e| format!("sandbox: krayne's pod: {e}"))?;
    let client = k8s::client_for_url(&sandbox.url()).map_err(|e| format!("sandbox client: {e}"))?;
    remove_dead_runs_audit_files(&std::env::temp_dir());
    let audit_file = std::env::temp_dir().join(format!("krayne-sandbox-{}-audit.db", std::process::id()));
    let audit_db = DatabaseOptions {
        url: format!("sqlite://{}", audit_file.display()),
        max_connections: 1,
        statement_timeout: Duration::from_secs(5),
        acquire_timeout: Duration::from_secs(5),
        ca_file: None,
    };
    // A fresh signing secret per run: tokens printed below die with it.
    let secret = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple()).into_bytes();
    // Pipelines sign in as Kubernetes ServiceAccounts, as in a real
    // cluster: the sandbox issues their tokens (TokenRequest).
    let refresh = KeyRefresh {
        ttl: Duration::from_secs(300),
        cooldown: Duration::from_secs(10),
        timeout: Duration::from_secs(5),
    };
    let accounts = super::service_account_issuer(None, "krayne", &client, refresh, vec![Algorithm::ES256], 24 * 3600)
        .with_reviewer(super::token_reviewer(&client, refresh));
    let verifier = Verifier::new(vec![VerifyingKey::hs256(&secret)], TokenRules::default()).and(accounts);
    // The sites `--sites N` makes, by name, for the mapping's check.
    let site_names: Vec<String> = if args.sites > 1 {
        (1..=usize::from(args.sites))
            .map(|n| site_name(n).to_string())
            .collect()
    } else {
        Vec::new()
    };
    let (mapping, hash) = match &args.teams {
        Some(file) => load_mapping(file, &site_names).map_err(|e| format!("--teams {e}"))?,
        None => (TeamMapping::parse(EXAMPLE_MAPPING)?, String::new()),
    };
    let auth = Authenticator::new(verifier, mapping);
    // A mapping of one's own reloads on change and on SIGHUP, as serve's.
    let reload = match &args.teams {
        Some(file) => Some(watch_mapping(auth.clone(), file.clone(), hash, true, site_names)?),
        None => None,
    };
    let upstream = super::upstream(args.service_upstream, &client);
    let others = other_sites(&args).await?;
    let upkeep = Upkeep {
        sweep_after: super::SWEEP_AFTER,
        ..Upkeep::default()
    };
    let sink = store::open(&audit_db, &QueueOptions::default(), upkeep, super::FIRST_UPKEEP).await?;
    let cache = super::cache_options(&args.cache);
    let fleet = if others.is_empty() {
        None
    } else {
        let entries = site_entries(&others);
        Some(super::sites::fleet(&entries, &client, &upstream, k8s::DEFAULT_TIMEOUT, cache.as_ref()).await?)
    };
    let home = if fleet.is_some() {
        site_name(1)
    } else {
        crate::domain::Site::local()
    };
    let kube = k8s::KubeClusterStore::new(client).with_site(home);
    let store: std::sync::Arc<dyn crate::domain::ClusterStore> = match &fleet {
        Some(fleet) => fleet.clone(),
        None => k8s::cluster_store(kube.clone(), cache.as_ref())?,
    };
    let mut parts = Parts::new(store, sink.clone(), auth);
    let kube = std::sync::Arc::new(kube);
    parts.rayjobs = Some(match &fleet {
        Some(fleet) => fleet.clone(),
        None => kube.clone(),
    });
    parts.kueue = Some(match &fleet {
        Some(fleet) => fleet.clone(),
        None => kube,
    });
    parts.run_ledger = Some(std::sync::Arc::new(sink.run_ledger()));
    parts.quota_lock = Some(std::sync::Arc::new(sink.admission_lock()));
    // One process: it records usage itself.
    parts.usage_ledger = Some(std::sync::Arc::new(sink.usage_ledger()));
    parts.usage_leadership = Some(std::sync::Arc::new(crate::control::background::SoleReplica));
    parts.activity = Some((std::sync::Arc::new(sink.activity_ledger()), Duration::from_secs(10)));
    parts.mapping_reload = reload;
    parts.grace = Duration::from_secs(5);
    // Sessions live as long as this sandbox; its notebooks serve under
    // their proxy path.
    parts.control.sessions.keys = Some(SessionKeys::random()?);
    parts.control.manifest.notebook_behind = Some(String::new());
    // As the chart does: every cluster gets its NetworkPolicy (the sandbox
    // stores it; it has no network plugin to enforce it).
    parts.control.network_policy = Some(crate::manifest::PolicyPeers {
        namespace: crate::sandbox::KRAYNE_NAMESPACE.into(),
        pod_labels: [crate::sandbox::KRAYNE_POD_LABEL]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into(),
        extra_ingress: Vec::new(),
    });
    // As the chart does: clusters require Ray's token authentication, with
    // a key this sandbox makes (or the one it is given).
    parts.control.ray_auth = Some(sandbox_ray_auth_key()?);
    parts.upstream = Some(match &fleet {
        Some(fleet) => fleet.clone(),
        None => upstream,
    });
    parts.ray = Some(super::ray_heads(super::DEFAULT_HEAD_ANSWER_BUDGET_MIB));
    parts.control.version = super::version_info(&[
        ("sandbox", true),
        ("watch-cache", args.cache.cache),
        ("service-tunnels", true),
        ("browser-sessions", true),
        ("service-account-tokens", true),
        ("sites", fleet.is_some()),
    ]);
    let api = std::net::SocketAddr::from(([127, 0, 0, 1], args.port));
    let ops = std::net::SocketAddr::from(([127, 0, 0, 1], args.ops_port));
    let running = app::start(parts, api, ops, app::shutdown_signal()).await?;
    let admin = token(&secret, "admin@example.com", &["platform-admins"])?;
    let alice = token(&secret, "alice@example.com", &["ml-research"])?;
    let url = format!("http://{}", running.api_addr);
    println!(
        "krayne sandbox is running (simulated Kubernetes; stop with Ctrl-C)\n\n\
         API (REST + gRPC)  {url}\n\
         API docs           {url}/docs\n\
         health/metrics     http://{ops}/readyz  http://{ops}/metrics\n\
         kubectl            kubectl --kubeconfig {kc} get rayclusters,pods -A\n\
                            (it serves get, list, watch, create, patch, delete, logs, port-forward\n\
                            and auth can-i; krayne tunnel names a cluster's services for you)\n\n\
         Your token (alice, team ml-research: editor on ml-team, with a quota; viewer on shared-*).\n\
         Paste this line once in each terminal you use; everything below refers to it:\n\
         export KRAYNE_SERVER={url} KRAYNE_TOKEN={alice} KRAYNE_NAMESPACE=ml-team\n\
           or keep it for every terminal: krayne login --server {url} --token \"$KRAYNE_TOKEN\" -n ml-team\n\
           (an admin of every namespace: export KRAYNE_ADMIN_TOKEN={admin})\n\n\
         Try it with curl:\n\
         curl -s -H \"Authorization: Bearer $KRAYNE_TOKEN\" {url}/v1/whoami\n\
         curl -s -H \"Authorization: Bearer $KRAYNE_TOKEN\" {url}/v1/namespaces/ml-team/quota\n\
         curl -s -X POST -H \"Authorization: Bearer $KRAYNE_TOKEN\" -H 'Content-Type: application/yaml' --data-binary 'name: demo' {url}/v1/namespaces/ml-team/clusters\n\
         curl -s -H \"Authorization: Bearer $KRAYNE_TOKEN\" '{url}/v1/namespaces/ml-team/clusters/demo/wait?timeout_seconds=60'\n\n\
         Or with the krayne CLI (cargo build -p krayne-cli puts it in target/debug/krayne):\n\
         krayne whoami\n\
         krayne create demo-cli --workers 2      # waits until it is ready\n\
         krayne get\n\
         krayne describe demo-cli\n\n\
         Use a cluster's services through the server (no kubeconfig):\n\
         curl -s -H \"Authorization: Bearer $KRAYNE_TOKEN\" {url}/v1/namespaces/ml-team/clusters/demo/services\n\
         curl -s -H \"Authorization: Bearer $KRAYNE_TOKEN\" {url}/v1/namespaces/ml-team/clusters/demo/services/dashboard/proxy/api/version\n\
         krayne open demo-cli        # the Ray dashboard in your browser, signed in\n\
         krayne tunnel demo-cli      # local ports for the dashboard, notebook, SSH, …\n\
         krayne ssh demo-cli -- hostname\n\
         krayne submit demo-cli -- python3 -c \"print('hello from the head')\"\n\n\
         Make a head fail, to see how krayne tells why (`krayne-server sandbox --help` lists the faults):\n\
         krayne create bad-image --set head.image=rayproject/ray:doesnotexist   # stops: the image cannot be pulled\n\
         krayne create crashy --set head.image=example.com/crash-loop:1         # stops: the head keeps crashing\n\
         krayne logs crashy --previous                                           # what the crashed head said\n\n\
         A pipeline signs in as its Kubernetes ServiceAccount (the ml-team namespace's default one\n\
         is on the ml-research team here):\n\
         kubectl --kubeconfig {kc} create token default -n ml-team --audience krayne > /tmp/krayne-token\n\
         env -u KRAYNE_TOKEN KRAYNE_TOKEN_FILE=/tmp/krayne-token krayne whoami\n\n\
         What this exposes on this machine (every local user can connect to 127.0.0.0/8):\n\
         - the API above: nothing without a token; health and metrics (namespaces' quota use) to anyone;\n\
         - the simulated Kubernetes: to whoever holds its kubeconfig's token ({kc});\n\
         - heads' ports at their pod IPs (127.x.y.z): each cluster's NetworkPolicy admits only its own pods\n  \
         and this server, recognised as your user's sockets (uid {uid}); another user's connection is refused;\n\
         - jobs and SSH sessions run {runs_as}.\n{sites}",
        sites = sites_banner(&kubeconfig, &others),
        ops = running.ops_addr,
        kc = kubeconfig.display(),
        uid = crate::sandbox::local_uid(),
        runs_as = if crate::sandbox::local_uid() == 0 {
            "as nobody, never as root"
        } else {
            "as you: run the sandbox as root to run them as nobody"
        },
    );
    tracing::info!(file = %audit_file.display(), "audit log (SQLite)");
    running.wait().await;
    sandbox.shutdown().await;
    let _ = std::fs::remove_file(&kubeconfig);
    for (other, file) in others {
        other.shutdown().await;
        let _ = std::fs::remove_file(file);
    }
    // The audit log lives as long as the run, as the tokens do.
    for suffix in ["", "-wal", "-shm"] {
        let mut file = audit_file.clone().into_os_string();
        file.push(suffix);
        let _ = std::fs::remove_file(file);
    }
    Ok(())
}

/// Removes the audit files of earlier sandbox runs that did not stop
/// cleanly (killed, crashed): `krayne-sandbox-<pid>-audit.db*` whose
/// process is gone.
fn remove_dead_runs_audit_files(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("krayne-sandbox-"))
            .and_then(|n| n.split_once("-audit.db"))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// A Ray token key of this sandbox's own: random, as long as it runs.
fn sandbox_ray_auth_key() -> Result<crate::domain::ray_auth::RayAuthKey, String> {
    let key = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
    crate::domain::ray_auth::RayAuthKey::new(key.as_bytes())
}

/// The name of the sandbox's `n`th site (from 1).
fn site_name(n: usize) -> crate::domain::Site {
    crate::domain::Site::new(&format!("site-{n}"))
}

/// The GPU type the sandbox's `n`th site offers.
fn site_gpu(n: usize) -> &'static str {
    ["a100", "h100", "l4", "a10"][(n - 1) % 4]
}

/// With `--sites N`, the sites past the first: each its own simulated
/// Kubernetes (KubeRay, heads), with a kubeconfig of its own.
async fn other_sites(args: &SandboxArgs) -> Result<Vec<(Sandbox, std::path::PathBuf)>, String> {
    let mut others = Vec::new();
    for n in 2..=usize::from(args.sites) {
        let sandbox = start_sandbox(args).await?;
        sandbox
            .add_krayne_pod()
            .map_err(|e| format!("sandbox site-{n}: krayne's pod: {e}"))?;
        let file = std::env::temp_dir().join(format!("krayne-sandbox-{}-site-{n}.kubeconfig", std::process::id()));
        sandbox
            .write_kubeconfig(&file)
            .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        others.push((sandbox, file));
    }
    Ok(others)
}

/// The sites file the sandbox would have: `site-1` is the first sandbox
/// (krayne's own), heaviest; each offers one GPU type.
fn site_entries(others: &[(Sandbox, std::path::PathBuf)]) -> Vec<crate::domain::sites::SiteEntry> {
    let site = |n: usize, kubeconfig: Option<std::path::PathBuf>| crate::domain::sites::SiteEntry {
        spec: crate::domain::sites::SiteSpec {
            name: site_name(n),
            weight: u32::try_from(100 / n).unwrap_or(1),
            region: Some(format!("sandbox-{n}")),
            gpu_types: vec![site_gpu(n).to_owned()],
            labels: std::collections::BTreeMap::new(),
        },
        kubeconfig,
        context: None,
    };
    std::iter::once(site(1, None))
        .chain(
            others
                .iter()
                .enumerate()
                .map(|(i, (_, file))| site(i + 2, Some(file.clone()))),
        )
        .collect()
}

/// What the banner says of the sites, with `--sites` above 1.
fn sites_banner(first: &std::path::Path, others: &[(Sandbox, std::path::PathBuf)]) -> String {
    if others.is_empty() {
        return String::new();
    }
    let mut text = String::from("\nSites (one API over several simulated Kubernetes clusters; docs/sites.md):\n");
    let files = std::iter::once(first).chain(others.iter().map(|(_, f)| f.as_path()));
    for (i, file) in files.enumerate() {
        let n = i + 1;
        text.push_str(&format!(
            "  {}  {} GPUs, weight {:<3}  kubectl --kubeconfig {} get rayclusters -A\n",
            site_name(n),
            site_gpu(n),
            100 / n,
            file.display()
        ));
    }
    text.push_str(
        "  krayne create gpu-job --set worker_groups[0].gpu_type=h100   # placed where h100s are\n\
         \x20 krayne create here --site site-2                            # or where you say\n",
    );
    text
}

/// Starts the sandbox with the options `krayne-server sandbox` uses.
async fn start_sandbox(args: &SandboxArgs) -> Result<Sandbox, String> {
    let mut options = SandboxOptions {
        namespaces: vec!["default".into(), "ml-team".into(), "shared-data".into()],
        ..SandboxOptions::default()
    };
    options.operator.time_scale = args.time_scale;
    Sandbox::start(options)
        .await
        .map_err(|e| format!("cannot start the sandbox: {e}"))
}
