//! The capsule extension of a card, and a fake door: a tiny HTTP responder thread on
//! `127.0.0.1:0` that answers as a session (the `mur ps`/`stop`/`token` tests' stand-in).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};

/// The capsule extension `uri` a door names its session under (DESIGN.md §5).
pub const CAPSULE_EXTENSION_URI: &str =
    "https://docs.murmur.nexus/reference/agent-card/#murmur-capsule-v1";

/// `params.sessionId` of a card's capsule extension.
pub fn session_of(card: &Value) -> Option<String> {
    card["capabilities"]["extensions"]
        .as_array()?
        .iter()
        .find(|e| e["uri"] == CAPSULE_EXTENSION_URI)?["params"]["sessionId"]
        .as_str()
        .map(str::to_string)
}

/// How a test door behaves.
#[derive(Default)]
pub struct DoorSpec {
    /// The session its card names.
    pub session_id: String,
    /// `Some`: an authenticated door — its public card names no session, and every `POST /`
    /// needs `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Speak A2A 1.0 only, as the original runtime's newer doors do: every call needs
    /// `A2A-Version: 1.0` (-32009 without it), the card is served under `GetExtendedAgentCard`
    /// only, and the session ends by `murmur.StopSession` (`session/stop` is method-not-found).
    pub v1_only: bool,
    /// Accept connections and never answer.
    pub silent: bool,
    /// Read the request, then write the answer one byte a second.
    pub trickle: bool,
    /// Run on an authorized `session/stop` (or `murmur.StopSession`), before it is answered.
    pub on_stop: Option<Box<dyn Fn() + Send + Sync>>,
}

/// One request a door received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// `GET /…` path, or the JSON-RPC method of a `POST /`.
    pub what: String,
    pub authorization: Option<String>,
    /// The `A2A-Version` header it came with.
    pub version: Option<String>,
}

/// A small HTTP responder answering as a session, on `127.0.0.1:0`.
pub struct Door {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    closing: Arc<AtomicBool>,
    acceptor: Option<thread::JoinHandle<()>>,
}

impl Door {
    pub fn start(spec: DoorSpec) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(vec![]));
        let closing = Arc::new(AtomicBool::new(false));
        let spec = Arc::new(spec);
        let acceptor = {
            let (seen, closing) = (seen.clone(), closing.clone());
            thread::spawn(move || {
                for stream in listener.incoming() {
                    if closing.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (spec, seen) = (spec.clone(), seen.clone());
                    thread::spawn(move || serve(stream, &spec, &seen));
                }
            })
        };
        Self {
            addr,
            seen,
            closing,
            acceptor: Some(acceptor),
        }
    }

    /// A public door answering as `session_id`.
    pub fn public(session_id: &str) -> Self {
        Self::start(DoorSpec {
            session_id: session_id.into(),
            ..DoorSpec::default()
        })
    }

    /// `host:port`, as a record's `url`.
    pub fn url(&self) -> String {
        self.addr.to_string()
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The requests that were `what` (a JSON-RPC method or a GET path).
    pub fn seen_of(&self, what: &str) -> Vec<Seen> {
        self.seen().into_iter().filter(|s| s.what == what).collect()
    }
}

impl Drop for Door {
    fn drop(&mut self) {
        self.closing.store(true, Ordering::SeqCst);
        // Wake the acceptor so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

/// The card a door answers with; `with_session` adds the capsule extension naming `session_id`.
pub fn card(url: &str, session_id: &str, with_session: bool, authenticated: bool) -> Value {
    let mut extensions = vec![];
    if with_session {
        extensions.push(json!({
            "uri": CAPSULE_EXTENSION_URI,
            "params": {"sessionId": session_id},
        }));
    }
    let mut card = json!({
        "protocolVersion": "0.3.0",
        "name": "echo",
        "version": "0.1.0",
        "url": format!("http://{url}/"),
        "preferredTransport": "JSONRPC",
        "capabilities": {"streaming": false, "extensions": extensions},
        "skills": [{"id": "task", "name": "task"}],
    });
    if authenticated {
        card["securitySchemes"] = json!({"bearer": {"type": "http", "scheme": "bearer"}});
        card["supportsAuthenticatedExtendedCard"] = json!(true);
    }
    card
}

struct Request {
    method: String,
    path: String,
    authorization: Option<String>,
    version: Option<String>,
    body: Vec<u8>,
}

fn read_request(stream: &mut TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut length = 0usize;
    let mut authorization = None;
    let mut version = None;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? == 0 {
            return None;
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = value.parse().ok()?;
        } else if name.eq_ignore_ascii_case("authorization") {
            authorization = Some(value.to_string());
        } else if name.eq_ignore_ascii_case("a2a-version") {
            version = Some(value.to_string());
        }
    }
    let mut body = vec![0; length.min(1 << 20)];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        method,
        path,
        authorization,
        version,
        body,
    })
}

fn respond(stream: &mut TcpStream, status: &str, extra: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
    let _ = stream.flush();
    let _ = stream.shutdown(Shutdown::Write);
}

fn serve(mut stream: TcpStream, spec: &DoorSpec, seen: &Mutex<Vec<Seen>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    if spec.silent {
        // Hold the connection, read whatever comes, answer nothing, until the client goes.
        let mut sink = [0u8; 4096];
        while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
        return;
    }
    let Some(request) = read_request(&mut stream) else {
        return;
    };
    if spec.trickle {
        for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" {
            if stream.write_all(&[*byte]).is_err() {
                return;
            }
            thread::sleep(Duration::from_secs(1));
        }
        return;
    }
    let url = stream.local_addr().unwrap().to_string();
    let authenticated = spec.token.is_some();
    if request.method == "GET" {
        seen.lock().unwrap().push(Seen {
            what: request.path.clone(),
            authorization: request.authorization.clone(),
            version: request.version.clone(),
        });
        if request.path == "/.well-known/agent-card.json" {
            let public = card(&url, &spec.session_id, !authenticated, authenticated);
            respond(&mut stream, "200 OK", "", public.to_string().as_bytes());
        } else {
            respond(&mut stream, "404 Not Found", "", b"{}");
        }
        return;
    }
    let call: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let method = call["method"].as_str().unwrap_or("").to_string();
    let id = call.get("id").cloned().unwrap_or(Value::Null);
    seen.lock().unwrap().push(Seen {
        what: method.clone(),
        authorization: request.authorization.clone(),
        version: request.version.clone(),
    });
    let bearer = spec.token.as_ref().map(|token| format!("Bearer {token}"));
    if bearer.is_some() && request.authorization != bearer {
        respond(
            &mut stream,
            "401 Unauthorized",
            "WWW-Authenticate: Bearer realm=\"echo\"\r\n",
            b"",
        );
        return;
    }
    let method_not_found = || {
        json!({"jsonrpc": "2.0", "id": id,
               "error": {"code": -32601, "message": "Method not found"}})
    };
    let wrong_version = spec.v1_only && request.version.as_deref() != Some("1.0");
    let answer = match method.as_str() {
        _ if wrong_version => json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32009, "message": "version not supported"}}),
        "agent/getAuthenticatedExtendedCard" if authenticated && !spec.v1_only => {
            json!({"jsonrpc": "2.0", "id": id, "result": card(&url, &spec.session_id, true, true)})
        }
        "GetExtendedAgentCard" if authenticated && spec.v1_only => {
            json!({"jsonrpc": "2.0", "id": id, "result": card(&url, &spec.session_id, true, true)})
        }
        "session/stop" if !spec.v1_only => {
            if let Some(on_stop) = &spec.on_stop {
                on_stop();
            }
            json!({"jsonrpc": "2.0", "id": id, "result": {}})
        }
        "murmur.StopSession" if spec.v1_only => {
            if let Some(on_stop) = &spec.on_stop {
                on_stop();
            }
            json!({"jsonrpc": "2.0", "id": id,
                   "result": {"session_id": spec.session_id, "canceled": [], "residue": []}})
        }
        _ => method_not_found(),
    };
    respond(&mut stream, "200 OK", "", answer.to_string().as_bytes());
}
