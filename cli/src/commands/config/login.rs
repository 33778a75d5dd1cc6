//! `krayne login`.

use krayne_client::{
    Client,
    auth::{Credential, CredentialStore, Provider, SignInError, advertised},
};

use crate::{
    context::Context,
    failure::Failure,
    output::note,
    settings::{self, Settings},
};

/// Scopes asked for when neither --scopes nor the server names any.
const DEFAULT_SCOPES: &str = "openid,email,profile,offline_access";

/// Sign in to a krayne server.
///
/// Through your identity provider: the browser opens (or, with
/// --no-browser or without a display, the URL is printed), and the
/// sign-in is kept and refreshed for you; --device signs in with a code
/// from any other device (SSH sessions, notebooks). The server tells
/// krayne where to sign in, so --server is enough. With --token (or
/// KRAYNE_TOKEN), the token you were given is saved instead.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    krayne login --server https://krayne.example.com\n  \
    krayne login --server https://krayne.example.com --device\n  \
    krayne login --server http://127.0.0.1:8080 --token \"$TOKEN\"")]
pub(crate) struct Args {
    /// Namespace to use when -n is not given.
    #[arg(short, long)]
    namespace: Option<String>,
    /// Save without checking the sign-in with the server.
    #[arg(long)]
    no_verify: bool,
    /// Sign in with a device code (RFC 8628): open the printed URL on any
    /// device and enter the code.
    #[arg(long, conflicts_with = "no_browser")]
    device: bool,
    /// Print the sign-in URL instead of opening a browser.
    #[arg(long)]
    no_browser: bool,
    /// The identity provider's issuer URL [default: what the server
    /// advertises].
    #[arg(long, value_name = "URL", requires = "client_id")]
    issuer: Option<String>,
    /// The OAuth client id krayne signs in as [default: what the server
    /// advertises].
    #[arg(long, value_name = "ID")]
    client_id: Option<String>,
    /// The OAuth client's secret, for providers that give even a CLI one
    /// (Google's "Desktop app" clients).
    #[arg(
        long,
        value_name = "SECRET",
        env = "KRAYNE_LOGIN_CLIENT_SECRET",
        hide_env_values = true
    )]
    client_secret: Option<String>,
    /// Scopes to ask for, comma-separated [default: the server's, else
    /// openid,email,profile,offline_access].
    #[arg(long, value_delimiter = ',')]
    scopes: Vec<String>,
}

pub(crate) async fn run(ctx: &Context, args: Args) -> Result<(), Failure> {
    let server = ctx
        .global
        .server
        .clone()
        .or_else(|| ctx.settings.server.clone())
        .ok_or_else(|| Failure::Usage("login needs --server URL (or KRAYNE_SERVER)".into()))?;
    let provider_flags = args.device || args.no_browser || args.issuer.is_some() || args.client_id.is_some();
    if ctx.global.token.is_some() && provider_flags {
        return Err(Failure::Usage(
            "--token (or KRAYNE_TOKEN) saves a token you were given; --device, --no-browser, --issuer and \
             --client-id sign in through your identity provider: give one or the other (unset KRAYNE_TOKEN)"
                .into(),
        ));
    }
    let (subject, issuer) = match ctx.global.token.clone() {
        Some(token) => (save_token(ctx, &args, &server, token).await?, None),
        None => {
            let credential = sign_in(ctx, &args, &server).await?;
            (
                Some(credential.email.clone().unwrap_or(credential.subject.clone())),
                Some(credential.issuer),
            )
        }
    };
    if ctx.printer.structured() {
        return ctx.printer.data(&serde_json::json!({
            "server": server,
            "subject": subject,
            "issuer": issuer,
            "namespace": args.namespace.or_else(|| ctx.settings.namespace.clone()),
            "config_file": ctx.settings_path.display().to_string(),
        }));
    }
    Ok(())
}

/// Saves a pasted token (checked with the server first).
async fn save_token(ctx: &Context, args: &Args, server: &str, token: String) -> Result<Option<String>, Failure> {
    let subject = if args.no_verify {
        None
    } else {
        let me = ctx.client()?.whoami().await?;
        note(&format!("authenticated as {}", me.subject));
        Some(me.subject)
    };
    let saved = Settings {
        server: Some(server.to_owned()),
        token: Some(token),
        namespace: args.namespace.clone().or_else(|| ctx.settings.namespace.clone()),
    };
    settings::save(&ctx.settings_path, &saved)?;
    note(&format!(
        "saved the server {server} and your token to {}",
        ctx.settings_path.display()
    ));
    Ok(subject)
}

/// Signs in through the identity provider and keeps the credential.
async fn sign_in(ctx: &Context, args: &Args, server: &str) -> Result<Credential, Failure> {
    let (issuer, client_id, scopes) = where_to_sign_in(args, server).await?;
    let provider = Provider::discover(&issuer, &client_id)
        .await
        .map_err(failure)?
        .with_client_secret(args.client_secret.clone());
    let credential = if args.device {
        let code = provider.start_device(&scopes).await.map_err(failure)?;
        match code.verification_uri_complete() {
            Some(url) => note(&format!(
                "To sign in, open this URL on any device and confirm the code {}:\n  {url}",
                code.user_code()
            )),
            None => note(&format!(
                "To sign in, open this URL on any device and enter the code {}:\n  {}",
                code.user_code(),
                code.verification_uri()
            )),
        }
        note(&format!(
            "Waiting for you to sign in (the code is good for {}s)…",
            code.expires_in().as_secs()
        ));
        provider.finish_device(&code).await.map_err(failure)?
    } else {
        let print_only = args.no_browser || !has_display();
        provider
            .sign_in_with_browser(&scopes, |url| {
                if print_only {
                    note(&format!("Open this URL in a browser to sign in:\n  {url}"));
                } else {
                    note(&format!(
                        "Opening your browser to sign in; if it does not open, visit:\n  {url}"
                    ));
                    if let Err(e) = open::that_detached(url) {
                        note(&format!("(could not open a browser: {e})"));
                    }
                }
            })
            .await
            .map_err(failure)?
    };
    if !args.no_verify {
        let me = Client::builder(server)
            .token(credential.id_token.clone())
            .connect_lazy()?
            .whoami()
            .await?;
        note(&format!(
            "authenticated as {}",
            me.email.as_deref().unwrap_or(&me.subject)
        ));
    }
    let store = credential_store(ctx);
    store.put(server, credential.clone()).map_err(Failure::Other)?;
    let saved = Settings {
        server: Some(server.to_owned()),
        // The sign-in replaces a pasted token.
        token: None,
        namespace: args.namespace.clone().or_else(|| ctx.settings.namespace.clone()),
    };
    settings::save(&ctx.settings_path, &saved)?;
    note(&format!(
        "signed in to {server} through {}; the sign-in is kept in {} and renewed automatically",
        credential.issuer,
        store.path().display()
    ));
    Ok(credential)
}

/// The issuer, client id and scopes: flags first, then what the server
/// advertises.
async fn where_to_sign_in(args: &Args, server: &str) -> Result<(String, String, Vec<String>), Failure> {
    let advertised = match (&args.issuer, &args.client_id) {
        (Some(_), Some(_)) => None,
        _ => advertised(server).await.map_err(failure)?,
    };
    let issuer = args
        .issuer
        .clone()
        .or_else(|| advertised.as_ref().map(|a| a.issuer.clone()))
        .ok_or_else(|| {
            Failure::Usage(format!(
                "{server} names no identity provider to sign in with: pass --issuer URL --client-id ID, \
                 or save a token you were given with --token"
            ))
        })?;
    let client_id = args
        .client_id
        .clone()
        .or_else(|| advertised.as_ref().map(|a| a.client_id.clone()))
        .ok_or_else(|| Failure::Usage("--issuer needs --client-id".into()))?;
    let scopes = if !args.scopes.is_empty() {
        args.scopes.clone()
    } else {
        advertised
            .map(|a| a.scopes)
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| DEFAULT_SCOPES.split(',').map(str::to_owned).collect())
    };
    Ok((issuer, client_id, scopes))
}

/// Where sign-ins are kept: `credentials.yaml` beside the config file.
pub(crate) fn credential_store(ctx: &Context) -> CredentialStore {
    CredentialStore::at(ctx.settings_path.with_file_name("credentials.yaml"))
}

/// A sign-in failure as the CLI reports it.
pub(crate) fn failure(e: SignInError) -> Failure {
    match e {
        SignInError::Denied(why) => Failure::Other(format!("sign-in failed: {why}")),
        other => Failure::Other(other.to_string()),
    }
}

/// Whether a browser can be opened here: a desktop session on Linux and
/// the BSDs; always elsewhere.
fn has_display() -> bool {
    if cfg!(any(
        target_os = "linux",
        target_os = "freebsd",
        target_os = "openbsd",
        target_os = "netbsd"
    )) {
        std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some()
    } else {
        true
    }
}
