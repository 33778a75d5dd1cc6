//! RFC 9457 problem documents: the one shape of every REST error.

use axum::{
    Json,
    extract::Request,
    http::{HeaderValue, StatusCode, header},
    middleware::Next,
    response::{IntoResponse, Response},
};
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::{AuthFailure, Error, FieldViolation, quota::QuotaViolation};

/// A problem document (`application/problem+json`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Problem {
    /// A URI naming the kind of problem.
    #[serde(rename = "type")]
    pub type_: String,
    /// Short summary (the HTTP reason).
    pub title: String,
    /// HTTP status.
    pub status: u16,
    /// What went wrong, for people.
    pub detail: String,
    /// Stable snake_case code, for programs.
    pub code: String,
    /// The request's id (`x-request-id`).
    pub request_id: String,
    /// For invalid input: every problem with its field path.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<FieldViolation>,
    /// For `quota_exceeded`: each limit the request would pass.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quota_violations: Vec<QuotaViolation>,
    #[serde(skip)]
    headers: Vec<(header::HeaderName, String)>,
}

impl Problem {
    /// A problem the transport itself raises (413, 415, 404 route, …).
    pub fn new(status: StatusCode, code: &str, detail: impl Into<String>) -> Self {
        Self {
            type_: format!("https://krayne.dev/problems/{code}"),
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            status: status.as_u16(),
            detail: detail.into(),
            code: code.to_owned(),
            request_id: String::new(),
            violations: Vec::new(),
            quota_violations: Vec::new(),
            headers: Vec::new(),
        }
    }

    /// The status a domain error answers with (the domain's one table).
    pub fn status_of(e: &Error) -> StatusCode {
        StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

impl From<Error> for Problem {
    #[deny(clippy::wildcard_enum_match_arm)]
    fn from(e: Error) -> Self {
        let mut p = Self::new(Self::status_of(&e), e.code(), e.to_string());
        match &e {
            Error::InvalidArgument(v) => {
                p.detail = "the request is invalid; see violations".into();
                p.violations = v.as_slice().to_vec();
            }
            Error::Unauthenticated(why) => {
                // RFC 6750 §3.1: no error code when no credentials were sent.
                let value = match why {
                    AuthFailure::MissingToken => r#"Bearer realm="krayne""#.to_owned(),
                    AuthFailure::SeveralCredentials | AuthFailure::TokenInQuery => {
                        format!(r#"Bearer realm="krayne", error="invalid_request", error_description="{why}""#)
                    }
                    AuthFailure::ExpiredToken
                    | AuthFailure::InvalidToken
                    | AuthFailure::SignInLink
                    | AuthFailure::BrowserSession => {
                        format!(r#"Bearer realm="krayne", error="invalid_token", error_description="{why}""#)
                    }
                };
                p.headers.push((header::WWW_AUTHENTICATE, value));
            }
            // No Retry-After: waiting does not free a quota.
            Error::QuotaExceeded { violations, .. } => p.quota_violations = violations.clone(),
            Error::RateLimited { retry_after } => {
                p.headers
                    .push((header::RETRY_AFTER, retry_after.as_secs().max(1).to_string()));
            }
            Error::Internal(detail) => tracing::error!(%detail, "internal error"),
            Error::PermissionDenied(_)
            | Error::NotFound { .. }
            | Error::AlreadyExists { .. }
            | Error::Conflict(_)
            | Error::FailedPrecondition(_)
            | Error::Unavailable(_)
            | Error::BadGateway(_)
            | Error::Gone(_)
            | Error::DeadlineExceeded(_)
            | Error::PayloadTooLarge { .. } => {}
        }
        p
    }
}

impl IntoResponse for Problem {
    /// The body is written by [`render_problems`], which knows the request
    /// id; here the problem rides in the response's extensions.
    fn into_response(self) -> Response {
        let mut response = StatusCode::from_u16(self.status)
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            .into_response();
        response.extensions_mut().insert(self);
        response
    }
}

/// A handler's error: any domain error becomes a problem.
pub(crate) struct ApiError(pub Box<Problem>);

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        Self(Box::new(e.into()))
    }
}

impl From<Problem> for ApiError {
    fn from(p: Problem) -> Self {
        Self(Box::new(p))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (*self.0).into_response()
    }
}

/// Middleware: writes every problem as `application/problem+json` with the
/// request's id.
pub(crate) async fn render_problems(request: Request, next: Next) -> Response {
    render(request, next, true).await
}

/// Middleware: [`render_problems`] for krayne's own problems only; other
/// answers (a proxied service's errors) pass as they are.
pub(crate) async fn render_own_problems(request: Request, next: Next) -> Response {
    render(request, next, false).await
}

async fn render(request: Request, next: Next, plain_too: bool) -> Response {
    let request_id = request
        .headers()
        .get(super::REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let mut response = next.run(request).await;
    let (status, mut problem) = match response.extensions_mut().remove::<Problem>() {
        Some(problem) => (response.status(), problem),
        None if plain_too && is_plain_error(&response) => (response.status(), plain_to_problem(response).await),
        None => return response,
    };
    problem.request_id = request_id;
    let headers = std::mem::take(&mut problem.headers);
    let mut rendered = (status, Json(problem)).into_response();
    rendered.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    for (name, value) in headers {
        if let Ok(v) = HeaderValue::from_str(&value) {
            rendered.headers_mut().insert(name, v);
        }
    }
    rendered
}

/// An error answer some layer wrote as plain text (an extractor's
/// rejection, say) rather than as a problem.
/// A page krayne wrote for a person (`text/html`: a used sign-in link) is
/// left as it is.
fn is_plain_error(response: &Response) -> bool {
    let status = response.status();
    let typed = |prefix: &[u8]| {
        response
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(prefix))
    };
    (status.is_client_error() || status.is_server_error())
        && !typed(b"application/problem+json")
        && !typed(b"text/html")
}

/// The stable code of a status no domain error produced.
fn code_of(status: StatusCode) -> &'static str {
    match status {
        StatusCode::UNAUTHORIZED => "unauthenticated",
        StatusCode::FORBIDDEN => "permission_denied",
        StatusCode::CONFLICT => "conflict",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::TOO_MANY_REQUESTS => "rate_limited",
        StatusCode::REQUEST_TIMEOUT => "deadline_exceeded",
        s if s.is_server_error() => "internal",
        _ => "invalid_argument",
    }
}

/// Re-writes a plain error answer as a problem, keeping its text as the
/// detail.
async fn plain_to_problem(response: Response) -> Problem {
    const MAX_DETAIL: usize = 4096;
    let status = response.status();
    // Headers that say how to go on (`Allow`, `Retry-After`, …) stay.
    let kept: Vec<(header::HeaderName, String)> = response
        .headers()
        .iter()
        .filter(|(name, _)| ![header::CONTENT_TYPE, header::CONTENT_LENGTH].contains(name))
        .filter_map(|(name, value)| Some((name.clone(), value.to_str().ok()?.to_owned())))
        .collect();
    let text = axum::body::to_bytes(response.into_body(), MAX_DETAIL)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let detail = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_owned()
    } else {
        text
    };
    let mut problem = Problem::new(status, code_of(status), detail);
    problem.headers = kept;
    problem
}
