//! A member's Deployment: one replica of `mur run` on its capsule, joined from its mounted
//! Secret, hardened, probed.
//!
//! What every member's Deployment shares is the template `deployment.json` (data, not code: the
//! binary stays small); what is the member's own is filled in here.
//!
//! - The capsule is `/capsules/<member>/<manifest file>` in the image, bound to the digest it
//!   was admitted with (`--capsule-sha256`): an image whose capsule differs does not start.
//! - Readiness: a member that calls others is Ready only while `mur formation ready` passes —
//!   its own door answers, and every callee's door takes this member's token for it, which
//!   only that member of this formation can do. Any other member is Ready when its door serves
//!   its card. Liveness is the card.
//! - Uid 65532, non-root, read-only root filesystem, no privilege escalation, every capability
//!   dropped; writable state (the murmur home `/var/murmur/home`, task directories, the
//!   workdir `/var/murmur`, `/tmp`) on `emptyDir` volumes; the Secret at
//!   `/run/murmur/formation` (`MURMUR_FORMATION_DIR`), mode 0400.
//! - `Recreate`: a session's tasks live in its memory, so two copies of a member never serve
//!   at once.

use serde_json::{Value, json};

use super::objects::{metadata, secret_name, selector};
use super::{DOOR_PORT, Emit};
use crate::formation::admission::Admitted;

/// What every member's Deployment shares.
const TEMPLATE: &str = include_str!("deployment.json");
/// The handler's working directory (the `state` volume).
const STATE_MOUNT: &str = "/var/murmur";

/// The Deployment of member `member`.
pub fn deployment(emit: &Emit<'_>, member: &Admitted) -> Value {
    let mut doc: Value = serde_json::from_str(TEMPLATE).expect("the template is JSON");
    doc["metadata"] = metadata(emit, &member.name, &member.name);
    let spec = &mut doc["spec"];
    spec["selector"] = json!({"matchLabels": selector(emit, &member.name)});
    spec["template"]["metadata"] = json!({"labels": super::objects::labels(emit, &member.name)});
    let pod = &mut spec["template"]["spec"];
    pod["volumes"][0]["secret"]["secretName"] = secret_name(&member.name).into();
    let container = &mut pod["containers"][0];
    container["image"] = emit.options.image.as_str().into();
    container["args"] = args(emit, member).into();
    container["env"][1]["value"] = emit.material.id.as_str().into();
    let mut readiness = if member.callees.is_empty() {
        container["livenessProbe"].clone()
    } else {
        json!({"exec": {"command": ["/bin/mur", "formation", "ready"]}, "timeoutSeconds": 15})
    };
    readiness["periodSeconds"] = 5.into();
    container["readinessProbe"] = readiness;
    doc
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

#[cfg(test)]
mod tests {
    use crate::json::channel::env;

    /// The template names what the member reads by the names the member reads.
    #[test]
    fn the_template_is_json_and_matches_the_contract() {
        let doc: serde_json::Value = serde_json::from_str(super::TEMPLATE).unwrap();
        let container = &doc["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["env"][0]["name"], env::FORMATION_DIR);
        assert_eq!(container["env"][1]["name"], env::FORMATION_ID);
        assert_eq!(container["ports"][0]["containerPort"], super::DOOR_PORT);
        assert_eq!(
            container["volumeMounts"][1]["mountPath"],
            super::STATE_MOUNT
        );
        assert_eq!(
            doc["spec"]["template"]["spec"]["volumes"][0]["name"],
            "formation"
        );
    }
}
