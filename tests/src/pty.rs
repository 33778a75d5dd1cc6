//! A program in a real pseudo-terminal, its screen read back through a
//! terminal emulator's parser (vt100), keys typed as a person types them:
//! for `krayne tui`'s end-to-end test and its start-up benchmark.

use std::{
    ffi::OsStr,
    io::{Read as _, Write as _},
    sync::mpsc,
    time::{Duration, Instant},
};

use portable_pty::{Child, CommandBuilder, PtyPair, PtySize, native_pty_system};

/// What the program asked the terminal to put on the clipboard (OSC 52),
/// each still base64 as sent.
#[derive(Debug, Default)]
pub struct Clipboard(Vec<Vec<u8>>);

impl vt100::Callbacks for Clipboard {
    fn copy_to_clipboard(&mut self, _: &mut vt100::Screen, _ty: &[u8], data: &[u8]) {
        self.0.push(data.to_vec());
    }
}

/// A terminal of `rows` × `cols` with one program in it.
pub struct Terminal {
    pair: PtyPair,
    child: Box<dyn Child + Send + Sync>,
    parser: vt100::Parser<Clipboard>,
    /// Every byte the program wrote, as written.
    transcript: Vec<u8>,
    output: mpsc::Receiver<(Instant, Vec<u8>)>,
    keys: Box<dyn std::io::Write + Send>,
    /// When the program was started.
    pub started: Instant,
}

impl Terminal {
    /// Starts `program args…` with `envs` (and `TERM=xterm-256color`, no
    /// `DISPLAY`).
    pub fn spawn<K: AsRef<OsStr>, V: AsRef<OsStr>>(
        program: impl AsRef<OsStr>,
        args: &[&str],
        envs: impl IntoIterator<Item = (K, V)>,
        (rows, cols): (u16, u16),
    ) -> Self {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut cmd = CommandBuilder::new(program);
        cmd.args(args);
        cmd.env("TERM", "xterm-256color");
        cmd.env_remove("DISPLAY");
        cmd.env_remove("WAYLAND_DISPLAY");
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let started = Instant::now();
        let child = pair.slave.spawn_command(cmd).unwrap();
        let mut reader = pair.master.try_clone_reader().unwrap();
        let (tx, output) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || tx.send((Instant::now(), buf[..n].to_vec())).is_err() {
                    break;
                }
            }
        });
        let keys = pair.master.take_writer().unwrap();
        Self {
            pair,
            child,
            parser: vt100::Parser::new_with_callbacks(
                rows.try_into().unwrap(),
                cols.try_into().unwrap(),
                0,
                Clipboard::default(),
            ),
            transcript: Vec::new(),
            output,
            keys,
            started,
        }
    }

    /// Waits until the screen shows all of `wanted` and none of
    /// `unwanted`; returns the screen's text and when it first did.
    pub fn wait_for(&mut self, wanted: &[&str], unwanted: &[&str]) -> (String, Instant) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut at = self.started;
        loop {
            let text = self.parser.screen().contents();
            if wanted.iter().all(|w| text.contains(w)) && !unwanted.iter().any(|u| text.contains(u)) {
                return (text, at);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "the screen never showed {wanted:?} without {unwanted:?}:\n{text}"
            );
            if let Ok((when, bytes)) = self.output.recv_timeout(left.min(Duration::from_millis(200))) {
                self.parser.process(&bytes);
                self.transcript.extend_from_slice(&bytes);
                at = when;
            }
        }
    }

    /// The screen as the emulator has it now, after reading what is left.
    pub fn screen(&mut self) -> &vt100::Screen {
        while let Ok((_, bytes)) = self.output.recv_timeout(Duration::from_millis(300)) {
            self.parser.process(&bytes);
            self.transcript.extend_from_slice(&bytes);
        }
        self.parser.screen()
    }

    /// What the program put on the clipboard (OSC 52) so far, decoded.
    pub fn clipboard(&mut self) -> Vec<String> {
        use base64::Engine as _;
        self.screen();
        let engine = base64::engine::general_purpose::STANDARD;
        self.parser
            .callbacks()
            .0
            .iter()
            .map(|data| String::from_utf8(engine.decode(data).unwrap()).unwrap())
            .collect()
    }

    /// Everything the program wrote, as text (escape sequences and all).
    pub fn transcript(&mut self) -> String {
        self.screen();
        String::from_utf8_lossy(&self.transcript).into_owned()
    }

    /// Types `keys` (`\r` is Enter, `\t` Tab, `\x7f` Backspace).
    pub fn type_keys(&mut self, keys: &str) {
        self.keys.write_all(keys.as_bytes()).unwrap();
        self.keys.flush().unwrap();
    }

    /// Waits (a minute at most) for the program to end; whether it
    /// succeeded.
    pub fn wait(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.success();
            }
            assert!(Instant::now() < deadline, "the program did not end within a minute");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs `program args…` in the same terminal after the first ended
    /// (e.g. `stty -a`, to read the terminal's settings), and waits for it.
    pub fn run_after(&mut self, program: &str, args: &[&str]) -> bool {
        let mut cmd = CommandBuilder::new(program);
        cmd.args(args);
        let mut child = self.pair.slave.spawn_command(cmd).unwrap();
        child.wait().unwrap().success()
    }
}

impl Drop for Terminal {
    /// A failed test leaves no program behind.
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}
