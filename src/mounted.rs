//! A formation member's joining material read from a mounted directory instead of a launcher's
//! channel: the Secret `mur formation --emit kubernetes` writes for it, one file per key
//! ([`files`]).
//!
//! Invariants:
//! - Nothing is followed through a link but Kubernetes' own `..data`: a Secret volume is a
//!   directory of links into a timestamped sibling that `..data` names; that one link is read,
//!   must name a sibling (one component, no `/`), and the files are then opened inside it with
//!   `O_NOFOLLOW`. A directory without `..data` (podman, a hand-made one) is read as it is.
//! - The door key and every token come from a file no other user may read or write (mode
//!   `0400`, `0440` or `0600`, `0640`: a Secret volume's `defaultMode: 0400` under an `fsGroup` is
//!   `0440`); anything else is refused before a byte is read from it.
//! - Every refusal names the file and the fix, and never holds a file's content.
//! - `MURMUR_FORMATION_ID`, when set (the emitted Deployment sets it), must be the id in
//!   `formation-id`: a Secret from another emitted set is refused, not joined.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::id::FormationId;
use crate::json::channel::{env, files};
use crate::json::manifest::is_valid_name;
use crate::secret::Secret;
use crate::sys::dir::Dir;
use crate::sys::fs::ReadRefusal;
use crate::token::Key;

/// The largest file read from a formation directory.
const MAX_FILE: u64 = 64 * 1024;
/// The one link a Kubernetes Secret volume has its files behind.
const K8S_DATA_LINK: &str = "..data";

/// What a mounted formation directory says.
pub struct Mounted {
    pub formation_id: FormationId,
    pub member: String,
    pub door_key: Key,
    /// Callee name → its token.
    pub calls: BTreeMap<String, Secret>,
    /// Callee name → its door, `host:port`.
    pub addresses: BTreeMap<String, String>,
}

impl std::fmt::Debug for Mounted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mounted")
            .field("formation_id", &self.formation_id)
            .field("member", &self.member)
            .field("calls", &self.calls.keys().collect::<Vec<_>>())
            .field("addresses", &self.addresses)
            .finish_non_exhaustive()
    }
}

/// The fix every "this is not a member's directory" refusal ends with.
const FIX: &str = "mount the member's Secret from 'mur formation ROSTER --emit kubernetes' there";

/// The formation directory named by `--formation-dir`, else by `MURMUR_FORMATION_DIR`.
pub fn named(flag: Option<&Path>) -> Option<PathBuf> {
    flag.map(Path::to_path_buf)
        .or_else(|| std::env::var_os(env::FORMATION_DIR).map(PathBuf::from))
}

/// Read the formation directory `path`.
pub fn read(path: &Path) -> Result<Mounted, String> {
    let dir = open(path)?;
    let text = |name: &str, secret: bool| read_text(&dir, name, secret);
    let formation_id = FormationId::parse(&text(files::FORMATION_ID, false)?)
        .map_err(|why| format!("{}: {why}; {FIX}", dir.join(files::FORMATION_ID).display()))?;
    if let Ok(named) = std::env::var(env::FORMATION_ID)
        && named != formation_id.as_str()
    {
        return Err(format!(
            "{}: names {formation_id}, but {} is {named}: this is another formation's Secret; mount this member's Secret from the same emitted manifests as its Deployment",
            dir.join(files::FORMATION_ID).display(),
            env::FORMATION_ID,
        ));
    }
    let member = text(files::MEMBER, false)?;
    if !is_valid_name(&member) {
        return Err(format!(
            "{}: not a member name (a lowercase letter, then up to 31 of a-z, 0-9, -); {FIX}",
            dir.join(files::MEMBER).display()
        ));
    }
    let door_key = Key::from_base64url(&text(files::DOOR_KEY, true)?).ok_or_else(|| {
        format!(
            "{}: not 32 bytes of base64url; {FIX}",
            dir.join(files::DOOR_KEY).display()
        )
    })?;
    let (calls, addresses) = callees(&dir)?;
    Ok(Mounted {
        formation_id,
        member,
        door_key,
        calls,
        addresses,
    })
}

/// Every `token.<callee>` and the `address.<callee>` each needs.
type Callees = (BTreeMap<String, Secret>, BTreeMap<String, String>);

fn callees(dir: &Dir) -> Result<Callees, String> {
    let names = dir
        .names()
        .map_err(|err| format!("{}: cannot list it: {err}", dir.path().display()))?;
    let (mut calls, mut addresses) = (BTreeMap::new(), BTreeMap::new());
    for name in names.iter().filter_map(|n| n.to_str()) {
        let Some(callee) = name.strip_prefix(files::TOKEN_PREFIX) else {
            continue;
        };
        if !is_valid_name(callee) {
            return Err(format!(
                "{}: '{}' is not a member name; {FIX}",
                dir.join(name).display(),
                callee.escape_debug()
            ));
        }
        let token = read_text(dir, name, true)?;
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!("{}: not a token; {FIX}", dir.join(name).display()));
        }
        let address = format!("{}{callee}", files::ADDRESS_PREFIX);
        addresses.insert(callee.to_string(), read_text(dir, &address, false)?);
        calls.insert(callee.to_string(), Secret::new(token));
    }
    Ok((calls, addresses))
}

/// `path` opened as a directory, or the sibling its Kubernetes `..data` link names.
fn open(path: &Path) -> Result<Dir, String> {
    let dir = Dir::open(path).map_err(|err| {
        format!(
            "formation directory {}; {FIX}",
            crate::sys::dir::explain(path, &err)
        )
    })?;
    let link = path.join(K8S_DATA_LINK);
    let Ok(target) = std::fs::read_link(&link) else {
        return Ok(dir);
    };
    let sibling: OsString = target.into_os_string();
    if sibling.as_encoded_bytes().contains(&b'/') || sibling.is_empty() {
        return Err(format!(
            "{}: points outside the formation directory ({}); {FIX}",
            link.display(),
            Path::new(&sibling).display()
        ));
    }
    dir.open_child(&sibling)
        .map_err(|err| crate::sys::dir::explain(&dir.join(&sibling), &err))
}

/// The text of entry `name` (one trailing newline dropped); a `secret` must be private.
fn read_text(dir: &Dir, name: &str, secret: bool) -> Result<String, String> {
    let path = dir.join(name);
    let small = dir.read_small(name, MAX_FILE).map_err(|refusal| match refusal {
        ReadRefusal::Vanished => format!("{}: missing; {FIX}", path.display()),
        ReadRefusal::Invalid(why) => format!("{}: {why}; {FIX}", path.display()),
        ReadRefusal::Io(why) => format!(
            "{}: cannot read it ({why}); make it readable by the member's user (uid {}) alone: mode 0400, or on Kubernetes the pod's fsGroup",
            path.display(),
            crate::sys::proc::euid(),
        ),
    })?;
    let mode = small.meta.mode() & 0o7777;
    if secret && mode & 0o037 != 0 {
        return Err(format!(
            "{}: mode {mode:04o} lets others read or change a secret; chmod 0400 {} (on Kubernetes: the Secret volume's defaultMode: 0400)",
            path.display(),
            path.display()
        ));
    }
    let text = String::from_utf8(small.bytes)
        .map_err(|_| format!("{}: not UTF-8 text; {FIX}", path.display()))?;
    let text = text.strip_suffix('\n').unwrap_or(&text);
    if text.is_empty() {
        return Err(format!("{}: empty; {FIX}", path.display()));
    }
    Ok(text.to_string())
}

/// How long a formation member's call looks its peer's name up again, 200 ms apart,
/// before the failure is said: a pod's peers are named in the cluster's DNS a moment after they
/// start, and a resolver (podman's, a node's) may fail a lookup now and then while it catches
/// up. A lookup that itself takes longer is not tried again.
pub const CALL_PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);
const RESOLVE_AGAIN: std::time::Duration = std::time::Duration::from_millis(200);

/// A door address `host:port` as the IP address and port to connect to: a name (a Kubernetes
/// Service) is resolved now, so a Service that moved is found at the next call — and looked up
/// again while `patience` lasts if it does not resolve (a readiness probe, itself repeated,
/// has none).
pub fn resolve_door(address: &str, patience: std::time::Duration) -> Result<String, String> {
    use std::net::ToSocketAddrs;
    let bare = address.strip_prefix("http://").unwrap_or(address);
    let bare = bare.strip_suffix('/').unwrap_or(bare);
    if bare.parse::<std::net::SocketAddr>().is_ok() {
        return Ok(bare.to_string());
    }
    let named = bare
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
    let started = std::time::Instant::now();
    let mut tries = 1;
    loop {
        match bare.to_socket_addrs() {
            Ok(mut addrs) => {
                return addrs
                    .next()
                    .map(|a| a.to_string())
                    .ok_or_else(|| format!("'{}' resolves to no address", bare.escape_debug()));
            }
            Err(_) if named && started.elapsed() + RESOLVE_AGAIN <= patience => {
                std::thread::sleep(RESOLVE_AGAIN);
                tries += 1;
            }
            Err(err) => {
                let after = match tries {
                    1 => String::new(),
                    n => format!(" ({n} tries, {} ms apart)", RESOLVE_AGAIN.as_millis()),
                };
                return Err(format!(
                    "cannot resolve '{}': {err}{after}",
                    bare.escape_debug()
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests;
