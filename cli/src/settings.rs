//! The config file `krayne login` writes: server, token, default namespace.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::failure::Failure;

/// Contents of `config.yaml`.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Settings {
    /// Server URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) server: Option<String>,
    /// Bearer token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) token: Option<String>,
    /// Namespace used when `-n` is not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) namespace: Option<String>,
}

/// `--config`, else `$XDG_CONFIG_HOME/krayne/config.yaml` (by default
/// `~/.config/krayne/config.yaml`).
pub(crate) fn path(explicit: Option<&Path>) -> Result<PathBuf, Failure> {
    if let Some(p) = explicit {
        return Ok(p.to_owned());
    }
    use etcetera::BaseStrategy as _;
    let base = etcetera::choose_base_strategy()
        .map_err(|e| Failure::Other(format!("cannot find the config directory: {e}; pass --config")))?;
    Ok(base.config_dir().join("krayne").join("config.yaml"))
}

/// The settings in `path`; none when the file does not exist.
pub(crate) fn load(path: &Path) -> Result<Settings, Failure> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Settings::default()),
        Err(e) => return Err(Failure::Other(format!("cannot read {}: {e}", path.display()))),
    };
    if text.trim().is_empty() {
        return Ok(Settings::default());
    }
    serde_saphyr::from_str(&text)
        .map_err(|e| Failure::Usage(format!("{} is not a valid config file: {e}", path.display())))
}

/// Writes `settings` to `path`, readable only by the user (0600; the
/// directory 0700), replacing the old file in one step.
pub(crate) fn save(path: &Path, settings: &Settings) -> Result<(), Failure> {
    let text = serde_saphyr::to_string(settings)
        .map_err(|e| Failure::Other(format!("cannot encode {}: {e}", path.display())))?;
    krayne_client::auth::write_private(path, &text).map_err(Failure::Other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_settings_load_back_and_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("krayne").join("config.yaml");
        assert_eq!(load(&path).unwrap(), Settings::default());
        let settings = Settings {
            server: Some("http://127.0.0.1:8080".into()),
            token: Some("t0k3n".into()),
            namespace: None,
        };
        save(&path, &settings).unwrap();
        assert_eq!(load(&path).unwrap(), settings);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn a_broken_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, "server: [\n").unwrap();
        let Failure::Usage(m) = load(&path).unwrap_err() else {
            panic!()
        };
        assert!(m.contains("config.yaml"), "{m}");
        std::fs::write(&path, "sever: x\n").unwrap();
        assert!(load(&path).is_err());
    }
}
