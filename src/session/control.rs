//! The control plane: settings and secrets a running session's handlers receive in their
//! environment from the next task on, set through `/control` with the `ctl1` control token.
//!
//! A secret's value is held in memory only: never written, never in a response, accepted only
//! from a loopback peer.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::sync::Mutex;

use serde_json::json;

use crate::net::server::{Request, Response};
use crate::secret::Secret;
use crate::token::{self, Key};

const MAX_SETTING: usize = 1024;
const MAX_SECRET: usize = 8 * 1024;

pub struct Control {
    key: Key,
    session_id: String,
    settings: Vec<String>,
    secrets: Vec<String>,
    values: Mutex<BTreeMap<String, OsString>>,
}

impl Control {
    /// A control plane for `session_id` over the declared names, with its token.
    pub fn new(
        session_id: &str,
        settings: &[String],
        secrets: &[String],
    ) -> Result<(Self, Secret), String> {
        let key = Key::generate()?;
        let nonce = crate::b64::encode(&crate::sys::random::bytes::<16>()?);
        let token = token::mint(
            &key,
            token::CONTROL,
            &json!({"session_id": session_id, "nonce": nonce}),
        );
        Ok((
            Self {
                key,
                session_id: session_id.to_string(),
                settings: settings.to_vec(),
                secrets: secrets.to_vec(),
                values: Mutex::new(BTreeMap::new()),
            },
            token,
        ))
    }

    /// The values set now, as environment entries for the next task.
    pub fn env(&self) -> Vec<(String, OsString)> {
        self.values
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    fn authorized(&self, request: &Request) -> bool {
        let mut values = request.header_values("authorization");
        let (Some(value), None) = (values.next(), values.next()) else {
            return false;
        };
        std::str::from_utf8(value)
            .ok()
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .and_then(|(_, t)| token::verify(&self.key, token::CONTROL, t.trim()))
            .is_some_and(|p| p.get("session_id").and_then(|s| s.as_str()) == Some(&self.session_id))
    }

    /// Answer one `/control…` request.
    pub fn handle(&self, request: &Request) -> Response {
        if !self.authorized(request) {
            let mut r = Response::json(
                401,
                &json!({"error": "the control token is required (mur token --control)"}),
            );
            r.headers
                .push(("WWW-Authenticate", "Bearer realm=\"control\"".into()));
            return r;
        }
        let rest = request.path.strip_prefix("/control").unwrap_or("");
        let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
        match (request.method.as_str(), segments.as_slice()) {
            ("GET", []) => self.listing(),
            ("PUT", ["settings", name]) => self.put_setting(name, &request.body),
            ("DELETE", ["settings", name]) => self.remove(name, &self.settings, "setting"),
            // `to_canonical`: an IPv4 peer of a `--bind ::` door is seen as ::ffff:127.0.0.1.
            ("PUT" | "DELETE", ["secrets", _])
                if !request.peer.ip().to_canonical().is_loopback() =>
            {
                Response::json(
                    403,
                    &json!({"error": "secrets are accepted from loopback peers only"}),
                )
            }
            ("PUT", ["secrets", name]) => self.put_secret(name, &request.body),
            ("DELETE", ["secrets", name]) => self.remove(name, &self.secrets, "secret"),
            _ => Response::json(
                404,
                &json!({"error": "no such control route: GET /control, PUT|DELETE /control/settings/NAME, PUT|DELETE /control/secrets/NAME"}),
            ),
        }
    }

    fn listing(&self) -> Response {
        let values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        let settings: serde_json::Map<String, serde_json::Value> = self
            .settings
            .iter()
            .map(|n| {
                let value = values.get(n).map(|v| v.to_string_lossy().into_owned());
                (n.clone(), json!({"set": value.is_some(), "value": value}))
            })
            .collect();
        let secrets: serde_json::Map<String, serde_json::Value> = self
            .secrets
            .iter()
            .map(|n| (n.clone(), json!({"set": values.contains_key(n)})))
            .collect();
        Response::json(200, &json!({"settings": settings, "secrets": secrets}))
    }

    fn put_setting(&self, name: &str, body: &[u8]) -> Response {
        if !self.settings.iter().any(|n| n == name) {
            return undeclared("setting", name, &self.settings);
        }
        if body.len() > MAX_SETTING + 64 {
            return Response::json(413, &json!({"error": "a setting is at most 1 KiB"}));
        }
        let value = serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .and_then(|v| v.get("value").and_then(|v| v.as_str()).map(str::to_string));
        match value {
            Some(v) if v.len() <= MAX_SETTING && !v.contains('\0') => {
                self.set(name, OsString::from(v));
                Response::json(200, &json!({"name": name, "set": true}))
            }
            Some(_) => Response::json(
                400,
                &json!({"error": "a setting is at most 1 KiB and holds no NUL"}),
            ),
            None => Response::json(
                400,
                &json!({"error": "the body must be {\"value\": \"...\"}"}),
            ),
        }
    }

    fn put_secret(&self, name: &str, body: &[u8]) -> Response {
        if !self.secrets.iter().any(|n| n == name) {
            return undeclared("secret", name, &self.secrets);
        }
        if body.len() > MAX_SECRET {
            return Response::json(413, &json!({"error": "a secret is at most 8 KiB"}));
        }
        if body.contains(&0) {
            return Response::json(400, &json!({"error": "a secret holds no NUL byte"}));
        }
        self.set(name, OsString::from_vec(body.to_vec()));
        Response::json(200, &json!({"name": name, "set": true}))
    }

    fn set(&self, name: &str, value: OsString) {
        self.values
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_string(), value);
    }

    fn remove(&self, name: &str, declared: &[String], kind: &str) -> Response {
        if !declared.iter().any(|n| n == name) {
            return undeclared(kind, name, declared);
        }
        self.values
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name);
        Response::json(200, &json!({"name": name, "set": false}))
    }
}

fn undeclared(kind: &str, name: &str, declared: &[String]) -> Response {
    Response::json(
        404,
        &json!({"error": format!("'{}' is not a declared {kind}; declared: {}", name.escape_debug(), declared.join(", "))}),
    )
}
