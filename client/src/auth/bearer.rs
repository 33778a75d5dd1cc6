//! Bearer tokens on every call, from a fixed token or a provider.

use std::sync::Arc;

use tonic::{Status, metadata::MetadataValue, service::Interceptor};

/// Supplies the bearer token for each call, so long-running programs can
/// refresh short-lived tokens (an OIDC client, a file a sidecar rewrites).
/// It is called once per call and should return quickly, e.g. from a cache.
pub trait TokenProvider: Send + Sync + 'static {
    /// The token to send now, or why there is none.
    fn token(&self) -> Result<String, String>;
}

impl<F> TokenProvider for F
where
    F: Fn() -> Result<String, String> + Send + Sync + 'static,
{
    fn token(&self) -> Result<String, String> {
        self()
    }
}

/// Adds `authorization: Bearer <token>` to every request.
#[derive(Clone, Default)]
pub(crate) struct Bearer {
    provider: Option<Arc<dyn TokenProvider>>,
}

impl Bearer {
    pub(crate) fn new(provider: Option<Arc<dyn TokenProvider>>) -> Self {
        Self { provider }
    }
}

impl Interceptor for Bearer {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, Status> {
        if let Some(provider) = &self.provider {
            let token = provider
                .token()
                .map_err(|why| Status::unauthenticated(format!("cannot get a token: {why}")))?;
            let value = MetadataValue::try_from(format!("Bearer {}", token.trim()))
                .map_err(|_| Status::unauthenticated("the token contains characters a header cannot carry"))?;
            request.metadata_mut().insert("authorization", value);
        }
        Ok(request)
    }
}

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token.
        f.debug_struct("Bearer")
            .field("provider", &self.provider.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[test]
    fn the_provider_is_asked_on_every_call() {
        let calls = Arc::new(AtomicU32::new(0));
        let counter = calls.clone();
        let mut bearer = Bearer::new(Some(Arc::new(move || {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            Ok(format!("token-{n}"))
        })));
        for expected in ["Bearer token-0", "Bearer token-1"] {
            let request = bearer.call(tonic::Request::new(())).unwrap();
            assert_eq!(request.metadata().get("authorization").unwrap(), expected);
        }
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_failing_provider_fails_the_call_as_unauthenticated() {
        let mut bearer = Bearer::new(Some(Arc::new(|| Err::<String, _>("expired".to_owned()))));
        let status = bearer.call(tonic::Request::new(())).unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unauthenticated);
        assert!(status.message().contains("expired"));
        let mut bad = Bearer::new(Some(Arc::new(|| Ok("a\nb".to_owned()))));
        assert_eq!(
            bad.call(tonic::Request::new(())).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
    }

    #[test]
    fn debug_hides_the_token() {
        let bearer = Bearer::new(Some(Arc::new(|| Ok("secret".to_owned()))));
        assert!(!format!("{bearer:?}").contains("secret"));
    }
}
