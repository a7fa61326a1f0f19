//! Push-notification configs on the wire, both generations: what `set` takes (0.3
//! `TaskPushNotificationConfig` with its `pushNotificationConfig`, 1.0 the flat
//! `TaskPushNotificationConfig`, and either inside a send's `configuration`), what `get`,
//! `list` and `delete` name, and a config as each generation shows it.
//!
//! A config's URL is read by [`crate::net::webhook::parse`] (http only, no userinfo, bounded);
//! its token and credentials become header values, so they are bounded and may hold no control
//! character — a CR or LF would let a client write headers of its own into the session's POST.

use serde_json::{Map, Value, json};

use super::error::RpcError;
use super::fields::{Fields, id, object, string};
use super::version::Generation;
use crate::net::webhook::{self, Url};
use crate::secret::Secret;

/// The longest token or credentials a config may carry, in bytes.
pub const MAX_SECRET: usize = 4096;

/// One webhook config of one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The client's id for it; the task's id when it gave none (as the reference servers do).
    pub id: String,
    /// Whether the client named it (`id` given): a 0.3 client that gave none cannot know the
    /// id it got, so its read of any id that names no config finds this one.
    pub named: bool,
    /// The URL as given, shown back as given.
    pub url: String,
    /// The URL read.
    pub target: Url,
    /// Sent as `X-A2A-Notification-Token`; never shown by `Debug`.
    pub token: Option<Secret>,
    /// Sent as `Authorization: <scheme> <credentials>`.
    pub auth: Option<Auth>,
    /// The generation it was set in: the shape its deliveries take.
    pub generation: Generation,
}

/// How the session authenticates to a webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Auth {
    pub scheme: String,
    /// Never shown by `Debug`.
    pub credentials: Option<Secret>,
}

impl Config {
    /// What holding it costs the memory budget.
    pub fn weight(&self) -> usize {
        let secret = |s: &Option<Secret>| s.as_ref().map_or(0, |s| s.expose().len());
        let auth = self
            .auth
            .as_ref()
            .map_or(0, |a| a.scheme.len() + secret(&a.credentials));
        512 + self.id.len() + 2 * self.url.len() + secret(&self.token) + auth
    }

    /// The headers a delivery carries besides `Content-Type` (they may hold secrets: they go to
    /// the socket and nowhere else).
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = Vec::new();
        if let Some(token) = &self.token {
            headers.push(("X-A2A-Notification-Token", token.expose().to_string()));
        }
        if let Some(Auth {
            scheme,
            credentials: Some(credentials),
        }) = &self.auth
        {
            let credentials = credentials.expose();
            headers.push(("Authorization", format!("{scheme} {credentials}")));
        }
        headers
    }

    /// The config as `generation` shows it, for `task_id` — without its token and credentials:
    /// the spec asks for none of them back (every member but the URL is optional), and an answer
    /// is read by more than the webhook (a proxy's log, a shared client's cache), so the secrets
    /// a client gave go to its webhook and nowhere else. The scheme is shown: it is no secret.
    pub fn render(&self, task_id: &str, generation: Generation) -> Value {
        let mut config = Map::new();
        config.insert("id".into(), json!(self.id));
        config.insert("url".into(), json!(self.url));
        if let Some(auth) = &self.auth {
            let mut shown = Map::new();
            match generation {
                Generation::V0_3 => shown.insert("schemes".into(), json!([auth.scheme])),
                Generation::V1_0 => shown.insert("scheme".into(), json!(auth.scheme)),
            };
            config.insert("authentication".into(), Value::Object(shown));
        }
        match generation {
            Generation::V0_3 => json!({"taskId": task_id, "pushNotificationConfig": config}),
            Generation::V1_0 => {
                config.insert("taskId".into(), json!(task_id));
                Value::Object(config)
            }
        }
    }
}

/// A `set` (0.3 `tasks/pushNotificationConfig/set`, 1.0 `CreateTaskPushNotificationConfig`): the
/// task it is for and the config.
pub fn set(params: &Value, generation: Generation) -> Result<(String, Config), RpcError> {
    let map = object(params, "params")?;
    let task_id = id(map, "taskId", "params")?
        .ok_or_else(|| RpcError::invalid("params.taskId", "a task id is required"))?;
    let config = match generation {
        Generation::V0_3 => {
            let at = "params.pushNotificationConfig";
            let inner = map
                .get("pushNotificationConfig")
                .ok_or_else(|| RpcError::invalid(at, "is required"))?;
            config(object(inner, at)?, at, generation, task_id)?
        }
        Generation::V1_0 => config(map, "params", generation, task_id)?,
    };
    Ok((task_id.to_string(), config))
}

/// The member of a send's `configuration` that carries a webhook config (0.3
/// `pushNotificationConfig`, 1.0 `taskPushNotificationConfig`).
pub fn send_key(generation: Generation) -> &'static str {
    match generation {
        Generation::V0_3 => "pushNotificationConfig",
        Generation::V1_0 => "taskPushNotificationConfig",
    }
}

/// The config a send's `configuration` carried (`value`, its [`send_key`] member), for the task
/// the send starts or continues: its id is that task's when it gives none
/// ([`Config::name_for`]).
pub fn in_send(value: &Value, generation: Generation) -> Result<Config, RpcError> {
    let at = format!("params.configuration.{}", send_key(generation));
    config(object(value, &at)?, &at, generation, "")
}

impl Config {
    /// Give a config read without an id (one inside a send) the task's.
    pub fn name_for(&mut self, task_id: &str) {
        if self.id.is_empty() {
            self.id = task_id.to_string();
        }
    }
}

/// `get` and `delete` name a task and a config; `list` a task. 0.3 calls the task `id` and the
/// config `pushNotificationConfigId` (optional for `get`: the task's first config); 1.0 calls
/// them `taskId` and `id`.
pub fn config_ref(
    params: &Value,
    generation: Generation,
    config_needed: bool,
) -> Result<(String, Option<String>), RpcError> {
    let map = object(params, "params")?;
    let (task_key, config_key) = match generation {
        Generation::V0_3 => ("id", "pushNotificationConfigId"),
        Generation::V1_0 => ("taskId", "id"),
    };
    let task = id(map, task_key, "params")?
        .ok_or_else(|| RpcError::invalid(format!("params.{task_key}"), "a task id is required"))?;
    let config = id(map, config_key, "params")?;
    if config_needed && config.is_none() {
        return Err(RpcError::invalid(
            format!("params.{config_key}"),
            "a config id is required",
        ));
    }
    Ok((task.to_string(), config.map(str::to_string)))
}

/// A config's members at `at`, for `task_id` ("" for one inside a send).
fn config(
    map: &Fields,
    at: &str,
    generation: Generation,
    task_id: &str,
) -> Result<Config, RpcError> {
    let url = string(map, "url", at)?
        .ok_or_else(|| RpcError::invalid(format!("{at}.url"), "a webhook URL is required"))?;
    let target = webhook::parse(url).map_err(|why| RpcError::invalid(format!("{at}.url"), why))?;
    let named = id(map, "id", at)?;
    let config_id = named.unwrap_or(task_id);
    let token = secret(map, "token", at)?;
    let auth = match map.get("authentication") {
        None | Some(Value::Null) => None,
        Some(value) => Some(auth(value, &format!("{at}.authentication"), generation)?),
    };
    Ok(Config {
        id: config_id.to_string(),
        named: named.is_some(),
        url: url.to_string(),
        target,
        token,
        auth,
        generation,
    })
}

/// 0.3 `{"schemes": [..], "credentials"}` (the first scheme is used), 1.0 `{"scheme",
/// "credentials"}`.
fn auth(value: &Value, at: &str, generation: Generation) -> Result<Auth, RpcError> {
    let map = object(value, at)?;
    let scheme = match generation {
        Generation::V0_3 => match map.get("schemes") {
            Some(Value::Array(schemes)) => schemes.first().and_then(Value::as_str),
            _ => None,
        }
        .map(str::to_string)
        .ok_or_else(|| {
            RpcError::invalid(format!("{at}.schemes"), "a list of schemes is required")
        })?,
        Generation::V1_0 => string(map, "scheme", at)?
            .map(str::to_string)
            .ok_or_else(|| RpcError::invalid(format!("{at}.scheme"), "a scheme is required"))?,
    };
    let scheme_ok = !scheme.is_empty()
        && scheme.len() <= 64
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !scheme_ok {
        let member = match generation {
            Generation::V0_3 => "schemes[0]",
            Generation::V1_0 => "scheme",
        };
        return Err(RpcError::invalid(
            format!("{at}.{member}"),
            "must be an HTTP authentication scheme (Bearer, Basic, ...)",
        ));
    }
    Ok(Auth {
        scheme,
        credentials: secret(map, "credentials", at)?,
    })
}

/// A token or credentials: a header value, so printable ASCII (spaces and tabs inside allowed),
/// at most [`MAX_SECRET`] bytes. Never quoted back: the refusal says what is wrong, not what it
/// held.
fn secret(map: &Fields, key: &str, at: &str) -> Result<Option<Secret>, RpcError> {
    let Some(text) = string(map, key, at)? else {
        return Ok(None);
    };
    let header_safe = text
        .bytes()
        .all(|b| b == b' ' || b == b'\t' || b.is_ascii_graphic());
    if text.is_empty() || text.len() > MAX_SECRET || !header_safe {
        return Err(RpcError::invalid(
            format!("{at}.{key}"),
            format!("must be 1 to {MAX_SECRET} bytes of printable ASCII (it is sent as a header)"),
        ));
    }
    Ok(Some(Secret::new(text.to_string())))
}

#[cfg(test)]
mod tests;
