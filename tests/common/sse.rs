//! A server-sent-events reader over a raw `TcpStream`: one streaming JSON-RPC request, then its
//! events one at a time as they arrive, so a test can see what came before something else
//! happened.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};

use super::http::{find, read_again_if_interrupted};

/// One open stream.
pub struct Sse {
    pub stream: TcpStream,
    buf: Vec<u8>,
    /// The response head, as sent.
    pub head: String,
    /// The `id:` of the event `next` returned last; `None` when it carried none.
    pub last_id: Option<u64>,
}

impl Sse {
    /// POST `method` with `params` (and the `A2A-Version` header `version`, when given) to the
    /// door at `addr`; the stream, once the response head has arrived.
    pub fn open(addr: &str, version: Option<&str>, method: &str, params: Value) -> Sse {
        Self::attach(Self::send(addr, version, method, params))
    }

    /// An HTTP+JSON stream: `method` at `path` with `headers` (lines ending `\r\n`) and
    /// `body`; the stream, once the response head has arrived (events are the bare objects).
    pub fn http_json(addr: &str, method: &str, path: &str, headers: &str, body: &[u8]) -> Sse {
        let mut stream = TcpStream::connect(addr).expect("connect");
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n{headers}Content-Length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body).unwrap();
        Self::attach(stream)
    }

    /// The stream on `stream`, once the response head has arrived.
    fn attach(mut stream: TcpStream) -> Sse {
        stream
            .set_read_timeout(Some(Duration::from_secs(15)))
            .unwrap();
        let mut buf = Vec::new();
        let head_end = loop {
            if let Some(at) = find(&buf, b"\r\n\r\n") {
                break at;
            }
            let mut chunk = [0u8; 4096];
            let n = read_again_if_interrupted(&mut stream, &mut chunk).expect("the response head");
            assert!(
                n > 0,
                "closed before the head: {}",
                String::from_utf8_lossy(&buf)
            );
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        buf.drain(..head_end + 4);
        Sse {
            stream,
            buf,
            head,
            last_id: None,
        }
    }

    /// Send the request and nothing else: for a reader that never reads.
    pub fn send(addr: &str, version: Option<&str>, method: &str, params: Value) -> TcpStream {
        let body =
            json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string();
        let mut stream = TcpStream::connect(addr).expect("connect");
        let version = version
            .map(|v| format!("A2A-Version: {v}\r\n"))
            .unwrap_or_default();
        let request = format!(
            "POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n{version}Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).unwrap();
        stream
    }

    /// The next event's JSON-RPC answer (comments skipped); `None` at the end of the stream.
    pub fn next(&mut self) -> Option<Value> {
        loop {
            while let Some(at) = find(&self.buf, b"\n\n") {
                let event: Vec<u8> = self.buf.drain(..at + 2).collect();
                let text = String::from_utf8_lossy(&event);
                let data: String = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("data: "))
                    .collect();
                if !data.is_empty() {
                    self.last_id = text
                        .lines()
                        .find_map(|l| l.strip_prefix("id: "))
                        .and_then(|id| id.trim().parse().ok());
                    return Some(serde_json::from_str(&data).expect("an event's data is JSON"));
                }
            }
            let mut chunk = [0u8; 64 * 1024];
            match read_again_if_interrupted(&mut self.stream, &mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(err) => panic!("reading the stream: {err}"),
            }
        }
    }

    /// Every remaining event's `result`, to the end of the stream.
    pub fn rest(&mut self) -> Vec<Value> {
        std::iter::from_fn(|| self.next())
            .map(|e| e["result"].clone())
            .collect()
    }
}
