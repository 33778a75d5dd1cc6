//! Krayne's commands and options that have no meaning here (`init`,
//! `sandbox …`, `--kubeconfig`): krayne talks to a krayne server, which
//! talks to Kubernetes. Each is refused with what replaces it, rather than
//! clap's "unrecognized" and a tip about a look-alike option.

use crate::failure::Failure;

/// Whatever Krayne's command was given.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    rest: Vec<String>,
}

/// `krayne init` → `krayne login`.
pub(crate) fn init() -> Failure {
    Failure::Usage(
        "`krayne init` is Krayne's: it picks a kubeconfig and a context, and krayne does not talk to Kubernetes \
         itself. Sign in to your krayne server instead: `krayne login --server URL --token TOKEN` (or set \
         KRAYNE_SERVER and KRAYNE_TOKEN)."
            .into(),
    )
}

/// `krayne sandbox …` → `krayne-server sandbox`.
pub(crate) fn sandbox() -> Failure {
    Failure::Usage(
        "`krayne sandbox setup|status|teardown` is Krayne's (k3s in Docker). krayne's sandbox is \
         `krayne-server sandbox`: a server on a simulated Kubernetes, which prints a token and the lines to use \
         (stop it with Ctrl-C)."
            .into(),
    )
}

/// `--kubeconfig` → `krayne login`.
pub(crate) fn kubeconfig() -> Failure {
    Failure::Usage(
        "--kubeconfig is Krayne's: krayne talks to a krayne server, which holds the Kubernetes credentials. \
         Pass --server URL and --token TOKEN (or KRAYNE_SERVER and KRAYNE_TOKEN), or run `krayne login`."
            .into(),
    )
}
