//! Running the `mur` binary (or any command) to its end under a deadline, its output captured.

use std::io::{Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long one short `mur` command may run before the test calls it hung.
pub const MUR_DEADLINE: Duration = Duration::from_secs(30);

/// The longer hang guard the `mur ps`/`stop`/`token` tests give each `mur` command.
pub const PATIENT_DEADLINE: Duration = Duration::from_secs(60);

pub fn mur_bin() -> &'static str {
    env!("CARGO_BIN_EXE_mur")
}

/// A `mur ARGS…` command with `HOME` set to `home`, a minimal environment (`PATH`, `LC_ALL=C`:
/// nothing of the test process's own leaks in), run from `cwd`, stdin closed unless set later.
pub fn mur_command(home: &std::path::Path, cwd: &std::path::Path, args: &[&str]) -> Command {
    binary_command(std::path::Path::new(mur_bin()), home, cwd, args)
}

/// [`mur_command`] for another build of `mur` at `binary` (the installed static one).
pub fn binary_command(
    binary: &std::path::Path,
    home: &std::path::Path,
    cwd: &std::path::Path,
    args: &[&str],
) -> Command {
    let mut command = Command::new(binary);
    command
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("LC_ALL", "C")
        .current_dir(cwd)
        .stdin(Stdio::null());
    command
}

/// What one finished command did, and when it ran.
#[derive(Debug, Clone)]
pub struct Output {
    /// The exit code; `None` if it died of a signal.
    pub code: Option<i32>,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub started: Instant,
    pub ended: Instant,
    /// `ended - started`.
    pub elapsed: Duration,
}

impl Output {
    pub fn code(&self) -> Option<i32> {
        self.code
    }

    /// Panic, showing everything, unless the exit code is `code`.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(code),
            "expected exit {code}; got {:?}\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        self
    }

    /// stdout parsed as one JSON document.
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim_end()).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON document ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

/// Spawn `command` with stdout/stderr captured and wait for it under `deadline` (killing it and
/// failing the test past it). Its stdin is left as the command has it.
#[track_caller]
pub fn run(command: Command, deadline: Duration) -> Output {
    run_to_end(command, None, deadline)
}

/// [`run`], with `stdin` (when given) written to a pipe and then closed.
#[track_caller]
pub fn run_to_end(mut command: Command, stdin: Option<&[u8]>, deadline: Duration) -> Output {
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    if stdin.is_some() {
        command.stdin(Stdio::piped());
    }
    let started = Instant::now();
    let mut child = command.spawn().expect("spawn mur");
    if let Some(bytes) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(bytes).unwrap();
    }
    let out = Drain::start(child.stdout.take().unwrap());
    let err = Drain::start(child.stderr.take().unwrap());
    let status = match wait_child(&mut child, deadline) {
        Some(status) => status,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{command:?} still running after {deadline:?}; stderr: {:?}",
                err.text()
            );
        }
    };
    let ended = Instant::now();
    // The pipes close when the process (and anything holding them) is gone; a leftover holder
    // must not hang the test either.
    out.wait(Duration::from_secs(5));
    err.wait(Duration::from_secs(5));
    Output {
        code: status.code(),
        status,
        stdout: out.text(),
        stderr: err.text(),
        started,
        ended,
        elapsed: ended - started,
    }
}

/// Whether `child` is still running; when it has exited, it is reaped and its status kept in
/// `status` (already set: it ended before).
pub fn still_running(child: &mut Child, status: &mut Option<ExitStatus>) -> bool {
    if status.is_some() {
        return false;
    }
    match child.try_wait().expect("wait for a child") {
        Some(ended) => {
            *status = Some(ended);
            false
        }
        None => true,
    }
}

/// `try_wait` until the child exits or `within` passes.
pub fn wait_child(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().expect("wait for a child") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// A pipe being read to EOF on a thread: what arrived so far, and whether EOF came.
pub struct Drain {
    pub(super) bytes: Arc<Mutex<Vec<u8>>>,
    pub(super) done: mpsc::Receiver<()>,
}

impl Drain {
    pub fn start(pipe: impl Read + Send + 'static) -> Drain {
        Drain::after(pipe, |_| {})
    }

    /// Run `first` on the pipe (on the reading thread), then drain the rest of it.
    pub fn after<R: Read + Send + 'static>(
        mut pipe: R,
        first: impl FnOnce(&mut R) + Send + 'static,
    ) -> Drain {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let (tx, done) = mpsc::channel();
        let sink = bytes.clone();
        thread::spawn(move || {
            first(&mut pipe);
            let mut chunk = [0u8; 8192];
            loop {
                match pipe.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink.lock().unwrap().extend_from_slice(&chunk[..n]),
                }
            }
            let _ = tx.send(());
        });
        Drain { bytes, done }
    }

    /// Wait up to `within` for EOF; whether it came.
    pub fn wait(&self, within: Duration) -> bool {
        !matches!(
            self.done.recv_timeout(within),
            Err(mpsc::RecvTimeoutError::Timeout)
        )
    }

    pub fn lock(&self) -> MutexGuard<'_, Vec<u8>> {
        self.bytes.lock().unwrap()
    }

    /// What arrived so far, as (lossy) text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.lock()).into_owned()
    }
}

/// [`Drain::start`].
pub fn drain(pipe: impl Read + Send + 'static) -> Drain {
    Drain::start(pipe)
}
