//! A person's sign-in as a token source: the kept credential, refreshed
//! with its refresh token before it expires, and written back so the CLI
//! and every program using the SDK share it.

use std::sync::Mutex;

use super::{Credential, CredentialStore, Provider, SignInError, TokenProvider, now};

/// The credential `krayne login` kept for a server.
#[derive(Debug)]
pub struct SignedIn {
    server: String,
    store: CredentialStore,
    cached: Mutex<Option<Credential>>,
}

impl SignedIn {
    /// The sign-in to `server` kept in `store`.
    pub fn new(server: impl Into<String>, store: CredentialStore) -> Self {
        Self {
            server: server.into(),
            store,
            cached: Mutex::new(None),
        }
    }

    /// The sign-in to `server` in the default credentials file.
    pub fn default_for(server: impl Into<String>) -> Result<Self, String> {
        Ok(Self::new(server, CredentialStore::default_location()?))
    }

    /// The current credential, refreshed first when it is due.
    pub async fn fresh(&self) -> Result<Credential, SignInError> {
        if let Some(c) = self.cached()
            && !c.due(now())
        {
            return Ok(c);
        }
        let _held = self.store.lock().map_err(SignInError::Provider)?;
        let current = self
            .store
            .get(&self.server)
            .map_err(SignInError::Provider)?
            .ok_or_else(|| SignInError::NotSignedIn(format!("not signed in to {}: run `krayne login`", self.server)))?;
        // Another program may have refreshed it meanwhile.
        if !current.due(now()) {
            return Ok(self.keep(current));
        }
        let ended = |e: SignInError| match e {
            SignInError::Ended(why) => SignInError::Ended(format!("{why}: sign in again with `krayne login`")),
            other => other,
        };
        let provider = Provider::discover(&current.issuer, &current.client_id)
            .await?
            .with_client_secret(current.client_secret.clone());
        let renewed = provider.refresh(&current).await.map_err(ended)?;
        self.store
            .put_held(&self.server, renewed.clone())
            .map_err(SignInError::Provider)?;
        Ok(self.keep(renewed))
    }

    fn cached(&self) -> Option<Credential> {
        self.cached.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn keep(&self, credential: Credential) -> Credential {
        *self.cached.lock().unwrap_or_else(|p| p.into_inner()) = Some(credential.clone());
        credential
    }
}

impl TokenProvider for SignedIn {
    fn token(&self) -> Result<String, String> {
        if let Some(c) = self.cached()
            && !c.due(now())
        {
            return Ok(c.id_token);
        }
        // Asked from a gRPC interceptor, which cannot wait on a future:
        // the refresh (once per token lifetime) runs on a thread of its own.
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| format!("cannot refresh the sign-in: {e}"))?;
                    runtime
                        .block_on(self.fresh())
                        .map(|c| c.id_token)
                        .map_err(|e| e.to_string())
                })
                .join()
                .unwrap_or_else(|_| Err("the sign-in's refresh failed".to_owned()))
        })
    }
}
