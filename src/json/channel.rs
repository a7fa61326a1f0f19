//! The contract between a formation launcher, its member sessions and their handlers: the
//! environment variables each side sets or reads, and the lines of the formation channel.
//!
//! Both `formation/` (the launcher) and `session/` (a member, and the handlers it runs) import
//! this module, and it imports neither: what crosses a process boundary is defined once, here.
//!
//! The channel is a pipe from the launcher that only one member inherits ([`env::CHANNEL`]),
//! carrying what that member must know and nothing may print. Line 1 ([`Hello`]), written before
//! the member is spawned: the formation id, the member's name, the launcher's identity, the
//! member's own door key (to verify calls into itself) and one token per member it may call.
//! Line 2 ([`Addresses`]), once every peer's door answers: where each of them is. Tokens and keys
//! travel here and nowhere else — never argv, the environment, a file, stdout or stderr.
//!
//! A member's stdout is the launcher's too: it starts each with `mur run … --json` and reads
//! its readiness line first. The entry given the formation's `--task` still prints that line
//! (a member started with a lifeline, [`env::LIFELINE`], is a launched one), then its answer as
//! it streams, which the launcher relays — where a `mur run --task --json` typed by a user
//! prints one result object instead.

use serde::{Deserialize, Serialize};

use crate::id::FormationId;
use crate::json::record::ProcessIdentity;
use crate::secret::Secret;

/// The longest channel line read.
pub const MAX_LINE: usize = 64 * 1024;

/// The environment variable names. A launcher sets the formation ones in each member; a session
/// sets the `MUR_*` ones (and the call socket) in each handler, and removes the formation ones,
/// which are its own, from a handler's environment.
pub mod env {
    /// A member's lifeline: the read end of a pipe whose write end only the launcher holds.
    /// EOF on it ends the member as SIGTERM would.
    pub const LIFELINE: &str = "MURMUR_FORMATION_LIFELINE";
    /// A member's channel: the read end of the pipe carrying its [`Hello`](super::Hello) and
    /// [`Addresses`](super::Addresses) lines.
    pub const CHANNEL: &str = "MURMUR_FORMATION_CHANNEL";
    /// The formation a member belongs to (not secret: it also names the member's record).
    pub const FORMATION_ID: &str = "MURMUR_FORMATION_ID";
    /// A member that joins without a launcher (Kubernetes): the directory holding its mounted
    /// joining material, laid out as [`files`](super::files) says.
    pub const FORMATION_DIR: &str = "MURMUR_FORMATION_DIR";
    /// A handler's end of a socket to its own session, for `mur formation call PEER`.
    pub const CALL_FD: &str = "MURMUR_CALL_FD";
    /// The session running the handler.
    pub const SESSION_ID: &str = "MUR_SESSION_ID";
    /// The task the handler runs.
    pub const TASK_ID: &str = "MUR_TASK_ID";
    /// The task's context.
    pub const CONTEXT_ID: &str = "MUR_CONTEXT_ID";
    /// Which turn of the task this run is: 1, then 2, … for each message that continues it.
    pub const TURN: &str = "MUR_TURN";
    /// The task's private directory: `message.json`, `history.json`, `out/`.
    pub const TASK_DIR: &str = "MUR_TASK_DIR";
    /// `name@version` of the capsule.
    pub const CAPSULE: &str = "MUR_CAPSULE";
    /// The capsule's directory (the manifest's, absolute): a handler runs in the workdir, so
    /// this is how it finds the files it ships with (`"$MUR_CAPSULE_DIR/prompt.txt"`).
    pub const CAPSULE_DIR: &str = "MUR_CAPSULE_DIR";
    /// The `mur` binary, so a handler can run `"$MUR" formation call …` without mur on its PATH.
    pub const MUR: &str = "MUR";
    /// Prefixes of names that are mur's own: a manifest may not declare a control value so named.
    pub const RESERVED_PREFIXES: [&str; 2] = ["MUR_", "MURMUR_"];
}

/// A formation directory's entries: one file per key of the member's Secret, holding what the
/// two channel lines carry (the launcher's identity aside: such a member has none). Values are
/// the bare text; one trailing newline is allowed. `door-key` and every `token.*` are secrets.
pub mod files {
    /// The formation's `frm_` id.
    pub const FORMATION_ID: &str = "formation-id";
    /// This member's name.
    pub const MEMBER: &str = "member";
    /// base64url of this member's 32-byte door key.
    pub const DOOR_KEY: &str = "door-key";
    /// `token.<callee>`: the `mft1` token for one member this one may call.
    pub const TOKEN_PREFIX: &str = "token.";
    /// `address.<callee>`: that member's door, `host:port` (a name is resolved at each call).
    pub const ADDRESS_PREFIX: &str = "address.";
}

/// A member's first line. `Debug` redacts the key and the tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    pub formation_id: FormationId,
    pub member: String,
    pub launcher: ProcessIdentity,
    /// base64url of this member's 32-byte door key.
    pub door_key: Secret,
    pub calls: Vec<Call>,
}

/// One member this member may call, and the `mft1` token that lets it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Call {
    pub name: String,
    pub token: Secret,
}

/// A later line: the doors of the members this one calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Addresses {
    pub addresses: Vec<Address>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Address {
    pub name: String,
    /// `host:port`.
    pub url: String,
}

/// A line as the launcher writes it: JSON and `\n`.
pub fn line<T: Serialize>(value: &T) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(value).expect("channel lines always serialize");
    bytes.push(b'\n');
    bytes
}

/// Read one line (without its `\n`) from `reader`, at most [`MAX_LINE`] bytes; `Ok(None)` at EOF.
pub fn read_line(reader: &mut impl std::io::BufRead) -> Result<Option<Vec<u8>>, String> {
    use std::io::{BufRead, Read};
    let mut line = Vec::new();
    let n = reader
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', &mut line)
        .map_err(|err| format!("the formation channel failed: {err}"))?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return Err(if line.len() > MAX_LINE {
            "a formation channel line is longer than 64 KiB".into()
        } else {
            "the formation channel closed mid-line".into()
        });
    }
    line.pop();
    Ok(Some(line))
}

/// Parse one channel line as `T`; the `Err` says what was expected, never the line itself (it
/// holds secrets).
pub fn parse<T: for<'de> Deserialize<'de>>(line: &[u8], what: &str) -> Result<T, String> {
    serde_json::from_slice(line).map_err(|err| {
        // serde's message names a key or a type, not the value, except for unknown variants;
        // only its category is kept, so no token can leak through it.
        format!(
            "the formation channel's {what} line is malformed ({:?} error at column {})",
            err.classify(),
            err.column()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Hello {
        Hello {
            formation_id: FormationId::parse("frm_0199c4e2f1b7712a9d3e4f5061728390").unwrap(),
            member: "reviewer".into(),
            launcher: ProcessIdentity {
                pid: 42,
                process_start: "7".into(),
            },
            door_key: Secret::new(crate::b64::encode(&[7u8; 32])),
            calls: vec![Call {
                name: "summarizer".into(),
                token: Secret::new("mft1.a.b".into()),
            }],
        }
    }

    #[test]
    fn lines_round_trip_and_debug_redacts() {
        let bytes = line(&hello());
        let mut reader = std::io::BufReader::new(&bytes[..]);
        let read = read_line(&mut reader).unwrap().unwrap();
        assert_eq!(parse::<Hello>(&read, "first").unwrap(), hello());
        assert_eq!(read_line(&mut reader).unwrap(), None);
        let key = crate::token::Key::from_base64url(hello().door_key.expose());
        assert_eq!(key.unwrap().as_bytes(), &[7u8; 32]);
        let debug = format!("{:?}", hello());
        assert!(
            !debug.contains("mft1") && !debug.contains(&crate::b64::encode(&[7u8; 32])),
            "{debug}"
        );
    }

    #[test]
    fn bad_lines_are_refused_without_echoing_them() {
        let bytes = vec![b'a'; MAX_LINE + 10];
        let mut long = std::io::BufReader::new(bytes.as_slice());
        assert!(read_line(&mut long).unwrap_err().contains("64 KiB"));
        let mut cut = std::io::BufReader::new(&b"{\"a\":1}"[..]);
        assert!(read_line(&mut cut).unwrap_err().contains("mid-line"));
        let err = parse::<Hello>(br#"{"formation_id":"frm_x","secret":"mft1.leak"}"#, "first")
            .unwrap_err();
        assert!(
            !err.contains("mft1.leak") && !err.contains("frm_x"),
            "{err}"
        );
        let mut short_key = hello();
        short_key.door_key = Secret::new("AAAA".into());
        assert!(crate::token::Key::from_base64url(short_key.door_key.expose()).is_none());
    }
}
