//! What a handler capsule's handlers run in, put in place at the session's start: whom they run
//! as ([`super::identity`]), their task directories ([`super::taskdir`]) and their sandbox
//! ([`super::sandbox`]) — in that order, since where the task directories go depends on the user,
//! and the sandbox grants them.

use std::path::Path;

use super::taskdir::SessionTasks;
use super::tasks::Capsule;
use super::{Declared, identity, sandbox};
use crate::id::SessionId;

/// A handler capsule's task directories and its handlers' sandbox (hiding `formation_dir`, a
/// member's mounted material, when it has one), put in place in `declared`; why the handlers run
/// unsandboxed, if they do. The embedded echo needs neither.
pub(super) fn prepare(
    declared: &mut Declared,
    session_id: &SessionId,
    formation_dir: Option<&Path>,
) -> Result<(Option<SessionTasks>, Option<String>), String> {
    let Capsule::Handler {
        argv,
        workdir,
        sandbox,
    } = &mut declared.capsule
    else {
        return Ok((None, None));
    };
    let user = identity::choose(&declared.sandbox, session_id.as_str())?;
    // One that keeps root's file access reaches whatever its modes would refuse it.
    if let Some(user) = user.as_ref().filter(|user| user.takes_task_dirs()) {
        identity::check_reach(user, workdir, &argv[0])?;
    }
    let dirs = task_dirs(session_id, user)?;
    let dir = declared.capsule_dir.as_deref();
    let (policy, why) = sandbox::apply(
        workdir,
        &declared.sandbox,
        dir,
        dirs.as_ref(),
        formation_dir,
    )
    .inspect_err(|_| dirs.iter().for_each(SessionTasks::remove))?;
    *sandbox = policy;
    Ok((dirs, why))
}

/// `~/.murmur/tasks/<session>/`, where each task's `MUR_TASK_DIR` goes (`/run/mur/<session>/`
/// for handlers running as `user`). Untrusted is the `Err`, and so is unusable for handlers that
/// run as a user of their own (they would run as no one); else unusable (a read-only or full
/// disk) is `None`, with a warning: handlers then run without a task directory (text on stdin,
/// stdout back).
fn task_dirs(
    session_id: &SessionId,
    user: Option<identity::HandlerUser>,
) -> Result<Option<SessionTasks>, String> {
    let own_user = user.is_some();
    match SessionTasks::create(session_id.as_str(), user) {
        Ok(dirs) => Ok(Some(dirs)),
        Err(crate::home::HomeError::Untrusted(why)) => Err(why),
        Err(crate::home::HomeError::Unusable(why)) if own_user => Err(why),
        Err(crate::home::HomeError::Unusable(why)) => {
            crate::cli::warn("run", &format!("{why}; handlers get no MUR_TASK_DIR"));
            Ok(None)
        }
    }
}
