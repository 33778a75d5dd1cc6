//! Where a person's sign-ins are kept: one credential per krayne server,
//! in a file only its owner may read (0600, its directory 0700), replaced
//! in one step. `krayne login` writes it; the CLI and the SDK read and
//! refresh it.

use std::{
    collections::BTreeMap,
    fs::File,
    io::Write as _,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

/// A sign-in through an OpenID provider.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credential {
    /// The provider's issuer URL.
    pub issuer: String,
    /// The OAuth client signed in as.
    pub client_id: String,
    /// Its secret, for providers that want one even from a CLI (Google's
    /// "Desktop app" clients, whose secret is not confidential).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// Scopes granted.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The ID token krayne is called with.
    pub id_token: String,
    /// What renews it without the person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the ID token was issued (Unix seconds).
    pub issued_at: i64,
    /// When it expires (Unix seconds).
    pub expires_at: i64,
    /// Who signed in (the token's subject).
    pub subject: String,
    /// Their e-mail, when the token carries one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the tokens.
        f.debug_struct("Credential")
            .field("issuer", &self.issuer)
            .field("subject", &self.subject)
            .field("expires_at", &self.expires_at)
            .field("refresh_token", &self.refresh_token.is_some())
            .finish_non_exhaustive()
    }
}

impl Credential {
    /// Whether the ID token should be renewed now: within a quarter of its
    /// lifetime (at most a minute) of expiring.
    pub fn due(&self, now: i64) -> bool {
        let margin = ((self.expires_at - self.issued_at) / 4).clamp(0, 60);
        now >= self.expires_at - margin
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File_ {
    #[serde(default)]
    servers: BTreeMap<String, Credential>,
}

/// The credentials file.
#[derive(Debug, Clone)]
pub struct CredentialStore {
    path: PathBuf,
}

impl CredentialStore {
    /// The file at `path`.
    pub fn at(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// `$XDG_CONFIG_HOME/krayne/credentials.yaml` (by default
    /// `~/.config/krayne/credentials.yaml`), beside the CLI's config.
    pub fn default_location() -> Result<Self, String> {
        use etcetera::BaseStrategy as _;
        let base = etcetera::choose_base_strategy().map_err(|e| format!("cannot find the config directory: {e}"))?;
        Ok(Self::at(base.config_dir().join("krayne").join("credentials.yaml")))
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The credential for `server`, if signed in there.
    pub fn get(&self, server: &str) -> Result<Option<Credential>, String> {
        Ok(self.read()?.servers.remove(&key(server)))
    }

    /// Keeps `credential` for `server`.
    pub fn put(&self, server: &str, credential: Credential) -> Result<(), String> {
        let _lock = self.lock()?;
        self.put_held(server, credential)
    }

    /// [`CredentialStore::put`] with the lock already held.
    pub(crate) fn put_held(&self, server: &str, credential: Credential) -> Result<(), String> {
        let mut file = self.read()?;
        file.servers.insert(key(server), credential);
        self.write(&file)
    }

    /// Forgets `server`'s credential; what it was, if any.
    pub fn remove(&self, server: &str) -> Result<Option<Credential>, String> {
        let _lock = self.lock()?;
        let mut file = self.read()?;
        let gone = file.servers.remove(&key(server));
        if gone.is_some() {
            self.write(&file)?;
        }
        Ok(gone)
    }

    /// Holds the store's lock (a file beside it) until dropped: two
    /// programs refreshing at once would spend one refresh token twice,
    /// which a provider rotating them takes for theft.
    pub fn lock(&self) -> Result<File, String> {
        let dir = self.dir();
        create_private_dir(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let path = self.path.with_extension("lock");
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        file.lock()
            .map_err(|e| format!("cannot lock {}: {e}", path.display()))?;
        Ok(file)
    }

    fn dir(&self) -> &Path {
        self.path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
    }

    fn read(&self) -> Result<File_, String> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(File_::default()),
            Err(e) => return Err(format!("cannot read {}: {e}", self.path.display())),
        };
        if text.trim().is_empty() {
            return Ok(File_::default());
        }
        serde_saphyr::from_str(&text).map_err(|e| format!("{} is not a credentials file: {e}", self.path.display()))
    }

    fn write(&self, file: &File_) -> Result<(), String> {
        let text = serde_saphyr::to_string(file).map_err(|e| format!("cannot write {}: {e}", self.path.display()))?;
        write_private(&self.path, &text)
    }
}

/// Writes `text` to `path` readable only by its owner (0600, in a 0700
/// directory), through a temporary file renamed over it: the file is never
/// readable by others, nor half written, not even for a moment.
pub fn write_private(path: &Path, text: &str) -> Result<(), String> {
    let fail = |e: &dyn std::fmt::Display| format!("cannot write {}: {e}", path.display());
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    create_private_dir(dir).map_err(|e| fail(&e))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| fail(&e))?;
    tmp.write_all(text.as_bytes()).map_err(|e| fail(&e))?;
    tmp.persist(path).map_err(|e| fail(&e.error))?;
    Ok(())
}

/// Servers are told apart by their URL, without a trailing slash.
fn key(server: &str) -> String {
    server.trim_end_matches('/').to_owned()
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(subject: &str) -> Credential {
        Credential {
            issuer: "https://idp.example.com".into(),
            client_id: "krayne-cli".into(),
            client_secret: None,
            scopes: vec!["openid".into()],
            id_token: "id.token.sig".into(),
            refresh_token: Some("refresh".into()),
            issued_at: 1_000,
            expires_at: 4_600,
            subject: subject.into(),
            email: None,
        }
    }

    #[test]
    fn credentials_are_kept_per_server_privately_and_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let store = CredentialStore::at(dir.path().join("krayne").join("credentials.yaml"));
        assert_eq!(store.get("http://a").unwrap(), None);
        store.put("http://a/", credential("alice")).unwrap();
        store.put("http://b", credential("bob")).unwrap();
        assert_eq!(store.get("http://a").unwrap().unwrap().subject, "alice");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(store.path()).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(store.remove("http://a").unwrap().unwrap().subject, "alice");
        assert_eq!(store.get("http://a").unwrap(), None);
        assert_eq!(store.get("http://b").unwrap().unwrap().subject, "bob");
        assert!(!format!("{:?}", credential("x")).contains("id.token"));
    }

    #[test]
    fn a_token_is_due_a_quarter_of_its_life_or_a_minute_before_it_expires() {
        let c = credential("alice");
        assert!(!c.due(4_539));
        assert!(c.due(4_540));
        let short = Credential {
            issued_at: 0,
            expires_at: 20,
            ..c
        };
        assert!(!short.due(14));
        assert!(short.due(15));
    }
}
