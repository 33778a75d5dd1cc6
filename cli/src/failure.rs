//! Why a command failed, its exit code, and the one line that says so.

use std::{io::Write as _, process::ExitCode};

use krayne_client::{ClientError, Code};

/// A failed command.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Bad input found before anything was sent.
    Usage(String),
    /// The user declined a confirmation.
    Declined(String),
    /// Interrupted (Ctrl-C) before the outcome was known: the shell's 130,
    /// never a failure's 1.
    Interrupted(String),
    /// A call failed (or its input was refused on this side).
    Client(ClientError),
    /// A call failed, and the command knows what to look at next: a
    /// `hint:` line of its own.
    Hinted(ClientError, String),
    /// Anything else (a file could not be written, …).
    Other(String),
    /// A sandbox refused a token: most likely one a previous run printed.
    StaleSandboxToken(ClientError),
    /// A program krayne ran (`ssh`) ended with this status and said why
    /// itself: passed on as the exit code, with nothing added.
    Exited(u8),
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        Self::Client(e)
    }
}

impl Failure {
    /// The exit code, as `krayne --help` lists them.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => 2,
            Self::Interrupted(_) => 130,
            Self::Declined(_) | Self::Other(_) => 1,
            Self::StaleSandboxToken(_) => 4,
            Self::Exited(code) => *code,
            Self::Client(e) | Self::Hinted(e, _) => match e.code() {
                Code::InvalidArgument | Code::OutOfRange => 2,
                Code::NotFound => 3,
                Code::Unauthenticated | Code::PermissionDenied => 4,
                Code::Unavailable => 5,
                Code::DeadlineExceeded => 6,
                Code::AlreadyExists => 7,
                Code::Ok
                | Code::Cancelled
                | Code::Unknown
                | Code::ResourceExhausted
                | Code::FailedPrecondition
                | Code::Aborted
                | Code::Unimplemented
                | Code::Internal
                | Code::DataLoss => 1,
            },
        }
    }

    /// What went wrong, in one line without the `error:` prefix.
    pub(crate) fn message(&self) -> &str {
        match self {
            Self::Usage(m) | Self::Declined(m) | Self::Interrupted(m) | Self::Other(m) => m,
            Self::Client(e) | Self::Hinted(e, _) | Self::StaleSandboxToken(e) => e.message(),
            Self::Exited(_) => "",
        }
    }

    /// The error line, field violations, a hint and (with `debug`) details.
    fn lines(&self, debug: bool) -> Vec<String> {
        match self {
            Self::Usage(m) | Self::Other(m) => vec![format!("error: {m}")],
            Self::Declined(m) | Self::Interrupted(m) => vec![m.clone()],
            Self::Exited(_) => Vec::new(),
            Self::StaleSandboxToken(e) => vec![
                format!("error: {}", e.message()),
                "hint: this server is a krayne sandbox, and its tokens belong to the run that printed them \
                 (each run signs with a new key): copy the `export KRAYNE_TOKEN=…` line the running sandbox \
                 printed when it started"
                    .to_owned(),
            ],
            Self::Client(e) | Self::Hinted(e, _) => {
                let mut lines = violation_lines(e.message(), e.violations());
                let hint = match (self, e.code()) {
                    (Self::Hinted(_, hint), _) => Some(format!("hint: {hint}")),
                    (_, Code::Unauthenticated) => {
                        Some("hint: pass --token, set KRAYNE_TOKEN, or run `krayne login`".to_owned())
                    }
                    (_, Code::PermissionDenied) => {
                        Some("hint: `krayne whoami` lists the namespaces you may use".to_owned())
                    }
                    (_, Code::Unavailable) => {
                        Some("hint: is the server running, and is --server (or KRAYNE_SERVER) right?".to_owned())
                    }
                    _ => None,
                };
                lines.extend(hint);
                if debug {
                    lines.push(format!("  code: {:?} ({})", e.code(), i32::from(e.code())));
                    if let Some(id) = e.request_id() {
                        lines.push(format!("  request id: {id}"));
                    }
                }
                lines
            }
        }
    }
}

/// The error line and the field violations, one per line. A server's
/// message that is the violations joined (`a: x; b: y`) becomes its
/// prefix, if any, and the list.
fn violation_lines(message: &str, violations: &[krayne_client::FieldViolation]) -> Vec<String> {
    let each: Vec<String> = violations
        .iter()
        .map(|v| format!("{}: {}", v.field, v.description))
        .collect();
    let joined = each.len() > 1 && each.iter().all(|v| message.contains(v.as_str()));
    if !joined {
        let mut lines = vec![format!("error: {message}")];
        lines.extend(
            each.into_iter()
                .filter(|v| !message.contains(v.as_str()))
                .map(|v| format!("  {v}")),
        );
        return lines;
    }
    let prefix = each
        .first()
        .and_then(|first| message.find(first.as_str()))
        .map_or("", |at| message[..at].trim_end_matches([' ', ':', ';']));
    let head = if prefix.is_empty() {
        format!("error: {} problems:", each.len())
    } else {
        format!("error: {prefix}:")
    };
    std::iter::once(head)
        .chain(each.into_iter().map(|v| format!("  {v}")))
        .collect()
}

/// Prints the failure, if any, to stderr and turns it into the exit code.
pub(crate) fn report(result: Result<(), Failure>, debug: bool) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            let mut stderr = std::io::stderr().lock();
            for line in failure.lines(debug) {
                // Nothing sensible is left to do when stderr is gone.
                let _ = writeln!(stderr, "{}", crate::output::printable(&line, true));
            }
            ExitCode::from(failure.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_per_kind() {
        let code = |c: Code| Failure::from(ClientError::new(c, "x")).exit_code();
        assert_eq!(Failure::Usage("x".into()).exit_code(), 2);
        assert_eq!(code(Code::InvalidArgument), 2);
        assert_eq!(code(Code::NotFound), 3);
        assert_eq!(code(Code::PermissionDenied), 4);
        assert_eq!(code(Code::Unauthenticated), 4);
        assert_eq!(code(Code::Unavailable), 5);
        assert_eq!(code(Code::DeadlineExceeded), 6);
        assert_eq!(code(Code::AlreadyExists), 7);
        assert_eq!(code(Code::Internal), 1);
    }

    #[test]
    fn violations_are_listed_under_the_message() {
        let e = ClientError::invalid_field("head.cpus", "must be a string");
        let lines = Failure::from(e).lines(true);
        assert_eq!(lines[0], "error: head.cpus: must be a string");
        assert!(lines.iter().any(|l| l.contains("InvalidArgument")), "{lines:?}");
    }

    #[test]
    fn joined_violations_come_one_per_line() {
        let v = |field: &str, description: &str| krayne_client::FieldViolation {
            field: field.into(),
            description: description.into(),
        };
        let violations = [v("a.b", "must be 1"), v("c", "is unknown")];
        assert_eq!(
            violation_lines("a.b: must be 1; c: is unknown", &violations),
            ["error: 2 problems:", "  a.b: must be 1", "  c: is unknown"]
        );
        assert_eq!(
            violation_lines("invalid cluster config: a.b: must be 1; c: is unknown", &violations),
            ["error: invalid cluster config:", "  a.b: must be 1", "  c: is unknown"]
        );
        assert_eq!(
            violation_lines("a.b: must be 1", &violations[..1]),
            ["error: a.b: must be 1"]
        );
        assert_eq!(
            violation_lines("bad request", &violations[..1]),
            ["error: bad request", "  a.b: must be 1"]
        );
    }
}
