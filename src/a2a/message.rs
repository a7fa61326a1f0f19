//! Messages and their parts, held once in mur's own form and read from and written to either
//! generation's shape.
//!
//! A client's message is validated as it is read — `messageId`, the user role, at least one part,
//! each part exactly one kind — and refused with -32602 naming the member at fault, so what is
//! stored (and copied into `history`) always fits the schema of whichever generation later reads
//! it. The kinds map one to one: 0.3 `text`/`data`/`file{bytes}`/`file{uri}` are 1.0
//! `text`/`data`/`raw`/`url`; 0.3's `name`/`mimeType` are 1.0's `filename`/`mediaType`.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::error::RpcError;
use super::fields::{
    Enum, Fields, MAX_DEPTH, id, into_object, object, proto_enum, string, take_metadata,
    within_depth,
};
use super::quote::quoted;
use super::version::Generation;
use crate::json::raw::{self, RawJson};

/// The longest `filename` kept (a common file system's limit).
const MAX_FILENAME: usize = 255;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    User,
    Agent,
}

impl Role {
    /// Its name in `generation`'s JSON: 0.3 `user`, 1.0 (and 0.3's proto JSON) `ROLE_USER`.
    pub fn wire(self, generation: Generation) -> &'static str {
        match (generation, self) {
            (Generation::V0_3, Role::User) => "user",
            (Generation::V0_3, Role::Agent) => "agent",
            (Generation::V1_0, Role::User) => "ROLE_USER",
            (Generation::V1_0, Role::Agent) => "ROLE_AGENT",
        }
    }

    /// The role `text` names in `generation`'s JSON.
    pub fn from_wire(text: &str, generation: Generation) -> Option<Self> {
        [Role::User, Role::Agent]
            .into_iter()
            .find(|role| role.wire(generation) == text)
    }
}

/// What one part carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Content {
    Text(String),
    /// Any JSON value, held as its text (never a tree ~16 times its size: [`RawJson`]).
    Data(RawJson),
    /// File bytes, as the base64 text that was checked to decode.
    Raw(String),
    /// A file by reference.
    Url(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    pub content: Content,
    pub filename: Option<String>,
    pub media_type: Option<String>,
    pub metadata: Option<Value>,
}

impl Part {
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: Content::Text(text.into()),
            filename: None,
            media_type: None,
            metadata: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub message_id: String,
    pub role: Role,
    pub parts: Vec<Part>,
    pub context_id: Option<String>,
    pub task_id: Option<String>,
    pub metadata: Option<Value>,
}

impl Message {
    /// A user's message of one text part (`mur run --task`'s).
    pub fn user_text(text: &str) -> Self {
        Self {
            message_id: "m".into(),
            role: Role::User,
            parts: vec![Part::text(text)],
            context_id: None,
            task_id: None,
            metadata: None,
        }
    }
}

impl Message {
    /// Read a client's message (`at` names where it sits, `params.message`) in `generation`'s
    /// shape, moving its data out of `value`. Unknown members are ignored, as both generations
    /// ask.
    pub fn parse(value: Value, generation: Generation, at: &str) -> Result<Self, RpcError> {
        let mut map = into_object(value, at)?;
        let map = &mut map;
        if generation == Generation::V0_3 {
            let kind = string(map, "kind", at)?;
            if kind.is_some_and(|k| k != "message") {
                return Err(RpcError::invalid(
                    format!("{at}.kind"),
                    "must be \"message\"",
                ));
            }
        }
        let message_id = string(map, "messageId", at)?
            .filter(|id| !id.is_empty())
            .ok_or_else(|| {
                RpcError::invalid(format!("{at}.messageId"), "a non-empty string is required")
            })?;
        check_role(map, generation, at)?;
        let context_id = id(map, "contextId", at)?.map(str::to_string);
        let task_id = string(map, "taskId", at)?.map(str::to_string);
        let message_id = message_id.to_string();
        let parts = match map.remove("parts") {
            Some(Value::Array(parts)) if !parts.is_empty() => parts,
            _ => {
                return Err(RpcError::invalid(
                    format!("{at}.parts"),
                    "a non-empty array of parts is required",
                ));
            }
        };
        let parts = parts
            .into_iter()
            .enumerate()
            .map(|(i, part)| Part::parse(part, generation, &format!("{at}.parts[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            message_id,
            role: Role::User,
            parts,
            context_id,
            task_id,
            metadata: take_metadata(map, at)?,
        })
    }

    /// The text parts joined by newlines: a handler's stdin.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match &p.content {
                Content::Text(text) => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn render(&self, generation: Generation) -> Value {
        let role = self.role.wire(generation);
        let parts = self.parts.iter().map(|p| p.render(generation)).collect();
        let mut out = crate::json::object([
            ("messageId", self.message_id.clone().into()),
            ("role", role.into()),
            ("parts", Value::Array(parts)),
        ]);
        if generation == Generation::V0_3 {
            out["kind"] = json!("message");
        }
        for (key, value) in [("contextId", &self.context_id), ("taskId", &self.task_id)] {
            if let Some(value) = value {
                out[key] = json!(value);
            }
        }
        if let Some(metadata) = &self.metadata {
            out["metadata"] = metadata.clone();
        }
        out
    }
}

impl Part {
    fn parse(value: Value, generation: Generation, at: &str) -> Result<Self, RpcError> {
        let mut map = into_object(value, at)?;
        let content = match generation {
            Generation::V0_3 => content_0_3(&mut map, at)?,
            Generation::V1_0 => content_1_0(&mut map, at)?,
        };
        // Where a part's file name and media type sit: in 0.3 only a file part has them, inside
        // its `file`; in 1.0 every part may, beside its content.
        let file_at = format!("{at}.file");
        let names = match generation {
            Generation::V0_3 => map
                .get("file")
                .and_then(Value::as_object)
                .map(|file| (file, "name", "mimeType", file_at.as_str())),
            Generation::V1_0 => Some((&map, "filename", "mediaType", at)),
        };
        let (filename, media_type) = match names {
            Some((names, name_key, type_key, names_at)) => {
                let filename = string(names, name_key, names_at)?;
                if let Some(name) = filename {
                    check_filename(name)
                        .map_err(|why| RpcError::invalid(format!("{names_at}.{name_key}"), why))?;
                }
                let media_type = string(names, type_key, names_at)?;
                (filename.map(str::to_string), media_type.map(str::to_string))
            }
            None => (None, None),
        };
        Ok(Self {
            content,
            filename,
            media_type,
            metadata: take_metadata(&mut map, at)?,
        })
    }

    pub fn render(&self, generation: Generation) -> Value {
        let mut out = match (generation, &self.content) {
            (Generation::V1_0, content) => {
                let out = match content {
                    Content::Text(t) => json!({"text": t}),
                    Content::Data(d) => json!({"data": d.marker()}),
                    Content::Raw(r) => json!({"raw": r}),
                    Content::Url(u) => json!({"url": u}),
                };
                self.with_names(out, ["filename", "mediaType"])
            }
            (Generation::V0_3, Content::Text(t)) => json!({"kind": "text", "text": t}),
            (Generation::V0_3, Content::Data(d)) => json!({"kind": "data", "data": d.marker()}),
            (Generation::V0_3, Content::Raw(r)) => {
                let file = self.with_names(json!({"bytes": r}), ["name", "mimeType"]);
                json!({"kind": "file", "file": file})
            }
            (Generation::V0_3, Content::Url(u)) => {
                let file = self.with_names(json!({"uri": u}), ["name", "mimeType"]);
                json!({"kind": "file", "file": file})
            }
        };
        if let Some(metadata) = &self.metadata {
            out["metadata"] = metadata.clone();
        }
        out
    }

    /// `into` with the file name and media type under `keys` (each generation spells them its
    /// way; 0.3 has them for files only).
    fn with_names(&self, mut into: Value, keys: [&str; 2]) -> Value {
        for (key, value) in keys.into_iter().zip([&self.filename, &self.media_type]) {
            if let Some(value) = value {
                into[key] = json!(value);
            }
        }
        into
    }
}

/// The role of a client's message, which must be the user's: 0.3 `"user"`; 1.0 `ROLE_USER` by
/// name or by its number 1 (the proto3 JSON mapping requires both to be read).
fn check_role(map: &Fields, generation: Generation, at: &str) -> Result<(), RpcError> {
    let user = match generation {
        Generation::V0_3 => map.get("role").and_then(Value::as_str) == Some("user"),
        Generation::V1_0 => matches!(
            proto_enum(map, "role", at),
            Ok(Some(Enum::Name("ROLE_USER") | Enum::Number(1)))
        ),
    };
    if user {
        return Ok(());
    }
    let want = match generation {
        Generation::V0_3 => "must be \"user\"",
        Generation::V1_0 => "must be \"ROLE_USER\" (or its number, 1)",
    };
    Err(RpcError::invalid(
        format!("{at}.role"),
        format!("{want}: a message sent to an agent is the user's"),
    ))
}

/// A 0.3 part's content (a `file` stays in `map` for its names). `kind`, when sent, must agree
/// with the one member present.
fn content_0_3(map: &mut Fields, at: &str) -> Result<Content, RpcError> {
    let present: Vec<&str> = ["text", "data", "file"]
        .into_iter()
        .filter(|k| map.contains_key(*k))
        .collect();
    let [kind] = present[..] else {
        return Err(RpcError::invalid(
            at,
            "a part needs exactly one of text, data, file",
        ));
    };
    if let Some(said) = string(map, "kind", at)?
        && said != kind
    {
        return Err(RpcError::invalid(
            format!("{at}.kind"),
            format!("says \"{}\" but the part holds {kind}", quoted(said)),
        ));
    }
    Ok(match kind {
        "text" => Content::Text(text(map, "text", at)?),
        "data" => data(map, at)?,
        _ => {
            let file_at = format!("{at}.file");
            let file = object(&map["file"], &file_at)?;
            match (file.contains_key("bytes"), file.contains_key("uri")) {
                (true, false) => raw(file, "bytes", &file_at)?,
                (false, true) => url(file, "uri", &file_at)?,
                _ => {
                    return Err(RpcError::invalid(
                        file_at,
                        "a file needs exactly one of bytes, uri",
                    ));
                }
            }
        }
    })
}

/// A 1.0 part's content: exactly one of `text`, `raw`, `url`, `data` (a `kind` is ignored, as
/// both reference servers do).
fn content_1_0(map: &mut Fields, at: &str) -> Result<Content, RpcError> {
    let present: Vec<&str> = ["text", "raw", "url", "data"]
        .into_iter()
        .filter(|k| map.contains_key(*k))
        .collect();
    match present[..] {
        ["text"] => Ok(Content::Text(text(map, "text", at)?)),
        ["raw"] => raw(map, "raw", at),
        ["url"] => url(map, "url", at),
        ["data"] => data(map, at),
        _ => Err(RpcError::invalid(
            at,
            "a part needs exactly one of text, raw, url, data",
        )),
    }
}

fn text(map: &Fields, key: &str, at: &str) -> Result<String, RpcError> {
    string(map, key, at)?
        .map(str::to_string)
        .ok_or_else(|| RpcError::invalid(format!("{at}.{key}"), "must be a string"))
}

fn raw(map: &Fields, key: &str, at: &str) -> Result<Content, RpcError> {
    let text = text(map, key, at)?;
    match crate::b64::decode_any(&text) {
        Some(_) => Ok(Content::Raw(text)),
        None => Err(RpcError::invalid(format!("{at}.{key}"), "is not base64")),
    }
}

fn url(map: &Fields, key: &str, at: &str) -> Result<Content, RpcError> {
    let text = text(map, key, at)?;
    if is_url(&text) {
        Ok(Content::Url(text))
    } else {
        Err(RpcError::invalid(
            format!("{at}.{key}"),
            "is not a URL (scheme:rest, no spaces)",
        ))
    }
}

/// `data`, moved out of `map` and kept as its text once its depth (and, for text the door kept
/// as sent, each object's keys) is checked. A request read by the door holds it as a marker
/// ([`raw`]); any other reader's tree is written out once, compactly.
fn data(map: &mut Fields, at: &str) -> Result<Content, RpcError> {
    let at = format!("{at}.data");
    let value = map.remove("data").unwrap_or_default();
    let text = match raw::unmark(value) {
        Ok(text) => text,
        Err(value) => {
            within_depth(&value, &at)?;
            return RawJson::from_value(&value)
                .map(Content::Data)
                .map_err(|err| RpcError::invalid(at, err.to_string()));
        }
    };
    match raw::check(&text) {
        Ok(depth) if depth > MAX_DEPTH => Err(RpcError::invalid(
            at,
            format!("nests deeper than {MAX_DEPTH} levels"),
        )),
        Ok(_) => RawJson::from_text(text)
            .map(Content::Data)
            .map_err(|err| RpcError::invalid(at, err.to_string())),
        Err(err) => Err(RpcError::invalid(at, err.to_string())),
    }
}

/// An absolute URI as RFC 3986 shapes it: a scheme (a letter, then letters, digits, `+-.`), a
/// colon, something after it, and no whitespace or control characters anywhere.
fn is_url(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once(':') else {
        return false;
    };
    let mut scheme_chars = scheme.chars();
    scheme_chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && scheme_chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        && !rest.is_empty()
        && !text.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// A file's name, never a path: what a handler may later write under its own directory.
fn check_filename(name: &str) -> Result<(), String> {
    if name.is_empty() || name == "." || name == ".." {
        return Err("must be a file name".into());
    }
    if name.contains(['/', '\\', '\0']) {
        return Err("must be a file name, without a path separator".into());
    }
    if name.len() > MAX_FILENAME {
        return Err(format!("is longer than {MAX_FILENAME} bytes"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: Value, generation: Generation) -> Result<Message, String> {
        Message::parse(value, generation, "params.message")
            .map_err(|e| e.field.unwrap_or(e.message))
    }

    #[test]
    fn every_kind_round_trips_through_both_generations() {
        let old = json!({"kind": "message", "messageId": "m1", "role": "user", "contextId": "c", "parts": [
            {"kind": "text", "text": "hi"},
            {"kind": "data", "data": {"k": [1, 2]}},
            {"kind": "file", "file": {"bytes": "aGVsbG8=", "name": "h.txt", "mimeType": "text/plain"}},
            {"kind": "file", "file": {"uri": "https://example.com/f", "name": "f"}},
        ]});
        let message = parse(old.clone(), Generation::V0_3).unwrap();
        assert_eq!(raw::expand(&message.render(Generation::V0_3)), old);
        let new = raw::expand(&message.render(Generation::V1_0));
        assert_eq!(new["role"], "ROLE_USER");
        assert_eq!(
            new["parts"][2],
            json!({"raw": "aGVsbG8=", "filename": "h.txt", "mediaType": "text/plain"})
        );
        assert_eq!(
            new["parts"][3],
            json!({"url": "https://example.com/f", "filename": "f"})
        );
        assert!(new.get("kind").is_none());
        assert_eq!(parse(new.clone(), Generation::V1_0).unwrap(), message);
        // ProtoJSON: the role's number reads as its name; answers still spell the name.
        let mut numbered = new;
        numbered["role"] = json!(1);
        let read = parse(numbered, Generation::V1_0).unwrap();
        assert_eq!(read, message);
        assert_eq!(read.render(Generation::V1_0)["role"], "ROLE_USER");
        assert_eq!(message.text(), "hi");
    }

    /// One refused message a line: the generation, the field the refusal must name, the message.
    const REFUSED: &str = r#"
1.0 params.message []
1.0 params.message.messageId {"role":"ROLE_USER","parts":[{"text":"x"}]}
1.0 params.message.messageId {"messageId":"","role":"ROLE_USER","parts":[{"text":"x"}]}
1.0 params.message.role {"messageId":"m","parts":[{"text":"x"}]}
1.0 params.message.role {"messageId":"m","role":"user","parts":[{"text":"x"}]}
1.0 params.message.role {"messageId":"m","role":2,"parts":[{"text":"x"}]}
1.0 params.message.role {"messageId":"m","role":0,"parts":[{"text":"x"}]}
1.0 params.message.role {"messageId":"m","role":1.5,"parts":[{"text":"x"}]}
1.0 params.message.role {"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"x"}]}
0.3 params.message.role {"messageId":"m","role":1,"parts":[{"kind":"text","text":"x"}]}
0.3 params.message.role {"messageId":"m","role":"robot","parts":[{"kind":"text","text":"x"}]}
0.3 params.message.kind {"messageId":"m","role":"user","kind":"task","parts":[{"text":"x"}]}
0.3 params.message.taskId {"messageId":"m","role":"user","taskId":5,"parts":[{"text":"x"}]}
1.0 params.message.parts {"messageId":"m","role":"ROLE_USER","parts":[]}
1.0 params.message.parts {"messageId":"m","role":"ROLE_USER","parts":{"text":"x"}}
1.0 params.message.parts[0] {"messageId":"m","role":"ROLE_USER","parts":[{}]}
1.0 params.message.parts[0] {"messageId":"m","role":"ROLE_USER","parts":[{"text":"x","data":1}]}
1.0 params.message.parts[0].text {"messageId":"m","role":"ROLE_USER","parts":[{"text":5}]}
1.0 params.message.parts[0].raw {"messageId":"m","role":"ROLE_USER","parts":[{"raw":"not base64!"}]}
1.0 params.message.parts[0].url {"messageId":"m","role":"ROLE_USER","parts":[{"url":"no scheme"}]}
1.0 params.message.parts[0].url {"messageId":"m","role":"ROLE_USER","parts":[{"url":"https://a b"}]}
1.0 params.message.parts[0].filename {"messageId":"m","role":"ROLE_USER","parts":[{"raw":"","filename":"../x"}]}
1.0 params.message.parts[0].metadata {"messageId":"m","role":"ROLE_USER","parts":[{"text":"x","metadata":3}]}
0.3 params.message.parts[0].kind {"messageId":"m","role":"user","parts":[{"kind":"data","text":"x"}]}
0.3 params.message.parts[0].file {"messageId":"m","role":"user","parts":[{"kind":"file","file":{}}]}
0.3 params.message.parts[0].file.name {"messageId":"m","role":"user","parts":[{"file":{"uri":"a:b","name":"x/y"}}]}
"#;

    #[test]
    fn bad_messages_are_refused_naming_the_field() {
        for line in REFUSED.lines().filter(|l| !l.is_empty()) {
            let mut words = line.splitn(3, ' ');
            let (generation, field, message) = (words.next(), words.next(), words.next());
            let generation = match generation {
                Some("0.3") => Generation::V0_3,
                _ => Generation::V1_0,
            };
            let value: Value = serde_json::from_str(message.unwrap()).unwrap();
            assert_eq!(
                parse(value, generation).unwrap_err(),
                field.unwrap(),
                "{line}"
            );
        }
        // 64 levels of data are fine, 65 are not; unknown members (a 1.0 part's `kind`) are
        // ignored.
        let nested = |levels| (0..levels).fold(json!(1), |inner, _| json!([inner]));
        let message = |data| json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"data": data, "kind": "data"}]});
        assert!(parse(message(nested(64)), Generation::V1_0).is_ok());
        let refused = parse(message(nested(65)), Generation::V1_0).unwrap_err();
        assert_eq!(refused, "params.message.parts[0].data");
    }

    #[test]
    fn a_refusal_quotes_at_most_a_hundred_escaped_characters_of_what_was_sent() {
        let kind = format!("\u{1b}{}", "k".repeat(100_000));
        let part = json!({"kind": kind, "text": "x"});
        let message = json!({"messageId": "m", "role": "user", "parts": [part]});
        let err = Message::parse(message, Generation::V0_3, "params.message").unwrap_err();
        let said = err.message;
        assert!(said.len() < 300 && !said.contains('\u{1b}'), "{said}");
        assert!(said.contains("\\u{1b}kkk"), "{said}");
    }

    #[test]
    fn data_read_by_the_door_is_kept_as_sent_and_renders_in_both_generations() {
        let body = br#"{"params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[
            {"data": {"k": [1, 2.50]}}, {"data": "s"}, {"data": [{"a":1,"a":2}]}]}}}"#;
        let mut tree = crate::json::strict::from_request(body, &|_| true).unwrap();
        let sent = tree["params"]["message"].take();
        let mut bad = sent.clone();
        bad["parts"].as_array_mut().unwrap().truncate(2);
        let message = parse(bad, Generation::V1_0).unwrap();
        let Content::Data(kept) = &message.parts[0].content else {
            panic!("{message:?}")
        };
        assert_eq!(kept.get(), r#"{"k": [1, 2.50]}"#, "the text as sent");
        let new = raw::to_vec(&message.render(Generation::V1_0));
        assert!(
            String::from_utf8_lossy(&new).contains(r#"{"data":{"k": [1, 2.50]}}"#),
            "{}",
            String::from_utf8_lossy(&new)
        );
        let old = raw::expand(&message.render(Generation::V0_3));
        assert_eq!(
            old["parts"][0],
            json!({"kind": "data", "data": {"k": [1, 2.5]}})
        );
        assert_eq!(old["parts"][1], json!({"kind": "data", "data": "s"}));
        assert_eq!(
            parse(sent, Generation::V1_0).unwrap_err(),
            "params.message.parts[2].data",
            "a key twice inside data is refused, naming the part"
        );
    }
}
