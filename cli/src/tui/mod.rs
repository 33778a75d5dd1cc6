//! `krayne tui`: a live terminal explorer of clusters over the server.
//!
//! [`app`] holds the state and turns keys and answers into effects,
//! [`ui`] draws it, [`driver`] makes the calls and runs the loop; only the
//! driver touches the terminal or the network.

pub(crate) mod app;
mod command;
mod driver;
mod filter;
#[cfg(test)]
mod fixtures;
mod form;
mod recent;
pub(crate) mod ui;

use std::io::IsTerminal as _;

use crate::{context::Context, failure::Failure};

/// A live terminal UI: the clusters of a namespace (or all), their detail,
/// services, tunnels and jobs. `?` lists the keys.
#[derive(Debug, clap::Args)]
#[command(after_help = "Keys: Enter detail · c create · s scale · d delete · t tunnels · \
o open in the browser · / filter (status: ns: service:) · n namespace · r refresh · \
Tab sort · Ctrl+P commands · ? help · q back/quit")]
pub(crate) struct Args {
    /// Namespace [default: KRAYNE_NAMESPACE, the config file's, or the one you may use].
    #[arg(short, long)]
    namespace: Option<String>,
    /// Every namespace you may see.
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    all_namespaces: bool,
}

/// Takes over the terminal until `q`, restoring it however the UI ends.
pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(Failure::Usage(
            "krayne tui needs a terminal; `krayne get -w` prints changes as lines instead".into(),
        ));
    }
    let client = ctx.client()?;
    // With -A the home namespace only says where `c` creates: someone with
    // no namespace of their own may still look at everything.
    let home = match ctx.namespace(args.namespace.as_deref()).await {
        Ok(home) => home,
        Err(_) if args.all_namespaces => String::new(),
        Err(e) => return Err(e),
    };
    let namespace = (!args.all_namespaces).then(|| home.clone());
    let (app, first) = app::App::new(namespace, home, recent::load());
    // `init` also restores the terminal if anything panics.
    let mut terminal = match ratatui::try_init() {
        Ok(terminal) => terminal,
        Err(e) => {
            // It may have got as far as raw mode.
            let _ = ratatui::try_restore();
            return Err(Failure::Other(format!("cannot take over the terminal: {e}")));
        }
    };
    let result = driver::run(&mut terminal, client, app, first).await;
    let restored = ratatui::try_restore();
    let links = result?;
    restored.map_err(|e| Failure::Other(format!("cannot restore the terminal: {e}")))?;
    // Unwrapped, one per line, in the scrollback: copyable whole.
    for (what, url) in links {
        crate::output::note(&format!("Sign-in link for {what} (open it once, within a minute):"));
        crate::output::out(&format!("{url}\n"))?;
    }
    Ok(())
}
