//! The systemd recipe, `examples/systemd/mur.service`, as far as a machine without systemd as
//! pid 1 can take it: `systemd-analyze verify` finds nothing to say about it, and its own
//! `ExecStart` line, run the way systemd runs a `Type=notify` service, says `READY=1` once the
//! door answers the readiness probe's request, and on systemd's stop (SIGTERM to the main
//! process, there being no `ExecStop`) exits with a status the unit counts as success.

use crate::common;

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;

use common::home::{Home, repo};
use common::http::http;
use common::run::{mur_bin, mur_command, wait_child};
use common::skip::skipped;
use common::wait::WAIT;

/// Where the unit expects mur, as installed by `./install.sh /usr/local`.
const INSTALLED: &str = "/usr/local/bin/mur";

fn unit() -> String {
    std::fs::read_to_string(repo().join("examples/systemd/mur.service")).unwrap()
}

/// The values of `key=` in `[Service]` (every line that sets it, in order).
fn service_values(unit: &str, key: &str) -> Vec<String> {
    unit.lines()
        .skip_while(|line| line.trim() != "[Service]")
        .take_while(|line| !line.starts_with('[') || line.trim() == "[Service]")
        .filter_map(|line| line.strip_prefix(key)?.strip_prefix('='))
        .map(str::to_string)
        .collect()
}

#[test]
fn systemd_analyze_verify_finds_nothing_to_say_about_the_unit() {
    let Ok(version) = std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
    else {
        return skipped(
            "systemd_analyze_verify_finds_nothing_to_say_about_the_unit",
            "no systemd-analyze on this machine (Debian: systemd)",
        );
    };
    assert!(version.status.success());
    // verify insists that ExecStart's program exists: point it at the mur under test.
    let home = Home::new();
    let copy: PathBuf = home.path().join("mur.service");
    std::fs::write(&copy, unit().replace(INSTALLED, mur_bin())).unwrap();
    assert_verified(&home, &copy);
}

/// `systemd-analyze verify UNIT` (run in the home, where the units are) has nothing to say:
/// verify exits 0 on a line it ignores ("Failed to parse …, ignoring"), so any word is a finding.
#[track_caller]
fn assert_verified(home: &Home, unit: &std::path::Path) {
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(unit)
        .current_dir(home.path())
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "systemd-analyze verify {}: {}\n{}{}",
        unit.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The unit is hardened: `systemd-analyze security` rates its exposure below 5 (it was 8.5,
/// EXPOSED, before the sandboxing lines), and the key settings are there as written.
#[test]
fn systemd_analyze_security_rates_the_unit_below_5() {
    let unit = unit();
    for (key, value) in [
        ("UMask", "0077"),
        ("NoNewPrivileges", "yes"),
        ("PrivateDevices", "yes"),
        ("ProtectKernelTunables", "yes"),
        ("ProtectKernelModules", "yes"),
        (
            "RestrictAddressFamilies",
            "AF_UNIX AF_INET AF_INET6 AF_NETLINK",
        ),
        ("CapabilityBoundingSet", ""),
    ] {
        assert_eq!(service_values(&unit, key), [value], "{key}");
    }
    let home = Home::new();
    let copy: PathBuf = home.path().join("mur.service");
    std::fs::write(&copy, unit.replace(INSTALLED, mur_bin())).unwrap();
    let Ok(out) = std::process::Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(&copy)
        .current_dir(home.path())
        .output()
    else {
        return skipped(
            "systemd_analyze_security_rates_the_unit_below_5",
            "no systemd-analyze on this machine (Debian: systemd)",
        );
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("--offline") || stderr.contains("unrecognized option") {
        return skipped(
            "systemd_analyze_security_rates_the_unit_below_5",
            "this systemd-analyze has no security --offline (systemd < 250)",
        );
    }
    let level = text
        .lines()
        .find_map(|line| {
            line.split("Overall exposure level for mur.service: ")
                .nth(1)
        })
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no exposure level in:\n{text}{stderr}"));
    assert!(level < 5.0, "exposure {level}:\n{text}");
}

#[test]
fn the_units_exec_start_is_ready_when_its_door_answers_and_stops_as_a_success() {
    let unit = unit();
    assert_eq!(service_values(&unit, "Type"), ["notify"]);
    assert!(
        service_values(&unit, "ExecStop").is_empty(),
        "stop is SIGTERM"
    );
    assert_eq!(service_values(&unit, "KillMode"), ["mixed"]);
    let exec_start = service_values(&unit, "ExecStart");
    let [line] = exec_start.as_slice() else {
        panic!("one ExecStart, not {exec_start:?}");
    };
    let argv: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(argv[0], INSTALLED);
    // The unit's arguments, but the capsule is examples/shout and the port any free one.
    let shout = repo().join("examples/shout");
    let args: Vec<&str> = argv[1..]
        .iter()
        .map(|&arg| match arg {
            "/srv/capsule" => shout.to_str().unwrap(),
            "8080" => "0",
            other => other,
        })
        .collect();

    let home = Home::new();
    let socket_path = home.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket.set_read_timeout(Some(WAIT)).unwrap();
    let mut command = mur_command(home.path(), home.path(), &args);
    command
        .env("NOTIFY_SOCKET", &socket_path)
        .stderr(std::process::Stdio::null());
    let mut child = command.spawn().expect("spawning the unit's ExecStart");

    let mut buf = [0u8; 64];
    let n = socket.recv(&mut buf).expect("READY=1 on NOTIFY_SOCKET");
    assert_eq!(&buf[..n], b"READY=1");
    // Ready means the probe's request is answered.
    let ps = home.mur(&["ps", "--json"]);
    let url = ps.json()["capsules"][0]["url"]
        .as_str()
        .expect("the session's url")
        .to_string();
    let card = http(&url, "GET", "/.well-known/agent-card.json", None, b"").unwrap();
    assert_eq!(card.status, 200, "{}", card.text());

    // systemd's stop: SIGTERM to the main process.
    // SAFETY: kill(2) with integers only; the pid is our unreaped child's, so it names it alone.
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(sent, 0);
    let status = wait_child(&mut child, WAIT).expect("mur exits after SIGTERM");
    let code = status.code().expect("an exit, not a signal").to_string();
    let success: Vec<String> = service_values(&unit, "SuccessExitStatus")
        .iter()
        .flat_map(|v| v.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .collect();
    assert!(
        code == "0" || success.contains(&code),
        "exit {code} after SIGTERM is not in SuccessExitStatus={success:?}"
    );
    assert!(home.running_entries().is_empty(), "the record is removed");
}

/// The `.socket` unit shipped beside the service: `systemd-analyze verify` has nothing to say
/// about the pair, and it names the door as mur looks for it.
#[test]
fn systemd_analyze_verify_finds_nothing_to_say_about_the_socket_unit() {
    let socket = std::fs::read_to_string(repo().join("examples/systemd/mur.socket")).unwrap();
    assert!(socket.contains("FileDescriptorName=door"), "{socket}");
    if std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        return skipped(
            "systemd_analyze_verify_finds_nothing_to_say_about_the_socket_unit",
            "no systemd-analyze on this machine (Debian: systemd)",
        );
    }
    let home = Home::new();
    std::fs::write(
        home.path().join("mur.service"),
        unit().replace(INSTALLED, mur_bin()),
    )
    .unwrap();
    std::fs::write(home.path().join("mur.socket"), socket).unwrap();
    assert_verified(&home, &home.path().join("mur.socket"));
}

/// Socket activation as systemd does it (`systemd-socket-activate`: it holds the socket, passes
/// it with `LISTEN_PID`/`LISTEN_FDS`, and starts mur at the first connection): the session
/// serves the socket it was given.
#[test]
fn a_socket_activated_session_serves_the_socket_it_was_given() {
    if std::process::Command::new("systemd-socket-activate")
        .arg("--version")
        .output()
        .is_err()
    {
        return skipped(
            "a_socket_activated_session_serves_the_socket_it_was_given",
            "no systemd-socket-activate on this machine (Debian: systemd)",
        );
    }
    let home = Home::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address = format!("127.0.0.1:{port}");
    let base = mur_command(home.path(), home.path(), &[]);
    let mut activate = std::process::Command::new("systemd-socket-activate");
    activate
        .args(["-l", &address, mur_bin(), "run", "--json"])
        .env_clear()
        .envs(base.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .current_dir(home.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut activate = activate.spawn().unwrap();
    // The first connection that reaches the socket starts mur; it is answered once mur serves.
    common::wait::wait_for(WAIT, "the card from the activated session", || {
        http(&address, "GET", "/.well-known/agent-card.json", None, b"")
            .ok()
            .filter(|card| card.status == 200)
    });
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(activate.stdout.take().unwrap()),
        &mut ready,
    )
    .unwrap();
    let ready: serde_json::Value = serde_json::from_str(&ready).expect("the readiness line");
    assert_eq!(
        ready["url"],
        address.as_str(),
        "it serves the socket it was given"
    );
    // SAFETY: kill(2) on our own unreaped child; systemd-socket-activate execs mur in place.
    unsafe { libc::kill(activate.id() as i32, libc::SIGTERM) };
    let status = wait_child(&mut activate, WAIT).expect("it ended");
    assert_eq!(status.code(), Some(143));
}

/// A session serving a socket it was handed (`--listen-fd`, as a service manager holds one)
/// restarts without refusing a connection: eight clients asking for the card the whole time see
/// no `ECONNREFUSED` — what arrives while no session serves waits in the socket's queue, and the
/// next session answers it.
#[test]
fn a_restart_on_a_held_socket_refuses_no_connection() {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    let home = Home::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let held = listener.as_raw_fd();
    let start = || {
        let mut command = mur_command(
            home.path(),
            home.path(),
            &["run", "--json", "--listen-fd", "3"],
        );
        // SAFETY: dup2(2) and fcntl(2) on descriptors this process holds open, both
        // async-signal-safe; the socket at 3 is then not close-on-exec, so mur inherits it there
        // (dup2 onto itself would leave the flag: the listener may be 3 already).
        unsafe {
            command.pre_exec(move || {
                let at_3 = if held == 3 {
                    libc::fcntl(3, libc::F_SETFD, 0)
                } else {
                    libc::dup2(held, 3)
                };
                if at_3 < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        common::session::Session::spawn(command)
    };
    let mut first = start();
    assert_eq!(first.url, address, "it serves the socket it was handed");

    let stop = Arc::new(AtomicBool::new(false));
    let (answered, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let (stop, answered, refused) = (stop.clone(), answered.clone(), refused.clone());
            let address = address.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match http(&address, "GET", "/.well-known/agent-card.json", None, b"") {
                        Ok(card) if card.status == 200 => {
                            answered.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(err) if err.kind() == std::io::ErrorKind::ConnectionRefused => {
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                        // Cut by the first session's wind-down: not a refusal.
                        _ => {}
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    first.signal(libc::SIGTERM);
    assert_eq!(first.wait_exit(WAIT).code(), Some(143));
    let before = answered.load(Ordering::Relaxed);
    std::thread::sleep(std::time::Duration::from_millis(200));
    let second = start();
    assert_eq!(second.url, address);
    std::thread::sleep(std::time::Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.join().unwrap();
    }
    let after = answered.load(Ordering::Relaxed) - before;
    assert_eq!(
        refused.load(Ordering::Relaxed),
        0,
        "connections refused across the restart"
    );
    assert!(
        before > 0 && after > 0,
        "answered: {before} before, {after} after"
    );
    drop(listener);
}
