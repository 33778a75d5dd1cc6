//! What must never appear in a server's log: bearer tokens, signing keys,
//! database passwords. Every [`crate::ServerProcess`] runs with debug
//! logging and is checked when it goes away.

use std::sync::Mutex;

/// The HS256 secret every test environment signs its tokens with.
pub(crate) const E2E_SECRET: &str = "e2e-secret-e2e-secret-e2e-secret-0123";
/// The secret every test server signs browser sessions with.
pub const E2E_SESSION_SECRET: &str = "e2e-session-secret-e2e-session-secret-4567";
/// The key every test server derives clusters' Ray tokens from.
pub(crate) const E2E_RAY_AUTH_KEY: &str = "e2e-ray-auth-key-e2e-ray-auth-key-89ab";

static REGISTERED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Adds `secret` (a password, a key) to what logs are checked for.
pub fn register_secret(secret: &str) {
    REGISTERED.lock().unwrap().push(secret.to_owned());
}

/// A JWT's shape: three base64url parts, the first starting `eyJ` (`{"`).
fn jwts(log: &str) -> impl Iterator<Item = &str> {
    log.match_indices("eyJ").filter_map(|(at, _)| {
        let tail = &log[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'))
            .unwrap_or(tail.len());
        let candidate = &tail[..end];
        let parts: Vec<&str> = candidate.split('.').collect();
        (parts.len() >= 3 && parts[..3].iter().all(|p| p.len() >= 8)).then_some(candidate)
    })
}

/// The secrets `log` contains, each with the line it is on.
pub fn secrets_in(log: &str) -> Vec<String> {
    let mut found: Vec<String> = jwts(log).map(|t| format!("a JWT ({}…)", &t[..12])).collect();
    let mut fixed = vec![
        E2E_SECRET.to_owned(),
        E2E_SESSION_SECRET.to_owned(),
        E2E_RAY_AUTH_KEY.to_owned(),
        "PRIVATE KEY".to_owned(),
    ];
    fixed.extend(REGISTERED.lock().unwrap().iter().cloned());
    for secret in fixed {
        if let Some(line) = log.lines().find(|l| l.contains(&secret)) {
            found.push(format!("{secret:?} in: {line}"));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_tokens_keys_and_registered_passwords() {
        register_secret("hunter2-db-password");
        let log = "INFO request authorization=Bearer eyJhbGciOi.eyJzdWIiOiJh.c2lnbmF0dXJl done\n\
                   DEBUG connecting to postgres://u:hunter2-db-password@db/x\n";
        let found = secrets_in(log);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(secrets_in("INFO eyJ is not a token; nor is eyJabc.def\n").is_empty());
        assert!(secrets_in("authorization: Sensitive\n").is_empty());
    }
}
