//! A session of the head's SSH server that asked for a terminal (`ssh`
//! without a command, `ssh -t`): the command runs on a pseudo-terminal
//! (portable-pty), as sshd runs it, so a shell prompts, edits lines and
//! answers Ctrl-C, and `tput`, `top` or Python's REPL work. The window
//! follows the client's (`window-change`).

use std::{
    io::{Read as _, Write as _},
    sync::{Arc, Mutex},
};

use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};
use russh::{Channel, ChannelMsg, server::Msg};
use tokio::sync::{mpsc, watch};

/// What a client asked of its terminal (`pty-req`).
#[derive(Debug, Clone)]
pub(super) struct TerminalRequest {
    /// `TERM`, e.g. `xterm-256color`.
    pub(super) term: String,
    pub(super) cols: u16,
    pub(super) rows: u16,
}

/// A running command's terminal, for the window changes that come later.
pub(super) type Window = Arc<Mutex<Box<dyn MasterPty + Send>>>;

/// Sets the terminal's size (a client's `window-change`).
pub(super) fn resize(window: &Window, cols: u16, rows: u16) {
    if let Ok(master) = window.lock() {
        let _ = master.resize(size(cols, rows));
    }
}

fn size(cols: u16, rows: u16) -> PtySize {
    PtySize {
        rows: rows.max(1),
        cols: cols.max(1),
        pixel_width: 0,
        pixel_height: 0,
    }
}

/// Starts `argv` with `env` in `cwd` on a new terminal, and carries it
/// over `channel` until it ends (its status sent), the client leaves or
/// the pod stops serving (then it is killed). Returns the terminal's
/// window handle.
pub(super) fn start(
    channel: Channel<Msg>,
    request: &TerminalRequest,
    argv: &[String],
    env: &[(&str, String)],
    cwd: &std::path::Path,
    stopped: watch::Receiver<()>,
) -> std::io::Result<Window> {
    let pair = native_pty_system()
        .openpty(size(request.cols, request.rows))
        .map_err(std::io::Error::other)?;
    let mut cmd = CommandBuilder::new(&argv[0]);
    cmd.args(&argv[1..]);
    cmd.env_clear();
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.env("TERM", &request.term);
    cmd.cwd(cwd);
    let child = pair.slave.spawn_command(cmd).map_err(std::io::Error::other)?;
    drop(pair.slave);
    let reader = pair.master.try_clone_reader().map_err(std::io::Error::other)?;
    let writer = pair.master.take_writer().map_err(std::io::Error::other)?;
    let window: Window = Arc::new(Mutex::new(pair.master));
    tokio::spawn(carry(channel, child, reader, writer, stopped, window.clone()));
    Ok(window)
}

/// The terminal's output to the client, the client's data to it.
async fn carry(
    mut channel: Channel<Msg>,
    mut child: Box<dyn portable_pty::Child + Send + Sync>,
    mut reader: Box<dyn std::io::Read + Send>,
    mut writer: Box<dyn std::io::Write + Send>,
    mut stopped: watch::Receiver<()>,
    window: Window,
) {
    // The terminal's ends block: a thread each way.
    let (output, mut from_terminal) = mpsc::channel::<Vec<u8>>(16);
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || output.blocking_send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let (to_terminal, input) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        while let Ok(data) = input.recv() {
            if writer.write_all(&data).and_then(|()| writer.flush()).is_err() {
                break;
            }
        }
    });
    let mut killer = child.clone_killer();
    let exited = tokio::task::spawn_blocking(move || child.wait());
    let out = channel.make_writer();
    let mut out = std::pin::pin!(out);
    let relay = async {
        use tokio::io::AsyncWriteExt as _;
        while let Some(data) = from_terminal.recv().await {
            if out.write_all(&data).await.is_err() {
                break;
            }
        }
    };
    let client = async {
        while let Some(message) = channel.wait().await {
            match message {
                ChannelMsg::Data { data } => {
                    let _ = to_terminal.send(data.to_vec());
                }
                ChannelMsg::WindowChange {
                    col_width, row_height, ..
                } => resize(
                    &window,
                    u16::try_from(col_width).unwrap_or(u16::MAX),
                    u16::try_from(row_height).unwrap_or(u16::MAX),
                ),
                ChannelMsg::Close => break,
                _ => {}
            }
        }
    };
    let status = tokio::select! {
        // The output first: the last lines come before the status.
        ((), status) = async { tokio::join!(relay, exited) } => status.ok().and_then(Result::ok),
        () = client => None,
        _ = stopped.changed() => None,
    };
    let Some(status) = status else {
        let _ = killer.kill();
        return;
    };
    let _ = channel.exit_status(status.exit_code()).await;
    let _ = channel.eof().await;
    let _ = channel.close().await;
}
