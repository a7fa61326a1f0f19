//! Reading the process table: layer 1 (is the pid held?) and layer 2 (when did its holder start?).

/// Layer 1: whether some process holds `pid` and has not exited.
///
/// (See [`holder`], which takes this reading and layer 2's in one pass.)
///
/// - `kill(pid, 0)` succeeding or failing with `EPERM` means the pid is held (by a process this
///   user may not signal, in the second case).
/// - A pid outside `1..=pid_t::MAX` is held by nobody: `kill(2)` reads `0` as the caller's own
///   process group and a negative `pid_t` as a group or every process, so asking about those
///   would answer for processes no record named.
/// - A zombie is not alive: it has exited and only waits to be reaped. Counting it would list an
///   exited capsule for as long as its parent neglects it, and `mur stop` could never see the
///   process it signalled go.
pub fn pid_is_alive(pid: u32) -> bool {
    !matches!(holder(pid), Holder::Gone)
}

/// Who holds a pid, as layers 1 and 2 read it in one pass ([`holder`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// No process holds the pid, or only a zombie does.
    Gone,
    /// A process holds it, but its start time cannot be read (no evidence either way).
    Unreadable,
    /// A process holds it that started at this token.
    Started(String),
}

impl Holder {
    /// A live holder whose start token was read, or could not be.
    fn started(token: Option<String>) -> Self {
        token.map_or(Holder::Unreadable, Holder::Started)
    }
}

/// Layers 1 and 2 in one reading: who holds `pid` ([`Holder`]).
///
/// One `kill(pid, 0)` and, on Linux, one read of `/proc/<pid>/stat` for both the zombie test and
/// the start time. A stat that cannot be read is not taken for a zombie: failing to look says
/// nothing about the process, and it reads as unverified.
pub fn holder(pid: u32) -> Holder {
    let Some(target) = as_pid_t(pid) else {
        return Holder::Gone;
    };
    // SAFETY: signal 0 runs the existence and permission checks only; no pointer is passed.
    let held = unsafe { libc::kill(target, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    if !held {
        return Holder::Gone;
    }
    platform::state_and_start(pid)
}

/// What kind of process holds a pid, as far as whether it may be signalled goes: who owns it,
/// whether it is a process at all (its thread group's leader) or a kernel thread, its parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessKind {
    /// The real uid.
    pub ruid: u32,
    /// The thread group the pid belongs to: the pid itself for a process, another for a thread.
    pub tgid: u32,
    /// `PF_KTHREAD`: a kernel thread, which no user space process is.
    pub kernel_thread: bool,
    pub ppid: u32,
}

/// The [`ProcessKind`] of whatever holds `pid`; `None` when it cannot be read (gone, or no procfs).
pub fn kind(pid: u32) -> Option<ProcessKind> {
    platform::kind(pid)
}

/// This process's effective uid: asked once and kept, since mur never changes its own ids (a
/// handler's are changed in the child, [`crate::sys::user::assume`]), and every file it opens
/// in a murmur home or a task directory is checked against it — several times a task.
pub fn euid() -> u32 {
    static EUID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    // SAFETY: geteuid(2) takes nothing and cannot fail.
    *EUID.get_or_init(|| unsafe { libc::geteuid() })
}

/// This process and its ancestors up to (not including) pid 0, nearest first; cut short where a
/// parent cannot be read.
///
/// Read once and kept: a `mur` lives seconds, and should its parent die it is reparented to an
/// ancestor (init or a subreaper) already on the chain. One `mur ps` checks every record against
/// it, so walking `/proc` once instead of per record keeps layers 1 and 2 cheap.
pub fn self_and_ancestors() -> &'static [u32] {
    static CHAIN: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();
    CHAIN.get_or_init(|| {
        let mut chain = vec![std::process::id()];
        while let Some(parent) = kind(*chain.last().expect("never empty")).map(|k| k.ppid) {
            if parent == 0 || chain.contains(&parent) || chain.len() > 4096 {
                break;
            }
            chain.push(parent);
        }
        chain
    })
}

/// The other processes this process can see that run the same program as it does (their
/// `/proc/PID/exe` is its own): other `mur` commands, where `/proc` is the pid namespace's own.
/// Empty where there is no `/proc` or it cannot be read.
pub fn others_running_this_program() -> Vec<u32> {
    let (Ok(me), Ok(entries)) = (
        std::fs::read_link("/proc/self/exe"),
        std::fs::read_dir("/proc"),
    ) else {
        return Vec::new();
    };
    let own = std::process::id();
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != own)
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == me))
        .collect()
}

/// Make this process non-dumpable: no core file, and no same-user `ptrace` or
/// `/proc/<pid>/mem` read of the keys and tokens it holds only in memory (a formation's master
/// key, a member's door key and call tokens). Best effort; a no-op where unsupported.
pub fn protect_memory() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
}

/// `pid` as a `pid_t` naming exactly one process, or `None` when it names none (0, or too large).
pub fn as_pid_t(pid: u32) -> Option<libc::pid_t> {
    libc::pid_t::try_from(pid).ok().filter(|&p| p > 0)
}

/// Layer 2's reading: an opaque token for when `pid`'s current holder started, or `None` when it
/// cannot be read (no such pid, no `/proc`, a malformed line).
///
/// Compared only by string equality with a token read the same way on the same machine; nothing
/// parses it as a number or converts between platforms.
///
/// | Platform | Token |
/// |---|---|
/// | Linux | field 22 of `/proc/<pid>/stat` (clock ticks since boot) |
/// | macOS | `pbi_start_tvsec.pbi_start_tvusec` from `proc_pidinfo(PROC_PIDTBSDINFO)` |
pub fn process_start_token(pid: u32) -> Option<String> {
    platform::process_start_token(pid)
}

/// Field 22 (`starttime`) of one `/proc/<pid>/stat` line, or `None` when the line has no `)` or
/// ends before field 22.
///
/// Field 2 is the executable name in parentheses and may itself hold spaces and parentheses
/// (`a) (b c`), so fields are counted from after the *last* `)`: what follows starts at field 3.
pub fn start_token_from_stat(stat: &str) -> Option<&str> {
    fields_after_comm(stat)?.nth(22 - 3)
}

/// Field 3 (the state letter) of one `/proc/<pid>/stat` line.
pub fn state_from_stat(stat: &str) -> Option<&str> {
    fields_after_comm(stat)?.next()
}

fn fields_after_comm(stat: &str) -> Option<std::str::SplitAsciiWhitespace<'_>> {
    Some(stat[stat.rfind(')')? + 1..].split_ascii_whitespace())
}

#[cfg(not(target_os = "macos"))]
mod platform {
    /// `/proc/<pid>/stat` in one read: a stat line is a few hundred bytes (the executable name is
    /// at most 16), and procfs renders it whole into a buffer that large.
    fn read_stat(pid: u32) -> Option<String> {
        use std::io::Read;
        let mut buf = [0u8; 4096];
        let mut file = std::fs::File::open(format!("/proc/{pid}/stat")).ok()?;
        let mut len = 0;
        loop {
            match file.read(&mut buf[len..]) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
            if len == buf.len() {
                break;
            }
        }
        String::from_utf8(buf[..len].to_vec()).ok()
    }

    /// `None` for a zombie; otherwise the start token if it could be read.
    pub(super) fn state_and_start(pid: u32) -> super::Holder {
        let Some(stat) = read_stat(pid) else {
            return super::Holder::Unreadable;
        };
        if super::state_from_stat(&stat) == Some("Z") {
            return super::Holder::Gone;
        }
        super::Holder::started(super::start_token_from_stat(&stat).map(str::to_string))
    }

    pub(super) fn process_start_token(pid: u32) -> Option<String> {
        super::start_token_from_stat(&read_stat(pid)?).map(str::to_string)
    }

    /// `PF_KTHREAD` in the flags field (9) of `/proc/<pid>/stat`.
    const PF_KTHREAD: u64 = 0x0020_0000;

    /// The owner, thread group and parent from `/proc/<pid>/status`, the flags from its stat.
    pub(super) fn kind(pid: u32) -> Option<super::ProcessKind> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|rest| rest.split_ascii_whitespace().next())
                .and_then(|value| value.parse::<u32>().ok())
        };
        let flags: u64 = super::fields_after_comm(&read_stat(pid)?)?
            .nth(6)?
            .parse()
            .ok()?;
        Some(super::ProcessKind {
            ruid: field("Uid:")?,
            tgid: field("Tgid:")?,
            kernel_thread: flags & PF_KTHREAD != 0,
            ppid: field("PPid:")?,
        })
    }
}

#[cfg(target_os = "macos")]
mod platform {
    /// The kernel's `PROC_PIDTBSDINFO` description of `pid`; `Err` holds the errno, or no OS
    /// error when the kernel wrote anything but exactly one `proc_bsdinfo`.
    fn bsd_info(pid: u32) -> std::io::Result<libc::proc_bsdinfo> {
        let size = std::mem::size_of::<libc::proc_bsdinfo>();
        // SAFETY: `proc_bsdinfo` is plain integers and integer arrays; all-zero is a valid value.
        let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
        // SAFETY: the buffer is one `proc_bsdinfo` and its own size bounds the kernel's write;
        // nothing keeps the pointer past the call.
        let written = unsafe {
            libc::proc_pidinfo(
                pid as libc::c_int,
                libc::PROC_PIDTBSDINFO,
                0,
                std::ptr::addr_of_mut!(info).cast(),
                size as libc::c_int,
            )
        };
        if written <= 0 {
            return Err(std::io::Error::last_os_error());
        }
        if usize::try_from(written).ok() != Some(size) {
            return Err(std::io::Error::other("short proc_bsdinfo"));
        }
        Ok(info)
    }

    pub(super) fn process_start_token(pid: u32) -> Option<String> {
        let info = bsd_info(pid).ok()?;
        Some(format!(
            "{}.{:06}",
            info.pbi_start_tvsec, info.pbi_start_tvusec
        ))
    }

    /// macOS has no kernel threads in its process table and names processes, not threads.
    pub(super) fn kind(pid: u32) -> Option<super::ProcessKind> {
        let info = bsd_info(pid).ok()?;
        Some(super::ProcessKind {
            ruid: info.pbi_ruid,
            tgid: pid,
            kernel_thread: false,
            ppid: info.pbi_ppid,
        })
    }

    pub(super) fn state_and_start(pid: u32) -> super::Holder {
        if is_zombie(pid) {
            return super::Holder::Gone;
        }
        super::Holder::started(process_start_token(pid))
    }

    /// `ESRCH` right after layer 1 found the pid held is a zombie or a process that exited in
    /// between; both are gone.
    fn is_zombie(pid: u32) -> bool {
        match bsd_info(pid) {
            Ok(info) => info.pbi_status == libc::SZOMB,
            Err(err) => err.raw_os_error() == Some(libc::ESRCH),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stat line whose field 22 is `987654`.
    fn stat_line(comm: &str) -> String {
        let middle: Vec<String> = (4..=21).map(|n| n.to_string()).collect();
        format!("1234 ({comm}) S {} 987654 23 24\n", middle.join(" "))
    }

    #[test]
    fn field_22_of_a_plain_line() {
        assert_eq!(start_token_from_stat(&stat_line("sleep")), Some("987654"));
        assert_eq!(state_from_stat(&stat_line("sleep")), Some("S"));
    }

    #[test]
    fn fields_count_from_the_last_close_paren() {
        assert_eq!(start_token_from_stat(&stat_line("a) (b c")), Some("987654"));
        assert_eq!(start_token_from_stat(&stat_line(") Z 1 2")), Some("987654"));
        assert_eq!(state_from_stat(&stat_line(") Z 1 2")), Some("S"));
    }

    #[test]
    fn a_line_without_close_paren_or_cut_short_has_no_token() {
        assert_eq!(start_token_from_stat("1234 sleep S 1 2 3"), None);
        let line = stat_line("sleep");
        let cut = &line[..line.find(" 987654").unwrap()];
        assert_eq!(start_token_from_stat(cut), None);
        assert_eq!(start_token_from_stat(""), None);
    }

    #[test]
    fn pid_zero_negative_and_huge_are_nobody() {
        assert!(!pid_is_alive(0));
        assert!(!pid_is_alive(u32::MAX));
        assert!(!pid_is_alive(1 << 31));
        assert_eq!(as_pid_t(0), None);
        assert_eq!(as_pid_t(u32::MAX), None);
    }

    #[test]
    fn this_process_is_alive_with_a_stable_token() {
        let me = std::process::id();
        assert!(pid_is_alive(me));
        let token = process_start_token(me).expect("own start time");
        assert!(!token.is_empty());
        assert_eq!(process_start_token(me), Some(token));
    }

    #[test]
    fn this_process_is_ours_a_leader_and_among_its_own_ancestors() {
        let me = std::process::id();
        let mine = kind(me).unwrap();
        assert_eq!(
            (mine.ruid, mine.tgid, mine.kernel_thread),
            (euid(), me, false)
        );
        let chain = self_and_ancestors();
        assert_eq!(chain[0], me);
        assert!(chain.contains(&mine.ppid), "{chain:?}");
        // kthreadd (pid 2) is a kernel thread wherever the kernel shows it.
        if let Some(kthreadd) = kind(2).filter(|k| k.ppid == 0) {
            assert!(kthreadd.kernel_thread, "{kthreadd:?}");
        }
    }

    #[test]
    fn a_zombie_is_not_alive() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while pid_is_alive(pid) {
            assert!(std::time::Instant::now() < deadline, "zombie read as alive");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        assert_eq!(
            state_from_stat(&stat),
            Some("Z"),
            "not yet reaped, so a zombie"
        );
        child.wait().unwrap();
    }
}
