//! `krayne logout`.

use krayne_client::auth::Provider;

use crate::{
    context::Context,
    failure::Failure,
    output::note,
    settings::{self, Settings},
};

use super::login::credential_store;

/// Forget your sign-in to the server (and a saved token); the identity
/// provider is asked to revoke the refresh token where it offers that.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) async fn run(ctx: &Context, _: Args) -> Result<(), Failure> {
    let server = ctx.server()?;
    let store = credential_store(ctx);
    let forgotten = store.remove(&server).map_err(Failure::Other)?;
    if let Some(credential) = &forgotten {
        // Best effort: the credential is gone from here either way.
        let revoked = match Provider::discover(&credential.issuer, &credential.client_id).await {
            Ok(provider) => {
                provider
                    .with_client_secret(credential.client_secret.clone())
                    .revoke(credential)
                    .await
            }
            Err(e) => Err(e),
        };
        match revoked {
            Ok(true) => note(&format!("revoked the sign-in at {}", credential.issuer)),
            Ok(false) => {}
            Err(e) => note(&format!("could not revoke the sign-in at {}: {e}", credential.issuer)),
        }
    }
    let had_token = ctx.settings.token.is_some() && ctx.settings.server.as_deref() == Some(server.as_str());
    if had_token {
        let saved = Settings {
            token: None,
            ..ctx.settings.clone()
        };
        settings::save(&ctx.settings_path, &saved)?;
    }
    match (forgotten, had_token) {
        (None, false) => note(&format!("not signed in to {server}")),
        _ => note(&format!("signed out of {server}")),
    }
    Ok(())
}
