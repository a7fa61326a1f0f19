//! A session launched as a formation member: what its channel told it, and the calls its
//! handlers make to peers through `MURMUR_CALL_FD`.
//!
//! The member learns its formation, its own door key and one token per member it may call from
//! the first channel line, and the peers' doors from a later one. A handler never sees a token or
//! an address: it asks its own session, over a socket only it inherited, to call a peer by name,
//! and gets the answer back as the peer writes it (the call goes as `message/stream`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::a2a::rpc::MESSAGE_STREAM;
use crate::id::FormationId;
use crate::json::channel::{self, Addresses, Hello, env};
use crate::json::record::ProcessIdentity;
use crate::net::client::Deadlines;
use crate::secret::Secret;
use crate::token::Key;

/// The longest call request or answer line.
const MAX_CALL_LINE: u64 = 8 << 20;

/// What a member knows about its formation.
pub struct Member {
    pub formation_id: FormationId,
    pub name: String,
    /// The launcher's identity; `None` for a member that joined from a mounted directory.
    pub launcher: Option<ProcessIdentity>,
    pub door_key: Key,
    calls: BTreeMap<String, Secret>,
    addresses: Mutex<BTreeMap<String, String>>,
    /// Signalled when an address line is learned or the channel closes. The channel is read on
    /// a thread of its own, so a handler may ask before a line already sent (the entry member's,
    /// written before its spawn) has been read: a call waits for it rather than failing.
    learned: Condvar,
    channel_closed: AtomicBool,
    /// How long a call may wait for the peer's answer: the caller's own task timeout.
    call_timeout: Duration,
}

impl Member {
    /// Read the first line of the channel on descriptor `fd`, and keep reading later lines
    /// (addresses) on a thread of their own. The `Err` never holds the line.
    pub fn join(fd: i32, call_timeout: Duration) -> Result<Arc<Self>, String> {
        let pipe = crate::sys::pipe::take_inherited(fd)?;
        let mut reader = BufReader::new(pipe);
        let first = channel::read_line(&mut reader)?
            .ok_or("the formation channel closed before its first line")?;
        let hello: Hello = channel::parse(&first, "first")?;
        if let Ok(named) = std::env::var(env::FORMATION_ID)
            && named != hello.formation_id.as_str()
        {
            return Err(format!(
                "{} names {named}, the channel {}",
                env::FORMATION_ID,
                hello.formation_id
            ));
        }
        let member = Arc::new(Self {
            door_key: Key::from_base64url(hello.door_key.expose())
                .ok_or("the channel's door key is not 32 bytes of base64url")?,
            formation_id: hello.formation_id,
            name: hello.member,
            launcher: Some(hello.launcher),
            calls: hello.calls.into_iter().map(|c| (c.name, c.token)).collect(),
            addresses: Mutex::new(BTreeMap::new()),
            learned: Condvar::new(),
            channel_closed: AtomicBool::new(false),
            call_timeout,
        });
        let listener = member.clone();
        std::thread::Builder::new()
            .name("channel".into())
            .stack_size(128 * 1024)
            .spawn(move || {
                while let Ok(Some(line)) = channel::read_line(&mut reader) {
                    match channel::parse::<Addresses>(&line, "address") {
                        Ok(update) => listener.learn(update),
                        Err(why) => crate::cli::warn("run", &why),
                    }
                }
                let _known = listener.addresses.lock().unwrap_or_else(|p| p.into_inner());
                listener.channel_closed.store(true, Ordering::Release);
                listener.learned.notify_all();
            })
            .map_err(|err| format!("cannot read the formation channel: {err}"))?;
        Ok(member)
    }

    /// Join from the mounted formation directory `dir` ([`crate::mounted`]): everything a
    /// launched member learns from its channel, read from files, every peer's address known at
    /// once. There is no launcher, and so no later line to wait for.
    pub fn mounted(dir: &std::path::Path, call_timeout: Duration) -> Result<Arc<Self>, String> {
        let mounted = crate::mounted::read(dir)?;
        Ok(Arc::new(Self {
            formation_id: mounted.formation_id,
            name: mounted.member,
            launcher: None,
            door_key: mounted.door_key,
            calls: mounted.calls,
            addresses: Mutex::new(mounted.addresses),
            learned: Condvar::new(),
            channel_closed: AtomicBool::new(true),
            call_timeout,
        }))
    }

    fn learn(&self, update: Addresses) {
        let mut known = self.addresses.lock().unwrap_or_else(|p| p.into_inner());
        for address in update.addresses {
            known.insert(address.name, address.url);
        }
        self.learned.notify_all();
    }

    /// Whether any handler of this member may call a peer (and so gets a call socket).
    pub fn calls_anyone(&self) -> bool {
        !self.calls.is_empty()
    }

    /// Serve one handler's call socket until the handler closes it: one JSON line per call,
    /// `{"peer","text"}`, answered by `{"chunk"}` lines as the peer's answer streams, then
    /// `{"ok":true,"answer"}` or `{"ok":false,"error"}`.
    pub fn serve_calls(&self, stream: UnixStream) {
        let Ok(writer) = stream.try_clone() else {
            return;
        };
        let mut writer = writer;
        let mut reader = BufReader::new(stream).take(MAX_CALL_LINE);
        let mut line = Vec::new();
        loop {
            line.clear();
            reader.set_limit(MAX_CALL_LINE);
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let mut chunk = |text: &str| {
                let mut out = json!({"chunk": text}).to_string().into_bytes();
                out.push(b'\n');
                let _ = writer.write_all(&out);
            };
            let answer = match self.call(&line, &mut chunk) {
                Ok(text) => json!({"ok": true, "answer": text}),
                Err(why) => json!({"ok": false, "error": why}),
            };
            let mut out = answer.to_string().into_bytes();
            out.push(b'\n');
            if writer.write_all(&out).is_err() {
                return;
            }
        }
    }

    /// `peer`'s door, waiting (at most the call timeout, and only while the channel is open)
    /// for the address line that names it.
    fn address_of(&self, peer: &str) -> Result<String, String> {
        let deadline = Instant::now() + self.call_timeout;
        let mut known = self.addresses.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(url) = known.get(peer) {
                return Ok(url.clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || self.channel_closed.load(Ordering::Acquire) {
                return Err(format!("the address of '{peer}' is not known yet"));
            }
            known = self
                .learned
                .wait_timeout(known, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Call a peer for the handler: its answer's text, each piece going to `on_chunk` as the
    /// peer's handler writes it.
    fn call(&self, request: &[u8], on_chunk: &mut dyn FnMut(&str)) -> Result<String, String> {
        let request: Value = crate::json::strict::from_slice(request)
            .map_err(|_| "a call is one JSON line: {\"peer\",\"text\"}".to_string())?;
        let peer = request
            .get("peer")
            .and_then(Value::as_str)
            .ok_or("a call names its peer")?;
        let text = request.get("text").and_then(Value::as_str).unwrap_or("");
        let Some(token) = self.calls.get(peer) else {
            let allowed: Vec<&str> = self.calls.keys().map(String::as_str).collect();
            return Err(format!(
                "{} may not call '{}' (the roster lets it call: {})",
                self.name,
                peer.escape_debug(),
                if allowed.is_empty() {
                    "nobody".into()
                } else {
                    allowed.join(", ")
                }
            ));
        };
        let url =
            crate::mounted::resolve_door(&self.address_of(peer)?, crate::mounted::CALL_PATIENCE)
                .map_err(|why| format!("calling '{peer}': {why}"))?;
        let params = json!({"message": {"kind": "message", "role": "user",
            "messageId": format!("call-{}", crate::time::unix_now()),
            "parts": [{"kind": "text", "text": text}]}});
        let deadlines = Deadlines {
            connect: Duration::from_secs(2),
            response: self.call_timeout + Duration::from_secs(5),
        };
        // The answer as it streamed, and the settled status: its state and its message's text.
        let mut answer = String::new();
        let mut settled = None;
        let mut on_event = |event: Value| {
            let texts = |parts: &Value| -> Vec<String> {
                let parts = parts.as_array().map(Vec::as_slice).unwrap_or_default();
                let texts = parts.iter().filter_map(|p| p["text"].as_str());
                texts.map(str::to_string).collect()
            };
            match event["kind"].as_str() {
                Some("artifact-update") => {
                    for text in texts(&event["artifact"]["parts"]) {
                        on_chunk(&text);
                        answer.push_str(&text);
                    }
                }
                Some("status-update") if event["final"] == true => {
                    let state = event["status"]["state"].as_str().unwrap_or("unknown");
                    let said = texts(&event["status"]["message"]["parts"]).join("\n");
                    settled = Some((state.to_string(), said));
                }
                _ => {}
            }
        };
        crate::door_client::call_streaming(
            &url,
            Some(token),
            MESSAGE_STREAM,
            params,
            deadlines,
            &mut on_event,
        )
        .map_err(|err| format!("calling '{peer}': {err}"))?;
        match settled {
            Some((state, _)) if state == "completed" => {
                // As the kept answer reads: less one trailing newline.
                Ok(answer.strip_suffix('\n').unwrap_or(&answer).to_string())
            }
            Some((state, text)) => Err(format!("'{peer}' answered {state}: {text}")),
            None => Err(format!("'{peer}' ended its answer without a final status")),
        }
    }
}
