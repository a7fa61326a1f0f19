//! A member's Deployment: one replica of `mur run` on its capsule, joined from its mounted
//! Secret, hardened, probed.
//!
//! - The capsule is `/capsules/<member>/<manifest file>` in the image, bound to the digest it
//!   was admitted with (`--capsule-sha256`): an image whose capsule differs does not start.
//! - Readiness: a member that calls others is Ready only while `mur formation ready` passes —
//!   its own door answers, and every callee's door takes this member's token for it, which
//!   only that member of this formation can do. Any other member is Ready when its door serves
//!   its card. Liveness is the card.
//! - Non-root, read-only root filesystem, no privilege escalation, every capability dropped;
//!   writable state (the murmur home, task directories, `/tmp`) on `emptyDir` volumes.
//! - `Recreate`: a session's tasks live in its memory, so two copies of a member never serve
//!   at once.

use serde_json::{Value, json};

use super::objects::{metadata, secret_name, selector};
use super::{DOOR_PORT, Emit};
use crate::formation::admission::Admitted;
use crate::json::contract::env;

/// Where the member's Secret is mounted.
pub const FORMATION_MOUNT: &str = "/etc/murmur/formation";
/// The writable volume: the murmur home under it, and the handler's working directory.
const STATE_MOUNT: &str = "/var/murmur";
/// The user the member runs as (no name needed: the image has no `/etc/passwd`).
const USER: u32 = 65532;
/// Where the card is served, for the probes.
const CARD_PATH: &str = "/.well-known/agent-card.json";

/// The Deployment of member `member`.
pub fn deployment(emit: &Emit<'_>, member: &Admitted) -> Value {
    let labels = super::objects::labels(emit, &member.name);
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(emit, &member.name, &member.name),
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector(emit, &member.name)},
            "template": {
                "metadata": {"labels": labels},
                "spec": pod_spec(emit, member),
            },
        },
    })
}

fn pod_spec(emit: &Emit<'_>, member: &Admitted) -> Value {
    json!({
        "automountServiceAccountToken": false,
        "enableServiceLinks": false,
        // The session's own orderly end takes up to 20 s.
        "terminationGracePeriodSeconds": 30,
        "securityContext": {
            "runAsNonRoot": true,
            "runAsUser": USER,
            "runAsGroup": USER,
            "fsGroup": USER,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container(emit, member)],
        "volumes": [
            {"name": "formation", "secret": {
                "secretName": secret_name(&member.name),
                "defaultMode": 0o400,
                "optional": false,
            }},
            {"name": "state", "emptyDir": {}},
            {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
        ],
    })
}

fn container(emit: &Emit<'_>, member: &Admitted) -> Value {
    let card = json!({"httpGet": {"path": CARD_PATH, "port": "door"}});
    let mut readiness = if member.callees.is_empty() {
        card.clone()
    } else {
        json!({"exec": {"command": ["/bin/mur", "formation", "ready"]}, "timeoutSeconds": 15})
    };
    readiness["periodSeconds"] = json!(5);
    let mut liveness = card;
    liveness["periodSeconds"] = json!(10);
    liveness["timeoutSeconds"] = json!(5);
    liveness["failureThreshold"] = json!(3);
    json!({
        "name": "mur",
        "image": emit.options.image,
        "command": ["/bin/mur"],
        "args": args(emit, member),
        "env": [
            {"name": env::FORMATION_DIR, "value": FORMATION_MOUNT},
            {"name": env::FORMATION_ID, "value": emit.material.id},
            {"name": "MURMUR_HOME", "value": format!("{STATE_MOUNT}/home")},
            {"name": "HOME", "value": STATE_MOUNT},
            {"name": "PATH", "value": "/bin"},
        ],
        "ports": [{"name": "door", "containerPort": DOOR_PORT, "protocol": "TCP"}],
        "readinessProbe": readiness,
        "livenessProbe": liveness,
        "resources": {
            "requests": {"cpu": "50m", "memory": "64Mi"},
            "limits": {"cpu": "1", "memory": "256Mi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": false,
            "readOnlyRootFilesystem": true,
            "runAsNonRoot": true,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "formation", "mountPath": FORMATION_MOUNT, "readOnly": true},
            {"name": "state", "mountPath": STATE_MOUNT},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    })
}

/// `mur run` on the member's capsule in the image, bound to its admitted digest, on every
/// address at the door port, advertising its Service's URL.
fn args(emit: &Emit<'_>, member: &Admitted) -> Vec<String> {
    let file = member.manifest.file_name().map_or_else(
        || "murmur.json".into(),
        |f| f.to_string_lossy().into_owned(),
    );
    vec![
        "run".into(),
        format!("/capsules/{}/{file}", member.name),
        "--bind".into(),
        "0.0.0.0".into(),
        "--port".into(),
        DOOR_PORT.to_string(),
        "--capsule-sha256".into(),
        member.sha256.clone(),
        "--advertise-url".into(),
        format!("http://{}/", emit.address(&member.name)),
        "--workdir".into(),
        STATE_MOUNT.into(),
    ]
}
