//! A task as the door shows it, in either generation's shape.
//!
//! The engine ([`crate::session::tasks`]) owns tasks and their lifecycle; this module owns what a
//! task *is* on the wire: its states' spellings, its status message, its artifact and history.
//! A task started in one generation reads the same in the other, because nothing here keeps a
//! client's JSON as it was sent — only the validated [`Message`].

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::message::{Message, Part, Role};
use super::version::Generation;
use crate::id::TaskId;
use crate::json::object;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum State {
    Submitted,
    Working,
    Completed,
    Failed,
    Canceled,
    /// The handler asked a question (exit 10); a message naming the task continues it.
    InputRequired,
}

/// Every state, for reading a filter and for tests.
pub const STATES: [State; 6] = [
    State::Submitted,
    State::Working,
    State::Completed,
    State::Failed,
    State::Canceled,
    State::InputRequired,
];

impl State {
    pub fn wire(self, generation: Generation) -> &'static str {
        match (generation, self) {
            (Generation::V0_3, State::Submitted) => "submitted",
            (Generation::V0_3, State::Working) => "working",
            (Generation::V0_3, State::Completed) => "completed",
            (Generation::V0_3, State::Failed) => "failed",
            (Generation::V0_3, State::Canceled) => "canceled",
            (Generation::V0_3, State::InputRequired) => "input-required",
            (Generation::V1_0, State::Submitted) => "TASK_STATE_SUBMITTED",
            (Generation::V1_0, State::Working) => "TASK_STATE_WORKING",
            (Generation::V1_0, State::Completed) => "TASK_STATE_COMPLETED",
            (Generation::V1_0, State::Failed) => "TASK_STATE_FAILED",
            (Generation::V1_0, State::Canceled) => "TASK_STATE_CANCELED",
            (Generation::V1_0, State::InputRequired) => "TASK_STATE_INPUT_REQUIRED",
        }
    }

    /// The state's number in 1.0's `TaskState` enum (PROTO 187), which ProtoJSON lets a client
    /// send instead of the name. (0 is `TASK_STATE_UNSPECIFIED`; 7 `REJECTED` and 8
    /// `AUTH_REQUIRED` are states no task of this door enters.)
    pub fn number(self) -> i32 {
        match self {
            State::Submitted => 1,
            State::Working => 2,
            State::Completed => 3,
            State::Failed => 4,
            State::Canceled => 5,
            State::InputRequired => 6,
        }
    }

    /// The state a 1.0 filter names; `None` for any other text.
    pub fn from_wire(text: &str, generation: Generation) -> Option<Self> {
        STATES.into_iter().find(|s| s.wire(generation) == text)
    }

    /// Completed, failed or canceled: nothing more will happen to it.
    pub fn is_final(self) -> bool {
        matches!(self, State::Completed | State::Failed | State::Canceled)
    }

    /// Final, or waiting for the client: a blocking send answers once a task is here.
    pub fn is_settled(self) -> bool {
        self.is_final() || self == State::InputRequired
    }
}

/// One task's content.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Task {
    pub id: TaskId,
    pub context_id: String,
    pub state: State,
    /// The messages of every turn, oldest first, both roles (a question the handler asked is
    /// the agent's), each naming this task and its context.
    pub history: Vec<Message>,
    /// The answer's parts once completed; the question's while input is required; the text
    /// streamed so far while working.
    pub answer: Vec<Part>,
    /// What the status message says when there is no answer: why it failed or was canceled.
    pub note: Option<String>,
    /// When the status last changed (seconds since the epoch).
    pub updated: i64,
}

/// How much of a task a reader asked for.
#[derive(Debug, Clone, Copy)]
pub struct View {
    /// The most recent messages of `history` to show; `None` is all of them.
    pub history_length: Option<usize>,
    pub artifacts: bool,
}

impl View {
    pub const FULL: View = View {
        history_length: None,
        artifacts: true,
    };
}

impl Task {
    /// The agent's status message: the answer when completed, the question while input is
    /// required, else the note, if any.
    fn status_message(&self) -> Option<Message> {
        let parts = if matches!(self.state, State::Completed | State::InputRequired) {
            self.answer.clone()
        } else {
            vec![Part::text(self.note.clone()?)]
        };
        Some(Message {
            message_id: format!("msg_{}", self.id.hex()),
            role: Role::Agent,
            parts,
            context_id: Some(self.context_id.clone()),
            task_id: Some(self.id.to_string()),
            metadata: None,
        })
    }

    /// The id of task `task_id`'s one artifact, the answer (the same in a stream and a read).
    pub fn artifact_id(task_id: &str) -> String {
        format!("art_{}", task_id.strip_prefix("tsk_").unwrap_or(task_id))
    }

    /// The status message as it stands, to keep in `history` (the question of turn `turn`),
    /// with an id of its own.
    pub fn said(&self, turn: u32) -> Option<Message> {
        let mut message = self.status_message()?;
        message.message_id = format!("msg_{}_{turn}", self.id.hex());
        Some(message)
    }

    pub fn render(&self, generation: Generation, view: View) -> Value {
        let message = self.status_message();
        let status = status_json(self.state, message.as_ref(), self.updated, generation);
        let keep = view
            .history_length
            .unwrap_or(usize::MAX)
            .min(self.history.len());
        let history = self.history[self.history.len() - keep..]
            .iter()
            .map(|m| m.render(generation))
            .collect();
        let mut task = object([
            ("id", self.id.to_string().into()),
            ("contextId", self.context_id.clone().into()),
            ("status", status),
            ("history", Value::Array(history)),
        ]);
        if generation == Generation::V0_3 {
            task["kind"] = json!("task");
        }
        // The answer so far while working (what has streamed), the whole of it once completed.
        let answered = match self.state {
            State::Completed => true,
            State::Working => !self.answer.is_empty(),
            _ => false,
        };
        if view.artifacts && answered {
            let parts = self.shown_answer();
            let artifact = answer_json(self.id.as_str(), &parts, generation);
            task["artifacts"] = Value::Array(vec![artifact]);
        }
        task
    }
}

impl Task {
    /// The answer as readers see it. While the task works that is stdout so far, less one
    /// trailing newline: the rule the stored answer follows once the turn ends, so a read
    /// mid-way and the chunks that follow it ([`super::stream::Trail`]) add up to the final
    /// answer, byte for byte.
    fn shown_answer(&self) -> std::borrow::Cow<'_, [Part]> {
        use super::message::Content;
        match self.answer.first().map(|p| &p.content) {
            Some(Content::Text(text)) if self.state == State::Working && text.ends_with('\n') => {
                let mut parts = self.answer.clone();
                parts[0].content = Content::Text(text[..text.len() - 1].to_string());
                std::borrow::Cow::Owned(parts)
            }
            _ => std::borrow::Cow::Borrowed(&self.answer),
        }
    }
}

/// A task's status on the wire, as a read and a stream's status update both carry it.
pub fn status_json(
    state: State,
    message: Option<&Message>,
    updated: i64,
    generation: Generation,
) -> Value {
    let mut status = object([
        ("state", state.wire(generation).into()),
        ("timestamp", crate::time::format_rfc3339(updated).into()),
    ]);
    if let Some(message) = message {
        status["message"] = message.render(generation);
    }
    status
}

/// Task `task_id`'s one artifact, the answer (or a stream's piece of it), on the wire.
pub fn answer_json(task_id: &str, parts: &[Part], generation: Generation) -> Value {
    let parts = parts.iter().map(|p| p.render(generation)).collect();
    object([
        ("artifactId", Task::artifact_id(task_id).into()),
        ("name", "answer".into()),
        ("parts", Value::Array(parts)),
    ])
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn task(state: State) -> Task {
        let message = Message {
            message_id: "m1".into(),
            role: Role::User,
            parts: vec![Part::text("hi")],
            context_id: Some("ctx".into()),
            task_id: None,
            metadata: None,
        };
        Task {
            id: TaskId::parse("tsk_0199c4e2f1b7712a9d3e4f5061728394").unwrap(),
            context_id: "ctx".into(),
            state,
            history: vec![message.clone(), message],
            answer: vec![Part::text("hi")],
            note: (state != State::Completed).then(|| "why".into()),
            updated: 0,
        }
    }

    #[test]
    fn both_generations_spell_the_same_task() {
        let done = task(State::Completed);
        let old = done.render(Generation::V0_3, View::FULL);
        assert_eq!(old["kind"], "task");
        assert_eq!(old["status"]["state"], "completed");
        assert_eq!(old["status"]["message"]["role"], "agent");
        assert_eq!(
            old["artifacts"][0]["parts"][0],
            json!({"kind": "text", "text": "hi"})
        );
        let new = done.render(Generation::V1_0, View::FULL);
        assert!(new.get("kind").is_none());
        assert_eq!(new["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(new["status"]["message"]["role"], "ROLE_AGENT");
        assert_eq!(new["artifacts"][0]["parts"][0], json!({"text": "hi"}));
        assert_eq!(new["status"]["timestamp"], "1970-01-01T00:00:00Z");
        for state in STATES {
            assert_eq!(
                State::from_wire(state.wire(Generation::V1_0), Generation::V1_0),
                Some(state)
            );
        }
        assert_eq!(State::from_wire("completed", Generation::V1_0), None);
    }

    #[test]
    fn a_view_trims_history_and_artifacts() {
        let done = task(State::Completed);
        let short = done.render(
            Generation::V1_0,
            View {
                history_length: Some(1),
                artifacts: false,
            },
        );
        assert_eq!(short["history"].as_array().unwrap().len(), 1);
        assert!(short.get("artifacts").is_none());
        let none = done.render(
            Generation::V1_0,
            View {
                history_length: Some(0),
                artifacts: true,
            },
        );
        assert_eq!(none["history"], json!([]));
        let failed = task(State::Failed).render(Generation::V0_3, View::FULL);
        assert!(failed.get("artifacts").is_none());
        assert_eq!(failed["status"]["message"]["parts"][0]["text"], "why");
    }
}
