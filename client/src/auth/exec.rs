//! A token printed by a command, as kubectl's exec credential plugins do:
//! the command prints the token, or an `ExecCredential` whose
//! `status.token` and `status.expirationTimestamp` say it and until when.

use std::{process::Command, sync::Mutex};

use super::{TokenProvider, now};

/// How long a token without an expiry is used before the command runs
/// again.
const WITHOUT_EXPIRY_SECONDS: i64 = 300;
/// A token is replaced this long before it expires.
const MARGIN_SECONDS: i64 = 30;

/// A command that prints a token, run again only when the last token is
/// about to expire (it runs on the calling thread: keep it quick).
#[derive(Debug)]
pub struct ExecToken {
    program: String,
    args: Vec<String>,
    cache: Mutex<Option<(String, i64)>>,
}

impl ExecToken {
    /// `program args…`.
    pub fn new(program: impl Into<String>, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            cache: Mutex::new(None),
        }
    }

    fn run(&self) -> Result<(String, i64), String> {
        let output = Command::new(&self.program)
            .args(&self.args)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.program))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(format!(
                "{} failed ({}): {}",
                self.program,
                output.status,
                stderr.trim()
            ));
        }
        parse(&String::from_utf8_lossy(&output.stdout)).map_err(|e| format!("{}: {e}", self.program))
    }
}

/// The token and until when to use it, from a command's output.
fn parse(stdout: &str) -> Result<(String, i64), String> {
    let text = stdout.trim();
    if text.starts_with('{') {
        let credential: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("printed JSON that is not an ExecCredential: {e}"))?;
        let token = credential
            .pointer("/status/token")
            .and_then(serde_json::Value::as_str)
            .filter(|t| !t.is_empty())
            .ok_or("its ExecCredential has no status.token")?;
        let until = match credential
            .pointer("/status/expirationTimestamp")
            .and_then(|v| v.as_str())
        {
            Some(t) => {
                t.parse::<jiff::Timestamp>()
                    .map_err(|e| format!("status.expirationTimestamp {t:?}: {e}"))?
                    .as_second()
                    - MARGIN_SECONDS
            }
            None => now() + WITHOUT_EXPIRY_SECONDS,
        };
        return Ok((token.to_owned(), until));
    }
    if text.is_empty() || text.contains(char::is_whitespace) {
        return Err("printed no token (one line, or an ExecCredential)".into());
    }
    Ok((text.to_owned(), now() + WITHOUT_EXPIRY_SECONDS))
}

impl TokenProvider for ExecToken {
    fn token(&self) -> Result<String, String> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((token, until)) = cache.as_ref()
            && *until > now()
        {
            return Ok(token.clone());
        }
        let (token, until) = self.run()?;
        *cache = Some((token.clone(), until));
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_token_or_an_exec_credential_is_read() {
        assert_eq!(parse("abc.def.ghi\n").unwrap().0, "abc.def.ghi");
        let (token, until) = parse(
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
                "status":{"token":"t0k","expirationTimestamp":"2030-01-01T00:00:00Z"}}"#,
        )
        .unwrap();
        assert_eq!(token, "t0k");
        assert_eq!(until, 1_893_456_000 - MARGIN_SECONDS);
        assert!(parse("").is_err());
        assert!(parse("two words").is_err());
        assert!(parse(r#"{"status":{}}"#).unwrap_err().contains("status.token"));
    }

    #[test]
    fn the_command_runs_again_only_when_its_token_is_due() {
        let dir = tempfile::tempdir().unwrap();
        let count = dir.path().join("count");
        let script = format!("echo x >> {0}; echo token-$(wc -l < {0})", count.display());
        let source = ExecToken::new("sh", ["-c", script.as_str()]);
        assert_eq!(source.token().unwrap(), "token-1");
        assert_eq!(source.token().unwrap(), "token-1");
        let failing = ExecToken::new("sh", ["-c", "echo nope >&2; exit 3"]);
        assert!(failing.token().unwrap_err().contains("nope"));
    }
}
