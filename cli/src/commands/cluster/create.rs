//! `krayne create NAME`.

use std::{path::PathBuf, time::Duration};

use krayne_client::{ClusterConfig, CreateOptions, proto};
use serde_json::json;

use crate::{context::Context, failure::Failure, output::note, parse};

/// Create a cluster and wait until it is ready (`--no-wait` returns at
/// once). Settings are applied in this order, later ones winning: the
/// file (`-f`), the flags (`--workers`, `--cpus-in-head`, …), then
/// `--set`. Flags that shape workers apply to the first worker group.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  krayne create demo -n ml-team --workers 2          # waits until it is ready
  krayne create demo --no-wait -o json               # returns once created
  krayne create -f cluster.yaml                 # the name (and namespace) from the file
  krayne create demo -f cluster.yaml --set head.cpus=4 --dry-run -o yaml
  krayne create demo -f old-krayne.yaml --strict --dry-run   # exit 2 on any unknown key
  krayne create big --gpus-per-worker 4 --queue --timeout 2h # waits in line for quota, then until ready")]
pub(crate) struct Args {
    /// Cluster name (lowercase letters, digits and '-'); replaces the
    /// file's [default: the file's `name`].
    name: Option<String>,
    /// Namespace [default: the file's, KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
    /// Krayne config file (YAML or JSON).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    file: Option<PathBuf>,
    /// Desired workers in the first worker group.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse::count)]
    workers: Option<u32>,
    /// Autoscaler lower bound of the first worker group.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse::count)]
    min_workers: Option<u32>,
    /// Autoscaler upper bound of the first worker group.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse::count)]
    max_workers: Option<u32>,
    /// Turn Ray's autoscaler off (the worker count is then fixed).
    #[arg(long)]
    no_autoscaling: bool,
    /// GPUs per worker in the first worker group.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse::count)]
    gpus_per_worker: Option<u32>,
    /// Head CPU, a Kubernetes quantity (2, 500m).
    #[arg(long, value_name = "CPUS")]
    cpus_in_head: Option<String>,
    /// Head memory, a Kubernetes quantity (8Gi).
    #[arg(long, value_name = "MEMORY")]
    memory_in_head: Option<String>,
    /// Set any config field, e.g. head.image=rayproject/ray:2.43.0 or
    /// worker_groups[1].replicas=2 (repeatable; an empty value resets it).
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse::assignment)]
    set: Vec<String>,
    /// Return once the cluster is created, without waiting until it is
    /// ready (by default create waits, as Krayne's does).
    #[arg(long, conflicts_with = "wait")]
    no_wait: bool,
    /// Wait until the cluster is ready: the default (kept for scripts
    /// that say so).
    #[arg(long, hide = true)]
    wait: bool,
    /// How long to wait until it is ready (300, 90s, 10m); past it, exit 6
    /// with the status it had.
    #[arg(long, value_parser = parse::duration, default_value = "5m", value_name = "DURATION")]
    timeout: Duration,
    /// Check everything and print the manifest; create nothing.
    #[arg(long)]
    dry_run: bool,
    /// What to do with keys below the top level that the cluster model
    /// does not know, and values converted as Krayne converts them ("2"
    /// for a number, "yes" for a boolean): refuse them, print a warning
    /// for each on stderr, or accept them silently.
    #[arg(long, value_enum, default_value_t = FieldValidation::Warn, value_name = "MODE")]
    field_validation: FieldValidation,
    /// Refuse what would only be warned about (`--field-validation
    /// strict`): a mistyped key fails the create, or the `--dry-run`, with
    /// exit 2.
    #[arg(long, conflicts_with = "field_validation")]
    strict: bool,
    /// When the cluster does not fit the namespace's quota, wait in the
    /// namespace's line (created suspended, admitted in order as quota
    /// frees) instead of failing; the wait shows its place as it moves.
    /// `--queue=false` fails even where the namespace queues by default.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    queue: Option<bool>,
    /// The site (Kubernetes cluster) to create it in, when the server
    /// fronts several; by default the first, by weight, that your team may
    /// use, where the namespace exists and that offers the GPU type
    /// (`krayne create --dry-run` says where it would go and why).
    #[arg(long, value_name = "SITE")]
    site: Option<String>,
    /// The GPU type the first worker group's workers need (a100, h100):
    /// the cluster goes to a site that offers it.
    #[arg(long, value_name = "TYPE")]
    gpu_type: Option<String>,
}

/// `--field-validation`, as kubectl spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FieldValidation {
    /// Refuse them, each at its field path.
    Strict,
    /// Accept them; print `Warning: <field>: <what>` for each.
    Warn,
    /// Accept them silently, as Krayne does.
    Ignore,
}

impl From<FieldValidation> for proto::FieldValidation {
    fn from(mode: FieldValidation) -> Self {
        match mode {
            FieldValidation::Strict => Self::Strict,
            FieldValidation::Warn => Self::Warn,
            FieldValidation::Ignore => Self::Ignore,
        }
    }
}

impl Args {
    /// The flags as overrides, applied after the file.
    fn overrides(&self) -> Vec<String> {
        let group = "worker_groups[0]";
        let mut o = Vec::new();
        let mut put = |key: String, value: Option<String>| {
            if let Some(v) = value {
                o.push(format!("{key}={v}"));
            }
        };
        put(format!("{group}.replicas"), self.workers.map(|n| n.to_string()));
        put(format!("{group}.min_replicas"), self.min_workers.map(|n| n.to_string()));
        put(format!("{group}.max_replicas"), self.max_workers.map(|n| n.to_string()));
        put(format!("{group}.gpus"), self.gpus_per_worker.map(|n| n.to_string()));
        put(
            format!("{group}.gpu_type"),
            self.gpu_type.as_ref().map(|t| json!(t).to_string()),
        );
        put("site".into(), self.site.as_ref().map(|s| json!(s).to_string()));
        // Quoted so `--cpus-in-head 2` stays the quantity "2".
        put(
            "head.cpus".into(),
            self.cpus_in_head.as_ref().map(|q| json!(q).to_string()),
        );
        put(
            "head.memory".into(),
            self.memory_in_head.as_ref().map(|q| json!(q).to_string()),
        );
        put(
            "autoscaler.enabled".into(),
            self.no_autoscaling.then(|| "false".to_owned()),
        );
        o
    }
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let config = match &args.file {
        Some(path) => ClusterConfig::from_file(path)?,
        None => ClusterConfig::default(),
    };
    let name = match (&args.name, config.get_str("name")) {
        (Some(name), _) => name.clone(),
        (None, Some(name)) => name.to_owned(),
        (None, None) => {
            let why = match &args.file {
                Some(file) => format!("{} has no `name:`; give the cluster's NAME", file.display()),
                None => "give the cluster's NAME (or a file with `name:` through -f)".to_owned(),
            };
            return Err(Failure::Usage(why));
        }
    };
    let namespace = ctx
        .namespace(args.namespace.as_deref().or(config.get_str("namespace")))
        .await?;
    let config = config
        .name(&name)
        .namespace(&namespace)
        .set_all(&args.overrides())?
        .set_all(&args.set)?;
    let client = ctx.client()?;
    let mode = if args.strict {
        FieldValidation::Strict
    } else {
        args.field_validation
    };
    let options = CreateOptions {
        dry_run: args.dry_run,
        wait: None,
        field_validation: mode.into(),
        queue: args.queue,
    };
    let created = client.create_with(config, options).await?;
    for warning in &created.warnings {
        let text = format!("Warning: {}: {}", warning.field, warning.description);
        // The field names keys of the user's file: never let them drive the terminal.
        let mut printable = String::with_capacity(text.len());
        for c in text.chars() {
            if c.is_control() {
                printable.extend(c.escape_default());
            } else {
                printable.push(c);
            }
        }
        note(&printable);
    }
    if !created.warnings.is_empty() {
        note("hint: --strict refuses these (exit 2) instead of passing them; --field-validation ignore keeps quiet");
    }
    if args.dry_run {
        let with = match created.warnings.len() {
            0 => String::new(),
            1 => " with the warning above".to_owned(),
            n => format!(" with the {n} warnings above"),
        };
        note(&format!(
            "dry run: {namespace}/{name} is valid{with}; this manifest would be created{}",
            placed(&created.cluster, created.placement.as_deref())
        ));
        return ctx.printer.data(&created.manifest);
    }
    if super::WAITING.contains(&created.cluster.status.as_str()) {
        note(&format!(
            "cluster {namespace}/{name} created, waiting in line for quota: {}",
            super::line_place(&created.cluster)
        ));
    } else {
        note(&format!(
            "cluster {namespace}/{name} created{}",
            placed(&created.cluster, created.placement.as_deref())
        ));
    }
    if args.no_wait {
        return super::print_cluster(ctx, &created.cluster);
    }
    let cluster = super::wait_ready(&client, &namespace, &name, args.timeout).await?;
    super::print_cluster(ctx, &cluster)?;
    if !ctx.printer.structured() {
        addresses(ctx, &client, &namespace, &name).await?;
    }
    Ok(())
}

/// ` in site S (why)` when the server fronts several sites; the server's
/// words printed escaped.
fn placed(cluster: &proto::ClusterInfo, why: Option<&str>) -> String {
    match why {
        Some(why) => format!(
            " in site {} ({})",
            crate::output::printable(&cluster.site, false),
            crate::output::printable(why, false)
        ),
        None => String::new(),
    }
}

/// The ready cluster's addresses, as Krayne shows them after a create:
/// each service, where it answers, and the command that opens it.
async fn addresses(ctx: &Context, client: &krayne_client::Client, namespace: &str, name: &str) -> Result<(), Failure> {
    // The cluster is there either way: its addresses are a courtesy.
    let Ok(services) = client.list_services(namespace, name).await else {
        return Ok(());
    };
    let server = ctx.server()?;
    let ns = format!(" -n {namespace}");
    let rows = services
        .iter()
        .map(|s| {
            let reach = crate::commands::service::access(&server, namespace, name, &s.name, Some(&s.proxy_url));
            let open = match s.name.as_str() {
                "dashboard" => format!("krayne open {name}{ns}"),
                "notebook" | "code-server" => format!("krayne open {name} {}{ns}", s.name),
                "ssh" => format!("krayne ssh {name}{ns}"),
                other => format!("krayne tunnel {name} {other}{ns}"),
            };
            vec![
                comfy_table::Cell::new(&s.name),
                comfy_table::Cell::new(reach),
                comfy_table::Cell::new(open),
            ]
        })
        .collect();
    crate::output::out("\n")?;
    ctx.printer.table(&["SERVICE", "ADDRESS", "OPEN IT WITH"], rows)
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use crate::cli::{Cli, Command};

    fn overrides(line: &[&str]) -> Vec<String> {
        let cli = Cli::try_parse_from([&["krayne", "create", "c"][..], line].concat()).unwrap();
        let Command::Cluster(super::super::Command::Create(args)) = cli.command else {
            panic!()
        };
        args.overrides()
    }

    #[test]
    fn krayne_flags_become_overrides_of_the_first_group_and_head() {
        assert_eq!(
            overrides(&[
                "--workers",
                "3",
                "--min-workers",
                "1",
                "--max-workers",
                "5",
                "--gpus-per-worker",
                "1",
                "--cpus-in-head",
                "2",
                "--memory-in-head",
                "8Gi",
                "--no-autoscaling"
            ]),
            [
                "worker_groups[0].replicas=3",
                "worker_groups[0].min_replicas=1",
                "worker_groups[0].max_replicas=5",
                "worker_groups[0].gpus=1",
                "head.cpus=\"2\"",
                "head.memory=\"8Gi\"",
                "autoscaler.enabled=false",
            ]
        );
        assert!(overrides(&[]).is_empty());
    }
}
