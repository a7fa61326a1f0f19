//! A document's shape — its keys, and what kind of value each holds — checked before serde reads
//! it, so that a file a person wrote (a manifest, a roster) is refused with every problem at
//! once, each under its key path (`lifecycle.concurrency: expected a whole number, found a
//! string`), in that person's terms rather than serde's (`invalid type: integer 1, expected a
//! string at line 1 column 23`, and only the first).
//!
//! A shape is data ([`Shape`], [`Field`]): a file type declares one constant, and a section of
//! it is one [`Field`]. Checking also prunes: every value found wrong is removed from the tree,
//! so serde can still read the rest (with its defaults where a value went) and the rules serde
//! cannot express can still be checked on it, while [`Problems::covers`] keeps a rule from
//! repeating a problem the shape already reported.

use serde_json::{Map, Value};

/// What a value must be.
pub enum Shape {
    /// A string.
    Text,
    /// `true` or `false`.
    Flag,
    /// A whole number from 0 to the bound (the largest the field's type holds).
    Whole(u64),
    /// One of these strings.
    Choice(&'static [&'static str]),
    /// A list, each element of this shape.
    List(&'static Shape),
    /// An object with exactly these fields (none other).
    Object(&'static [Field]),
    /// This shape, or `null` (which means absent).
    OrNull(&'static Shape),
    /// The first of these shapes the value has the JSON type of (`"all"` or a list of rules);
    /// described together when it has none of them.
    Either(&'static [Shape]),
}

/// One key of an [`Shape::Object`].
pub struct Field {
    pub key: &'static str,
    pub shape: Shape,
    /// Whether the key must be present.
    pub required: bool,
}

impl Field {
    pub const fn required(key: &'static str, shape: Shape) -> Self {
        Self {
            key,
            shape,
            required: true,
        }
    }

    pub const fn optional(key: &'static str, shape: Shape) -> Self {
        Self {
            key,
            shape,
            required: false,
        }
    }
}

/// What is wrong with a document: `(key path, why)` pairs, in the order found.
#[derive(Debug, Default)]
pub struct Problems {
    found: Vec<(String, String)>,
    /// The paths of the values the shape removed: a later rule about one of them (or about a
    /// value inside or around it) would be the same problem twice.
    pruned: Vec<String>,
}

impl Problems {
    /// Note a problem with the value at `path`.
    pub fn add(&mut self, path: &str, why: impl Into<String>) {
        self.found.push((path.to_string(), why.into()));
    }

    /// Note a problem found by a rule over the typed document, unless the shape already found
    /// the value it is about wrong (a pruned value reads as its default).
    pub fn rule(&mut self, path: &str, why: impl Into<String>) {
        if !self.covers(path) {
            self.add(path, why);
        }
    }

    /// Whether the value at `path`, or one inside or around it, was pruned.
    pub fn covers(&self, path: &str) -> bool {
        self.pruned
            .iter()
            .any(|p| within(p, path) || within(path, p))
    }

    /// Whether a problem was noted about the value at `path` or one inside it.
    pub fn about(&self, path: &str) -> bool {
        self.found.iter().any(|(p, _)| within(path, p))
    }

    /// Every problem, one per line (`path: why`, or just `why` at the top), or `Ok` if none.
    pub fn into_result(self) -> Result<(), String> {
        if self.found.is_empty() {
            return Ok(());
        }
        // Grouped by section (the first key of the path), sections in the order they were first
        // found wrong — the shape's order, then the rules' — each keeping its own order.
        let section = |path: &str| path.split(['.', '[']).next().unwrap_or("").to_string();
        let mut sections: Vec<String> = Vec::new();
        for (path, _) in &self.found {
            if !sections.contains(&section(path)) {
                sections.push(section(path));
            }
        }
        let lines: Vec<String> = sections
            .iter()
            .flat_map(|s| self.found.iter().filter(move |(p, _)| section(p) == *s))
            .map(|(path, why)| match path.as_str() {
                "" => why.clone(),
                _ => format!("{path}: {why}"),
            })
            .collect();
        Err(match lines.as_slice() {
            [one] => one.clone(),
            many => format!("{} problems:\n  {}", many.len(), many.join("\n  ")),
        })
    }
}

/// Whether the key path `inner` is `outer` or a path inside it (`outer` empty: the document).
fn within(outer: &str, inner: &str) -> bool {
    inner
        .strip_prefix(outer)
        .is_some_and(|rest| outer.is_empty() || rest.is_empty() || rest.starts_with(['.', '[']))
}

/// Check `value` against `shape`, noting each problem under its path and removing each wrong
/// value (an unknown key, a value of the wrong kind; a list with a wrong element goes whole).
/// Returns whether `value` itself is right: `false` for an object missing a required field,
/// which is kept (and not marked pruned: its other fields may still be checked) — its parent
/// removes it; at the top, the caller decides whether the rest is worth reading.
pub fn check(value: &mut Value, shape: &Shape, path: &str, problems: &mut Problems) -> bool {
    // A shape of shapes checks as the one whose kind the value has, if any.
    let chosen = match shape {
        Shape::OrNull(inner) if !value.is_null() => Some(&**inner).filter(|s| same_kind(s, value)),
        Shape::Either(shapes) => shapes.iter().find(|s| same_kind(s, value)),
        _ => None,
    };
    if let Some(chosen) = chosen {
        return check(value, chosen, path, problems);
    }
    let kept = match (shape, &mut *value) {
        (Shape::OrNull(_), Value::Null) => true,
        (Shape::Text, Value::String(_)) | (Shape::Flag, Value::Bool(_)) => true,
        (Shape::Whole(max), Value::Number(n)) if n.as_u64().is_some_and(|n| n <= *max) => true,
        (Shape::Whole(max), Value::Number(n)) if n.as_u64().is_some() => {
            problems.add(path, format!("{n} is too large (at most {max})"));
            return prune(problems, path);
        }
        (Shape::Choice(choices), Value::String(s)) if choices.contains(&s.as_str()) => true,
        (Shape::Choice(choices), Value::String(s)) => {
            let why = format!(
                "'{}' is not one of {}",
                s.escape_debug(),
                choices.join(", ")
            );
            problems.add(path, why);
            return prune(problems, path);
        }
        (Shape::List(element), Value::Array(items)) => {
            let mut all = true;
            for (i, item) in items.iter_mut().enumerate() {
                all &= check(item, element, &format!("{path}[{i}]"), problems);
            }
            return all || prune(problems, path);
        }
        (Shape::Object(fields), Value::Object(map)) => return object(map, fields, path, problems),
        _ => false,
    };
    if !kept {
        let why = format!("expected {}, found {}", expected(shape), found(value));
        problems.add(path, why);
        return prune(problems, path);
    }
    true
}

/// Note `path` as pruned; always `false` (the value is not kept).
fn prune(problems: &mut Problems, path: &str) -> bool {
    problems.pruned.push(path.to_string());
    false
}

/// The fields of an object: unknown keys and missing required ones noted, wrong values removed.
/// Returns whether every required field is (still) there: serde could not read it otherwise.
fn object(
    map: &mut Map<String, Value>,
    fields: &[Field],
    path: &str,
    problems: &mut Problems,
) -> bool {
    // Unknown keys first, then the fields in the shape's order: a reader's order, not the
    // parser's (which sorts keys).
    let unknown: Vec<String> = map
        .keys()
        .filter(|key| !fields.iter().any(|f| f.key == key.as_str()))
        .cloned()
        .collect();
    if !unknown.is_empty() {
        let allowed: Vec<&str> = fields.iter().map(|f| f.key).collect();
        for key in unknown {
            let why = format!(
                "unknown field `{}` (the fields here: {})",
                key.escape_debug(),
                allowed.join(", ")
            );
            problems.add(path, why);
            prune(problems, &join(path, &key));
            map.remove(&key);
        }
    }
    for field in fields {
        let child = join(path, field.key);
        if let Some(value) = map.get_mut(field.key)
            && !check(value, &field.shape, &child, problems)
        {
            prune(problems, &child);
            map.remove(field.key);
        }
    }
    let mut whole = true;
    for field in fields.iter().filter(|f| f.required) {
        let child = join(path, field.key);
        if !map.contains_key(field.key) {
            whole = false;
            if !problems.covers(&child) {
                let why = format!("missing ({} is required)", expected(&field.shape));
                problems.add(&child, why);
                prune(problems, &child);
            }
        }
    }
    whole
}

fn join(path: &str, key: &str) -> String {
    match path {
        "" => key.to_string(),
        _ => format!("{path}.{key}"),
    }
}

/// Whether `value` has the JSON type `shape` wants (not whether it is right in every detail).
fn same_kind(shape: &Shape, value: &Value) -> bool {
    match shape {
        Shape::Text | Shape::Choice(_) => value.is_string(),
        Shape::Flag => value.is_boolean(),
        Shape::Whole(_) => value.is_number(),
        Shape::List(_) => value.is_array(),
        Shape::Object(_) => value.is_object(),
        Shape::OrNull(inner) => value.is_null() || same_kind(inner, value),
        Shape::Either(shapes) => shapes.iter().any(|s| same_kind(s, value)),
    }
}

/// What a shape wants, in a reader's words.
fn expected(shape: &Shape) -> String {
    match shape {
        Shape::Text => "a string".into(),
        Shape::Flag => "true or false".into(),
        Shape::Whole(_) => "a whole number".into(),
        Shape::Choice(choices) => format!("one of \"{}\"", choices.join("\", \"")),
        Shape::List(element) => format!("a list of {}", plural(element)),
        Shape::Object(_) => "an object".into(),
        Shape::OrNull(inner) => format!("{} or null", expected(inner)),
        Shape::Either(shapes) => shapes.iter().map(expected).collect::<Vec<_>>().join(" or "),
    }
}

fn plural(shape: &Shape) -> String {
    match shape {
        Shape::Text => "strings".into(),
        Shape::Object(_) => "objects".into(),
        other => format!("values each {}", expected(other)),
    }
}

/// What a value is, in a reader's words; short, whatever its size.
fn found(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => format!("the number {n}"),
        Value::String(_) => "a string".into(),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// Parse `bytes` as one JSON document (a key twice in an object is refused, as everywhere mur
/// reads JSON that decides something), the error in a reader's words: what is wrong, and where.
pub fn parse(bytes: &[u8]) -> Result<Value, String> {
    super::strict::from_slice(bytes).map_err(|err| {
        let text = err.to_string();
        let what = text.split(" at line ").next().unwrap_or(&text);
        match err.classify() {
            serde_json::error::Category::Eof => {
                format!("not valid JSON: it ends early (line {})", err.line())
            }
            _ => format!(
                "not valid JSON: {what} (line {}, column {})",
                err.line(),
                err.column()
            ),
        }
    })
}

#[cfg(test)]
mod tests;
