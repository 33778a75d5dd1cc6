//! The `config` commands as one enum that dispatches itself: a new verb is
//! a variant here and its module beside this file.

use clap::Subcommand;

use crate::{context::Context, failure::Failure};

/// The client itself: sign-in, completions, version, and Krayne's
/// commands krayne replaces.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Sign in: through your identity provider (browser or device code),
    /// or save a token you were given.
    Login(super::login::Args),
    /// Forget your sign-in to the server.
    Logout(super::logout::Args),
    /// Print a shell completion script.
    Completions(super::completions::Args),
    /// Print the client's version, and the server's when one is configured.
    Version(super::version::Args),
    /// Krayne's `init` (a kubeconfig and context); refused with what
    /// replaces it.
    #[command(hide = true)]
    Init(super::krayne_only::Args),
    /// Krayne's `sandbox setup|status|teardown` (k3s in Docker); refused
    /// with what replaces it.
    #[command(hide = true)]
    Sandbox(super::krayne_only::Args),
}

impl Command {
    /// Runs the verb.
    pub(crate) async fn run(self, ctx: &Context) -> Result<(), Failure> {
        match self {
            Self::Login(args) => super::login::run(ctx, args).await,
            Self::Logout(args) => super::logout::run(ctx, args).await,
            Self::Completions(args) => super::completions::run(&args),
            Self::Version(args) => super::version::run(ctx, args).await,
            Self::Init(_) => Err(super::krayne_only::init()),
            Self::Sandbox(_) => Err(super::krayne_only::sandbox()),
        }
    }
}
