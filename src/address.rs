//! Naming a session or formation on the command line: `@N`, a full `ses_`/`frm_` id, an
//! instance name (`mur run --name`), `FORMATION/MEMBER`, a member name or a capsule `NAME` or
//! `NAME@VERSION` that exactly one session has, or a case-insensitive prefix or suffix of at
//! least four characters of exactly one id.
//!
//! The same rules resolve among running sessions and among ended ones ([`Addressable`]); a
//! caller that takes either (`mur logs`) looks among the running first and among the ended only
//! when nothing running matched ([`lookup`]), so an address never means an ended session while a
//! running one answers to it.

use crate::id::FormationId;
use crate::json::ended::EndedRecord;
use crate::json::record::RunningRecord;
use crate::running::{Entry, Record};

/// The fewest characters a prefix or suffix address may have: fewer would match by accident.
pub const MIN_SUFFIX: usize = 4;

/// What an address named.
#[derive(Debug)]
pub enum Named<'a, R = RunningRecord> {
    Session(&'a Entry<R>),
    /// A formation and its members' records (at least one).
    Formation(FormationId, Vec<&'a Entry<R>>),
}

/// What addresses read of a record, running or ended.
pub trait Addressable: Record {
    /// Whether these are running sessions: `@N` counts only those (the rows `mur ps` lists
    /// first), and messages say `running` or `ended`.
    fn running() -> bool
    where
        Self: Sized;
    fn formation_id(&self) -> Option<&FormationId>;
    fn name(&self) -> Option<&str>;
    fn member(&self) -> Option<&str>;
    fn capsule_name(&self) -> &str;
    fn capsule(&self) -> String;
}

/// Both kinds of record keep what addresses read under the same names.
macro_rules! addressable {
    ($record:ty, $running:literal) => {
        impl Addressable for $record {
            fn running() -> bool {
                $running
            }
            fn formation_id(&self) -> Option<&FormationId> {
                self.formation_id.as_ref()
            }
            fn name(&self) -> Option<&str> {
                self.name.as_deref()
            }
            fn member(&self) -> Option<&str> {
                self.member.as_deref()
            }
            fn capsule_name(&self) -> &str {
                &self.capsule_name
            }
            fn capsule(&self) -> String {
                <$record>::capsule(self)
            }
        }
    };
}

addressable!(RunningRecord, true);
addressable!(EndedRecord, false);

/// `running` or `ended`, for messages.
fn state<R: Addressable>() -> &'static str {
    if R::running() { "running" } else { "ended" }
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

/// Resolve `address` among `items` (running records that passed layers 1 and 2, most recent
/// first — the order `mur ps` lists them in, which `@N` counts — or ended ones, most recently
/// ended first). The `Err` names the address and says what would have matched.
pub fn resolve<'a, R: Addressable>(
    address: &str,
    items: &'a [Entry<R>],
) -> Result<Named<'a, R>, String> {
    if let Some(named) = lookup(address, items)? {
        return Ok(named);
    }
    let state = state::<R>();
    Err(if at_n(address)?.is_some() {
        format!(
            "{address}: only {} session(s) {state} (mur ps lists them)",
            items.len()
        )
    } else if address.chars().count() < MIN_SUFFIX {
        format!(
            "'{address}' is too short and names no {state} capsule: give @N, a full id, a NAME, \
             or at least {MIN_SUFFIX} of an id's first or last characters"
        )
    } else if address.starts_with("ses_") && address.len() == 4 + crate::id::HEX_DIGITS {
        format!("no {state} session {address} (mur ps lists them)")
    } else if address.starts_with("frm_") && address.len() == 4 + crate::id::HEX_DIGITS {
        format!("no {state} formation {address} (mur ps lists them)")
    } else {
        format!(
            "no {state} session or formation begins or ends with '{address}', and no {state} \
             session is named so (mur ps{} lists them)",
            if R::running() { "" } else { " -a" }
        )
    })
}

/// [`resolve`], with `Ok(None)` when the address matched nothing: the `Err` is an address that
/// can match nothing (malformed, too short) or matched more than one session.
pub fn lookup<'a, R: Addressable>(
    address: &str,
    items: &'a [Entry<R>],
) -> Result<Option<Named<'a, R>>, String> {
    if let Some(n) = at_n(address)? {
        return Ok(items
            .get(n - 1)
            .filter(|_| R::running())
            .map(Named::Session));
    }
    if let Some((formation, member)) = address.split_once('/') {
        return in_formation(formation, member, items);
    }
    for (prefix, noun) in [("ses_", "session id"), ("frm_", "formation id")] {
        if let Some(hex) = address.strip_prefix(prefix)
            && !hex.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Err(format!(
                "'{}' is not a {noun} ({prefix}followed by {} lowercase hex digits)",
                address.escape_debug(),
                crate::id::HEX_DIGITS
            ));
        }
    }
    // An instance name is unique among running sessions; among ended ones it names the one that
    // ended last.
    if let Some(entry) = items.iter().find(|e| e.record.name() == Some(address)) {
        return Ok(Some(Named::Session(entry)));
    }
    if let Some(named) = by_name(address, items)? {
        return Ok(Some(named));
    }
    by_id(address, items)
}

/// The sessions or formations whose id `address` begins or ends (case-insensitive): exactly
/// one, or an `Err` saying there are several; `Ok(None)` for none, and for an address too short
/// to be taken as part of an id.
fn by_id<'a, R: Addressable>(
    address: &str,
    items: &'a [Entry<R>],
) -> Result<Option<Named<'a, R>>, String> {
    if address.chars().count() < MIN_SUFFIX {
        return Ok(None);
    }
    let part = address.to_ascii_lowercase();
    let matching = |id: &str| {
        let hex = &id[4..];
        id.starts_with(&part) || hex.starts_with(&part) || id.ends_with(&part)
    };
    let mut sessions = items
        .iter()
        .filter(|e| matching(e.record.session_id().as_str()));
    let mut formations: Vec<&FormationId> = items
        .iter()
        .filter_map(|e| e.record.formation_id())
        .filter(|f| matching(f.as_str()))
        .collect();
    formations.sort();
    formations.dedup();
    let session = sessions.next();
    let matches = usize::from(session.is_some()) + sessions.count() + formations.len();
    match (matches, session, formations.first()) {
        (0, ..) => Ok(None),
        (1, Some(entry), _) => Ok(Some(Named::Session(entry))),
        // The id matched a member's formation id, so the formation has that member.
        (1, None, Some(&f)) => Ok(formation(f.clone(), items)),
        _ => Err(format!(
            "'{address}' matches {matches} sessions or formations; give more characters"
        )),
    }
}

/// `FORMATION/MEMBER`: the member so named of the one formation `formation` names (a full
/// `frm_` id, or a prefix or suffix of one).
fn in_formation<'a, R: Addressable>(
    formation: &str,
    member: &str,
    items: &'a [Entry<R>],
) -> Result<Option<Named<'a, R>>, String> {
    let Some(Named::Formation(_, members)) = by_id(formation, items)? else {
        return Ok(None);
    };
    Ok(members
        .into_iter()
        .find(|e| e.record.member() == Some(member))
        .map(Named::Session))
}

/// The one session whose member name or capsule (`NAME`, or `NAME@VERSION`) `address` names,
/// if any has it; several are an `Err` listing them (each with its `@N` when running), so a
/// script never stops or reads the wrong one. Names are tried before ids: a name is what a
/// person types, and one that happens to begin or end an id too would otherwise be refused as
/// ambiguous.
fn by_name<'a, R: Addressable>(
    address: &str,
    items: &'a [Entry<R>],
) -> Result<Option<Named<'a, R>>, String> {
    let matching: Vec<(usize, &Entry<R>)> = items
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            let r = &e.record;
            r.member() == Some(address) || r.capsule_name() == address || r.capsule() == address
        })
        .collect();
    match matching.as_slice() {
        [] => Ok(None),
        [(_, only)] => Ok(Some(Named::Session(only))),
        many => Err(format!(
            "'{address}' names {} {} sessions: {}; give {}an id",
            many.len(),
            state::<R>(),
            many.iter()
                .map(|(i, e)| {
                    let row = if R::running() {
                        format!("@{} ", i + 1)
                    } else {
                        String::new()
                    };
                    format!("{row}{} {}", e.record.session_id(), e.record.capsule())
                })
                .collect::<Vec<_>>()
                .join(", "),
            if R::running() { "@N or " } else { "" }
        )),
    }
}

fn formation<R: Addressable>(id: FormationId, items: &[Entry<R>]) -> Option<Named<'_, R>> {
    let members: Vec<&Entry<R>> = items
        .iter()
        .filter(|e| e.record.formation_id() == Some(&id))
        .collect();
    (!members.is_empty()).then_some(Named::Formation(id, members))
}

/// The shortest length, at least `min` digits, at which each of the ids' hex digits `hexes`
/// differs from every other in its first ones: how many `mur ps` shows (`--no-trunc`: all),
/// so that what it shows is always a prefix address of one session.
pub fn unique_prefix(hexes: &[&str], min: usize) -> usize {
    let mut sorted: Vec<&str> = hexes.to_vec();
    sorted.sort_unstable();
    let longest_shared = sorted
        .windows(2)
        .map(|w| {
            w[0].bytes()
                .zip(w[1].bytes())
                .take_while(|(a, b)| a == b)
                .count()
        })
        .max()
        .unwrap_or(0);
    (longest_shared + 1).clamp(min, crate::id::HEX_DIGITS)
}

#[cfg(test)]
mod tests;
