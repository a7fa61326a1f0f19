//! Naming a session or formation on the command line: `@N`, a full `ses_`/`frm_` id, a capsule
//! `NAME` or `NAME@VERSION` that exactly one running session has, or a case-insensitive suffix
//! of at least four characters matching exactly one of them.

use crate::id::{FormationId, SessionId};
use crate::running::Entry;

/// The fewest characters a suffix address may have: fewer would match by accident.
pub const MIN_SUFFIX: usize = 4;

/// What an address named.
#[derive(Debug)]
pub enum Named<'a> {
    Session(&'a Entry),
    /// A formation and its members' records (at least one).
    Formation(FormationId, Vec<&'a Entry>),
}

/// `Some(N)` for an `@N` address, `None` for any other form; the `Err` is an `@` form that can
/// never name a session (`@0`, `@x`): a usage error, which applets check before looking at any
/// record, so it is told apart (exit 2) from an address that merely matched nothing (exit 1).
pub fn at_n(address: &str) -> Result<Option<usize>, String> {
    let Some(n) = address.strip_prefix('@') else {
        return Ok(None);
    };
    n.parse()
        .ok()
        .filter(|&n| n >= 1)
        .map(Some)
        .ok_or_else(|| format!("'{address}': @N wants a whole number from 1 (@1 is the newest)"))
}

/// Resolve `address` among `running` (records that passed layers 1 and 2, most recent first —
/// the order `mur ps` lists them in, which `@N` counts). The `Err` names the address and says
/// what would have matched.
pub fn resolve<'a>(address: &str, running: &'a [Entry]) -> Result<Named<'a>, String> {
    if let Some(n) = at_n(address)? {
        return running.get(n - 1).map(Named::Session).ok_or_else(|| {
            format!(
                "{address}: only {} session(s) running (mur ps lists them)",
                running.len()
            )
        });
    }
    if address.starts_with("ses_") {
        let id = SessionId::parse(address)?;
        return running
            .iter()
            .find(|e| e.record.session_id == id)
            .map(Named::Session)
            .ok_or_else(|| format!("no running session {id} (mur ps lists them)"));
    }
    if address.starts_with("frm_") {
        let id = FormationId::parse(address)?;
        return formation(id.clone(), running)
            .ok_or_else(|| format!("no running formation {id} (mur ps lists them)"));
    }
    if let Some(named) = by_name(address, running)? {
        return Ok(named);
    }
    if address.chars().count() < MIN_SUFFIX {
        return Err(format!(
            "'{address}' is too short and names no running capsule: give @N, a full id, a capsule NAME, or at least {MIN_SUFFIX} of an id's last characters"
        ));
    }
    let suffix = address.to_ascii_lowercase();
    let mut sessions = running
        .iter()
        .filter(|e| e.record.session_id.as_str().ends_with(&suffix));
    let mut formations: Vec<&FormationId> = running
        .iter()
        .filter_map(|e| e.record.formation_id.as_ref())
        .filter(|f| f.as_str().ends_with(&suffix))
        .collect();
    formations.sort();
    formations.dedup();
    let session = sessions.next();
    let matches = usize::from(session.is_some()) + sessions.count() + formations.len();
    match (matches, session, formations.first()) {
        (0, ..) => Err(format!(
            "no running session or formation ends in '{address}', and no running capsule is named so (mur ps lists them)"
        )),
        (1, Some(entry), _) => Ok(Named::Session(entry)),
        (1, None, Some(&f)) => {
            // The suffix matched a member's formation id, so the formation has that member.
            formation(f.clone(), running)
                .ok_or_else(|| format!("'{address}' matched a formation with no running member"))
        }
        _ => Err(format!(
            "'{address}' matches {matches} sessions or formations; give more characters"
        )),
    }
}

/// The one running session of the capsule `address` names (`NAME`, or `NAME@VERSION`), if any
/// has it; several are an `Err` listing them (each with its `@N`), so a script never stops or
/// reads the wrong one. Names are tried before suffixes: a capsule name is what a person
/// types, and one that happens to end an id too would otherwise be refused as ambiguous.
fn by_name<'a>(address: &str, running: &'a [Entry]) -> Result<Option<Named<'a>>, String> {
    let matching: Vec<(usize, &Entry)> = running
        .iter()
        .enumerate()
        .filter(|(_, e)| e.record.capsule_name == address || e.record.capsule() == address)
        .collect();
    match matching.as_slice() {
        [] => Ok(None),
        [(_, only)] => Ok(Some(Named::Session(only))),
        many => Err(format!(
            "'{address}' names {} running sessions: {}; give @N or an id",
            many.len(),
            many.iter()
                .map(|(i, e)| format!("@{} {} {}", i + 1, e.record.session_id, e.record.capsule()))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

fn formation(id: FormationId, running: &[Entry]) -> Option<Named<'_>> {
    let members: Vec<&Entry> = running
        .iter()
        .filter(|e| e.record.formation_id.as_ref() == Some(&id))
        .collect();
    (!members.is_empty()).then_some(Named::Formation(id, members))
}

#[cfg(test)]
mod tests;
