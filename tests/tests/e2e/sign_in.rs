//! People sign in through a real, OpenID Certified provider: panva's
//! `oidc-provider` (tests/portal/idp/provider.mjs), its login and consent
//! pages completed in Debian's Chromium (idp/sign-in.mjs). `krayne login`
//! by authorization code + PKCE with a loopback redirect, and by device
//! code; `whoami`; the SDK on the same kept sign-in; a refresh after the ID
//! token expired, without the person; `logout`; a revoked refresh token
//! ends in "sign in again". Kubernetes' ServiceAccount issuer is trusted at
//! the same time. The transcript goes to `<target>/tmp/sign-in.log`.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use krayne_client::{
    Client,
    auth::{CredentialStore, SignedIn},
};
use krayne_tests::{Env, EnvOptions, krayne_binary};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, BufReader};

use crate::portal::{chromium, node_project, project};

/// The ID tokens' lifetime at the test provider: short, so the refresh is
/// seen within the test.
const ID_TOKEN_TTL: i64 = 8;

/// The provider, running until dropped (its stdin closes).
struct Idp {
    issuer: String,
    _child: tokio::process::Child,
}

async fn start_idp(node: &Path) -> Idp {
    let mut child = tokio::process::Command::new(node)
        .current_dir(project())
        .arg("idp/provider.mjs")
        .env("IDP_CLIENT_ID", "krayne-cli")
        .env("IDP_ID_TOKEN_TTL", ID_TOKEN_TTL.to_string())
        .env("IDP_GROUPS", "ml-research")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let line = BufReader::new(stdout).lines().next_line().await.unwrap().unwrap();
    let ready: Value = serde_json::from_str(&line).unwrap();
    Idp {
        issuer: ready["issuer"].as_str().unwrap().to_owned(),
        _child: child,
    }
}

/// `krayne` with its own config directory.
struct Cli {
    config: PathBuf,
    server: String,
}

impl Cli {
    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(krayne_binary());
        c.arg("--config")
            .arg(&self.config)
            .args(["--server", &self.server])
            .args(args)
            .env_remove("KRAYNE_TOKEN")
            .env_remove("KRAYNE_SERVER")
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY")
            .env("NO_COLOR", "1")
            .kill_on_drop(true);
        c
    }

    /// Runs `krayne args…`: (exit code, stdout, stderr).
    async fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out = self.command(args).output().await.unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `krayne login args…`, the provider's pages completed in Chromium at
    /// the first URL it prints; what it printed.
    async fn login(&self, node: &Path, browser: &Path, args: &[&str], log: &mut String) -> String {
        let mut child = self
            .command(&[&["login"], args].concat())
            .stderr(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut printed = String::new();
        let url = loop {
            let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
                .await
                .expect("krayne login printed no URL within 30 s")
                .unwrap()
                .unwrap_or_else(|| panic!("krayne login ended without a URL:\n{printed}"));
            printed.push_str(&line);
            printed.push('\n');
            if let Some(url) = line.trim().strip_prefix("http") {
                break format!("http{url}");
            }
        };
        let walked = tokio::process::Command::new(node)
            .current_dir(project())
            .args(["idp/sign-in.mjs", &url, "alice"])
            .env("CHROMIUM", browser)
            .output()
            .await
            .unwrap();
        let steps = String::from_utf8_lossy(&walked.stdout).into_owned();
        assert!(
            walked.status.success(),
            "the browser did not get through:\n{steps}{}",
            String::from_utf8_lossy(&walked.stderr)
        );
        while let Some(line) = lines.next_line().await.unwrap() {
            printed.push_str(&line);
            printed.push('\n');
        }
        let status = child.wait().await.unwrap();
        log.push_str(&format!(
            "$ krayne login {}\n{printed}(chromium)\n{steps}\n",
            args.join(" ")
        ));
        assert!(status.success(), "krayne login failed:\n{printed}");
        printed
    }

    fn store(&self) -> CredentialStore {
        CredentialStore::at(self.config.with_file_name("credentials.yaml"))
    }
}

/// Waits until the kept ID token has expired.
async fn outlive(store: &CredentialStore, server: &str) {
    let expires = store.get(server).unwrap().unwrap().expires_at;
    let left = expires - jiff::Timestamp::now().as_second() + 1;
    tokio::time::sleep(Duration::from_secs(left.max(0).unsigned_abs())).await;
}

#[tokio::test]
async fn people_sign_in_through_a_certified_openid_provider() {
    let Some(node) = node_project("signing in at oidc-provider").await else {
        return;
    };
    let Some(browser) = chromium("signing in at oidc-provider") else {
        return;
    };
    let idp = start_idp(&node).await;
    let dir = tempfile::tempdir().unwrap();
    let issuers = dir.path().join("issuers.yaml");
    // No leeway: an expired ID token is refused at once, so a call that
    // passes after expiry passed on a refreshed one.
    std::fs::write(
        &issuers,
        format!(
            "- issuer: {}\n  audience: krayne-cli\n  algorithms: [RS256]\n  leeway_seconds: 0\n",
            idp.issuer
        ),
    )
    .unwrap();
    let env = Env::start_with(EnvOptions::with_args(&[
        "--issuers-file",
        issuers.to_str().unwrap(),
        "--login-issuer",
        &idp.issuer,
        "--login-client-id",
        "krayne-cli",
        "--login-scopes",
        "openid,email,profile,groups,offline_access",
        "--service-account-tokens",
        "--allow-hs256-with-jwks",
    ]))
    .await;
    let cli = Cli {
        config: dir.path().join("krayne").join("config.yaml"),
        server: env.url(),
    };
    let mut log = String::new();

    // The server tells the CLI where to sign in.
    let advertised = env.anonymous().get("/.well-known/krayne").await.expect(200).body;
    assert_eq!(advertised["login"]["issuer"], idp.issuer.as_str());
    assert_eq!(advertised["login"]["client_id"], "krayne-cli");

    // A pasted token and a provider's sign-in at once is a mistake.
    let (code, _, err) = cli.run(&["login", "--token", "t", "--device"]).await;
    assert!(code == 2 && err.contains("give one or the other"), "{err}");

    // Authorization code + PKCE, the redirect to krayne's loopback listener.
    let printed = cli.login(&node, &browser, &["--no-browser"], &mut log).await;
    assert!(printed.contains("authenticated as alice@example.com"), "{printed}");
    let store = cli.store();
    let kept = store.get(&env.url()).unwrap().expect("a kept sign-in");
    assert_eq!(
        (kept.subject.as_str(), kept.issuer.as_str()),
        ("alice", idp.issuer.as_str())
    );
    assert!(kept.refresh_token.is_some());
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(store.path()).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    let config = std::fs::read_to_string(&cli.config).unwrap();
    assert!(
        !config.contains("token"),
        "the sign-in is not in the config file: {config}"
    );

    let (code, out, err) = cli.run(&["whoami", "-o", "json"]).await;
    assert_eq!(code, 0, "{err}");
    let me: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(me["subject"], "alice");
    assert_eq!(me["issuer"], idp.issuer.as_str());
    assert_eq!(me["teams"], serde_json::json!(["ml-research"]));
    // The advertised scopes were asked for: the provider's groups came.
    assert_eq!(me["groups"], serde_json::json!(["ml-research"]));
    let (_, table, _) = cli.run(&["whoami"]).await;
    log.push_str(&format!("$ krayne whoami\n{table}\n"));
    assert!(table.contains(&idp.issuer), "{table}");

    // The SDK on the same kept sign-in.
    let sdk = Client::connect(env.url())
        .await
        .unwrap()
        .with_token_provider(SignedIn::new(env.url(), store.clone()));
    assert_eq!(sdk.whoami().await.unwrap().subject, "alice");

    // The ID token expires: the server refuses it, the CLI renews it.
    outlive(&store, &env.url()).await;
    env.rest(&kept.id_token).get("/v1/whoami").await.expect(401);
    let (code, out, err) = cli.run(&["whoami", "-o", "json"]).await;
    assert_eq!(code, 0, "no refresh after expiry: {err}");
    let renewed = store.get(&env.url()).unwrap().unwrap();
    assert_ne!(renewed.id_token, kept.id_token);
    assert!(renewed.expires_at > kept.expires_at);
    log.push_str(&format!(
        "(the ID token expired; krayne whoami renewed it: expires {} → {})\n{out}\n",
        kept.expires_at, renewed.expires_at
    ));
    // And so does the SDK, on its own, when it is due again.
    outlive(&store, &env.url()).await;
    assert_eq!(sdk.whoami().await.unwrap().subject, "alice");

    // Logout forgets the sign-in. The test provider is plain HTTP, where
    // RFC 7009 sends no token to a revocation endpoint: logout says so.
    let (code, _, err) = cli.run(&["logout"]).await;
    log.push_str(&format!("$ krayne logout\n{err}\n"));
    assert!(
        code == 0 && err.contains("not HTTPS") && err.contains("signed out"),
        "{err}"
    );
    assert_eq!(store.get(&env.url()).unwrap(), None);
    let (code, _, err) = cli.run(&["whoami"]).await;
    assert!(code == 4 && err.contains("missing bearer token"), "{err}");

    // The device grant, for SSH sessions and notebooks.
    let printed = cli.login(&node, &browser, &["--device"], &mut log).await;
    assert!(printed.contains("confirm the code"), "{printed}");
    let (code, _, err) = cli.run(&["whoami"]).await;
    assert_eq!(code, 0, "{err}");

    // Its refresh token revoked at the provider: after expiry, a clear
    // "sign in again" (the CLI's and the SDK's).
    let device = store.get(&env.url()).unwrap().unwrap();
    let discovery: Value = reqwest::get(format!("{}/.well-known/openid-configuration", idp.issuer))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let revoked = reqwest::Client::new()
        .post(discovery["revocation_endpoint"].as_str().unwrap())
        // A refresh token is base64url: nothing to escape in the form.
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "token={}&client_id=krayne-cli",
            device.refresh_token.clone().unwrap()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status().as_u16(), 200);
    outlive(&store, &env.url()).await;
    let (code, _, err) = cli.run(&["whoami"]).await;
    log.push_str(&format!(
        "(the refresh token revoked at the provider)\n$ krayne whoami\n{err}\n"
    ));
    assert!(code == 4 && err.contains("sign in again with `krayne login`"), "{err}");
    let sdk = Client::connect(env.url())
        .await
        .unwrap()
        .with_token_provider(SignedIn::new(env.url(), store.clone()));
    let refused = sdk.whoami().await.unwrap_err();
    assert!(refused.message().contains("sign in again"), "{refused:?}");

    std::fs::write(Path::new(env!("CARGO_TARGET_TMPDIR")).join("sign-in.log"), &log).unwrap();
}
