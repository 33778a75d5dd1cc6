//! Signing in through an OpenID provider (openidconnect): discovery, the
//! authorization code with PKCE and a loopback redirect (RFC 8252), the
//! device authorization grant (RFC 8628), refresh and revocation. ID
//! tokens are verified against the provider's keys before they are kept.

use std::{convert::Infallible, future::Future, pin::Pin, time::Duration};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode, body::Incoming};
use openidconnect::{
    AdditionalProviderMetadata, AsyncHttpClient, AuthorizationCode, ClientId, ClientSecret, CsrfToken,
    DeviceAuthorizationUrl, EndpointMaybeSet, EndpointNotSet, EndpointSet, HttpRequest, HttpResponse, IssuerUrl, Nonce,
    OAuth2TokenResponse, PkceCodeChallenge, ProviderMetadata, RedirectUrl, RefreshToken, RequestTokenError,
    RevocationUrl, Scope,
    core::{
        CoreAuthDisplay, CoreAuthenticationFlow, CoreClaimName, CoreClaimType, CoreClient, CoreClientAuthMethod,
        CoreDeviceAuthorizationResponse, CoreErrorResponseType, CoreGrantType, CoreJsonWebKey,
        CoreJweContentEncryptionAlgorithm, CoreJweKeyManagementAlgorithm, CoreResponseMode, CoreResponseType,
        CoreRevocableToken, CoreSubjectIdentifierType, CoreTokenResponse,
    },
};
use serde::{Deserialize, Serialize};

use super::Credential;

/// How long a person has to finish signing in.
const SIGN_IN_TIMEOUT: Duration = Duration::from_secs(300);
/// Timeout of one request to the provider.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// Why signing in (or staying signed in) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignInError {
    /// The provider could not be used: not reachable, or a strange answer.
    #[error("{0}")]
    Provider(String),
    /// The person refused, or did not finish in time.
    #[error("{0}")]
    Denied(String),
    /// The sign-in has ended (its refresh token was revoked or expired):
    /// only signing in again helps.
    #[error("{0}")]
    Ended(String),
    /// Nobody has signed in to this server.
    #[error("{0}")]
    NotSignedIn(String),
}

/// The provider's endpoints beyond core discovery.
#[derive(Clone, Debug, Deserialize, Serialize)]
struct MoreEndpoints {
    #[serde(default)]
    device_authorization_endpoint: Option<DeviceAuthorizationUrl>,
    #[serde(default)]
    revocation_endpoint: Option<RevocationUrl>,
}

impl AdditionalProviderMetadata for MoreEndpoints {}

type Metadata = ProviderMetadata<
    MoreEndpoints,
    CoreAuthDisplay,
    CoreClientAuthMethod,
    CoreClaimName,
    CoreClaimType,
    CoreGrantType,
    CoreJweContentEncryptionAlgorithm,
    CoreJweKeyManagementAlgorithm,
    CoreJsonWebKey,
    CoreResponseMode,
    CoreResponseType,
    CoreSubjectIdentifierType,
>;

type Client =
    CoreClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointMaybeSet, EndpointMaybeSet>;

/// reqwest 0.13 as openidconnect's HTTP client; redirects are not
/// followed (a provider's redirect must not send a token elsewhere).
#[derive(Clone)]
struct Http(reqwest::Client);

/// A failed request to the provider.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct HttpError(String);

impl<'c> AsyncHttpClient<'c> for Http {
    type Error = HttpError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let url = parts.uri.to_string();
            let response = self
                .0
                .request(parts.method, &url)
                .headers(parts.headers)
                .body(body)
                .send()
                .await
                .map_err(|e| HttpError(format!("{url}: {e}")))?;
            let mut answer = Response::builder().status(response.status());
            for (name, value) in response.headers() {
                answer = answer.header(name, value);
            }
            let body = response.bytes().await.map_err(|e| HttpError(format!("{url}: {e}")))?;
            answer.body(body.to_vec()).map_err(|e| HttpError(format!("{url}: {e}")))
        })
    }
}

/// The device grant's first step: what the person is shown.
#[derive(Debug)]
pub struct DeviceCode {
    details: CoreDeviceAuthorizationResponse,
    scopes: Vec<String>,
}

impl DeviceCode {
    /// Where to go.
    pub fn verification_uri(&self) -> &str {
        self.details.verification_uri().as_str()
    }

    /// Where to go with the code filled in, when the provider offers it.
    pub fn verification_uri_complete(&self) -> Option<&str> {
        self.details.verification_uri_complete().map(|u| u.secret().as_str())
    }

    /// The code to enter there.
    pub fn user_code(&self) -> &str {
        self.details.user_code().secret()
    }

    /// How long the code is good for.
    pub fn expires_in(&self) -> Duration {
        self.details.expires_in()
    }
}

/// An OpenID provider and krayne's public client there.
#[derive(Clone)]
pub struct Provider {
    metadata: Metadata,
    issuer: String,
    client_id: String,
    client_secret: Option<String>,
    http: Http,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .finish()
    }
}

impl Provider {
    /// Reads `issuer`'s discovery document and keys, for `client_id`.
    pub async fn discover(issuer: &str, client_id: &str) -> Result<Self, SignInError> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| SignInError::Provider(format!("HTTP client: {e}")))?;
        let http = Http(http);
        let url = IssuerUrl::new(issuer.to_owned())
            .map_err(|e| SignInError::Provider(format!("{issuer:?} is not an issuer URL: {e}")))?;
        let metadata = Metadata::discover_async(url, &http).await.map_err(|e| {
            SignInError::Provider(format!("cannot read {issuer}'s OpenID configuration: {}", chain(&e)))
        })?;
        Ok(Self {
            metadata,
            issuer: issuer.to_owned(),
            client_id: client_id.to_owned(),
            client_secret: None,
            http,
        })
    }

    /// Also sends `secret`, for providers that give even a CLI's client
    /// one (Google's "Desktop app" clients).
    pub fn with_client_secret(mut self, secret: Option<String>) -> Self {
        self.client_secret = secret;
        self
    }

    /// The issuer URL.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    fn client(&self) -> Client {
        CoreClient::from_provider_metadata(
            self.metadata.clone(),
            ClientId::new(self.client_id.clone()),
            self.client_secret.clone().map(ClientSecret::new),
        )
    }

    /// Signs in through the browser: a loopback listener on 127.0.0.1
    /// receives the code (RFC 8252 §7.3); `open` is handed the URL to
    /// visit (it opens a browser, or prints it).
    pub async fn sign_in_with_browser(
        &self,
        scopes: &[String],
        open: impl FnOnce(&str),
    ) -> Result<Credential, SignInError> {
        let io = |e: std::io::Error| SignInError::Provider(format!("the loopback listener: {e}"));
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.map_err(io)?;
        let redirect = format!(
            "http://127.0.0.1:{}/callback",
            listener.local_addr().map_err(io)?.port()
        );
        let redirect = RedirectUrl::new(redirect).map_err(|e| SignInError::Provider(e.to_string()))?;
        let client = self.client().set_redirect_uri(redirect);
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let (url, state, nonce) = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .add_scopes(extra_scopes(scopes))
            .set_pkce_challenge(challenge)
            .url();
        open(url.as_str());
        let code = tokio::time::timeout(SIGN_IN_TIMEOUT, callback(listener, state.secret().clone()))
            .await
            .map_err(|_| SignInError::Denied(format!("nobody signed in within {}s", SIGN_IN_TIMEOUT.as_secs())))??;
        let response = client
            .exchange_code(AuthorizationCode::new(code))
            .map_err(|e| SignInError::Provider(e.to_string()))?
            .set_pkce_verifier(verifier)
            .request_async(&self.http)
            .await
            .map_err(|e| token_error(&self.issuer, &e))?;
        self.credential(&client, &response, Some(&nonce), None, scopes)
    }

    /// Starts the device grant: show the person [`DeviceCode`], then
    /// [`Provider::finish_device`].
    pub async fn start_device(&self, scopes: &[String]) -> Result<DeviceCode, SignInError> {
        let client = self.client().set_device_authorization_url(self.device_endpoint()?);
        let details: CoreDeviceAuthorizationResponse = client
            .exchange_device_code()
            .add_scopes(all_scopes(scopes))
            .request_async(&self.http)
            .await
            .map_err(|e| SignInError::Provider(format!("{}: {}", self.issuer, chain(&e))))?;
        Ok(DeviceCode {
            details,
            scopes: scopes.to_vec(),
        })
    }

    /// Waits (polling as the provider asks) until the person has approved
    /// `code`.
    pub async fn finish_device(&self, code: &DeviceCode) -> Result<Credential, SignInError> {
        let client = self.client().set_device_authorization_url(self.device_endpoint()?);
        let response: CoreTokenResponse = client
            .exchange_device_access_token(&code.details)
            .map_err(|e| SignInError::Provider(e.to_string()))?
            .request_async(&self.http, tokio::time::sleep, Some(code.expires_in()))
            .await
            .map_err(|e| match e {
                RequestTokenError::ServerResponse(r) => {
                    SignInError::Denied(format!("the sign-in was not approved: {}", r.error()))
                }
                other => SignInError::Provider(format!("{}: {}", self.issuer, chain(&other))),
            })?;
        self.credential(&client, &response, None, None, &code.scopes)
    }

    fn device_endpoint(&self) -> Result<DeviceAuthorizationUrl, SignInError> {
        self.metadata
            .additional_metadata()
            .device_authorization_endpoint
            .clone()
            .ok_or_else(|| {
                SignInError::Provider(format!(
                    "{} offers no device authorization (RFC 8628): sign in with the browser instead",
                    self.issuer
                ))
            })
    }

    /// A new ID token for `credential`, by its refresh token.
    pub async fn refresh(&self, credential: &Credential) -> Result<Credential, SignInError> {
        let token = credential.refresh_token.clone().ok_or_else(|| {
            SignInError::Ended(format!(
                "{} gave no refresh token (ask for the offline_access scope)",
                self.issuer
            ))
        })?;
        let client = self.client();
        let response = client
            .exchange_refresh_token(&RefreshToken::new(token))
            .map_err(|e| SignInError::Provider(e.to_string()))?
            .request_async(&self.http)
            .await
            .map_err(|e| token_error(&self.issuer, &e))?;
        self.credential(&client, &response, None, Some(credential), &credential.scopes)
    }

    /// Revokes `credential`'s refresh token, when the provider offers
    /// revocation (RFC 7009).
    pub async fn revoke(&self, credential: &Credential) -> Result<bool, SignInError> {
        let (Some(url), Some(token)) = (
            self.metadata.additional_metadata().revocation_endpoint.clone(),
            credential.refresh_token.clone(),
        ) else {
            return Ok(false);
        };
        if url.url().scheme() != "https" {
            // RFC 7009 §2 sends tokens to a revocation endpoint over TLS only.
            return Err(SignInError::Provider(format!(
                "its revocation endpoint is not HTTPS, so the refresh token was not sent there \
                 (it stays valid at {} until it expires)",
                self.issuer
            )));
        }
        self.client()
            .set_revocation_url(url)
            .revoke_token(CoreRevocableToken::from(RefreshToken::new(token)))
            .map_err(|e| SignInError::Provider(e.to_string()))?
            .request_async(&self.http)
            .await
            .map_err(|e| SignInError::Provider(format!("{}: {}", self.issuer, chain(&e))))?;
        Ok(true)
    }

    /// The credential in a token response, its ID token verified (with
    /// `nonce` when the request carried one).
    fn credential<AU, DA, IN, RV, TE, UI>(
        &self,
        client: &CoreClient<AU, DA, IN, RV, TE, UI>,
        response: &CoreTokenResponse,
        nonce: Option<&Nonce>,
        previous: Option<&Credential>,
        scopes: &[String],
    ) -> Result<Credential, SignInError>
    where
        AU: openidconnect::EndpointState,
        DA: openidconnect::EndpointState,
        IN: openidconnect::EndpointState,
        RV: openidconnect::EndpointState,
        TE: openidconnect::EndpointState,
        UI: openidconnect::EndpointState,
    {
        let id_token = response.extra_fields().id_token().ok_or_else(|| {
            SignInError::Provider(format!(
                "{} answered without an ID token (is `openid` among the scopes?)",
                self.issuer
            ))
        })?;
        let verifier = client.id_token_verifier();
        let claims = match nonce {
            Some(nonce) => id_token.claims(&verifier, nonce),
            // Refreshed and device-granted tokens carry no nonce of ours.
            None => id_token.claims(&verifier, |_: Option<&Nonce>| Ok(())),
        }
        .map_err(|e| SignInError::Provider(format!("{}'s ID token does not verify: {e}", self.issuer)))?;
        Ok(Credential {
            issuer: self.issuer.clone(),
            client_id: self.client_id.clone(),
            client_secret: self.client_secret.clone(),
            scopes: scopes.to_vec(),
            id_token: id_token.to_string(),
            refresh_token: response
                .refresh_token()
                .map(|t| t.secret().clone())
                .or_else(|| previous.and_then(|p| p.refresh_token.clone())),
            issued_at: claims.issue_time().timestamp(),
            expires_at: claims.expiration().timestamp(),
            subject: claims.subject().to_string(),
            email: claims.email().map(|e| e.to_string()),
        })
    }
}

/// Where a krayne server says people sign in (`/.well-known/krayne`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Advertised {
    /// The provider's issuer URL.
    pub issuer: String,
    /// krayne's public client there.
    pub client_id: String,
    /// Scopes to ask for.
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// What `server` advertises at `/.well-known/krayne`; `None` when it
/// names no identity provider.
pub async fn advertised(server: &str) -> Result<Option<Advertised>, SignInError> {
    #[derive(Deserialize)]
    struct Document {
        login: Option<Advertised>,
    }
    let url = format!("{}/.well-known/krayne", server.trim_end_matches('/'));
    let fail = |e: &dyn std::fmt::Display| SignInError::Provider(format!("cannot ask {url} where to sign in: {e}"));
    let http = reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .build()
        .map_err(|e| fail(&e))?;
    let response = http.get(&url).send().await.map_err(|e| fail(&e))?;
    if response.status() == StatusCode::NOT_FOUND {
        return Ok(None);
    }
    let response = response.error_for_status().map_err(|e| fail(&e))?;
    let document: Document = response.json().await.map_err(|e| fail(&e))?;
    Ok(document.login)
}

/// The scopes besides `openid`, which openidconnect always asks for.
fn extra_scopes(scopes: &[String]) -> Vec<Scope> {
    scopes
        .iter()
        .filter(|s| s.as_str() != "openid")
        .map(|s| Scope::new(s.clone()))
        .collect()
}

/// Every scope, `openid` first (the device request adds none itself).
fn all_scopes(scopes: &[String]) -> Vec<Scope> {
    std::iter::once(Scope::new("openid".into()))
        .chain(extra_scopes(scopes))
        .collect()
}

/// A token endpoint's refusal in words: `invalid_grant` on a refresh
/// means the sign-in has ended.
fn token_error<E: std::error::Error + 'static>(
    issuer: &str,
    e: &RequestTokenError<E, openidconnect::StandardErrorResponse<CoreErrorResponseType>>,
) -> SignInError {
    match e {
        RequestTokenError::ServerResponse(r) if *r.error() == CoreErrorResponseType::InvalidGrant => {
            let why = r.error_description().map_or("invalid_grant", String::as_str);
            SignInError::Ended(format!("{issuer} no longer accepts this sign-in ({why})"))
        }
        other => SignInError::Provider(format!("{issuer}: {}", chain(other))),
    }
}

/// An error and its causes on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// Serves the loopback redirect until it brings the code (or an error)
/// for `state`; other paths (a browser's favicon) get 404.
async fn callback(listener: tokio::net::TcpListener, state: String) -> Result<String, SignInError> {
    let (found, mut outcome) = tokio::sync::mpsc::channel(1);
    loop {
        tokio::select! {
            Some(result) = outcome.recv() => return result,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let found = found.clone();
                let state = state.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let (status, page, result) = answer(req.uri(), &state);
                        let found = found.clone();
                        async move {
                            if let Some(result) = result {
                                let _ = found.send(result).await;
                            }
                            let mut response = Response::new(Full::new(Bytes::from(page)));
                            *response.status_mut() = status;
                            response.headers_mut().insert(
                                http::header::CONTENT_TYPE,
                                http::HeaderValue::from_static("text/html; charset=utf-8"),
                            );
                            Ok::<_, Infallible>(response)
                        }
                    });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
                });
            }
        }
    }
}

type Outcome = Option<Result<String, SignInError>>;

/// The page for one request to the loopback listener, and what it
/// brought.
fn answer(uri: &http::Uri, state: &str) -> (StatusCode, String, Outcome) {
    if uri.path() != "/callback" {
        return (
            StatusCode::NOT_FOUND,
            page("Not found", "This is krayne's sign-in listener."),
            None,
        );
    }
    let query = uri.query().unwrap_or_default();
    let params: std::collections::HashMap<String, String> =
        openidconnect::url::form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
    // The state first: an answer without this sign-in's state is not the
    // provider's (anything on this machine can send one), error or not.
    if params.get("state").map(String::as_str) != Some(state) {
        // Not ours (a stale tab, or a forged link): keep waiting.
        return (
            StatusCode::BAD_REQUEST,
            page("Sign-in failed", "This link is not for this sign-in."),
            None,
        );
    }
    if let Some(error) = params.get("error") {
        let why = match params.get("error_description") {
            Some(d) => format!("{error}: {d}"),
            None => error.clone(),
        };
        // The provider's words reach a terminal: no control characters.
        let why: String = why
            .chars()
            .take(500)
            .map(|c| {
                if c.is_control() {
                    c.escape_unicode().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect();
        let body = page("Sign-in failed", &format!("The identity provider said: {why}"));
        return (StatusCode::BAD_REQUEST, body, Some(Err(SignInError::Denied(why))));
    }
    match params.get("code") {
        Some(code) => (
            StatusCode::OK,
            page(
                "Signed in to krayne",
                "You are signed in. You can close this tab and go back to the terminal.",
            ),
            Some(Ok(code.clone())),
        ),
        None => (
            StatusCode::BAD_REQUEST,
            page("Sign-in failed", "The answer has no code."),
            None,
        ),
    }
}

fn page(title: &str, text: &str) -> String {
    let escape = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title></head><body><h1>{}</h1><p>{}</p></body></html>",
        escape(title),
        escape(title),
        escape(text)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loopback_listener_takes_only_its_own_answer() {
        let uri = |q: &str| q.parse::<http::Uri>().unwrap();
        let (status, _, result) = answer(&uri("/callback?code=abc&state=s1"), "s1");
        assert_eq!((status, result), (StatusCode::OK, Some(Ok("abc".into()))));
        let (status, _, result) = answer(&uri("/callback?code=abc&state=other"), "s1");
        assert_eq!((status, result), (StatusCode::BAD_REQUEST, None));
        let (_, body, result) = answer(
            &uri("/callback?error=access_denied&error_description=%3Cb%3Eno%3C%2Fb%3E&state=s1"),
            "s1",
        );
        assert_eq!(
            result,
            Some(Err(SignInError::Denied("access_denied: <b>no</b>".into())))
        );
        assert!(body.contains("&lt;b&gt;no") && !body.contains("<b>no"), "{body}");
        // Reliability 29g (issue 53, item 7): one GET without the state
        // neither ends the sign-in nor carries a terminal's escapes.
        let (status, _, result) = answer(
            &uri("/callback?error=access_denied&error_description=%1B%5D0%3Bpwned%07%1B%5B2J"),
            "s1",
        );
        assert_eq!((status, result), (StatusCode::BAD_REQUEST, None));
        let (_, _, result) = answer(
            &uri("/callback?error=access_denied&error_description=%1B%5B2Jx&state=s1"),
            "s1",
        );
        let Some(Err(SignInError::Denied(why))) = result else {
            panic!("{result:?}")
        };
        assert!(!why.chars().any(char::is_control), "{why:?}");
        assert_eq!(answer(&uri("/favicon.ico"), "s1").0, StatusCode::NOT_FOUND);
    }

    #[test]
    fn openid_is_asked_for_once() {
        let scopes = ["openid".to_owned(), "email".to_owned()];
        let names = |s: Vec<Scope>| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(names(extra_scopes(&scopes)), ["email"]);
        assert_eq!(names(all_scopes(&scopes)), ["openid", "email"]);
    }
}
