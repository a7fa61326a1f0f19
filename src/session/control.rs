//! The control plane: settings and secrets a running session's handlers receive in their
//! environment from the next task on, set through `/control` with the `ctl1` control token.
//!
//! A setting holds a JSON string, number or boolean (the original runtime's `mur control set MODE
//! 5` sends the number 5); its handlers see a string as it is and anything else as its JSON text
//! (`5`, `true`). The answers have the original's shapes: `GET /control` is `{"session_id",
//! "settings": [{"name", "value"}], "secrets": [{"name", "set"}]}` (a setting not set yet has
//! `"value": null`), a setting's `PUT` `{"name", "previous", "value", "applies_from"}`, a
//! secret's `{"name", "set", "replaced"}`.
//!
//! A secret's value is held in memory only: never written, never in a response, accepted only
//! from a loopback peer.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::sync::Mutex;

use serde_json::{Value, json};

use crate::net::server::{Request, Response};
use crate::secret::Secret;
use crate::token::{self, Key};

const MAX_SETTING: usize = 1024;
const MAX_SECRET: usize = 8 * 1024;

/// When a change takes effect, as a setting's `PUT` answer says it (the original's doors say
/// `next_inference_call`; mur's handlers read their environment once, as a task starts).
const APPLIES_FROM: &str = "next_task";

/// Proof that a request carried this session's control token, found from its head
/// ([`Control::admit`]): what [`Control::handle`] takes, so the token is checked once.
pub struct Authorized(());

pub struct Control {
    key: Key,
    session_id: String,
    settings: Vec<String>,
    secrets: Vec<String>,
    values: Mutex<Values>,
}

/// What has been set: the settings' JSON values and the secrets' bytes.
#[derive(Default)]
struct Values {
    settings: BTreeMap<String, Value>,
    secrets: BTreeMap<String, OsString>,
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
                values: Mutex::default(),
            },
            token,
        ))
    }

    /// The values set now, as environment entries for the next task.
    pub fn env(&self) -> Vec<(String, OsString)> {
        let values = self.lock();
        let settings = values
            .settings
            .iter()
            .map(|(k, v)| (k.clone(), OsString::from(env_text(v))));
        let secrets = values.secrets.iter().map(|(k, v)| (k.clone(), v.clone()));
        settings.chain(secrets).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Values> {
        self.values.lock().unwrap_or_else(|p| p.into_inner())
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

    /// Whether a `/control…` request whose head has arrived may have its `body_len` bytes read:
    /// the proof that it carries the control token, or the refusal to answer from its head —
    /// 401 without the token, 413 for a body larger than any control route takes — so no byte of
    /// an unauthorized or oversized body is ever read.
    pub fn admit(&self, head: &Request, body_len: usize) -> Result<Authorized, Response> {
        if !self.authorized(head) {
            let mut r = Response::json(
                401,
                &json!({"error": "the control token is required (mur token --control)"}),
            );
            r.headers
                .push(("WWW-Authenticate", "Bearer realm=\"control\"".into()));
            return Err(r);
        }
        if body_len > MAX_SECRET {
            return Err(Response::json(
                413,
                &json!({"error": "a control request's body is at most 8 KiB (a secret's most)"}),
            ));
        }
        Ok(Authorized(()))
    }

    /// Answer one `/control…` request, admitted ([`Control::admit`]) with its whole body.
    pub fn handle(&self, request: &Request, _: &Authorized) -> Response {
        let rest = request.path.strip_prefix("/control").unwrap_or("");
        let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
        match (request.method.as_str(), segments.as_slice()) {
            ("GET", []) => self.listing(),
            ("PUT", ["settings", name]) => self.put_setting(name, &request.body),
            ("DELETE", ["settings", name]) => self.remove(name, "setting"),
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
            ("DELETE", ["secrets", name]) => self.remove(name, "secret"),
            _ => Response::json(
                404,
                &json!({"error": "no such control route: GET /control, PUT|DELETE /control/settings/NAME, PUT|DELETE /control/secrets/NAME"}),
            ),
        }
    }

    fn listing(&self) -> Response {
        let values = self.lock();
        let settings: Vec<Value> = self
            .settings
            .iter()
            .map(|n| json!({"name": n, "value": values.settings.get(n)}))
            .collect();
        let secrets: Vec<Value> = self
            .secrets
            .iter()
            .map(|n| json!({"name": n, "set": values.secrets.contains_key(n)}))
            .collect();
        Response::json(
            200,
            &json!({"session_id": self.session_id, "settings": settings, "secrets": secrets}),
        )
    }

    fn put_setting(&self, name: &str, body: &[u8]) -> Response {
        if !self.settings.iter().any(|n| n == name) {
            return undeclared("setting", name, &self.settings);
        }
        if body.len() > MAX_SETTING + 64 {
            return Response::json(413, &json!({"error": "a setting is at most 1 KiB"}));
        }
        let value = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|mut v| v.get_mut("value").map(Value::take))
            .filter(|v| v.is_string() || v.is_number() || v.is_boolean());
        let Some(value) = value else {
            return Response::json(
                400,
                &json!({"error": "the body must be {\"value\": V}, V a JSON string, number or boolean"}),
            );
        };
        let text = env_text(&value);
        if text.len() > MAX_SETTING || text.contains('\0') {
            return Response::json(
                400,
                &json!({"error": "a setting is at most 1 KiB and holds no NUL"}),
            );
        }
        let previous = self.lock().settings.insert(name.to_string(), value.clone());
        Response::json(
            200,
            &json!({"name": name, "previous": previous, "value": value, "applies_from": APPLIES_FROM}),
        )
    }

    fn put_secret(&self, name: &str, body: &[u8]) -> Response {
        if !self.secrets.iter().any(|n| n == name) {
            return undeclared("secret", name, &self.secrets);
        }
        if body.contains(&0) {
            return Response::json(400, &json!({"error": "a secret holds no NUL byte"}));
        }
        let value = OsString::from_vec(body.to_vec());
        let replaced = self
            .lock()
            .secrets
            .insert(name.to_string(), value)
            .is_some();
        Response::json(
            200,
            &json!({"name": name, "set": true, "replaced": replaced}),
        )
    }

    fn remove(&self, name: &str, kind: &str) -> Response {
        let declared = if kind == "setting" {
            &self.settings
        } else {
            &self.secrets
        };
        if !declared.iter().any(|n| n == name) {
            return undeclared(kind, name, declared);
        }
        let mut values = self.lock();
        if kind == "setting" {
            values.settings.remove(name);
        } else {
            values.secrets.remove(name);
        }
        Response::json(200, &json!({"name": name, "set": false}))
    }
}

/// What a handler's environment holds for a setting: a string as it is, anything else its JSON
/// text (`5`, `true`).
fn env_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn undeclared(kind: &str, name: &str, declared: &[String]) -> Response {
    Response::json(
        404,
        &json!({"error": format!("'{}' is not a declared {kind}; declared: {}", name.escape_debug(), declared.join(", "))}),
    )
}
