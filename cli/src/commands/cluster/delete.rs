//! `krayne delete NAME`.

use std::io::IsTerminal as _;

use serde_json::json;

use crate::{context::Context, failure::Failure, output::note};

/// Delete a cluster; Kubernetes removes its pods and services.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Cluster name.
    name: String,
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
    /// Do not ask for confirmation (Krayne's `--force`). Without it, a
    /// terminal is asked; otherwise a `y` line on stdin confirms.
    #[arg(short, long, visible_alias = "force")]
    yes: bool,
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let namespace = ctx.namespace(args.namespace.as_deref()).await?;
    let target = format!("{namespace}/{}", args.name);
    if !args.yes && !confirmed(&target)? {
        return Err(Failure::Declined(format!("not deleted: {target}")));
    }
    let client = ctx.client()?;
    client.delete(&namespace, &args.name).await?;
    note(&format!("cluster {target} deleted"));
    if ctx.printer.structured() {
        return ctx
            .printer
            .data(&json!({"namespace": namespace, "name": args.name, "deleted": true}));
    }
    Ok(())
}

/// Asks whether to delete `target`: at a terminal with a prompt, else
/// from a line on stdin (`echo y | krayne delete NAME`, as scripts answer
/// Krayne's prompt). No line at all is a usage error, not a "no".
fn confirmed(target: &str) -> Result<bool, Failure> {
    if std::io::stdin().is_terminal() {
        let answer = dialoguer::Confirm::new()
            .with_prompt(format!("Delete cluster {target}?"))
            .default(false)
            .interact_opt()
            .map_err(|e| Failure::Other(format!("cannot ask for confirmation: {e}")))?;
        return Ok(answer == Some(true));
    }
    note(&format!("Delete cluster {target}? [y/N] (reading stdin)"));
    let mut line = String::new();
    let read = std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| Failure::Other(format!("cannot read the answer from stdin: {e}")))?;
    if read == 0 {
        return Err(Failure::Usage(format!(
            "refusing to delete {target} without confirmation: stdin is not a terminal and gave no answer; \
             pass --yes (or --force), or pipe `y`"
        )));
    }
    Ok(is_yes(&line))
}

/// `y` or `yes`, in any case, as a prompt takes it.
fn is_yes(answer: &str) -> bool {
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_y_or_yes_confirms() {
        for yes in ["y\n", "Y", " yes \n", "YES"] {
            assert!(super::is_yes(yes), "{yes:?}");
        }
        for no in ["", "n", "no", "yy", "sure"] {
            assert!(!super::is_yes(no), "{no:?}");
        }
    }
}
