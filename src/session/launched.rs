//! What a launched formation member inherits: its lifeline (a pipe only its launcher can close,
//! watched to EOF so no member outlives its launcher) and its membership (the formation channel
//! a launcher passes, or the mounted Secret a member joins from without one).

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::{Declared, Options, member};
use crate::json::channel::env;

/// The formation lifeline this process inherited (`MURMUR_FORMATION_LIFELINE=<fd>`), if any.
pub(super) fn inherited_lifeline() -> Result<Option<std::fs::File>, String> {
    match std::env::var(env::LIFELINE) {
        Ok(fd) => fd
            .parse::<i32>()
            .map_err(|_| format!("{}={fd}: not a descriptor number", env::LIFELINE))
            .and_then(crate::sys::pipe::take_inherited)
            .map_err(|why| format!("{}: {why}", env::LIFELINE))
            .map(Some),
        Err(_) => Ok(None),
    }
}

/// What the formation channel (`MURMUR_FORMATION_CHANNEL=<fd>`) says, for a launched member;
/// else what the mounted formation directory (`--formation-dir`, `MURMUR_FORMATION_DIR`) says,
/// for a member that joins without a launcher.
pub(super) fn inherited_membership(
    options: &Options,
    declared: &Declared,
) -> Result<Option<Arc<member::Member>>, String> {
    let call_timeout = Duration::from_secs(declared.lifecycle.task_timeout_secs);
    match std::env::var(env::CHANNEL) {
        Ok(fd) => fd
            .parse::<i32>()
            .map_err(|_| "not a descriptor number".to_string())
            .and_then(|fd| member::Member::join(fd, call_timeout))
            .map_err(|why| format!("{}: {why}", env::CHANNEL))
            .map(Some),
        Err(_) => crate::mounted::named(options.formation_dir.as_deref())
            .map(|dir| member::Member::mounted(&dir, call_timeout))
            .transpose(),
    }
}

/// Read the lifeline until EOF on a thread of its own; the flag it raises (and wakes the
/// session with) when the launcher has let go. The `Err`: no thread, so a member that ran on
/// would outlive its launcher.
pub(super) fn watch_lifeline(mut pipe: std::fs::File) -> Result<Arc<AtomicBool>, String> {
    let closed = Arc::new(AtomicBool::new(false));
    let raised = closed.clone();
    std::thread::Builder::new()
        .name("lifeline".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            let mut byte = [0u8; 64];
            while matches!(pipe.read(&mut byte), Ok(n) if n > 0) {}
            raised.store(true, Ordering::Release);
            crate::sys::wake::notify();
        })
        .map_err(|err| format!("cannot watch the formation lifeline: {err}"))?;
    Ok(closed)
}
