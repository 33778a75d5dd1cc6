//! What every command needs: where the server is, who the caller is, how
//! to print.

use std::{path::PathBuf, time::Duration};

use krayne_client::{
    Client, ClientError, Code, RetryPolicy,
    auth::{SignedIn, TokenFile},
    proto::{NamespaceAccess, Role},
};

use crate::{
    cli::Global,
    failure::Failure,
    output::{Printer, note},
    settings::{self, Settings},
};

/// Resolved configuration: flags and environment over the config file.
pub(crate) struct Context {
    pub(crate) global: Global,
    pub(crate) settings_path: PathBuf,
    pub(crate) settings: Settings,
    pub(crate) printer: Printer,
}

impl Context {
    /// Reads the config file and settles the output style.
    pub(crate) fn new(global: Global) -> Result<Self, Failure> {
        let global = global.with_environment();
        let settings_path = settings::path(global.config.as_deref())?;
        let settings = settings::load(&settings_path)?;
        let printer = Printer::new(global.output);
        Ok(Self {
            global,
            settings_path,
            settings,
            printer,
        })
    }

    /// The server URL: `--server`/`KRAYNE_SERVER`, else the config file's.
    pub(crate) fn server(&self) -> Result<String, Failure> {
        self.global
            .server
            .clone()
            .or_else(|| self.settings.server.clone())
            .ok_or_else(|| {
                Failure::Usage("no server given: pass --server URL, set KRAYNE_SERVER, or run `krayne login`".into())
            })
    }

    /// The token: `--token`/`KRAYNE_TOKEN`, else the config file's unless
    /// `--token-file`/`KRAYNE_TOKEN_FILE` names one (it wins over the file).
    pub(crate) fn token(&self) -> Option<String> {
        self.global.token.clone().or_else(|| {
            self.global
                .token_file
                .is_none()
                .then(|| self.settings.token.clone())
                .flatten()
        })
    }

    /// `-n`, else `KRAYNE_NAMESPACE`, else the config file's namespace,
    /// else the namespace the caller may use ([`pick_namespace`]), named
    /// on stderr so nobody wonders where a cluster went.
    pub(crate) async fn namespace(&self, flag: Option<&str>) -> Result<String, Failure> {
        let chosen = flag
            .map(str::to_owned)
            .or_else(|| std::env::var("KRAYNE_NAMESPACE").ok().filter(|n| !n.is_empty()))
            .or_else(|| self.settings.namespace.clone());
        if let Some(namespace) = chosen {
            return Ok(namespace);
        }
        let me = self.client()?.whoami().await?;
        // A global admin may use every namespace: only their teams' are
        // theirs to pick from.
        let own: Vec<NamespaceAccess> = if me.global_admin {
            me.namespaces
                .iter()
                .filter(|n| !n.via_teams.is_empty())
                .cloned()
                .collect()
        } else {
            me.namespaces.clone()
        };
        let (namespace, why) = pick_namespace(&own).ok_or_else(|| {
            let who = me.email.as_deref().unwrap_or(&me.subject);
            if me.global_admin {
                return Failure::Usage(format!(
                    "{who} is a global admin, who may use every namespace: pass -n NAMESPACE (or set KRAYNE_NAMESPACE)"
                ));
            }
            let message = format!(
                "{who} may not use any namespace yet: ask a platform admin to add your team to one, or pass -n NAMESPACE"
            );
            Failure::Client(ClientError::new(Code::PermissionDenied, message))
        })?;
        note(&format!("Namespace: {namespace} ({why}; -n NAMESPACE for another)"));
        Ok(namespace)
    }

    /// A client for the server. The connection opens on the first call.
    pub(crate) fn client(&self) -> Result<Client, Failure> {
        // A person is waiting: retry a restarting server briefly, then say so.
        let retry = RetryPolicy {
            max_retries: 3,
            min_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(1),
        };
        let server = self.server()?;
        let mut builder = Client::builder(&server).retry(retry);
        if let Some(token) = self.token() {
            builder = builder.token(token);
        } else if let Some(file) = &self.global.token_file {
            builder = builder.token_provider(TokenFile::new(file));
        } else {
            let store = crate::commands::config::login::credential_store(self);
            if store.get(&server).map_err(Failure::Other)?.is_some() {
                builder = builder.token_provider(SignedIn::new(server, store));
            }
        }
        Ok(builder.connect_lazy()?)
    }
}

/// The namespace to use when none was named, and why: the caller's only
/// one, else the first where they may create clusters, else the first
/// they may see. `None` when they may use none.
pub(crate) fn pick_namespace(namespaces: &[NamespaceAccess]) -> Option<(String, &'static str)> {
    let can_edit = |n: &&NamespaceAccess| matches!(Role::try_from(n.role), Ok(Role::Editor | Role::Admin));
    match namespaces {
        [] => None,
        [only] => Some((only.namespace.clone(), "the only namespace you may use")),
        _ => Some(match namespaces.iter().find(can_edit) {
            Some(n) => (n.namespace.clone(), "the first namespace where you are an editor"),
            None => (namespaces[0].namespace.clone(), "the first namespace you may see"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(namespace: &str, role: Role) -> NamespaceAccess {
        NamespaceAccess {
            namespace: namespace.into(),
            role: role.into(),
            ..NamespaceAccess::default()
        }
    }

    fn context(token: Option<&str>, token_file: Option<&str>, saved: Option<&str>) -> Context {
        Context {
            global: Global {
                server: Some("http://127.0.0.1:1".into()),
                token: token.map(str::to_owned),
                token_file: token_file.map(PathBuf::from),
                config: None,
                output: crate::output::Format::Table,
                debug: false,
                kubeconfig: None,
            },
            settings_path: PathBuf::from("/nonexistent/krayne/config.yaml"),
            settings: Settings {
                token: saved.map(str::to_owned),
                ..Settings::default()
            },
            printer: Printer::new(crate::output::Format::Table),
        }
    }

    #[test]
    fn a_given_token_beats_a_token_file_which_beats_the_saved_token() {
        assert_eq!(
            context(Some("flag"), Some("/f"), Some("saved")).token().as_deref(),
            Some("flag")
        );
        assert_eq!(context(None, Some("/f"), Some("saved")).token(), None);
        assert_eq!(context(None, None, Some("saved")).token().as_deref(), Some("saved"));
    }

    #[test]
    fn the_only_namespace_is_picked() {
        let picked = pick_namespace(&[access("ml-team", Role::Viewer)]);
        assert_eq!(picked, Some(("ml-team".into(), "the only namespace you may use")));
    }

    #[test]
    fn an_editor_namespace_wins_over_earlier_viewer_ones() {
        let all = [
            access("shared-data", Role::Viewer),
            access("ml-team", Role::Editor),
            access("zeta", Role::Admin),
        ];
        assert_eq!(pick_namespace(&all).map(|p| p.0), Some("ml-team".into()));
    }

    #[test]
    fn without_an_editor_namespace_the_first_is_picked() {
        let all = [access("shared-a", Role::Viewer), access("shared-b", Role::Viewer)];
        assert_eq!(
            pick_namespace(&all),
            Some(("shared-a".into(), "the first namespace you may see"))
        );
        assert_eq!(pick_namespace(&[]), None);
    }
}
