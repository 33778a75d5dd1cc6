//! A token read from a file, re-read whenever the file changes: a
//! projected ServiceAccount token (which the kubelet rotates by swapping a
//! symlink) or a file a sidecar rewrites.

use std::{
    path::{Path, PathBuf},
    sync::Mutex,
    time::SystemTime,
};

use super::TokenProvider;

/// What tells one version of the file from the next.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    #[cfg(unix)]
    inode: u64,
}

fn stamp(path: &Path) -> std::io::Result<Stamp> {
    // Follows symlinks: the kubelet's `..data` swap is a new inode.
    let meta = std::fs::metadata(path)?;
    Ok(Stamp {
        modified: meta.modified().ok(),
        len: meta.len(),
        #[cfg(unix)]
        inode: std::os::unix::fs::MetadataExt::ino(&meta),
    })
}

/// The token in a file, re-read when the file changes (checked on every
/// call with one `stat`).
#[derive(Debug)]
pub struct TokenFile {
    path: PathBuf,
    cache: Mutex<Option<(Stamp, String)>>,
}

impl TokenFile {
    /// The token in `path`, e.g. `/var/run/secrets/krayne/token`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            cache: Mutex::new(None),
        }
    }
}

impl TokenProvider for TokenFile {
    fn token(&self) -> Result<String, String> {
        let shown = self.path.display();
        let now = stamp(&self.path).map_err(|e| format!("cannot read the token file {shown}: {e}"))?;
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((seen, token)) = cache.as_ref()
            && *seen == now
        {
            return Ok(token.clone());
        }
        let text =
            std::fs::read_to_string(&self.path).map_err(|e| format!("cannot read the token file {shown}: {e}"))?;
        let token = text.trim().to_owned();
        if token.is_empty() {
            return Err(format!("the token file {shown} is empty"));
        }
        *cache = Some((now, token.clone()));
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rotated_file_is_read_again_and_a_missing_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        let source = TokenFile::new(&path);
        assert!(source.token().unwrap_err().contains("token"));
        std::fs::write(dir.path().join("a"), "first\n").unwrap();
        std::os::unix::fs::symlink(dir.path().join("a"), &path).unwrap();
        assert_eq!(source.token().unwrap(), "first");
        // As the kubelet rotates: a new file, and the link swapped to it.
        std::fs::write(dir.path().join("b"), "second").unwrap();
        std::os::unix::fs::symlink(dir.path().join("b"), dir.path().join("next")).unwrap();
        std::fs::rename(dir.path().join("next"), &path).unwrap();
        assert_eq!(source.token().unwrap(), "second");
        std::fs::write(dir.path().join("b"), "  \n").unwrap();
        assert!(source.token().unwrap_err().contains("empty"));
    }
}
