//! Raw HTTP/1.1 over `TcpStream` (so raw and malformed bytes can be sent): a keep-alive client,
//! one-shot `Connection: close` requests, and response parsing.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use serde_json::Value;

// ---------------------------------------------------------------------------------------------
// A keep-alive client
// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    /// Names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == &name.to_ascii_lowercase())
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        body_json(self.status, &self.body)
    }
}

/// One keep-alive connection to a door.
pub struct Http {
    pub stream: TcpStream,
    host: String,
    buf: Vec<u8>,
}

impl Http {
    pub fn connect(addr: &str) -> Http {
        Self::try_connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
    }

    pub fn try_connect(addr: &str) -> std::io::Result<Http> {
        let sock: SocketAddr = addr.parse().expect("host:port");
        let stream = TcpStream::connect_timeout(&sock, Duration::from_secs(5))?;
        stream.set_read_timeout(Some(Duration::from_secs(15)))?;
        stream.set_write_timeout(Some(Duration::from_secs(15)))?;
        Ok(Http {
            stream,
            host: addr.to_string(),
            buf: Vec::new(),
        })
    }

    pub fn set_read_timeout(&self, timeout: Duration) {
        self.stream.set_read_timeout(Some(timeout)).unwrap();
    }

    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// Send one request (with `Host` and, for a body or a POST/PUT, `Content-Length`) and read
    /// its response.
    pub fn try_request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> std::io::Result<HttpResponse> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.host);
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if !body.is_empty() || matches!(method, "POST" | "PUT") {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body);
        self.send_raw(&bytes)?;
        self.read_response()
    }

    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> HttpResponse {
        self.try_request(method, path, headers, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    pub fn get(&mut self, path: &str) -> HttpResponse {
        self.request("GET", path, &[], b"")
    }

    /// A POST with a JSON body and, when given, a bearer token.
    pub fn post(&mut self, path: &str, token: Option<&str>, body: &[u8]) -> HttpResponse {
        self.post_as(path, token, None, body)
    }

    /// A POST with a JSON body, a bearer token and an `A2A-Version` header, each when given.
    pub fn post_as(
        &mut self,
        path: &str,
        token: Option<&str>,
        version: Option<&str>,
        body: &[u8],
    ) -> HttpResponse {
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers = vec![("Content-Type", "application/json")];
        if let Some(auth) = &auth {
            headers.push(("Authorization", auth.as_str()));
        }
        if let Some(version) = version {
            headers.push(("A2A-Version", version));
        }
        self.request("POST", path, &headers, body)
    }

    /// Read one response: status line, headers, and a `Content-Length` body (or, without one,
    /// everything to EOF).
    pub fn read_response(&mut self) -> std::io::Result<HttpResponse> {
        let head_end = loop {
            if let Some(at) = find(&self.buf, b"\r\n\r\n") {
                break at;
            }
            if !self.fill()? {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!(
                        "connection closed before a response head ({} bytes: {:?})",
                        self.buf.len(),
                        String::from_utf8_lossy(&self.buf)
                    ),
                ));
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let mut fields = status_line.splitn(3, ' ');
        let version = fields.next().unwrap_or("");
        let status: u16 = fields
            .next()
            .and_then(|s| s.parse().ok())
            .filter(|_| version == "HTTP/1.1")
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("bad status line {status_line:?}"),
                )
            })?;
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        self.buf.drain(..head_end + 4);
        let length = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .map(|(_, v)| v.parse::<usize>().expect("a numeric Content-Length"));
        let body = match length {
            Some(length) => {
                while self.buf.len() < length {
                    if !self.fill()? {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::UnexpectedEof,
                            "connection closed mid-body",
                        ));
                    }
                }
                self.buf.drain(..length).collect()
            }
            None => {
                while self.fill()? {}
                std::mem::take(&mut self.buf)
            }
        };
        Ok(HttpResponse {
            status,
            headers,
            body,
        })
    }

    /// Read more bytes into the buffer; `false` at EOF.
    fn fill(&mut self) -> std::io::Result<bool> {
        let mut chunk = [0u8; 16 * 1024];
        let n = read_again_if_interrupted(&mut self.stream, &mut chunk)?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n > 0)
    }

    /// Whether the peer has closed: a read returns EOF (or a reset) within `within`, with nothing
    /// (else) left to read.
    pub fn closed_within(&mut self, within: Duration) -> bool {
        self.set_read_timeout(within);
        let mut chunk = [0u8; 1024];
        loop {
            match read_again_if_interrupted(&mut self.stream, &mut chunk) {
                Ok(0) => return true,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
    }
}

/// An HTTP body parsed as JSON; the test fails (showing the body) when it is not.
#[track_caller]
fn body_json(status: u16, body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or_else(|e| {
        panic!(
            "HTTP {status} body is not JSON ({e}): {}",
            String::from_utf8_lossy(body)
        )
    })
}

/// Where `needle` first occurs in `haystack`.
pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

// ---------------------------------------------------------------------------------------------
// One-shot requests
// ---------------------------------------------------------------------------------------------

/// A whole HTTP answer: the head as text, and the bytes after it.
#[derive(Debug)]
pub struct HttpAnswer {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl HttpAnswer {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    #[track_caller]
    pub fn json(&self) -> Value {
        body_json(self.status, &self.body)
    }
}

/// One request on a fresh connection (`Connection: close`), read to EOF; `authorization` is sent
/// verbatim as the header's value when given.
pub fn one_shot(
    url: &str,
    method: &str,
    path: &str,
    authorization: Option<&str>,
    body: &[u8],
) -> std::io::Result<HttpAnswer> {
    let addr: SocketAddr = url.parse().expect("host:port");
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    stream.set_write_timeout(Some(Duration::from_secs(20)))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {url}\r\nConnection: close\r\n");
    if let Some(value) = authorization {
        head.push_str(&format!("Authorization: {value}\r\n"));
    }
    if !body.is_empty() || method == "POST" || method == "PUT" {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    stream.write_all(&bytes)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    parse_answer(&answer).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not an HTTP answer: {:?}", String::from_utf8_lossy(&answer)),
        )
    })
}

/// [`one_shot`], with `token` (when given) sent as `Authorization: Bearer <token>`.
pub fn http(
    url: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &[u8],
) -> std::io::Result<HttpAnswer> {
    let authorization = token.map(|t| format!("Bearer {t}"));
    one_shot(url, method, path, authorization.as_deref(), body)
}

/// `POST /` to the door at `url` (`host:port`) with `body`, `authorization` sent verbatim as
/// the header's value when given.
#[track_caller]
pub fn post(url: &str, authorization: Option<&str>, body: &Value) -> HttpAnswer {
    one_shot(url, "POST", "/", authorization, body.to_string().as_bytes())
        .unwrap_or_else(|e| panic!("POST / to the door at {url}: {e}"))
}

/// One whole HTTP answer (head and everything after it).
pub fn parse_answer(bytes: &[u8]) -> Option<HttpAnswer> {
    let end = find(bytes, b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some(HttpAnswer {
        status,
        head,
        body: bytes[end + 4..].to_vec(),
    })
}

/// Read one response with a `Content-Length` body off a keep-alive stream, using and refilling
/// `buf` (bytes past it stay there). `None` on EOF or error before a whole response.
pub fn read_one_response(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<HttpAnswer> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some(end) = find(buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let length: usize = head
                .lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(n, _)| n.trim().eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                let status = head.split_whitespace().nth(1)?.parse().ok()?;
                let body = buf[end + 4..end + 4 + length].to_vec();
                buf.drain(..end + 4 + length);
                return Some(HttpAnswer { status, head, body });
            }
        }
        match read_again_if_interrupted(stream, &mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// `stream.read`, again while it fails `EINTR`. A read from a socket with a timeout fails so
/// when the process is stopped and continued, even with no signal handler (signal(7)), and
/// whatever stops this process stops every test in it, each perhaps in such a read.
pub fn read_again_if_interrupted(stream: &mut TcpStream, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match stream.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// `127.0.0.1:PORT` where nothing listens (a port just bound and released): a door that is not
/// there, refused at once.
pub fn dead_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    addr.to_string()
}
