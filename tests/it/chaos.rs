//! Chaos (the "prove it" issue): formations and sessions struck by a random signal at a random
//! moment, again and again, and checked for leftovers after each strike.
//!
//! Short CI variant (20 iterations):
//!     cargo test --test it chaos::
//! Full run (200 iterations, release build for speed):
//!     MUR_CHAOS_ITERATIONS=200 cargo test --release --test it chaos:: -- --nocapture
//! Replay a run's choices (its seed is printed at the start and in the summary line):
//!     MUR_CHAOS_SEED=<seed> MUR_CHAOS_ITERATIONS=<n> cargo test --test it chaos:: -- --nocapture
//! Moments are real time, so a replay repeats every iteration's plan (shape, victim, signal,
//! delay), not the exact interleaving it met.
//!
//! Each iteration has a `HOME` of its own and either launches a three-member formation (the
//! entry `lead` calls `reviewer` and `summarizer`; served, or with `--task`; handlers sleep a
//! little so there is time to strike) or runs one `mur run --task` whose handler is in flight.
//! It picks a victim — the launcher (or the session), the entry member, a peer, or a handler
//! (whose pid the handler writes to a file) — a signal (TERM, INT, HUP, KILL, or STOP then CONT
//! after 0–500 ms) and a moment (before readiness, or 0–300 ms after it; for a handler, after
//! it started), and strikes. Then everything settles: the launcher or session ends on its own
//! (a `--task` always does), or is sent SIGTERM when nothing ended it (a served formation whose
//! launcher and entry survived). After one `mur ps --json`:
//!
//! 1. no process of the iteration is left: none whose environment holds the iteration's `HOME`
//!    (launcher, members, handlers and whatever they started);
//! 2. `mur ps` lists nothing, says it pruned whatever records were left (a SIGKILLed session's
//!    or member's), and `~/.murmur/running` holds no `.json` or `.control` file afterwards;
//! 3. no record was removed while its process was alive, from a sampler that lists
//!    `~/.murmur/running` every few milliseconds from the spawn to the end (see [`Sampler`]);
//! 4. every `~/.murmur/formations/*/` directory holds its `formation.json` marker.
//!
//! Sometimes a `mur ps` runs while the strike lands (always worth it while a member is
//! stopped: a stopped session's record must be kept), and sometimes the home holds a dozen
//! ended formation directories, so the launcher is pruning them when it is struck.
//!
//! The test makes itself a child subreaper, so orphans (members of a SIGKILLed launcher,
//! handlers of a SIGKILLed session) become its children and are reaped, never left as zombies.

use crate::common;

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{
    formation::{FormationFixture, manifest},
    process::{alive, children_of, cmdline, environ, processes_with_env, start_token},
    run::{Drain, drain, mur_bin},
};
use serde_json::{Value, json};

/// Iterations when `MUR_CHAOS_ITERATIONS` is not set: the short CI variant.
const DEFAULT_ITERATIONS: usize = 20;
/// The longest anything may take to end once it should (the launcher, its members, `mur ps`).
const SETTLE: Duration = Duration::from_secs(30);
/// How long a launch that nothing struck may take to print its readiness line.
const READY_WITHIN: Duration = Duration::from_secs(20);
/// How long a served formation is left to end by itself before the test sends SIGTERM.
const SERVED_LINGER: Duration = Duration::from_millis(300);
/// How long the test looks for a victim (a member's process, a handler's pid file).
const FIND_WITHIN: Duration = Duration::from_secs(5);
/// A session removes its own record near its end (then it may still finish writing answers, for
/// up to 2 s); once it has, it must be gone within this.
const RECORD_GONE_GRACE: Duration = Duration::from_secs(5);
/// A pid no process can hold (`PID_MAX_LIMIT`): the launcher of the stale formation dirs.
const NO_PID: u32 = 4_194_304;

// ---------------------------------------------------------------------------------------------
// The test
// ---------------------------------------------------------------------------------------------

#[test]
fn formations_and_sessions_leave_nothing_behind_whatever_is_struck_and_when() {
    // As a subreaper it inherits the orphans of everything it strikes and reaps them: alone, or
    // it would inherit and reap other tests' processes too.
    if !common::alone::own_process(
        "chaos::formations_and_sessions_leave_nothing_behind_whatever_is_struck_and_when",
    ) {
        return;
    }
    let iterations = match std::env::var("MUR_CHAOS_ITERATIONS") {
        Ok(n) => n
            .trim()
            .parse::<usize>()
            .unwrap_or_else(|_| panic!("MUR_CHAOS_ITERATIONS={n}: not a number")),
        Err(_) => DEFAULT_ITERATIONS,
    };
    let seed = match std::env::var("MUR_CHAOS_SEED") {
        Ok(s) => parse_seed(&s).unwrap_or_else(|| panic!("MUR_CHAOS_SEED={s}: not a number")),
        Err(_) => {
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64;
            nanos ^ (u64::from(std::process::id()) << 32)
        }
    };
    println!("chaos: seed {seed}, {iterations} iterations (replay: MUR_CHAOS_SEED={seed})");
    common::process::become_subreaper();

    let mut failures: Vec<String> = Vec::new();
    let mut failed_iterations = 0;
    let began = Instant::now();
    for i in 0..iterations {
        let mut rng = Rng::new(seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let plan = Plan::draw(&mut rng);
        let at = Instant::now();
        let found = Iteration::run(&plan);
        let verdict = if found.failures.is_empty() {
            "ok"
        } else {
            failed_iterations += 1;
            "FAILED"
        };
        println!(
            "chaos[{i}] {plan} -> {} ({:.2}s) {verdict}",
            found.outcome,
            at.elapsed().as_secs_f64()
        );
        for note in &found.notes {
            println!("    note: {note}");
        }
        for failure in &found.failures {
            println!("    FAIL: {failure}");
            failures.push(format!("iteration {i} [{plan}]: {failure}"));
        }
        if !found.failures.is_empty() {
            println!("    launcher stderr: {}", found.stderr.trim_end());
        }
    }
    let summary = format!(
        "chaos: {iterations} iterations, {} failures, seed {seed}",
        failures.len()
    );
    println!(
        "{summary} ({failed_iterations} iterations failed, {:.1}s)",
        began.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{summary}\n{}", failures.join("\n"));
}

fn parse_seed(text: &str) -> Option<u64> {
    let text = text.trim();
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

// ---------------------------------------------------------------------------------------------
// Randomness: xorshift64, seeded per iteration from the run's seed
// ---------------------------------------------------------------------------------------------

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        // splitmix64 once, so nearby seeds give unrelated streams; xorshift needs a non-zero state.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn percent(&mut self, p: u64) -> bool {
        self.below(100) < p
    }

    /// Uniform in `0..=max_ms` milliseconds.
    fn ms(&mut self, max_ms: u64) -> Duration {
        Duration::from_millis(self.below(max_ms + 1))
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

// ---------------------------------------------------------------------------------------------
// What an iteration does
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// `mur formation --task`: ends by itself once the entry's task ends.
    FormationTask,
    /// `mur formation` serving; with `send_task`, one task sent to the entry's door.
    FormationServed { send_task: bool },
    /// `mur run --task`: one session, its handler in flight.
    RunTask,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Victim {
    /// The formation's launcher, or the `mur run` session.
    Launcher,
    Entry,
    Peer(&'static str),
    /// The handler of this member (of the session, for `mur run`).
    Handler(&'static str),
}

#[derive(Clone, Copy, Debug)]
enum Strike {
    Signal(i32),
    /// SIGSTOP, then SIGCONT this much later.
    StopCont(Duration),
}

#[derive(Clone, Copy, Debug)]
enum Moment {
    /// This long after the spawn (the launcher) or after the member's process appeared.
    BeforeReady(Duration),
    /// This long after the readiness line (for a handler: after its pid file appeared).
    AfterReady(Duration),
}

struct Plan {
    shape: Shape,
    victim: Victim,
    strike: Strike,
    moment: Moment,
    /// Run `mur ps -v --json` while the strike lands.
    ps_during: bool,
    /// Ended formation directories of this project put in the home first (the launch prunes
    /// all but the newest 10).
    stale_dirs: usize,
}

const PEERS: [&str; 2] = ["reviewer", "summarizer"];
const MEMBERS: [&str; 3] = ["lead", "reviewer", "summarizer"];

impl Plan {
    fn draw(rng: &mut Rng) -> Plan {
        let shape = match rng.below(10) {
            0..=3 => Shape::FormationTask,
            4..=6 => Shape::FormationServed { send_task: false },
            _ => Shape::RunTask,
        };
        let victim = if shape == Shape::RunTask {
            if rng.percent(50) {
                Victim::Launcher
            } else {
                Victim::Handler("solo")
            }
        } else {
            match rng.below(4) {
                0 => Victim::Launcher,
                1 => Victim::Entry,
                2 => Victim::Peer(rng.pick(&PEERS)),
                _ => Victim::Handler(rng.pick(&MEMBERS)),
            }
        };
        let shape = match shape {
            Shape::FormationServed { .. } => Shape::FormationServed {
                send_task: matches!(victim, Victim::Handler(_)) || rng.percent(50),
            },
            other => other,
        };
        let strike = match rng.below(5) {
            0 => Strike::Signal(libc::SIGTERM),
            1 => Strike::Signal(libc::SIGINT),
            2 => Strike::Signal(libc::SIGHUP),
            3 => Strike::Signal(libc::SIGKILL),
            _ => Strike::StopCont(rng.ms(500)),
        };
        let moment = match victim {
            Victim::Handler(_) => Moment::AfterReady(rng.ms(300)),
            _ if rng.percent(25) => Moment::BeforeReady(match victim {
                // A formation takes tens of ms to be ready: anywhere in its launch.
                Victim::Launcher => rng.ms(80),
                _ => rng.ms(15),
            }),
            _ => Moment::AfterReady(rng.ms(300)),
        };
        let ps_during = rng.percent(match strike {
            Strike::StopCont(_) => 70,
            Strike::Signal(_) => 30,
        });
        let stale_dirs = if shape != Shape::RunTask && rng.percent(30) {
            12
        } else {
            0
        };
        Plan {
            shape,
            victim,
            strike,
            moment,
            ps_during,
            stale_dirs,
        }
    }

    fn formation(&self) -> bool {
        self.shape != Shape::RunTask
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGCONT => "SIGCONT",
        _ => "a signal",
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shape = match self.shape {
            Shape::FormationTask => "formation --task",
            Shape::FormationServed { send_task: true } => "formation served +task",
            Shape::FormationServed { send_task: false } => "formation served",
            Shape::RunTask => "run --task",
        };
        let strike = match self.strike {
            Strike::Signal(signal) => signal_name(signal).to_string(),
            Strike::StopCont(pause) => format!("SIGSTOP, SIGCONT {} ms later,", pause.as_millis()),
        };
        let victim = match (self.victim, self.shape) {
            (Victim::Launcher, Shape::RunTask) => "the session".to_string(),
            (Victim::Launcher, _) => "the launcher".to_string(),
            (Victim::Entry, _) => "the entry lead".to_string(),
            (Victim::Peer(name), _) => format!("peer {name}"),
            (Victim::Handler(name), _) => format!("{name}'s handler"),
        };
        let moment = match (self.moment, self.victim) {
            (Moment::BeforeReady(d), Victim::Launcher) => {
                format!("{} ms after the spawn", d.as_millis())
            }
            (Moment::BeforeReady(d), _) => {
                format!("{} ms after its process appeared", d.as_millis())
            }
            (Moment::AfterReady(d), Victim::Handler(_)) => {
                format!("{} ms after it started", d.as_millis())
            }
            (Moment::AfterReady(d), _) => format!("{} ms after readiness", d.as_millis()),
        };
        write!(f, "{shape}: {strike} to {victim} {moment}")?;
        if self.ps_during {
            write!(f, ", ps during")?;
        }
        if self.stale_dirs > 0 {
            write!(f, ", {} stale formation dirs", self.stale_dirs)?;
        }
        Ok(())
    }
}

/// What one iteration found.
#[derive(Default)]
struct Found {
    /// How the launcher or session ended, and what was struck.
    outcome: String,
    failures: Vec<String>,
    notes: Vec<String>,
    /// The launcher's (or session's) stderr, shown with failures.
    stderr: String,
}

// ---------------------------------------------------------------------------------------------
// The capsules
// ---------------------------------------------------------------------------------------------

/// The entry member: asks both peers, a little apart, and combines their answers.
fn lead_script(pids: &Path) -> String {
    format!(
        r#"#!/bin/sh
set -eu
echo $$ > '{}/lead.pid'
text=$(cat)
sleep 0.1
r=$(printf '%s' "$text" | "$MUR" formation call reviewer -)
s=$("$MUR" formation call summarizer "$text")
printf 'lead: %s + %s\n' "$r" "$s"
"#,
        pids.display()
    )
}

/// A peer, or the lone session's capsule: a little work, then an answer.
fn worker_script(pids: &Path, name: &str, secs: &str) -> String {
    format!(
        "#!/bin/sh\nset -eu\necho $$ > '{}/{name}.pid'\ntext=$(cat)\nsleep {secs}\nprintf '{name}[%s]\\n' \"$text\"\n",
        pids.display()
    )
}

/// A manifest with an authenticated door, and with `control` (so a `.control` file sits beside
/// its record) when `with_control`.
fn capsule_manifest(name: &str, accept: bool, with_control: bool) -> Value {
    let mut m = manifest(name, accept, true);
    if with_control {
        m["control"] = json!({"settings": ["MOOD"]});
    }
    m
}

/// Write the iteration's capsules; the `mur` arguments that start it.
fn write_capsules(env: &FormationFixture, plan: &Plan, pids: &Path) -> Vec<String> {
    if !plan.formation() {
        let dir = env.write_member_capsule(
            "solo",
            &capsule_manifest("solo", false, true),
            Some(&worker_script(pids, "solo", "0.3")),
        );
        // No --json: with --task it is the one result at the end; the session is ready once
        // its record is written (`Iteration::recorded`).
        return ["run", &dir.to_string_lossy(), "--task", "chaos"]
            .map(str::to_string)
            .to_vec();
    }
    env.write_member_capsule(
        "lead",
        &capsule_manifest("lead", false, false),
        Some(&lead_script(pids)),
    );
    env.write_member_capsule(
        "reviewer",
        &capsule_manifest("reviewer", true, true),
        Some(&worker_script(pids, "reviewer", "0.15")),
    );
    env.write_member_capsule(
        "summarizer",
        &capsule_manifest("summarizer", true, false),
        Some(&worker_script(pids, "summarizer", "0.15")),
    );
    let roster = env.roster(&json!({
        "members": [
            {"name": "lead", "capsule": "lead", "entry": true},
            {"name": "reviewer", "capsule": "reviewer/murmur.json"},
            {"name": "summarizer", "capsule": "summarizer"},
        ],
        "reachability": [{"from": "lead", "to": ["reviewer", "summarizer"]}],
    }));
    let mut args = vec![
        "formation".to_string(),
        roster.to_string_lossy().into_owned(),
        "--json".to_string(),
    ];
    if plan.shape == Shape::FormationTask {
        args.extend(["--task".to_string(), "chaos".to_string()]);
    }
    args
}

/// `count` ended formation directories of this project, older than any the launch mints, each
/// with a marker naming a launcher that cannot exist and two member dirs holding some files.
fn write_stale_formations(env: &FormationFixture, count: usize) {
    let marker = serde_json::to_vec_pretty(&json!({
        "project_dir": env.project,
        "launcher_pid": NO_PID,
        "launcher_start": "0",
    }))
    .unwrap();
    for k in 0..count {
        let dir = env.formations().join(format!("frm_{:032x}", k + 1));
        for member in PEERS {
            let workdir = dir.join(member);
            fs::create_dir_all(&workdir).unwrap();
            for n in 0..25 {
                fs::write(workdir.join(format!("file-{n}")), b"left by a past task").unwrap();
            }
        }
        fs::write(dir.join("formation.json"), &marker).unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// One iteration
// ---------------------------------------------------------------------------------------------

struct Iteration<'a> {
    plan: &'a Plan,
    env: FormationFixture,
    home_env: String,
    pids: PathBuf,
    main: Proc,
    spawned: Instant,
    ready: Option<Value>,
    window: Arc<Mutex<Option<StopWindow>>>,
    mid_ps: Option<Proc>,
    found: Found,
}

impl<'a> Iteration<'a> {
    fn run(plan: &'a Plan) -> Found {
        let env = FormationFixture::new();
        let pids = env.project.join("pids");
        fs::create_dir_all(&pids).unwrap();
        let args = write_capsules(&env, plan, &pids);
        if plan.stale_dirs > 0 {
            write_stale_formations(&env, plan.stale_dirs);
        }
        let home_env = env.home_env();
        let window = Arc::new(Mutex::new(None));
        let sampler = Sampler::start(env.running(), window.clone());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut command = env.command(&args);
        command.stdin(Stdio::null());
        let main = Proc::spawn(command);
        let mut it = Iteration {
            plan,
            env,
            home_env,
            pids,
            main,
            spawned: Instant::now(),
            ready: None,
            window,
            mid_ps: None,
            found: Found::default(),
        };
        let struck = it.strike();
        it.settle();
        it.check(sampler);
        it.found.outcome = format!(
            "{}; exit {}",
            struck,
            it.main
                .status
                .map_or("none".to_string(), |s| describe_status(&s))
        );
        it.clean_up();
        it.found.stderr = it.main.stderr_to_end();
        it.found
    }

    fn fail(&mut self, what: String) {
        self.found.failures.push(what);
    }

    /// Find the victim at the plan's moment and deliver the plan's signal. What was done.
    fn strike(&mut self) -> String {
        let victim = match self.plan.moment {
            Moment::BeforeReady(delay) => match self.plan.victim {
                Victim::Launcher => {
                    sleep_until(self.spawned + delay);
                    Some(self.main.pid)
                }
                Victim::Entry => self.member_process("lead", delay),
                Victim::Peer(name) => self.member_process(name, delay),
                Victim::Handler(_) => unreachable!("a handler is struck after readiness"),
            },
            Moment::AfterReady(delay) => self.after_ready(delay),
        };
        let Some(pid) = victim else {
            return "victim never seen, nothing struck".to_string();
        };
        let landed = match self.plan.strike {
            Strike::Signal(signal) => {
                let sent = signal_ours(pid, signal, &self.home_env);
                if self.plan.ps_during {
                    self.start_mid_ps();
                }
                sent
            }
            Strike::StopCont(pause) => {
                let sent = signal_ours(pid, libc::SIGSTOP, &self.home_env);
                if sent && wait_state(pid, 'T', Duration::from_millis(200)) {
                    *self.window.lock().unwrap() = Some(StopWindow {
                        pid,
                        stopped: Instant::now(),
                        resumed: None,
                    });
                }
                if self.plan.ps_during {
                    self.start_mid_ps();
                }
                thread::sleep(pause);
                if let Some(window) = self.window.lock().unwrap().as_mut() {
                    window.resumed = Some(Instant::now());
                }
                // SIGCONT even if the STOP went astray, so nothing stays stopped.
                signal_ours(pid, libc::SIGCONT, &self.home_env);
                sent
            }
        };
        if landed {
            format!("struck pid {pid}")
        } else {
            format!("pid {pid} was gone before the strike")
        }
    }

    /// BeforeReady for a member: wait for its `mur run` process to appear among the launcher's
    /// children, then `delay`.
    fn member_process(&mut self, name: &str, delay: Duration) -> Option<u32> {
        let needle = format!("/{name}");
        let deadline = Instant::now() + FIND_WITHIN;
        loop {
            let found = children_of(self.main.pid).into_iter().find(|&pid| {
                let argv = cmdline(pid);
                argv.get(1).is_some_and(|a| a == "run") && argv.iter().any(|a| a.contains(&needle))
            });
            if let Some(pid) = found {
                thread::sleep(delay);
                return Some(pid);
            }
            if Instant::now() >= deadline || self.main.exited() {
                return None;
            }
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// AfterReady: the readiness line, then (served) the task, then the victim.
    fn after_ready(&mut self, delay: Duration) -> Option<u32> {
        let ready = if self.plan.formation() {
            self.main.readiness(READY_WITHIN)
        } else {
            self.recorded(READY_WITHIN)
        };
        match ready {
            Some(ready) => self.ready = Some(ready),
            None => {
                let status = self.main.try_status();
                self.fail(format!(
                    "no readiness line within {READY_WITHIN:?} and nothing struck yet (status {status:?})"
                ));
                return None;
            }
        }
        if self.plan.shape == (Shape::FormationServed { send_task: true }) {
            self.send_task();
        }
        let pid = match self.plan.victim {
            Victim::Launcher => Some(self.main.pid),
            Victim::Entry => self.ready_pid("lead"),
            Victim::Peer(name) => self.ready_pid(name),
            Victim::Handler(name) => self.handler_pid(name),
        };
        thread::sleep(delay);
        pid
    }

    /// A `mur run --task` is ready once its record is written (as its readiness line would be
    /// printed, were there one): that record, when it appears `within`.
    fn recorded(&self, within: Duration) -> Option<Value> {
        let deadline = Instant::now() + within;
        loop {
            let found = fs::read_dir(self.env.running())
                .into_iter()
                .flatten()
                .filter_map(|entry| fs::read(entry.ok()?.path()).ok())
                .filter_map(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
                .find(|record| record["pid"] == self.main.pid);
            if found.is_some() || Instant::now() >= deadline {
                return found;
            }
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// A member's pid from the readiness line (the session's, for `mur run`).
    fn ready_pid(&self, name: &str) -> Option<u32> {
        let ready = self.ready.as_ref()?;
        let pid = match ready["members"].as_array() {
            Some(members) => members.iter().find(|m| m["name"] == name)?["pid"].as_u64(),
            None => ready["pid"].as_u64(),
        };
        pid.map(|p| p as u32)
    }

    /// The pid a handler wrote to its file once it started.
    fn handler_pid(&mut self, name: &str) -> Option<u32> {
        let path = self.pids.join(format!("{name}.pid"));
        let deadline = Instant::now() + FIND_WITHIN;
        loop {
            if let Some(pid) = fs::read_to_string(&path)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                return Some(pid);
            }
            if Instant::now() >= deadline || self.main.exited() {
                return None;
            }
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// One non-blocking task to the served formation's entry member, with its operator token.
    fn send_task(&mut self) {
        let Some(ready) = &self.ready else { return };
        let Some(lead) = ready["members"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["name"] == "lead"))
        else {
            return;
        };
        let url = lead["url"].as_str().unwrap_or_default().to_string();
        let sid = lead["session_id"].as_str().unwrap_or_default();
        let token = fs::read(self.env.running().join(format!("{sid}.json")))
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|r| r["door_token"].as_str().map(str::to_string));
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
            "message": {"kind": "message", "role": "user", "messageId": "chaos",
                "parts": [{"kind": "text", "text": "chaos"}]},
            "configuration": {"blocking": false}}});
        if let Err(why) = try_post(&url, token.as_deref(), &body) {
            self.found
                .notes
                .push(format!("the task could not be sent: {why}"));
        }
    }

    fn start_mid_ps(&mut self) {
        let mut command = self.env.command(&["ps", "-v", "--json"]);
        command.stdin(Stdio::null());
        self.mid_ps = Some(Proc::spawn(command));
    }

    /// Let the launcher (or session) end — by itself, or by the test's SIGTERM where nothing
    /// ends it — then every `mur` process of the iteration.
    fn settle(&mut self) {
        let by_itself = match self.plan.shape {
            Shape::FormationServed { .. } => SERVED_LINGER,
            _ => SETTLE,
        };
        if self.main.wait_for(by_itself).is_none() {
            if !matches!(self.plan.shape, Shape::FormationServed { .. }) {
                self.fail(format!(
                    "(1) the {} did not end by itself within {SETTLE:?}",
                    self.main_name()
                ));
            }
            signal_ours(self.main.pid, libc::SIGTERM, &self.home_env);
            if self.main.wait_for(SETTLE).is_none() {
                self.fail(format!(
                    "(1) the {} did not exit within {SETTLE:?} of SIGTERM",
                    self.main_name()
                ));
                self.main.kill();
            }
        }
        if let Some(mut ps) = self.mid_ps.take() {
            match ps.wait_for(SETTLE) {
                Some(status) if status.success() => {
                    let said = ps.stderr_to_end();
                    if !said.trim().is_empty() {
                        self.found
                            .notes
                            .push(format!("ps during the strike: {}", one_line(&said)));
                    }
                }
                Some(status) => self.fail(format!(
                    "mur ps during the strike exited {}: {}",
                    describe_status(&status),
                    ps.stderr_to_end()
                )),
                None => {
                    self.fail(format!("mur ps during the strike took over {SETTLE:?}"));
                    ps.kill();
                }
            }
        }
        // Members end with their launcher (a SIGKILLed one's by their lifelines), and any
        // `mur formation call` with its handler.
        let deadline = Instant::now() + SETTLE;
        loop {
            let left = mur_processes(&self.home_env);
            if left.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                self.fail(format!(
                    "(1) mur processes still running {SETTLE:?} after the {} exited: {}",
                    self.main_name(),
                    describe_processes(&left)
                ));
                break;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    fn main_name(&self) -> &'static str {
        if self.plan.formation() {
            "launcher"
        } else {
            "session"
        }
    }

    /// The four invariants.
    fn check(&mut self, sampler: Sampler) {
        // (1) Nothing of the iteration is left.
        let left = processes_with_env(&self.home_env);
        if !left.is_empty() {
            self.fail(format!(
                "(1) processes left after the {} and every mur process ended: {}",
                self.main_name(),
                describe_processes(&left)
            ));
        }

        // (2) ps prunes what was left, lists nothing, and the running dir is empty after it.
        let stale: Vec<String> = self
            .env
            .running_files()
            .into_iter()
            .filter(|n| n.ends_with(".json"))
            .collect();
        let mut command = self.env.command(&["ps", "--json"]);
        command.stdin(Stdio::null());
        let mut ps = Proc::spawn(command);
        match ps.wait_for(SETTLE) {
            Some(status) if status.success() => {
                let stdout = ps.stdout_to_end();
                let stderr = ps.stderr_to_end();
                match serde_json::from_str::<Value>(&stdout) {
                    Ok(listing) => {
                        let capsules = listing["capsules"].as_array().map_or(0, Vec::len);
                        let formations = listing["formations"].as_array().map_or(0, Vec::len);
                        if capsules != 0 || formations != 0 {
                            self.fail(format!("(2) mur ps still lists something: {listing}"));
                        }
                    }
                    Err(_) => self.fail(format!("(2) mur ps --json printed {stdout:?}")),
                }
                if !stale.is_empty() {
                    let said = format!("pruned {} stale record", stale.len());
                    if !stderr.contains(&said) {
                        self.fail(format!(
                            "(2) {} record(s) were left ({}), but mur ps did not say '{said}': {stderr:?}",
                            stale.len(),
                            stale.join(", ")
                        ));
                    }
                    self.found
                        .notes
                        .push(format!("ps pruned {} record(s) left behind", stale.len()));
                }
            }
            Some(status) => self.fail(format!(
                "(2) mur ps --json exited {}: {}",
                describe_status(&status),
                ps.stderr_to_end()
            )),
            None => {
                self.fail(format!("(2) mur ps --json took over {SETTLE:?}"));
                ps.kill();
            }
        }
        let files = self.env.running_files();
        let records: Vec<&String> = files
            .iter()
            .filter(|n| n.ends_with(".json") || n.ends_with(".control"))
            .collect();
        if !records.is_empty() {
            self.fail(format!(
                "(2) left in ~/.murmur/running after mur ps: {records:?}"
            ));
        }
        let other: Vec<&String> = files
            .iter()
            .filter(|n| !n.ends_with(".json") && !n.ends_with(".control"))
            .collect();
        if !other.is_empty() {
            self.found
                .notes
                .push(format!("other files in ~/.murmur/running: {other:?}"));
        }

        // (3) No record removed while its process lived.
        for violation in sampler.finish() {
            self.fail(format!("(3) {violation}"));
        }

        // (4) Every formation directory has its marker.
        if let Ok(listing) = fs::read_dir(self.env.formations()) {
            for item in listing.flatten() {
                let path = item.path();
                if path.is_dir() && !path.join("formation.json").is_file() {
                    let inside: Vec<String> = fs::read_dir(&path)
                        .map(|l| {
                            l.flatten()
                                .map(|e| e.file_name().to_string_lossy().into_owned())
                                .collect()
                        })
                        .unwrap_or_default();
                    self.fail(format!(
                        "(4) {} has no formation.json (holds {inside:?})",
                        path.display()
                    ));
                }
            }
        }
    }

    /// End whatever a failure left running, and reap every orphan we inherited.
    fn clean_up(&mut self) {
        self.main.kill();
        if let Some(mut ps) = self.mid_ps.take() {
            ps.kill();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let left = processes_with_env(&self.home_env);
            if left.is_empty() || Instant::now() >= deadline {
                break;
            }
            for pid in left {
                signal_ours(pid, libc::SIGKILL, &self.home_env);
                signal_ours(pid, libc::SIGCONT, &self.home_env);
            }
            reap_orphans();
            thread::sleep(Duration::from_millis(10));
        }
        reap_orphans();
    }
}

fn describe_status(status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code.to_string(),
        (_, Some(signal)) => format!("by {}", signal_name(signal)),
        _ => "?".to_string(),
    }
}

fn one_line(text: &str) -> String {
    text.trim_end().replace('\n', " | ")
}

// ---------------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------------

/// A process the test started: stdout read line by line, stderr drained. Killed and reaped on
/// drop if it is still running.
struct Proc {
    child: Child,
    pid: u32,
    lines: mpsc::Receiver<String>,
    stderr: Drain,
    status: Option<ExitStatus>,
}

impl Proc {
    fn spawn(mut command: Command) -> Proc {
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().expect("spawn mur");
        let pid = child.id();
        let (tx, lines) = mpsc::channel();
        let mut reader = BufReader::new(child.stdout.take().unwrap());
        thread::spawn(move || {
            let mut line = String::new();
            loop {
                line.clear();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let _ = tx.send(line.clone());
                    }
                }
            }
        });
        let stderr = drain(child.stderr.take().unwrap());
        Proc {
            child,
            pid,
            lines,
            stderr,
            status: None,
        }
    }

    fn try_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    fn exited(&mut self) -> bool {
        self.try_status().is_some()
    }

    /// Its exit status, waiting (polling) up to `within`.
    fn wait_for(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.try_status() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(2));
        }
    }

    /// The first stdout line that is a JSON object: the readiness line.
    fn readiness(&mut self, within: Duration) -> Option<Value> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Ok(value @ Value::Object(_)) = serde_json::from_str(line.trim()) {
                        return Some(value);
                    }
                }
                Err(_) => return None,
            }
        }
    }

    /// Everything it printed on stdout (after it exited: up to its EOF, bounded).
    fn stdout_to_end(&mut self) -> String {
        let mut out = String::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            out.push_str(&line);
        }
        out
    }

    /// What it printed on stderr so far.
    fn stderr(&self) -> String {
        self.stderr.text()
    }

    /// Everything it printed on stderr, once it exited: waits (bounded) for the pipe's EOF, so
    /// nothing still in flight is missed.
    fn stderr_to_end(&self) -> String {
        self.stderr.wait(Duration::from_secs(5));
        self.stderr()
    }

    fn kill(&mut self) {
        if self.try_status().is_none() {
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Send `signal` to `pid` only if it is a process of this iteration (its environment holds the
/// iteration's `HOME`), so a recycled pid is never signalled. Whether it was sent.
fn signal_ours(pid: u32, signal: i32, home_env: &str) -> bool {
    let ours = environ(pid)
        .split(|&b| b == 0)
        .any(|entry| entry == home_env.as_bytes());
    // SAFETY: kill(2) takes plain integers; the process was just checked to be this test's.
    ours && unsafe { libc::kill(pid as i32, signal) } == 0
}

/// The state letter of `/proc/<pid>/stat` (`R`, `S`, `T`, `Z`, …).
fn state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

fn parent(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Wait up to `within` for `pid` to be in `wanted` state; whether it got there.
fn wait_state(pid: u32, wanted: char, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        match state(pid) {
            Some(s) if s == wanted => return true,
            None | Some('Z') | Some('X') => return false,
            _ => {}
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(1));
    }
}

/// Live processes of this iteration that run the `mur` binary.
fn mur_processes(home_env: &str) -> Vec<u32> {
    let mur = fs::canonicalize(mur_bin()).unwrap_or_else(|_| PathBuf::from(mur_bin()));
    processes_with_env(home_env)
        .into_iter()
        .filter(|&pid| fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == mur))
        .collect()
}

fn describe_processes(pids: &[u32]) -> String {
    pids.iter()
        .map(|&pid| {
            format!(
                "pid {pid} (parent {}, state {}): {}",
                parent(pid).map_or("?".to_string(), |p| p.to_string()),
                state(pid).unwrap_or('?'),
                cmdline(pid).join(" ")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Reap every zombie child of ours: orphans we inherited as subreaper. Only called once every
/// `Child` the test holds has been waited on.
fn reap_orphans() {
    for pid in children_of(std::process::id()) {
        if state(pid) == Some('Z') {
            let mut status = 0;
            // SAFETY: a live out-parameter for the status; WNOHANG never blocks.
            unsafe { libc::waitpid(pid as i32, &mut status, libc::WNOHANG) };
        }
    }
}

fn sleep_until(at: Instant) {
    thread::sleep(at.saturating_duration_since(Instant::now()));
}

/// `POST /` to the door at `url` with `body`; the HTTP status. Never panics.
fn try_post(url: &str, token: Option<&str>, body: &Value) -> Result<u16, String> {
    let addr: SocketAddr = url.parse().map_err(|_| format!("bad url {url:?}"))?;
    let mut stream =
        TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let body = body.to_string();
    let mut request = format!(
        "POST / HTTP/1.1\r\nHost: {url}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(token) = token {
        request.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(|e| e.to_string())?;
    let answer = String::from_utf8_lossy(&answer);
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not an HTTP answer: {answer:?}"))
}

// ---------------------------------------------------------------------------------------------
// Invariant 3: the sampler
// ---------------------------------------------------------------------------------------------

/// The time a victim was known to be stopped: from when its state read `T` after SIGSTOP, to
/// just before SIGCONT was sent.
#[derive(Clone, Copy)]
struct StopWindow {
    pid: u32,
    stopped: Instant,
    resumed: Option<Instant>,
}

/// One record the sampler has seen.
struct Seen {
    pid: u32,
    start: String,
    /// When the last listing that still held it began.
    last_present: Instant,
    /// When it was first missing while its process was alive, and whether that has been judged.
    vanished_alive: Option<Instant>,
    judged: bool,
}

/// Lists `~/.murmur/running` every 2 ms from the spawn to the end, remembering each record's
/// pid and start time. A record's own session removes it as the last step of its orderly end,
/// so a record missing while its process lives is judged this way:
///
/// - if the process was stopped (SIGSTOP confirmed) from before the last listing that held the
///   record to after the listing that missed it, something else removed it: a violation;
/// - otherwise the process must be gone within [`RECORD_GONE_GRACE`] (its own removal is its
///   last act); still alive after that, the record was taken from a live session: a violation.
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: thread::JoinHandle<Vec<String>>,
}

impl Sampler {
    fn start(running: PathBuf, window: Arc<Mutex<Option<StopWindow>>>) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = thread::spawn(move || sample(&running, &window, &flag));
        Sampler { stop, thread }
    }

    /// Stop sampling; the violations found.
    fn finish(self) -> Vec<String> {
        self.stop.store(true, Ordering::Release);
        self.thread
            .join()
            .unwrap_or_else(|_| vec!["the sampler panicked".to_string()])
    }
}

fn same_process_alive(pid: u32, start: &str) -> bool {
    alive(pid) && start_token(pid).as_deref() == Some(start)
}

fn sample(running: &Path, window: &Mutex<Option<StopWindow>>, stop: &AtomicBool) -> Vec<String> {
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    let mut violations = Vec::new();
    loop {
        let last_pass = stop.load(Ordering::Acquire);
        let began = Instant::now();
        let names: Vec<String> = fs::read_dir(running)
            .map(|l| {
                l.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("ses_") && n.ends_with(".json"))
                    .collect()
            })
            .unwrap_or_default();
        let ended = Instant::now();
        for name in &names {
            if let Some(known) = seen.get_mut(name) {
                known.last_present = began;
                continue;
            }
            let Some(record) = fs::read(running.join(name))
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            else {
                continue;
            };
            let (Some(pid), Some(start)) =
                (record["pid"].as_u64(), record["process_start"].as_str())
            else {
                continue;
            };
            seen.insert(
                name.clone(),
                Seen {
                    pid: pid as u32,
                    start: start.to_string(),
                    last_present: began,
                    vanished_alive: None,
                    judged: false,
                },
            );
        }
        let now = Instant::now();
        for (name, known) in seen.iter_mut() {
            if known.judged {
                continue;
            }
            if known.vanished_alive.is_none() && names.contains(name) {
                continue;
            }
            let alive_now = same_process_alive(known.pid, &known.start);
            match known.vanished_alive {
                None => {
                    if !alive_now {
                        // Gone with its process (or pruned after it died): fine.
                        known.judged = true;
                        continue;
                    }
                    known.vanished_alive = Some(ended);
                    let stopped_throughout = window.lock().unwrap().is_some_and(|w| {
                        w.pid == known.pid
                            && w.stopped <= known.last_present
                            && w.resumed.is_none_or(|r| ended <= r)
                    });
                    if stopped_throughout {
                        violations.push(format!(
                            "record {name} was removed while its process (pid {}) was stopped",
                            known.pid
                        ));
                        known.judged = true;
                    }
                }
                Some(at) => {
                    if !alive_now {
                        known.judged = true;
                    } else if now.duration_since(at) > RECORD_GONE_GRACE {
                        violations.push(format!(
                            "record {name} was removed while its process (pid {}) lived, and it still runs {RECORD_GONE_GRACE:?} later",
                            known.pid
                        ));
                        known.judged = true;
                    }
                }
            }
        }
        if last_pass {
            break;
        }
        thread::sleep(Duration::from_millis(2));
    }
    violations
}
