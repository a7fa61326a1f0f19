//! The door's JSON-RPC methods of both A2A generations and the scopes that grant them: one table
//! for the door that answers them, the host tools that call them and the manifest that grants
//! them. A leaf (it imports nothing of the crate), so the manifest's check below
//! [`crate::a2a`] reads the same table the door does.
//!
//! Every method belongs to an [`Op`]; the twins of the two generations (`message/send` and
//! `SendMessage`) share one, and a scope grants an op, so a credential granted either name may
//! call both. `ListTasks` is a read, granted with `tasks/get`.

/// One A2A protocol generation: which method names, shapes and error forms apply (the
/// `A2A-Version` header that names one is [`crate::a2a::version`]'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// A2A 0.3: `message/send`, lowercase states, `kind` discriminators.
    V0_3,
    /// A2A 1.0: `SendMessage`, ProtoJSON (`TASK_STATE_*`, `ROLE_*`), errors carrying `ErrorInfo`.
    V1_0,
}

/// What a door method does, whichever generation names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Send,
    Stream,
    Get,
    List,
    Cancel,
    Subscribe,
    /// The push-notification config methods (which one: [`push_action`]): a scope of their own,
    /// any of their eight names granting all four; -32003 where `network.push` is off.
    PushConfig,
    ExtendedCard,
    /// `session/stop`: mur's own answer shape.
    Stop,
    /// `murmur.StopSession`: the original runtime's — cancel every live task and account for
    /// them, leaving the process to the caller's signal.
    StopSession,
    /// `murmur.WatchSession`: the original runtime's observer stream of the session's events;
    /// its own scope.
    Watch,
}

/// One JSON-RPC method the door knows.
#[derive(Debug)]
pub struct Method {
    pub name: &'static str,
    pub op: Op,
    /// The generation whose method set holds it; mur calls it with this generation's header.
    pub generation: Generation,
    /// mur's own methods are answered under either header.
    pub own: bool,
}

/// A2A 0.3: send a message, starting a task.
pub const MESSAGE_SEND: &str = "message/send";
/// A2A 0.3: send a message, and stream the task's events.
pub const MESSAGE_STREAM: &str = "message/stream";
/// A2A 0.3: read a task.
pub const TASKS_GET: &str = "tasks/get";
/// A2A 0.3: ask a task to end.
pub const TASKS_CANCEL: &str = "tasks/cancel";
/// A2A 0.3: the extended (authenticated) agent card.
pub const EXTENDED_CARD: &str = "agent/getAuthenticatedExtendedCard";
/// A2A 1.0's name for the extended card.
pub const EXTENDED_CARD_V1: &str = "GetExtendedAgentCard";
/// mur's own: end the session in order.
pub const SESSION_STOP: &str = "session/stop";
/// The original runtime's session method (it speaks only 1.0): cancel every live task and say
/// which; the process is ended by the signal its caller sends next.
pub const STOP_SESSION: &str = "murmur.StopSession";

const fn m(name: &'static str, op: Op, generation: Generation) -> Method {
    Method {
        name,
        op,
        generation,
        own: false,
    }
}

/// The original runtime's observer stream (1.0 only there).
pub const WATCH_SESSION: &str = "murmur.WatchSession";

/// mur's own methods: answered under either header, called with `generation`'s.
const fn own(name: &'static str, op: Op, generation: Generation) -> Method {
    Method {
        own: true,
        ..m(name, op, generation)
    }
}

const V03: Generation = Generation::V0_3;
const V10: Generation = Generation::V1_0;

/// Every method the door answers.
pub const METHODS: &[Method] = &[
    m(MESSAGE_SEND, Op::Send, V03),
    m(MESSAGE_STREAM, Op::Stream, V03),
    m(TASKS_GET, Op::Get, V03),
    m(TASKS_CANCEL, Op::Cancel, V03),
    m("tasks/resubscribe", Op::Subscribe, V03),
    m("tasks/pushNotificationConfig/set", Op::PushConfig, V03),
    m("tasks/pushNotificationConfig/get", Op::PushConfig, V03),
    m("tasks/pushNotificationConfig/list", Op::PushConfig, V03),
    m("tasks/pushNotificationConfig/delete", Op::PushConfig, V03),
    m(EXTENDED_CARD, Op::ExtendedCard, V03),
    m("SendMessage", Op::Send, V10),
    m("SendStreamingMessage", Op::Stream, V10),
    m("GetTask", Op::Get, V10),
    m("ListTasks", Op::List, V10),
    m("CancelTask", Op::Cancel, V10),
    m("SubscribeToTask", Op::Subscribe, V10),
    m("CreateTaskPushNotificationConfig", Op::PushConfig, V10),
    m("GetTaskPushNotificationConfig", Op::PushConfig, V10),
    m("ListTaskPushNotificationConfigs", Op::PushConfig, V10),
    m("DeleteTaskPushNotificationConfig", Op::PushConfig, V10),
    m(EXTENDED_CARD_V1, Op::ExtendedCard, V10),
    own(SESSION_STOP, Op::Stop, V03),
    own(STOP_SESSION, Op::StopSession, V10),
    own(WATCH_SESSION, Op::Watch, V10),
];

/// The method called `name`, if the door knows it.
pub fn method(name: &str) -> Option<&'static Method> {
    METHODS.iter().find(|m| m.name == name)
}

/// What a push-config method does to a task's configs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushAction {
    Set,
    Get,
    List,
    Delete,
}

/// What push-config method `method` does; `None` for any other method.
pub fn push_action(method: &Method) -> Option<PushAction> {
    let action = match method.name {
        "tasks/pushNotificationConfig/set" | "CreateTaskPushNotificationConfig" => PushAction::Set,
        "tasks/pushNotificationConfig/get" | "GetTaskPushNotificationConfig" => PushAction::Get,
        "tasks/pushNotificationConfig/list" | "ListTaskPushNotificationConfigs" => PushAction::List,
        "tasks/pushNotificationConfig/delete" | "DeleteTaskPushNotificationConfig" => {
            PushAction::Delete
        }
        _ => return None,
    };
    (method.op == Op::PushConfig).then_some(action)
}

/// The 1.0 names of `op`'s methods, joined, for a message telling a 0.3 caller what 1.0 calls it.
pub fn twin_names(op: Op) -> String {
    METHODS
        .iter()
        .filter(|m| m.op == op && m.generation == Generation::V1_0)
        .map(|m| m.name)
        .collect::<Vec<_>>()
        .join(" or ")
}

/// The grant an op needs: twins share one, and `ListTasks` is a read like `GetTask`. The four
/// push-config methods share one grant of their own: setting a webhook makes the session post
/// to it, which reading tasks does not. `Option` so a method may one day need none.
pub fn grant(op: Op) -> Option<Op> {
    match op {
        Op::List => Some(Op::Get),
        other => Some(other),
    }
}

/// Whether `scope` (a method name from a manifest or a token) grants `op`. `session/stop`
/// grants `murmur.StopSession` too — the lesser: it cancels tasks but ends nothing — and not
/// the other way round.
pub fn scope_grants(scope: &str, op: Op) -> bool {
    method(scope).is_some_and(|m| {
        let (held, needed) = (grant(m.op), grant(op));
        held.is_some()
            && (held == needed || (held == Some(Op::Stop) && needed == Some(Op::StopSession)))
    })
}

/// Whether `name` may be a scope: a door method that some grant covers.
pub fn is_scope(name: &str) -> bool {
    method(name).is_some_and(|m| grant(m.op).is_some())
}

/// The scope names a manifest may use, for error messages.
pub fn scope_names() -> Vec<&'static str> {
    METHODS
        .iter()
        .filter(|m| grant(m.op).is_some())
        .map(|m| m.name)
        .collect()
}

/// The operator token's scopes, one name a grant: the first 0.3 name of each grant (it grants
/// its 1.0 twin too, and the push-config methods one another), and the name of each 1.0 method
/// with no 0.3 twin, so it holds every method.
pub fn operator_scopes() -> Vec<&'static str> {
    let granted = |m: &Method| grant(m.op).is_some();
    let mut scopes: Vec<&'static str> = Vec::new();
    for m in METHODS.iter().filter(|m| granted(m)) {
        if !scopes.iter().any(|s| scope_grants(s, m.op)) {
            scopes.push(m.name);
        }
    }
    scopes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_of_either_generation_grants_its_twin_and_nothing_else() {
        assert!(scope_grants(MESSAGE_SEND, Op::Send));
        assert!(scope_grants("SendMessage", Op::Send));
        assert!(scope_grants(TASKS_GET, Op::List));
        assert!(scope_grants("ListTasks", Op::Get));
        assert!(scope_grants(SESSION_STOP, Op::StopSession));
        assert!(scope_grants(STOP_SESSION, Op::StopSession));
        assert!(
            !scope_grants(STOP_SESSION, Op::Stop),
            "the lesser grants less"
        );
        assert!(!scope_grants(MESSAGE_SEND, Op::Get));
        assert!(!scope_grants(TASKS_GET, Op::Cancel));
        assert!(scope_grants(
            "tasks/pushNotificationConfig/set",
            Op::PushConfig
        ));
        assert!(scope_grants(
            "ListTaskPushNotificationConfigs",
            Op::PushConfig
        ));
        assert!(!scope_grants("tasks/pushNotificationConfig/get", Op::Get));
        assert!(!scope_grants(TASKS_GET, Op::PushConfig));
        assert!(!scope_grants("nonsense", Op::Send));
        assert!(is_scope("GetTaskPushNotificationConfig"));
        assert!(is_scope("CancelTask"));
    }

    #[test]
    fn each_push_config_method_has_its_action_and_no_other_method_has_one() {
        let actions: Vec<_> = METHODS.iter().filter_map(push_action).collect();
        for action in [
            PushAction::Set,
            PushAction::Get,
            PushAction::List,
            PushAction::Delete,
        ] {
            assert_eq!(actions.iter().filter(|&&a| a == action).count(), 2);
        }
        assert_eq!(METHODS.iter().filter(|m| m.op == Op::PushConfig).count(), 8);
    }

    #[test]
    fn names_are_unique_and_the_operator_holds_every_grant() {
        // One name a grant, the 0.3 one.
        let expected = [
            MESSAGE_SEND,
            MESSAGE_STREAM,
            TASKS_GET,
            TASKS_CANCEL,
            "tasks/resubscribe",
            "tasks/pushNotificationConfig/set",
            EXTENDED_CARD,
            SESSION_STOP,
            WATCH_SESSION,
        ];
        assert_eq!(operator_scopes(), expected);
        for (i, a) in METHODS.iter().enumerate() {
            assert!(
                METHODS[i + 1..].iter().all(|b| b.name != a.name),
                "{}",
                a.name
            );
            if let Some(needed) = grant(a.op) {
                assert!(
                    operator_scopes().iter().any(|s| scope_grants(s, needed)),
                    "{}",
                    a.name
                );
            }
        }
    }
}
