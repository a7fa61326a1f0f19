//! One capsule session: a door on loopback, a running record for exactly as long as it lives,
//! and an orderly end on the first SIGTERM/SIGINT/SIGHUP or `session/stop`.
//!
//! This version serves the embedded `echo` capsule only; handler capsules from a manifest are
//! refused with a clear error until task execution lands.

pub mod door;

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::id::SessionId;
use crate::json::record::RunningRecord;
use crate::running::RecordGuard;
use crate::sys::signal;

/// How often the main loop looks for a reason to stop.
const WATCH_INTERVAL: Duration = Duration::from_millis(20);

/// What `mur run` was asked for.
pub struct Options {
    pub bind: IpAddr,
    pub port: u16,
    pub workdir: PathBuf,
    pub json: bool,
}

/// Run the embedded echo capsule until asked to stop; the exit code.
pub fn run_echo(options: &Options) -> Result<i32, String> {
    let name = "echo";
    let version = env!("CARGO_PKG_VERSION");
    signal::catch_termination();
    let session_id = SessionId::mint()?;
    let listener = TcpListener::bind(SocketAddr::new(options.bind, options.port))
        .map_err(|err| format!("cannot listen on {}:{}: {err}", options.bind, options.port))?;
    let addr = listener
        .local_addr()
        .map_err(|err| format!("cannot read the door's address: {err}"))?
        .to_string();
    let door = Arc::new(door::Door::new(
        session_id.clone(),
        name,
        version,
        addr.clone(),
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let (door, stop) = (door.clone(), stop.clone());
        std::thread::Builder::new()
            .name("door".into())
            .spawn(move || crate::net::server::serve(listener, door, stop))
            .map_err(|err| format!("cannot start the door: {err}"))?
    };

    let pid = std::process::id();
    let record = RunningRecord {
        session_id: session_id.clone(),
        url: addr.clone(),
        pid,
        process_start: crate::sys::proc::process_start_token(pid).unwrap_or_default(),
        capsule_name: name.into(),
        capsule_version: version.into(),
        workdir: options.workdir.clone(),
        outlives_launcher: !crate::running::has_controlling_terminal(),
        started_at: crate::time::format_rfc3339(crate::time::unix_now()),
        door_token: None,
        credentials: Default::default(),
        formation_id: None,
        formation_lifeline: false,
        formation_launcher: None,
        spawned_by: None,
        records_dir: Some(options.workdir.clone()),
    };
    // Failing to record never fails the session: it runs on, unaddressable by `mur ps`.
    let guard = crate::home::running_dir()
        .and_then(|dir| RecordGuard::write(&dir, &record))
        .map_err(|why| crate::cli::warn("run", &format!("{why}; running without a record")))
        .ok();

    announce(options, &record);

    let code = loop {
        if let Some(caught) = signal::caught_termination() {
            break 128 + caught;
        }
        if door.stop_requested.load(Ordering::Acquire) {
            break 128 + libc::SIGTERM;
        }
        std::thread::sleep(WATCH_INTERVAL);
    };
    stop.store(true, Ordering::Release);
    drop(guard);
    let _ = server.join();
    Ok(code)
}

/// The readiness line: one JSON line on stdout with `--json`, a human line on stderr otherwise;
/// and `READY=1` to `NOTIFY_SOCKET` where systemd asks for it. Never a token.
fn announce(options: &Options, record: &RunningRecord) {
    use std::io::Write;
    if options.json {
        let line = serde_json::json!({
            "session_id": record.session_id,
            "url": record.url,
            "pid": record.pid,
            "name": record.capsule_name,
            "version": record.capsule_version,
            "workdir": record.workdir,
        });
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    } else {
        let _ = writeln!(
            std::io::stderr(),
            "mur run: {} {} serving at http://{}/ (stop: mur stop {} or ^C)",
            record.capsule(),
            record.session_id,
            record.url,
            record.session_id
        );
    }
    if let Some(socket) = std::env::var_os("NOTIFY_SOCKET") {
        notify_ready(&socket);
    }
}

fn notify_ready(socket: &std::ffi::OsStr) {
    use std::os::unix::net::UnixDatagram;
    let path = std::path::Path::new(socket);
    if let Ok(sock) = UnixDatagram::unbound() {
        let _ = sock.send_to(b"READY=1", path);
    }
}
