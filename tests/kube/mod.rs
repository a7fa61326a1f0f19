//! Scaffolding for tests/it/kubernetes.rs: emitting and reading the manifests, the schema
//! validator, and members run from their emitted configuration — each in a network namespace of
//! its own when this runs as root, else on loopback at distinct addresses.

pub mod podman;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::home::{Home, fresh_dir};
use crate::common::http::{http, post};
use crate::common::run::{MUR_DEADLINE, Output, mur_bin, run};
use crate::common::session::Session;
use crate::common::skip::skipped;
use crate::common::wait::wait_for;

/// The Kubernetes minors the manifests are validated for: the oldest the validator knows, and
/// the current one.
pub const KUBERNETES_VERSIONS: [&str; 2] = ["1.25.0", "1.37.0"];
/// The door port every member listens on (the emitted one).
const PORT: u16 = 8080;
/// How long members have to become ready once all are started.
const READY_WITHIN: Duration = Duration::from_secs(30);

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One `--emit kubernetes` stream: its text and its documents.
pub struct Emitted {
    pub text: String,
    pub docs: Vec<Value>,
    /// The roster's directory (the capsules are found from it).
    pub project: PathBuf,
}

impl Emitted {
    /// `mur formation ROSTER --emit kubernetes --image registry.example/mur-review:1 EXTRA…`.
    #[track_caller]
    pub fn of(home: &Home, roster: &Path, extra: &[&str]) -> Self {
        let emit = [
            "formation",
            roster.to_str().unwrap(),
            "--emit",
            "kubernetes",
            "--image",
            "registry.example/mur-review:1",
        ];
        let out = home.mur(&[&emit[..], extra].concat());
        out.expect_code(0);
        let docs = out
            .stdout
            .split("---\n")
            .filter(|d| !d.trim().is_empty())
            .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d}")))
            .collect();
        Self {
            text: out.stdout,
            docs,
            project: roster.to_path_buf(),
        }
    }

    #[track_caller]
    pub fn object(&self, kind: &str, name: &str) -> &Value {
        self.docs
            .iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    }

    pub fn formation_id(&self) -> String {
        self.docs[0]["metadata"]["labels"]["murmur.nexus/formation"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Member `member`'s Secret, decoded: file name → text.
    pub fn secret_files(&self, member: &str) -> BTreeMap<String, String> {
        let secret = self.object("Secret", &format!("{member}-formation"));
        secret["data"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| {
                let b64 = v.as_str().unwrap().replace('+', "-").replace('/', "_");
                let bytes = crate::common::tokens::b64_decode(b64.trim_end_matches('=')).unwrap();
                (k.clone(), String::from_utf8(bytes).unwrap())
            })
            .collect()
    }

    /// Member `member`'s container.
    pub fn container(&self, member: &str) -> &Value {
        &self.object("Deployment", member)["spec"]["template"]["spec"]["containers"][0]
    }
}

pub fn sha256_of(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_string()
}

/// A project of five members a–e (a the entry, every door authenticated, every capsule
/// accepting peer tasks) whose reachability is `all`, `none`, or `rules` (a → b, c; b → c, d;
/// e called by nobody). Its directory.
pub fn five_members(kind: &str) -> PathBuf {
    let project = fresh_dir("mur-kube-five");
    for name in ["a", "b", "c", "d", "e"] {
        let dir = project.join(name);
        std::fs::create_dir(&dir).unwrap();
        let manifest = crate::common::formation::manifest(name, true, true);
        std::fs::write(dir.join("murmur.json"), manifest.to_string()).unwrap();
        std::fs::write(dir.join("handler.sh"), "#!/bin/sh\ncat\n").unwrap();
        chmod(&dir.join("handler.sh"), 0o755);
    }
    let reachability = match kind {
        "all" => json!("all"),
        "none" => json!([]),
        _ => json!([{"from": "a", "to": ["b", "c"]}, {"from": "b", "to": ["c", "d"]}]),
    };
    let members: Vec<Value> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|n| json!({"name": n, "capsule": n, "entry": *n == "a"}))
        .collect();
    let roster = json!({"members": members, "reachability": reachability});
    std::fs::write(project.join("roster.json"), roster.to_string()).unwrap();
    project
}

/// `kubernetes-validate`, installed by tests/kube/setup.sh on first use; `None` (the skip
/// recorded for `test`) when it cannot be.
pub fn validator(test: &str) -> Option<PathBuf> {
    let bin = repo().join("target/kubernetes-validate/bin/kubernetes-validate");
    if !bin.exists() {
        let _ = Command::new(repo().join("tests/kube/setup.sh"))
            .stdin(Stdio::null())
            .status();
    }
    if bin.exists() {
        Some(bin)
    } else {
        skipped(
            test,
            "kubernetes-validate (PyPI) could not be installed under target/",
        );
        None
    }
}

/// Validate `file` strictly for Kubernetes `version`; the validator's words when it refuses.
pub fn validate(validator: &Path, file: &Path, version: &str) -> Result<(), String> {
    let out = Command::new(validator)
        .args(["--strict", "--quiet", "-k", version])
        .arg(file)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

pub fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Replace a read-only file's text, keeping its mode.
pub fn rewrite(path: &Path, text: &str) {
    let mode = std::fs::metadata(path).unwrap().permissions().mode();
    chmod(path, 0o600);
    std::fs::write(path, text).unwrap();
    chmod(path, mode);
}

// ---------------------------------------------------------------------------------------------
// Where members run
// ---------------------------------------------------------------------------------------------

/// Where each member runs: its address and, under root, its network namespace; the namespaces
/// are removed on drop.
pub struct Places {
    by_name: BTreeMap<String, (Option<String>, String)>,
    namespaces: Vec<String>,
}

const MEMBERS: [&str; 3] = ["lead", "reviewer", "summarizer"];

impl Places {
    /// Every member on loopback, at an address of its own.
    pub fn loopback() -> Self {
        let net = std::process::id() % 200 + 1;
        let by_name = MEMBERS
            .iter()
            .enumerate()
            .map(|(i, m)| (m.to_string(), (None, format!("127.77.{net}.{}", i + 2))))
            .collect();
        Self {
            by_name,
            namespaces: Vec::new(),
        }
    }

    /// A namespace per member, bridged in a hub namespace, with one veth into this one.
    fn netns() -> Result<Self, String> {
        let tag = std::process::id();
        let subnet = format!("10.213.{}", tag % 250);
        let hub = format!("murk{tag}h");
        let mut places = Self {
            by_name: BTreeMap::new(),
            namespaces: vec![hub.clone()],
        };
        ip(&["netns", "add", &hub])?;
        ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &hub, "link", "set", "br0", "up"])?;
        let host = format!("mk{tag}");
        ip(&[
            "link", "add", &host, "type", "veth", "peer", "name", "up0", "netns", &hub,
        ])?;
        ip(&["-n", &hub, "link", "set", "up0", "master", "br0", "up"])?;
        ip(&["addr", "add", &format!("{subnet}.1/24"), "dev", &host])?;
        ip(&["link", "set", &host, "up"])?;
        for (i, member) in MEMBERS.iter().enumerate() {
            let ns = format!("murk{tag}{i}");
            places.namespaces.push(ns.clone());
            ip(&["netns", "add", &ns])?;
            let port = format!("p{i}");
            ip(&[
                "-n", &hub, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns",
                &ns,
            ])?;
            ip(&["-n", &hub, "link", "set", &port, "master", "br0", "up"])?;
            let address = format!("{subnet}.{}", i + 2);
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{address}/24"),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            places
                .by_name
                .insert(member.to_string(), (Some(ns), address));
        }
        Ok(places)
    }

    pub fn address(&self, member: &str) -> String {
        format!("{}:{PORT}", self.by_name[member].1)
    }

    /// A command running `mur ARGS` where `member` runs, with `HOME` the test's and `env`.
    fn mur(&self, home: &Home, member: &str, args: &[String], env: &[(&str, String)]) -> Command {
        let mut command = match &self.by_name[member].0 {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, mur_bin()]);
                c
            }
            None => Command::new(mur_bin()),
        };
        command
            .args(args)
            .env_clear()
            .env("HOME", home.path())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LC_ALL", "C")
            .current_dir(home.path())
            .stdin(Stdio::null());
        for (k, v) in env {
            command.env(k, v);
        }
        command
    }
}

impl Drop for Places {
    fn drop(&mut self) {
        // The host's veth goes with its peer in the hub.
        for ns in self.namespaces.iter().rev() {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Network namespaces when this runs as root and `ip netns` works; else loopback, said loudly.
pub fn places(test: &str) -> Places {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let why = if root {
        match Places::netns() {
            Ok(places) => {
                eprintln!("{test}: members in network namespaces of their own, bridged");
                return places;
            }
            Err(why) => why,
        }
    } else {
        "not root".to_string()
    };
    skipped(
        test,
        &format!(
            "network namespaces unavailable ({why}): members ran on loopback at distinct addresses instead"
        ),
    );
    Places::loopback()
}

// ---------------------------------------------------------------------------------------------
// A member from its emitted configuration
// ---------------------------------------------------------------------------------------------

/// One member's mounted directory, written from its Secret as a Secret volume lays it out
/// (mode 0400 in a 0700 directory), the peers' addresses where the test put them.
pub struct Member {
    pub name: String,
    pub dir: PathBuf,
    workdir: PathBuf,
}

impl Member {
    pub fn write(emitted: &Emitted, name: &str, places: &Places) -> Self {
        let root = fresh_dir("mur-kube-member");
        let dir = root.join("formation");
        std::fs::create_dir(&dir).unwrap();
        for (file, mut text) in emitted.secret_files(name) {
            if let Some(callee) = file.strip_prefix("address.") {
                text = places.address(callee);
            }
            std::fs::write(dir.join(&file), text).unwrap();
            chmod(&dir.join(&file), 0o400);
        }
        chmod(&dir, 0o700);
        let workdir = root.join("work");
        std::fs::create_dir(&workdir).unwrap();
        Self {
            name: name.to_string(),
            dir,
            workdir,
        }
    }

    /// The Deployment's command line and environment, made to run here: the capsule from the
    /// roster's directory for `/capsules/<member>/`, this member's address and workdir, `--json`.
    pub fn command(&self, home: &Home, places: &Places, emitted: &Emitted) -> Command {
        let container = emitted.container(&self.name);
        assert_eq!(container["command"], json!(["/bin/mur"]));
        let mut args: Vec<String> = container["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        let capsules = format!("/capsules/{}/", self.name);
        let here = emitted.project.join(&self.name);
        args[1] = args[1].replace(&capsules, &format!("{}/", here.display()));
        let (bind, _) = places
            .address(&self.name)
            .split_once(':')
            .map(|(a, p)| (a.to_string(), p.to_string()))
            .unwrap();
        for (flag, value) in [
            ("--bind", bind),
            ("--workdir", self.workdir.display().to_string()),
        ] {
            let at = args.iter().position(|a| a == flag).unwrap();
            args[at + 1] = value;
        }
        args.push("--json".into());
        let mut env = Vec::new();
        for var in container["env"].as_array().unwrap() {
            let name = var["name"].as_str().unwrap();
            match name {
                "MURMUR_FORMATION_DIR" => env.push((name, self.dir.display().to_string())),
                "MURMUR_FORMATION_ID" => {
                    env.push((name, var["value"].as_str().unwrap().to_string()))
                }
                _ => {}
            }
        }
        places.mur(home, &self.name, &args, &env)
    }

    /// `mur formation ready` as the lead's readiness probe runs it, where the member runs.
    pub fn ready(&self, home: &Home, places: &Places) -> Output {
        let args = [
            "formation".to_string(),
            "ready".into(),
            "--formation-dir".into(),
            self.dir.display().to_string(),
            "--door".into(),
            places.address(&self.name),
        ];
        run(places.mur(home, &self.name, &args, &[]), MUR_DEADLINE)
    }
}

/// The review formation run from its emitted configuration: the lead unready until both
/// peers answer as themselves, its task answered through them, a token for one member refused
/// at another's door, and the lead unready again once a callee goes away.
pub fn run_review(home: &Home, emitted: &Emitted, places: &Places) {
    let members: BTreeMap<&str, Member> = MEMBERS
        .iter()
        .map(|m| (*m, Member::write(emitted, m, places)))
        .collect();
    let lead = Session::spawn(members["lead"].command(home, places, emitted));
    let out = members["lead"].ready(home, places);
    out.expect_code(1);
    assert!(
        out.stderr.contains("reviewer at") && out.stderr.contains("summarizer at"),
        "{}",
        out.stderr
    );
    let mut reviewer = Session::spawn(members["reviewer"].command(home, places, emitted));
    let summarizer = Session::spawn(members["summarizer"].command(home, places, emitted));
    let said = wait_for(READY_WITHIN, "the lead to be ready", || {
        let out = members["lead"].ready(home, places);
        (out.code() == Some(0)).then_some(out.stdout)
    });
    assert!(
        said.contains("reviewer at") && said.contains("answers as 'reviewer'"),
        "{said}"
    );

    let record = home.record(&lead.id);
    assert!(
        record.get("formation_launcher").is_none_or(Value::is_null),
        "{record}"
    );
    assert_ne!(record["formation_lifeline"], true, "{record}");
    assert_eq!(record["formation_id"], json!(emitted.formation_id()));
    let operator = format!("Bearer {}", record["door_token"].as_str().unwrap());
    let task = crate::common::formation::send_text("Please review THIS change. It is small.");
    let answer = post(&places.address("lead"), Some(&operator), &task);
    let text = answer.text();
    assert_eq!(answer.status, 200, "{text}");
    assert!(
        text.contains("review: 7 words, too loud")
            && text.contains("summary: Please review THIS change"),
        "{text}"
    );
    // The lead's token for the reviewer opens no other door.
    let token = emitted.secret_files("lead")["token.reviewer"].clone();
    let body = crate::common::formation::rpc("tasks/get", json!({"id": "x"}));
    let refused = http(
        &places.address("summarizer"),
        "POST",
        "/",
        Some(&token),
        body.to_string().as_bytes(),
    )
    .unwrap();
    assert_eq!(refused.status, 401, "{}", refused.text());
    let took = http(
        &places.address("reviewer"),
        "POST",
        "/",
        Some(&token),
        body.to_string().as_bytes(),
    )
    .unwrap();
    assert_eq!(took.status, 200, "{}", took.text());
    reviewer.signal(libc::SIGTERM);
    reviewer.wait_exit(Duration::from_secs(30));
    let out = members["lead"].ready(home, places);
    out.expect_code(1);
    assert!(out.stderr.contains("reviewer at"), "{}", out.stderr);
    assert!(!out.stderr.contains("summarizer at"), "{}", out.stderr);
    drop(summarizer);
    drop(lead);
}
