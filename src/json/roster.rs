//! The formation roster, `roster.json`: who is in the team, which one takes the formation's
//! tasks, and who may call whom. Strict: unknown keys are refused, naming the key.

use serde::Deserialize;

use super::shape::{self, Field, Problems, Shape};

/// A roster as written; [`crate::formation::admission`] checks what serde cannot.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Roster {
    pub members: Vec<Member>,
    /// Who may call whom: `"all"`, a list of rules, or absent (nobody calls anybody).
    #[serde(default, deserialize_with = "reachability")]
    pub reachability: Reachability,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Member {
    pub name: String,
    /// A `murmur.json` path or its directory, relative to the roster's directory.
    pub capsule: String,
    #[serde(default)]
    pub entry: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Reachability {
    /// No member calls another.
    #[default]
    Nothing,
    /// Every member may call every member but itself and the entry member.
    All,
    /// Explicit edges.
    Rules(Vec<Rule>),
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub from: String,
    pub to: Vec<String>,
}

fn reachability<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Reachability, D::Error> {
    use serde::de::Error;
    match serde_json::Value::deserialize(deserializer)? {
        serde_json::Value::String(text) if text == "all" => Ok(Reachability::All),
        serde_json::Value::Array(rules) => serde_json::from_value(serde_json::Value::Array(rules))
            .map(Reachability::Rules)
            .map_err(|err| D::Error::custom(format!("reachability: {err}"))),
        other => Err(D::Error::custom(format!(
            "reachability: {other} is neither \"all\" nor a list of {{\"from\",\"to\":[…]}} rules"
        ))),
    }
}

/// What a roster's keys hold ([`crate::json::shape`]); the rules on their values are
/// admission's ([`crate::formation::admission`]).
pub const SHAPE: Shape = Shape::Object(&[
    Field::required(
        "members",
        Shape::List(&Shape::Object(&[
            Field::required("name", Shape::Text),
            Field::required("capsule", Shape::Text),
            Field::optional("entry", Shape::Flag),
        ])),
    ),
    Field::optional(
        "reachability",
        Shape::Either(&[
            Shape::Choice(&["all"]),
            Shape::List(&Shape::Object(&[
                Field::required("from", Shape::Text),
                Field::required("to", Shape::List(&Shape::Text)),
            ])),
        ]),
    ),
]);

impl Roster {
    /// Parse roster bytes; the `Err` names every problem with the roster's shape, each under
    /// its key path.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, String> {
        let mut value = shape::parse(bytes)?;
        let mut problems = Problems::default();
        shape::check(&mut value, &SHAPE, "", &mut problems);
        problems.into_result()?;
        serde_json::from_value(value).map_err(|err| err.to_string())
    }
}

#[cfg(test)]
mod tests;
