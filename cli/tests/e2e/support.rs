//! Running the `krayne` binary.

use std::{path::Path, process::Output};

use assert_cmd::assert::OutputAssertExt as _;
use krayne_tests::Env;

/// A `krayne` invocation against `env`, with no config file of the user's
/// in the way.
pub(crate) struct Krayne {
    server: String,
    token: Option<String>,
    config_home: tempfile::TempDir,
}

impl Krayne {
    pub(crate) fn new(env: &Env, token: &str) -> Self {
        Self {
            server: env.url(),
            token: Some(token.to_owned()),
            config_home: tempfile::tempdir().unwrap(),
        }
    }

    /// Without --server/--token: only the config file counts.
    pub(crate) fn bare(&self) -> Self {
        Self {
            server: String::new(),
            token: None,
            config_home: tempfile::tempdir().unwrap(),
        }
    }

    pub(crate) fn config_home(&self) -> &Path {
        self.config_home.path()
    }

    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_krayne"));
        cmd.args(args)
            .env_remove("KRAYNE_SERVER")
            .env_remove("KRAYNE_TOKEN")
            .env_remove("KRAYNE_CONFIG")
            .env_remove("KRAYNE_NAMESPACE")
            // No desktop: `krayne open` prints its link.
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY")
            .env("XDG_CONFIG_HOME", self.config_home.path())
            .env("XDG_STATE_HOME", self.config_home.path().join("state"))
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null());
        if !self.server.is_empty() {
            cmd.env("KRAYNE_SERVER", &self.server);
        }
        if let Some(token) = &self.token {
            cmd.env("KRAYNE_TOKEN", token);
        }
        cmd
    }

    /// Starts `krayne args…` with stdin, stdout and stderr piped (for a
    /// command that runs until stopped).
    pub(crate) fn spawn(&self, args: &[&str]) -> tokio::process::Child {
        let mut cmd = tokio::process::Command::from(self.command(args));
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        cmd.spawn().unwrap()
    }

    /// The environment `krayne` runs with (server and token), for a
    /// program that runs it, such as ssh's ProxyCommand.
    pub(crate) fn env_vars(&self) -> Vec<(&'static str, String)> {
        let mut vars = vec![("KRAYNE_SERVER", self.server.clone())];
        if let Some(token) = &self.token {
            vars.push(("KRAYNE_TOKEN", token.clone()));
        }
        vars
    }

    /// Runs `krayne args…` off the async runtime, so the sandbox (in this
    /// process) keeps serving while the CLI talks to the server.
    pub(crate) async fn run(&self, args: &[&str]) -> Run {
        self.run_with(args, &[]).await
    }

    /// [`Self::run`] in directory `dir` (what `.` means to the command).
    pub(crate) async fn run_in(&self, dir: &Path, args: &[&str]) -> Run {
        let mut cmd = self.command(args);
        cmd.current_dir(dir);
        finished(cmd).await
    }

    /// [`Self::run`] with more environment variables.
    pub(crate) async fn run_with(&self, args: &[&str], envs: &[(&str, String)]) -> Run {
        let mut cmd = self.command(args);
        cmd.envs(envs.iter().map(|(k, v)| (*k, v.as_str())));
        finished(cmd).await
    }
}

/// `cmd` run to its end off the async runtime.
async fn finished(mut cmd: std::process::Command) -> Run {
    Run(tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap())
}

/// A finished `krayne` run.
pub(crate) struct Run(pub(crate) Output);

impl Run {
    pub(crate) fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.0.stdout).into_owned()
    }

    pub(crate) fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.0.stderr).into_owned()
    }

    /// Asserts the exit code and returns the run.
    #[track_caller]
    pub(crate) fn code(self, expected: i32) -> Self {
        // assert_cmd's failure message shows the command, stdout and stderr.
        self.0.clone().assert().code(expected);
        self
    }

    /// Asserts success and parses stdout as JSON.
    #[track_caller]
    pub(crate) fn json(self) -> serde_json::Value {
        let run = self.code(0);
        serde_json::from_str(&run.stdout()).unwrap_or_else(|e| panic!("{e}: {}", run.stdout()))
    }

    /// Asserts success and returns stdout's lines.
    #[track_caller]
    pub(crate) fn lines(self) -> Vec<String> {
        self.code(0).stdout().lines().map(str::to_owned).collect()
    }
}

/// The words of a table line.
pub(crate) fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}
