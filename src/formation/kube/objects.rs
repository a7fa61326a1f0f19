//! The Secret, Service and NetworkPolicy of one member, and the labels every object carries.

use serde_json::{Map, Value, json};

use super::{DOOR_PORT, Emit};
use crate::formation::admission::Admitted;
use crate::json::channel::files;

/// The label naming the formation id: with the member's name, it selects exactly one member's
/// pods; alone, the whole formation.
pub const FORMATION_LABEL: &str = "murmur.nexus/formation";
/// The label naming the member.
pub const NAME_LABEL: &str = "app.kubernetes.io/name";

/// What selects member `name`'s pods: the formation id and the member name.
pub fn selector(emit: &Emit<'_>, name: &str) -> Value {
    let mut labels = Map::new();
    labels.insert(FORMATION_LABEL.into(), emit.material.id.as_str().into());
    labels.insert(NAME_LABEL.into(), name.into());
    Value::Object(labels)
}

/// Every object's labels: the selector's, the formation's name, and who made it.
pub fn labels(emit: &Emit<'_>, name: &str) -> Value {
    let mut labels = selector(emit, name);
    labels["app.kubernetes.io/part-of"] = emit.part_of.as_str().into();
    labels["app.kubernetes.io/component"] = "formation-member".into();
    labels["app.kubernetes.io/managed-by"] = "mur".into();
    labels
}

/// An object's `metadata`: its name, the namespace if one was given, the labels.
pub fn metadata(emit: &Emit<'_>, object: &str, member: &str) -> Value {
    let mut meta = json!({"name": object, "labels": labels(emit, member)});
    if let Some(ns) = &emit.options.namespace {
        meta["namespace"] = ns.as_str().into();
    }
    meta
}

/// The name of member `member`'s Secret.
pub fn secret_name(member: &str) -> String {
    format!("{member}-formation")
}

/// The Secret member `member`'s pod mounts: exactly what its two channel lines would carry —
/// formation id, name, door key, one token and one address per callee — each as one key.
pub fn secret(emit: &Emit<'_>, member: &Admitted) -> Value {
    let mut data = Map::new();
    let mut put = |key: String, text: &str| {
        data.insert(key, crate::b64::encode_standard(text.as_bytes()).into());
    };
    put(files::FORMATION_ID.into(), emit.material.id.as_str());
    put(files::MEMBER.into(), &member.name);
    put(
        files::DOOR_KEY.into(),
        emit.material.door_key_text(&member.name).expose(),
    );
    for call in emit.material.calls(member) {
        put(
            format!("{}{}", files::TOKEN_PREFIX, call.name),
            call.token.expose(),
        );
        put(
            format!("{}{}", files::ADDRESS_PREFIX, call.name),
            &emit.address(&call.name),
        );
    }
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata(emit, &secret_name(&member.name), &member.name),
        "type": "Opaque",
        "immutable": true,
        "data": data,
    })
}

/// The Service named after the member: its door, at the same port, by that one member's pods.
pub fn service(emit: &Emit<'_>, member: &Admitted) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(emit, &member.name, &member.name),
        "spec": {
            "selector": selector(emit, &member.name),
            "ports": [{"name": "door", "port": DOOR_PORT, "targetPort": "door", "protocol": "TCP"}],
        },
    })
}

/// Who may reach member `member`'s door: the entry member from anywhere (it takes the
/// formation's tasks); any other only from the members the roster lets call it — none at all
/// for a member nobody calls. Egress is not restricted (a member calls through Services and
/// DNS; the tokens decide what it may ask).
pub fn network_policy(emit: &Emit<'_>, member: &Admitted) -> Value {
    let port = json!([{"port": DOOR_PORT, "protocol": "TCP"}]);
    let callers: Vec<Value> = emit
        .formation
        .members
        .iter()
        .filter(|m| m.callees.contains(&member.name))
        .map(|m| json!({"podSelector": {"matchLabels": selector(emit, &m.name)}}))
        .collect();
    let ingress = if member.entry {
        json!([{"ports": port}])
    } else if callers.is_empty() {
        json!([])
    } else {
        json!([{"from": callers, "ports": port}])
    };
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(emit, &member.name, &member.name),
        "spec": {
            "podSelector": {"matchLabels": selector(emit, &member.name)},
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    })
}
