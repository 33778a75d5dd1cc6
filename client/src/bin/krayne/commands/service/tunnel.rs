//! `krayne tunnel NAME [SERVICE...]` (alias `tun-open`): local ports that
//! reach a cluster's services through the server, or `--stdio` for one.

use std::{collections::BTreeMap, sync::atomic::Ordering, time::Duration};

use comfy_table::Cell;
use krayne_client::Forwarder;
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
/// `ssh -o ProxyCommand='krayne tunnel --stdio NAME ssh'`).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Cluster name.
    name: String,
    /// Services to open [default: every one the cluster declares].
    services: Vec<String>,
    /// Namespace [default: the config file's, or `default`].
    #[arg(short, long)]
    namespace: Option<String>,
    /// A local port for a service, e.g. `--port dashboard=8265` (repeatable).
    #[arg(long = "port", value_name = "SERVICE=PORT", value_parser = service_port)]
    ports: Vec<(String, u16)>,
    /// Pipe one service's connection through stdin/stdout.
    #[arg(long)]
    stdio: bool,
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
async fn bind_near(port: u16) -> Result<TcpListener, Failure> {
    for candidate in port..port.saturating_add(100) {
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", candidate)).await {
            return Ok(listener);
        }
    }
    TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| Failure::Other(format!("cannot listen on 127.0.0.1: {e}")))
}

fn local_url(service: &str, port: u16) -> String {
    match service {
        "client" => format!("ray://127.0.0.1:{port}"),
        "ssh" => format!("ssh -p {port} 127.0.0.1"),
        "dashboard" | "notebook" | "code-server" => format!("http://127.0.0.1:{port}"),
        _ => format!("127.0.0.1:{port}"),
    }
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let client = ctx.client()?;
    let namespace = ctx.namespace(args.namespace.as_deref());
    if args.stdio {
        let [service] = args.services.as_slice() else {
            return Err(Failure::Usage(
                "--stdio takes exactly one SERVICE, e.g. `krayne tunnel --stdio NAME ssh`".into(),
            ));
        };
        return stdio(&client, &namespace, &args.name, service).await;
    }
    let declared = client.list_services(&namespace, &args.name).await?;
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
                "cluster {} declares no service {service:?} (it has: {})",
                args.name,
                names.join(", ")
            )));
        };
        let listener = match chosen.get(service) {
            Some(port) => TcpListener::bind(("127.0.0.1", *port))
                .await
                .map_err(|e| Failure::Other(format!("cannot listen on 127.0.0.1:{port}: {e}")))?,
            None => bind_near(krayne_port(&args.name, &namespace, service)).await?,
        };
        let local = listener.local_addr().map(|a| a.port()).unwrap_or_default();
        rows.push(vec![
            Cell::new(service),
            Cell::new(local_url(service, local)),
            Cell::new(remote.port),
        ]);
        let forwarder = client.forward(&namespace, &args.name, service, listener);
        forwarders.push((service.clone(), local, forwarder));
    }
    ctx.printer.table(&["Service", "Local URL", "Remote Port"], rows)?;
    note("Tunnels open through the server; Ctrl-C closes them.");
    live_counts(&forwarders).await;
    Ok(())
}

/// Shows connection and byte counts on stderr until Ctrl-C.
async fn live_counts(forwarders: &[(String, u16, Forwarder)]) {
    let bar = indicatif::ProgressBar::new_spinner();
    bar.enable_steady_tick(Duration::from_millis(250));
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = tokio::signal::ctrl_c() => break,
        }
        let status: Vec<String> = forwarders
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
    note("Tunnels closed.");
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
