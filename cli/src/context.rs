//! What every command needs: where the server is, who the caller is, how
//! to print.

use std::{path::PathBuf, time::Duration};

use krayne_client::{Client, RetryPolicy};

use crate::{
    cli::Global,
    failure::Failure,
    output::Printer,
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

    /// The token: `--token`/`KRAYNE_TOKEN`, else the config file's.
    pub(crate) fn token(&self) -> Option<String> {
        self.global.token.clone().or_else(|| self.settings.token.clone())
    }

    /// `-n`, else the config file's namespace, else `default`.
    pub(crate) fn namespace(&self, flag: Option<&str>) -> String {
        flag.map(str::to_owned)
            .or_else(|| self.settings.namespace.clone())
            .unwrap_or_else(|| "default".to_owned())
    }

    /// A client for the server. The connection opens on the first call.
    pub(crate) fn client(&self) -> Result<Client, Failure> {
        // A person is waiting: retry a restarting server briefly, then say so.
        let retry = RetryPolicy {
            max_retries: 3,
            min_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(1),
        };
        let mut builder = Client::builder(self.server()?).retry(retry);
        if let Some(token) = self.token() {
            builder = builder.token(token);
        }
        Ok(builder.connect_lazy()?)
    }
}
