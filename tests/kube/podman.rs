//! The review formation's emitted manifests played for real by `podman kube play` (Debian's
//! podman 4.3, as root, configured by tests/kube/containers.conf through `CONTAINERS_CONF`).
//!
//! Podman 4.3.1 mounts a Secret's `data` still base64-encoded, ignores `stringData`, and gives
//! the files mode 0644 whatever `defaultMode` says: a member rightly refuses such a directory.
//! The canonical manifests stay what a cluster gets; for podman alone, each member's `formation`
//! volume becomes a `hostPath` directory that this test lays out from the member's Secret
//! exactly as the kubelet would (decoded, 0400, owned by the pod's user), and the Secrets and
//! NetworkPolicies (which podman does not enforce) are left out of what is played. Podman names
//! a Deployment's pod `<name>-pod-0` and resolves pod names on a network of its own, so the
//! addresses in those directories name the pods.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::{Emitted, chmod, repo};
use crate::common::home::{Home, fresh_dir};
use crate::common::http::post;
use crate::common::skip::skipped;
use crate::common::wait::wait_for;

const TEST: &str = "podman_kube_play_runs_the_review_formation";
const MEMBERS: [&str; 3] = ["lead", "reviewer", "summarizer"];
/// The pods' user (the emitted `runAsUser`).
const POD_USER: u32 = 65532;

/// `podman ARGS` under the project's containers.conf; stdout, or why it failed.
fn podman(args: &[&str]) -> Result<String, String> {
    let out = Command::new("podman")
        .args(args)
        .env("CONTAINERS_CONF", repo().join("tests/kube/containers.conf"))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("podman: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "podman {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Everything this test made in podman, removed on drop: the pods, the network, the image.
struct Played {
    yaml: PathBuf,
    network: String,
    image: String,
}

impl Drop for Played {
    fn drop(&mut self) {
        let _ = podman(&["kube", "down", self.yaml.to_str().unwrap()]);
        for member in MEMBERS {
            for volume in ["state", "tmp"] {
                let _ = podman(&["volume", "rm", "-f", &format!("{member}-{volume}")]);
            }
        }
        let _ = podman(&["network", "rm", "-f", &self.network]);
        let _ = podman(&["rmi", "-f", &self.image]);
    }
}

/// Why podman cannot run here, if it cannot.
fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (the project's containers.conf is for rootful podman)".into());
    }
    podman(&["info"]).err()
}

/// The build context: the static mur (install.sh), a static busybox, the capsules, the
/// Containerfile, at the paths the Containerfile names.
fn context() -> Result<PathBuf, String> {
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists())
        .ok_or("no busybox (Debian: busybox-static)")?;
    let ldd = Command::new("ldd")
        .arg(busybox)
        .output()
        .map_err(|e| e.to_string())?;
    if ldd.status.success() {
        return Err(format!(
            "{} is not static (Debian: busybox-static)",
            busybox.display()
        ));
    }
    let ctx = fresh_dir("mur-kube-image");
    let prefix = ctx.join("target/image");
    let built = Command::new(repo().join("install.sh"))
        .arg(&prefix)
        .env(
            "CARGO_TARGET_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR"))
                .parent()
                .unwrap()
                .join("install-sh"),
        )
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("install.sh: {e}"))?;
    if !built.status.success() {
        return Err(format!(
            "install.sh failed: {}",
            String::from_utf8_lossy(&built.stderr)
        ));
    }
    std::fs::copy(busybox, prefix.join("bin/busybox")).map_err(|e| e.to_string())?;
    for member in MEMBERS {
        let dir = ctx.join("examples/review").join(member);
        std::fs::create_dir_all(&dir).unwrap();
        for file in ["murmur.json", "handler.sh"] {
            let from = repo().join("examples/review").join(member).join(file);
            std::fs::copy(&from, dir.join(file)).unwrap();
        }
    }
    std::fs::create_dir_all(ctx.join("examples/container")).unwrap();
    std::fs::copy(
        repo().join("examples/container/Containerfile.review"),
        ctx.join("examples/container/Containerfile.review"),
    )
    .unwrap();
    Ok(ctx)
}

/// Member `member`'s Secret as the kubelet would mount it, addresses naming the pods.
fn mounted(emitted: &Emitted, member: &str, root: &Path) -> PathBuf {
    let dir = root.join(member);
    std::fs::create_dir(&dir).unwrap();
    for (file, mut text) in emitted.secret_files(member) {
        if let Some(callee) = file.strip_prefix("address.") {
            text = format!("{callee}-pod-0:8080");
        }
        let path = dir.join(&file);
        std::fs::write(&path, text).unwrap();
        std::os::unix::fs::chown(&path, Some(POD_USER), Some(POD_USER)).unwrap();
        chmod(&path, 0o400);
    }
    std::os::unix::fs::chown(&dir, Some(POD_USER), Some(POD_USER)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

/// What podman plays: the Deployments, each `formation` volume a host directory, each emptyDir
/// named after its member, and no `ports` (podman 4.3 publishes each on the host, and all three
/// are 8080).
fn playable(emitted: &Emitted, dirs: &BTreeMap<&str, PathBuf>) -> String {
    let mut out = String::new();
    for doc in &emitted.docs {
        let mut doc = doc.clone();
        match doc["kind"].as_str().unwrap() {
            "Deployment" => {
                let name = doc["metadata"]["name"].as_str().unwrap().to_string();
                let volumes = doc["spec"]["template"]["spec"]["volumes"]
                    .as_array_mut()
                    .unwrap();
                let formation = volumes
                    .iter_mut()
                    .find(|v| v["name"] == "formation")
                    .unwrap();
                *formation = json!({"name": "formation", "hostPath": {
                    "path": dirs[name.as_str()], "type": "Directory"}});
                // Podman 4.3 makes an emptyDir a volume named as the pod's volume is, shared by
                // every pod that names one so: three members in one murmur home, each pruning
                // the others' records (pid 1 "started at another time") and task directories.
                for volume in volumes.iter_mut().filter(|v| v.get("emptyDir").is_some()) {
                    volume["name"] = json!(format!("{name}-{}", volume["name"].as_str().unwrap()));
                }
                let container = &mut doc["spec"]["template"]["spec"]["containers"][0];
                for mount in container["volumeMounts"].as_array_mut().unwrap() {
                    if mount["name"] != "formation" {
                        mount["name"] =
                            json!(format!("{name}-{}", mount["name"].as_str().unwrap()));
                    }
                }
                // Podman 4.3 publishes every containerPort on the host: three 8080s collide.
                container.as_object_mut().unwrap().remove("ports");
            }
            _ => continue,
        }
        out.push_str(&format!("---\n{doc}\n"));
    }
    out
}

/// The address of `container` on `network`, as the host reaches it.
fn ip_of(container: &str, network: &str) -> String {
    let inspect: Value = serde_json::from_str(&podman(&["inspect", container]).unwrap()).unwrap();
    let ip = inspect[0]["NetworkSettings"]["Networks"][network]["IPAddress"]
        .as_str()
        .unwrap_or_else(|| panic!("no address for {container}: {inspect}"));
    format!("{ip}:8080")
}

pub fn run_review() {
    if let Some(why) = unavailable() {
        skipped(TEST, &format!("podman cannot run here: {why}"));
        return;
    }
    let ctx = match context() {
        Ok(ctx) => ctx,
        Err(why) => {
            skipped(TEST, &format!("no image to play: {why}"));
            return;
        }
    };
    let tag = std::process::id();
    let image = format!("localhost/mur-review:test{tag}");
    let file = ctx.join("examples/container/Containerfile.review");
    podman(&[
        "build",
        "-q",
        "-f",
        file.to_str().unwrap(),
        "-t",
        &image,
        ctx.to_str().unwrap(),
    ])
    .unwrap();
    let home = Home::patient();
    let emitted = Emitted::of(&home, &repo().join("examples/review"), &["--image", &image]);
    let root = fresh_dir("mur-kube-podman");
    let dirs: BTreeMap<&str, PathBuf> = MEMBERS
        .iter()
        .map(|m| (*m, mounted(&emitted, m, &root)))
        .collect();
    let yaml = root.join("play.yaml");
    std::fs::write(&yaml, playable(&emitted, &dirs)).unwrap();
    let played = Played {
        yaml: yaml.clone(),
        network: format!("murk{tag}"),
        image: image.clone(),
    };
    podman(&["network", "create", &played.network]).unwrap();
    podman(&[
        "kube",
        "play",
        "--network",
        &played.network,
        yaml.to_str().unwrap(),
    ])
    .unwrap();

    // The lead's readiness probe, as the cluster would run it.
    let said = wait_for(Duration::from_secs(60), "the lead to be ready", || {
        podman(&["exec", "lead-pod-0-mur", "/bin/mur", "formation", "ready"]).ok()
    });
    assert!(said.contains("answers as 'reviewer'"), "{said}");
    let token = podman(&["exec", "lead-pod-0-mur", "/bin/mur", "token", "lead"]).unwrap();
    let lead = ip_of("lead-pod-0-mur", &played.network);
    let task = crate::common::formation::send_text("Please review THIS change. It is small.");
    let answer = post(&lead, Some(&format!("Bearer {}", token.trim())), &task);
    let text = answer.text();
    eprintln!("{TEST}: the lead answered: {text}");
    let logs = || {
        MEMBERS
            .iter()
            .map(|m| {
                let container = format!("{m}-pod-0-mur");
                let said = podman(&["exec", &container, "/bin/mur", "logs", m, "-n", "20"]);
                format!("{m}: {}", said.unwrap_or_else(|why| why))
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(answer.status, 200, "{text}\nthe members' logs:\n{}", logs());
    assert!(
        text.contains("review: 7 words, too loud") && text.contains("summary: Please"),
        "{text}\nthe members' logs:\n{}",
        logs()
    );
    // The lead's token for the reviewer: 401 at the summarizer's door; at the reviewer's, only
    // the call methods (403 for anything else).
    let to_reviewer = format!("Bearer {}", emitted.secret_files("lead")["token.reviewer"]);
    let probe = crate::common::formation::rpc("tasks/get", json!({"id": "x"}));
    let summarizer = ip_of("summarizer-pod-0-mur", &played.network);
    assert_eq!(post(&summarizer, Some(&to_reviewer), &probe).status, 401);
    let reviewer = ip_of("reviewer-pod-0-mur", &played.network);
    let stop = crate::common::formation::rpc("session/stop", json!({}));
    assert_eq!(post(&reviewer, Some(&to_reviewer), &stop).status, 403);

    podman(&["kube", "down", yaml.to_str().unwrap()]).unwrap();
    let left = podman(&["ps", "-a", "--format", "{{.Names}}"]).unwrap();
    let pods = podman(&["pod", "ps", "--format", "{{.Name}}"]).unwrap();
    for member in MEMBERS {
        assert!(!left.contains(&format!("{member}-pod-0")), "left: {left}");
        assert!(!pods.contains(&format!("{member}-pod-0")), "left: {pods}");
    }
    drop(played);
    let _ = std::fs::remove_dir_all(root);
    let _ = std::fs::remove_dir_all(ctx);
}
