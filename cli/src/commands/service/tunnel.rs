//! `krayne tunnel NAME [SERVICE...]`: local ports that reach a cluster's
//! services through the server, or `--stdio` for one; `krayne tun-open`
//! keeps them in the background, as Krayne's does.

use std::{collections::BTreeMap, sync::atomic::Ordering, time::Duration};

use comfy_table::Cell;
use krayne_client::{Forwarder, proto::HeadService};
use sha2::{Digest as _, Sha256};
use tokio::net::TcpListener;

use crate::{context::Context, failure::Failure, output::note};

/// Open local ports that reach a cluster's services through the server.
///
/// Each service gets Krayne's local port (10000 + sha256 of
/// "<cluster>/<namespace>/<service>" mod 50000), or the next free one, or
/// the one `--port` gives; the table goes to stdout, live connection and
/// byte counts to stderr. Ctrl-C closes them. With `--stdio`, one
/// service's connection is piped through stdin and stdout instead (for
/// `ssh -o ProxyCommand='krayne tunnel --stdio NAME ssh'`). With `--detach`
/// a background process keeps the ports open; `--list` shows such
/// processes, `--close NAME` (or `krayne tun-close NAME`) stops one.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Cluster name.
    #[arg(required_unless_present_any = ["list", "close"])]
    name: Option<String>,
    /// Services to open [default: every one the cluster declares].
    services: Vec<String>,
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
    /// A local port for a service, e.g. `--port dashboard=8265` (repeatable).
    #[arg(long = "port", value_name = "SERVICE=PORT", value_parser = service_port)]
    ports: Vec<(String, u16)>,
    /// Pipe one service's connection through stdin/stdout.
    #[arg(long, conflicts_with_all = ["detach", "list", "close"])]
    stdio: bool,
    /// Keep the tunnels open in a background process (state in
    /// $XDG_STATE_HOME/krayne/tunnels, mode 0600).
    #[arg(long, conflicts_with_all = ["list", "close"])]
    detach: bool,
    /// List the background tunnels.
    #[arg(long, conflicts_with = "close")]
    list: bool,
    /// Close the background tunnels of cluster NAME (nothing to close is
    /// not an error).
    #[arg(long, value_name = "NAME")]
    close: Option<String>,
    /// The background process's state file (set by --detach).
    #[arg(long, hide = true)]
    state_file: Option<std::path::PathBuf>,
    /// Tunnels already open in the background are shown, not refused
    /// (`tun-open`, as Krayne's).
    #[arg(skip)]
    reuse_open: bool,
}

/// `krayne tun-open NAME` (Krayne's): the tunnels in a background
/// process, and return; if they are open already, they are shown again.
pub(crate) async fn open_in_background(ctx: &Context, mut args: Args) -> Result<(), Failure> {
    if !(args.stdio || args.list || args.close.is_some()) {
        args.detach = true;
        args.reuse_open = true;
    }
    run(ctx, args).await
}

/// `krayne tun-close NAME`: `krayne tunnel --close NAME`.
#[derive(Debug, clap::Args)]
pub(crate) struct CloseArgs {
    /// Cluster name.
    name: String,
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
}

/// Closes the background tunnels of a cluster.
pub(crate) async fn close(ctx: &Context, args: CloseArgs) -> Result<(), Failure> {
    let namespace = ctx.namespace(args.namespace.as_deref()).await?;
    let closed = super::detached::close(&namespace, &args.name).await?;
    if closed {
        note(&format!("Closed the tunnels to {namespace}/{}.", args.name));
    } else {
        note(&format!("No tunnels to {namespace}/{} were open.", args.name));
    }
    if ctx.printer.structured() {
        return ctx
            .printer
            .data(&serde_json::json!({"namespace": namespace, "cluster": args.name, "closed": closed}));
    }
    Ok(())
}

fn service_port(text: &str) -> Result<(String, u16), String> {
    let (service, port) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?}: expected SERVICE=PORT, e.g. dashboard=8265"))?;
    let port: u16 = port.parse().map_err(|_| format!("{port:?} is not a port (1–65535)"))?;
    if port == 0 {
        return Err("port 0 is not a port; leave --port out to get a free one".into());
    }
    Ok((service.to_owned(), port))
}

/// Krayne's local port for a service: `10000 + sha256(key) mod 50000`,
/// the digest read as one big-endian number.
pub(crate) fn krayne_port(cluster: &str, namespace: &str, service: &str) -> u16 {
    let digest = Sha256::digest(format!("{cluster}/{namespace}/{service}").as_bytes());
    let rest = digest.iter().fold(0u32, |r, b| (r * 256 + u32::from(*b)) % 50_000);
    u16::try_from(10_000 + rest).unwrap_or(10_000)
}

/// Binds 127.0.0.1:`port`, else the next free port above it, else any.
pub(crate) async fn bind_near(port: u16) -> Result<TcpListener, Failure> {
    for candidate in port..port.saturating_add(100) {
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", candidate)).await {
            return Ok(listener);
        }
    }
    TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| Failure::Other(format!("cannot listen on 127.0.0.1: {e}")))
}

/// Where a tunnel to `service` is used locally: an HTTP service's URL
/// ends with the path it serves under (`base_path`: the notebook's base
/// URL; `/` for the others).
pub(crate) fn local_url(service: &HeadService, port: u16) -> String {
    let base = service.base_path.trim_start_matches('/');
    match service.name.as_str() {
        "client" => format!("ray://127.0.0.1:{port}"),
        // Krayne's form: scripts parse it as a URL.
        "ssh" => format!("ssh://127.0.0.1:{port}"),
        _ if service.protocol == "http" && base.is_empty() => format!("http://127.0.0.1:{port}"),
        _ if service.protocol == "http" => format!("http://127.0.0.1:{port}/{base}"),
        _ => format!("127.0.0.1:{port}"),
    }
}

/// The command that uses a local port, for services used by one (SSH).
pub(crate) fn local_command(service: &str, port: u16) -> Option<String> {
    (service == "ssh").then(|| format!("ssh -p {port} ray@127.0.0.1"))
}

/// What a person does with a local port: the command for SSH, else the URL.
pub(crate) fn local_use(open: &super::detached::OpenTunnel) -> &str {
    open.command.as_deref().unwrap_or(&open.local_url)
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    if args.list {
        return list(ctx);
    }
    if let Some(name) = args.close {
        let namespace = args.namespace;
        return close(ctx, CloseArgs { name, namespace }).await;
    }
    let Some(cluster) = args.name.clone() else {
        return Err(Failure::Usage("give the cluster's NAME".into()));
    };
    let client = ctx.client()?;
    let namespace = ctx.namespace(args.namespace.as_deref()).await?;
    if args.stdio {
        let [service] = args.services.as_slice() else {
            return Err(Failure::Usage(
                "--stdio takes exactly one SERVICE, e.g. `krayne tunnel --stdio NAME ssh`".into(),
            ));
        };
        return stdio(&client, &namespace, &cluster, service).await;
    }
    if args.detach {
        return detach(ctx, &args, &namespace, &cluster).await;
    }
    let declared = client.list_services(&namespace, &cluster).await?;
    let wanted: Vec<String> = if args.services.is_empty() {
        declared.iter().map(|s| s.name.clone()).collect()
    } else {
        args.services.clone()
    };
    let chosen: BTreeMap<String, u16> = args.ports.iter().cloned().collect();
    let mut forwarders: Vec<(String, u16, Forwarder)> = Vec::new();
    let mut rows = Vec::new();
    for service in &wanted {
        let Some(remote) = declared.iter().find(|s| &s.name == service) else {
            let names: Vec<&str> = declared.iter().map(|s| s.name.as_str()).collect();
            return Err(Failure::Usage(format!(
                "cluster {cluster} declares no service {service:?} (it has: {})",
                names.join(", ")
            )));
        };
        let listener = match chosen.get(service) {
            Some(port) => TcpListener::bind(("127.0.0.1", *port))
                .await
                .map_err(|e| Failure::Other(format!("cannot listen on 127.0.0.1:{port}: {e}")))?,
            None => bind_near(krayne_port(&cluster, &namespace, service)).await?,
        };
        let local = listener.local_addr().map(|a| a.port()).unwrap_or_default();
        rows.push(super::detached::OpenTunnel {
            service: service.clone(),
            remote_port: remote.port,
            local_port: local,
            local_url: local_url(remote, local),
            command: local_command(service, local),
        });
        let forwarder = client.forward_service(&namespace, &cluster, remote, listener);
        forwarders.push((service.clone(), local, forwarder));
    }
    if let Some(state_file) = &args.state_file {
        let state = super::detached::State {
            pid: std::process::id(),
            namespace: namespace.clone(),
            cluster: cluster.clone(),
            services: rows,
        };
        super::detached::write(state_file, &state)?;
        until_stopped(None).await;
        let _ = std::fs::remove_file(state_file);
        return Ok(());
    }
    print_table(ctx, &rows)?;
    ray_auth_note(&client, &namespace, &cluster, &wanted).await;
    note("Tunnels open through the server; Ctrl-C closes them.");
    until_stopped(Some(&forwarders)).await;
    note("Tunnels closed.");
    Ok(())
}

/// When a tunnel reaches Ray's dashboard or client and the cluster
/// requires Ray's token: how Ray's own clients get it (to stderr; `krayne
/// ray-credentials` prints the same to stdout). Asking is audited; a
/// refusal (a cluster with a token of its own, an older server) leaves the
/// tunnels open with a word on why.
async fn ray_auth_note(client: &krayne_client::Client, namespace: &str, cluster: &str, services: &[String]) {
    if !services.iter().any(|s| s == "dashboard" || s == "client") {
        return;
    }
    let credentials = match client.ray_credentials(namespace, cluster).await {
        Ok(credentials) => credentials,
        Err(e) => {
            note(&format!(
                "No Ray token for Ray's own clients through these tunnels: {}",
                e.message()
            ));
            return;
        }
    };
    if credentials.mode == "token" {
        note(&format!(
            "Ray requires its token on this cluster; for `ray job submit` and `ray.init` through these tunnels:\n  \
             {}",
            super::credentials::exports(&credentials.token).join("\n  ")
        ));
    }
}

/// The open tunnels: a table, or with `-o json` Krayne's list of
/// `{service, remote_port, local_port, local_url}` (and SSH's `command`).
fn print_table(ctx: &Context, open: &[super::detached::OpenTunnel]) -> Result<(), Failure> {
    if ctx.printer.structured() {
        let list = serde_json::to_value(open).map_err(|e| Failure::Other(e.to_string()))?;
        return ctx.printer.data(&list);
    }
    let rows = open
        .iter()
        .map(|t| vec![Cell::new(&t.service), Cell::new(local_use(t)), Cell::new(t.remote_port)])
        .collect();
    ctx.printer.table(&["Service", "Local URL", "Remote Port"], rows)
}

/// `--list`: the background tunnels.
fn list(ctx: &Context) -> Result<(), Failure> {
    let states = super::detached::list()?;
    if ctx.printer.structured() {
        let list = serde_json::to_value(&states).map_err(|e| Failure::Other(e.to_string()))?;
        return ctx.printer.data(&list);
    }
    if states.is_empty() {
        note("No background tunnels.");
        return Ok(());
    }
    let rows = states
        .iter()
        .flat_map(|s| {
            s.services.iter().map(|t| {
                vec![
                    Cell::new(&s.namespace),
                    Cell::new(&s.cluster),
                    Cell::new(&t.service),
                    Cell::new(local_use(t)),
                    Cell::new(s.pid),
                ]
            })
        })
        .collect();
    ctx.printer
        .table(&["NAMESPACE", "CLUSTER", "SERVICE", "LOCAL URL", "PID"], rows)
}

/// `--detach`: starts this command again in the background with a state
/// file, waits until its ports are bound, and prints them.
async fn detach(ctx: &Context, args: &Args, namespace: &str, cluster: &str) -> Result<(), Failure> {
    use std::os::unix::process::CommandExt as _;
    let state_file = super::detached::file(namespace, cluster)?;
    if let Some(open) = super::detached::read_live(&state_file) {
        if args.reuse_open {
            print_table(ctx, &open.services)?;
            note(&format!(
                "Tunnels to {namespace}/{cluster} are already open (pid {}).",
                open.pid
            ));
            return Ok(());
        }
        return Err(Failure::Usage(format!(
            "tunnels to {namespace}/{cluster} are already open (pid {}); `krayne tunnel --close {cluster} -n {namespace}` first",
            open.pid
        )));
    }
    let log = state_file.with_extension("log");
    let dir = super::detached::dir()?;
    std::fs::create_dir_all(&dir).map_err(|e| Failure::Other(format!("cannot create {}: {e}", dir.display())))?;
    let log_file =
        std::fs::File::create(&log).map_err(|e| Failure::Other(format!("cannot write {}: {e}", log.display())))?;
    let me = std::env::current_exe().map_err(|e| Failure::Other(format!("cannot find the krayne binary: {e}")))?;
    let mut command = std::process::Command::new(me);
    command.args(["tunnel", cluster, "-n", namespace]).args(&args.services);
    for (service, port) in &args.ports {
        command.arg("--port").arg(format!("{service}={port}"));
    }
    command.arg("--state-file").arg(&state_file);
    command.env("KRAYNE_SERVER", ctx.server()?);
    if let Some(token) = ctx.token() {
        command.env("KRAYNE_TOKEN", token);
    }
    // A sign-in is read (and renewed) from the same config directory.
    command.env("KRAYNE_CONFIG", &ctx.settings_path);
    let err = log_file
        .try_clone()
        .map_err(|e| Failure::Other(format!("cannot write {}: {e}", log.display())))?;
    // Its own process group: the terminal's Ctrl-C and hang-up are not its.
    command
        .stdin(std::process::Stdio::null())
        .stdout(log_file)
        .stderr(err)
        .process_group(0);
    let mut child = command
        .spawn()
        .map_err(|e| Failure::Other(format!("cannot start the background process: {e}")))?;
    for _ in 0..200 {
        if let Some(state) = super::detached::read_live(&state_file) {
            print_table(ctx, &state.services)?;
            let opened: Vec<String> = state.services.iter().map(|s| s.service.clone()).collect();
            ray_auth_note(&ctx.client()?, namespace, cluster, &opened).await;
            note(&format!(
                "Tunnels open in the background (pid {}); `krayne tunnel --close {cluster} -n {namespace}` closes them.",
                state.pid
            ));
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(Failure::Other(format!(
                "the background process ended ({status}): {}",
                said.trim()
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = child.kill();
    Err(Failure::Other(
        "the background process did not open its ports within 20 s".into(),
    ))
}

/// Waits for Ctrl-C, SIGTERM or a hang-up, showing connection and byte
/// counts on stderr meanwhile when given forwarders.
async fn until_stopped(forwarders: Option<&[(String, u16, Forwarder)]>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut hup)) = (signal(SignalKind::terminate()), signal(SignalKind::hangup())) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    let bar = match forwarders {
        Some(_) => indicatif::ProgressBar::new_spinner(),
        None => indicatif::ProgressBar::hidden(),
    };
    bar.enable_steady_tick(Duration::from_millis(250));
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
            _ = hup.recv() => break,
        }
        let status: Vec<String> = forwarders
            .unwrap_or_default()
            .iter()
            .map(|(service, _, f)| {
                let c = f.counts();
                let failed = c.failed.load(Ordering::Relaxed);
                format!(
                    "{service}: {} open, {} in all{}, {} up, {} down",
                    c.open.load(Ordering::Relaxed),
                    c.opened.load(Ordering::Relaxed),
                    if failed > 0 {
                        format!(" ({failed} refused)")
                    } else {
                        String::new()
                    },
                    indicatif::HumanBytes(c.to_service.load(Ordering::Relaxed)),
                    indicatif::HumanBytes(c.to_client.load(Ordering::Relaxed)),
                )
            })
            .collect();
        bar.set_message(status.join(" | "));
    }
    bar.finish_and_clear();
}

/// One tunnel on stdin/stdout.
async fn stdio(client: &krayne_client::Client, namespace: &str, cluster: &str, service: &str) -> Result<(), Failure> {
    let tunnel = client.open_tunnel(namespace, cluster, service).await?;
    let (mut from_service, mut to_service) = tokio::io::split(tunnel);
    let copied = {
        let up = async {
            let mut stdin = tokio::io::stdin();
            let _ = tokio::io::copy(&mut stdin, &mut to_service).await;
            let _ = tokio::io::AsyncWriteExt::shutdown(&mut to_service).await;
        };
        let down = async {
            let mut stdout = tokio::io::stdout();
            let copied = tokio::io::copy(&mut from_service, &mut stdout).await;
            let _ = tokio::io::AsyncWriteExt::flush(&mut stdout).await;
            copied
        };
        tokio::pin!(up, down);
        tokio::select! {
            copied = &mut down => copied,
            () = &mut up => down.await,
        }
    };
    let tunnel = from_service.unsplit(to_service);
    tunnel.closed().await?;
    copied
        .map(|_| ())
        .map_err(|e| Failure::Other(format!("cannot write to stdout: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn krayne_ports_are_stable_and_in_range() {
        let p = krayne_port("demo", "ml-team", "dashboard");
        assert_eq!(p, krayne_port("demo", "ml-team", "dashboard"));
        assert!((10_000..60_000).contains(&p));
        assert_ne!(p, krayne_port("demo", "ml-team", "notebook"));
    }

    #[test]
    fn service_ports_are_read_strictly() {
        assert_eq!(service_port("dashboard=8265").unwrap(), ("dashboard".into(), 8265));
        assert!(service_port("dashboard").is_err());
        assert!(service_port("dashboard=0").is_err());
        assert!(service_port("dashboard=70000").is_err());
    }
}
