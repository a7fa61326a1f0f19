//! Push notifications (`network.push`): every task's webhook configs, and the bounded queue of
//! updates to deliver to them, which one thread empties (`push/deliver.rs`).
//!
//! Whoever changes a task — a door worker, a task thread, main — holds the engine lock while the
//! task's events are published; the update for each of its webhooks is queued then, under the
//! configs' and the queue's locks (leaves, held only for memory, taken in that order under the
//! engine lock), and nothing else: no socket, no name lookup, no log line. The queue is bounded
//! ([`MAX_QUEUED`], and the budget's push share); an update it has no room for is dropped and
//! counted — the task never waits for a receiver. The delivery thread does everything that may
//! wait: it resolves a webhook's host, checks the address (`Push::target`) and connects to
//! exactly that address, many webhooks at once on one `poll` loop ([`crate::net::multi`]).
//!
//! Configs are counted in the push share of the memory budget and bounded: [`MAX_PER_TASK`] per
//! task, [`MAX_CONFIGS`] in all (at the bound, the configs of the task that ended longest ago
//! give way; while every task holding one is live, a new one is refused).

mod deliver;

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, VecDeque};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::task::Waker;
use std::time::{Duration, Instant};

use super::budget::{Budget, Charge};
use crate::a2a::push::Config;
use crate::a2a::stream::{Event, Trail};
use crate::a2a::task::Task;
use crate::a2a::version::Generation;
use crate::net::webhook::{self, Url};
use crate::sys::wake;

/// The most configs one task may hold.
pub const MAX_PER_TASK: usize = 16;
/// The most configs the session holds.
pub const MAX_CONFIGS: usize = 4096;
/// The most updates waiting for delivery.
pub const MAX_QUEUED: usize = 4096;
/// How long the updates queued when the session winds down are tried for ([`Push::finish`]):
/// `mur stop` waits about 2 s for it at most.
pub const FINISH_GRACE: Duration = Duration::from_millis(1800);
/// How long [`Push::finish`] waits past its grace for the delivery thread to log what it could
/// not deliver.
const FINISH_SLACK: Duration = Duration::from_millis(200);

/// The session's push notifications: its rules, configs and queue.
pub struct Push {
    /// `network.push.allow`, lowercased, IPv6 addresses without brackets.
    allow: Vec<String>,
    /// The door's own address: never delivered to.
    door: SocketAddr,
    /// The share of the session's budget configs and queued updates are counted in.
    budget: Arc<Budget>,
    configs: Mutex<Registry>,
    queue: Mutex<Queue>,
    /// The delivery thread's wake-up: armed when an update is queued, written once the engine
    /// lock is released (its waker goes with the engine's other wakes).
    wake: Arc<wake::Pipe>,
    /// Set when the session winds down ([`Push::finish`]): every exchange ends by then, and the
    /// delivery thread with them.
    closing: OnceLock<Instant>,
    /// The delivery thread is done: what it could not deliver is logged.
    finished: Mutex<bool>,
    finished_cv: Condvar,
}

/// Why a config was not set.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The task holds [`MAX_PER_TASK`] already.
    PerTask,
    /// The session holds [`MAX_CONFIGS`], every one for a live task; or the budget is full.
    Full(String),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::PerTask => write!(
                f,
                "the task holds {MAX_PER_TASK} push configs, the most one task may; delete one first"
            ),
            Refused::Full(why) => f.write_str(why),
        }
    }
}

/// Every task's configs. Kept so that setting one costs no walk of them all: the count and
/// the order of ends are kept beside them.
#[derive(Default)]
struct Registry {
    tasks: BTreeMap<String, Held>,
    /// The ended tasks in `tasks`, by their end's number ([`Held::ended`]): the first gives way
    /// first.
    ended: BTreeMap<u64, String>,
    /// How many configs `tasks` hold.
    held: usize,
    /// The next number of an end seen ([`Held::ended`]).
    next_end: u64,
}

/// One task's configs.
struct Held {
    configs: Vec<(Arc<Config>, Charge)>,
    /// When the task was seen to end, in order of ends: its configs are the first to give way
    /// at the bound, the task that ended longest ago first. `None` while it is live.
    ended: Option<u64>,
    /// The task's answer as its 1.0 webhooks are sent it: chunks less a trailing newline held
    /// for the next, as a stream's reader gets them, so the chunks a receiver assembles are the
    /// answer `GetTask` shows (one trail for all its configs: they get the same chunks).
    trail: Trail,
}

#[derive(Default)]
struct Queue {
    items: VecDeque<Delivery>,
    /// Updates dropped for want of room since the delivery thread last said so.
    dropped: u64,
}

/// One update for one webhook.
struct Delivery {
    task_id: String,
    context_id: String,
    config: Arc<Config>,
    /// 1.0: the event; 0.3: the task as it stood at the event (`Event::Task`).
    event: Arc<Event>,
    /// Failed attempts so far.
    attempt: u32,
    /// What it holds of the push share.
    _charge: Charge,
}

impl Push {
    /// Push notifications for a session whose door is at `door`, its configs and queue counted in
    /// a share of `budget` (an eighth), with `allow` as the manifest names it; the delivery
    /// thread started. `Err` when no thread could be started.
    pub fn start(
        allow: &[String],
        door: SocketAddr,
        budget: &Arc<Budget>,
    ) -> Result<Arc<Self>, String> {
        let push = Self::new(allow, door, budget)?;
        let delivering = push.clone();
        std::thread::Builder::new()
            .name("push".into())
            .spawn(move || deliver::run(&delivering))
            .map_err(|err| format!("cannot start the push thread: {err}"))?;
        Ok(push)
    }

    /// [`Push::start`] without its thread.
    fn new(allow: &[String], door: SocketAddr, budget: &Arc<Budget>) -> Result<Arc<Self>, String> {
        let wake = wake::Pipe::new()
            .map_err(|err| format!("cannot make the push thread's wake-up pipe: {err}"))?;
        let allow = allow
            .iter()
            .map(|host| {
                let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
                bare.unwrap_or(host).to_ascii_lowercase()
            })
            .collect();
        Ok(Arc::new(Self {
            allow,
            door,
            budget: Budget::share(budget, budget.limit() / 8),
            configs: Mutex::default(),
            queue: Mutex::default(),
            wake: Arc::new(wake),
            closing: OnceLock::new(),
            finished: Mutex::new(false),
            finished_cv: Condvar::new(),
        }))
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        // panic = "abort": a poisoned lock cannot be observed half-updated.
        self.configs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `host` (as a URL writes it, lowercased) is on the allow-list.
    fn allowed(&self, host: &str) -> bool {
        self.allow.iter().any(|a| a == host)
    }

    /// Refuse, when a config is set, a URL whose host is an IP address no webhook may reach (a
    /// name is judged when it is resolved, at each delivery: `Push::target`).
    pub fn check_literal(&self, url: &Url) -> Result<(), String> {
        match url.literal() {
            Some(ip) => self.check(url, SocketAddr::new(ip, url.port)),
            None => Ok(()),
        }
    }

    /// Whether a delivery for `url` may connect to `to`.
    fn check(&self, url: &Url, to: SocketAddr) -> Result<(), String> {
        if webhook::is_door(to, self.door) {
            return Err(format!("{to} is this session's own door"));
        }
        match webhook::forbidden(to.ip()) {
            Some(why) if !self.allowed(&url.host) => Err(format!(
                "{} is {why}, and network.push.allow does not name '{}'",
                to.ip(),
                url.host
            )),
            _ => Ok(()),
        }
    }

    /// The one address a delivery for `url` connects to: its host resolved once (an IP address
    /// as it is), the first address that passes [`Push::check`]; the address is connected to as
    /// it is, never looked up again. Blocks on the resolver: only the delivery thread calls it.
    fn target(&self, url: &Url) -> Result<SocketAddr, String> {
        let found: Vec<SocketAddr> = match url.literal() {
            Some(ip) => vec![SocketAddr::new(ip, url.port)],
            None => (url.host.as_str(), url.port)
                .to_socket_addrs()
                .map_err(|err| format!("cannot resolve '{}': {err}", url.host))?
                .map(|a| SocketAddr::new(a.ip().to_canonical(), a.port()))
                .collect(),
        };
        let mut why = format!("'{}' resolves to no address", url.host);
        for to in found {
            match self.check(url, to) {
                Ok(()) => return Ok(to),
                Err(refused) => why = refused,
            }
        }
        Err(why)
    }

    /// The session is winding down, its tasks ended: give what is queued a last chance — the
    /// delivery thread tries every update at once, retries none, cuts every exchange at `grace`
    /// and logs, per task and webhook, what was not delivered — and wait for that, a little past
    /// `grace` at most (a thread stuck in a name lookup is left behind). Before the log closes.
    pub fn finish(&self, grace: Duration) {
        let until = Instant::now() + grace;
        let _ = self.closing.set(until);
        self.wake.arm();
        self.wake.notify();
        let mut finished = self.finished.lock().unwrap_or_else(|p| p.into_inner());
        let give_up = until + FINISH_SLACK;
        while !*finished {
            let left = give_up.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            finished = self
                .finished_cv
                .wait_timeout(finished, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Set `config` on task `task_id` (the caller may see the task; `ended`: it has ended),
    /// replacing one of the same id.
    pub fn set(&self, task_id: &str, config: Config, ended: bool) -> Result<Arc<Config>, Refused> {
        let charge = Charge::new(&self.budget);
        if !charge.grow(config.weight()) {
            return Err(Refused::Full(format!(
                "busy: push configs and queued updates hold their share of the memory budget ({} KiB); delete some, or retry later",
                self.budget.limit() >> 10
            )));
        }
        let config = Arc::new(config);
        let mut registry = self.registry();
        let replaces = registry
            .tasks
            .get(task_id)
            .is_some_and(|h| h.configs.iter().any(|(c, _)| c.id == config.id));
        if !replaces {
            if registry
                .tasks
                .get(task_id)
                .is_some_and(|h| h.configs.len() >= MAX_PER_TASK)
            {
                return Err(Refused::PerTask);
            }
            if registry.held >= MAX_CONFIGS && !registry.forget_oldest_ended() {
                return Err(Refused::Full(format!(
                    "busy: the session holds {MAX_CONFIGS} push configs, all for live tasks; delete some, or retry later"
                )));
            }
        }
        let registry = &mut *registry;
        let held = match registry.tasks.entry(task_id.to_string()) {
            Entry::Occupied(held) => held.into_mut(),
            Entry::Vacant(vacant) => {
                let end = ended.then(|| end_number(&mut registry.next_end));
                if let Some(end) = end {
                    registry.ended.insert(end, vacant.key().clone());
                }
                vacant.insert(Held {
                    configs: Vec::new(),
                    ended: end,
                    trail: Trail::default(),
                })
            }
        };
        held.configs.retain(|(c, _)| c.id != config.id);
        held.configs.push((config.clone(), charge));
        registry.held += usize::from(!replaces);
        Ok(config)
    }

    /// Task `task_id`'s configs, in the order they were set.
    pub fn list(&self, task_id: &str) -> Vec<Arc<Config>> {
        let registry = self.registry();
        let held = registry.tasks.get(task_id);
        held.map_or_else(Vec::new, |h| {
            h.configs.iter().map(|(c, _)| c.clone()).collect()
        })
    }

    /// Delete task `task_id`'s config `config_id`: no update is delivered to it from now on,
    /// queued ones included. Whether it existed.
    pub fn delete(&self, task_id: &str, config_id: &str) -> bool {
        let mut registry = self.registry();
        let Some(held) = registry.tasks.get_mut(task_id) else {
            return false;
        };
        let before = held.configs.len();
        held.configs.retain(|(c, _)| c.id != config_id);
        let deleted = before - held.configs.len();
        let (emptied, ended) = (held.configs.is_empty(), held.ended);
        registry.held -= deleted;
        if emptied {
            registry.tasks.remove(task_id);
            if let Some(end) = ended {
                registry.ended.remove(&end);
            }
        }
        deleted > 0
    }

    /// Whether `config` is still task `task_id`'s (not deleted, not replaced).
    fn current(&self, task_id: &str, config: &Arc<Config>) -> bool {
        let registry = self.registry();
        let held = registry.tasks.get(task_id);
        held.is_some_and(|h| h.configs.iter().any(|(c, _)| Arc::ptr_eq(c, config)))
    }

    /// Queue `event` of `task` for each of its webhooks — a 1.0 config gets the event (a
    /// `StreamResponse`; an artifact chunk shaped by the task's [`Trail`] first, as a stream's
    /// reader gets it), a 0.3 config the task as it stands (0.3's payload is the Task object, at
    /// every update; `task_weight` bytes, as the budget counts it) — and leave the delivery
    /// thread's wake-up in `wakes` when it is not already on its way. Called under the engine
    /// lock: it takes the configs' and the queue's locks, and waits on nothing, calls the kernel
    /// for nothing.
    pub fn publish(
        &self,
        task: &Task,
        event: &Arc<Event>,
        task_weight: usize,
        wakes: &mut Vec<Waker>,
    ) {
        let (configs, event) = {
            let mut registry = self.registry();
            let registry = &mut *registry;
            let Some(held) = registry.tasks.get_mut(task.id.as_str()) else {
                return;
            };
            if held.ended.is_none() && event.ends() && task.state.is_final() {
                let end = end_number(&mut registry.next_end);
                held.ended = Some(end);
                registry.ended.insert(end, task.id.to_string());
            }
            let shaped = match **event {
                Event::Artifact { .. } => Arc::new(held.trail.shape((**event).clone())),
                _ => event.clone(),
            };
            let configs = held.configs.iter().map(|(c, _)| c.clone());
            (configs.collect::<Vec<_>>(), shaped)
        };
        let mut as_task = None;
        let mut queue = self.queue();
        for config in configs {
            if config.target.https {
                continue;
            }
            let event = match config.generation {
                Generation::V1_0 => event.clone(),
                Generation::V0_3 => as_task
                    .get_or_insert_with(|| Arc::new(Event::Task(task.clone())))
                    .clone(),
            };
            let charge = Charge::new(&self.budget);
            let weight = match &*event {
                Event::Task(_) => task_weight,
                other => other.weight(),
            };
            if queue.items.len() >= MAX_QUEUED || !charge.grow(weight) {
                queue.dropped += 1;
                continue;
            }
            queue.items.push_back(Delivery {
                task_id: task.id.to_string(),
                context_id: task.context_id.clone(),
                config,
                event,
                attempt: 0,
                _charge: charge,
            });
        }
        drop(queue);
        if self.wake.arm() {
            wakes.push(Waker::from(self.wake.clone()));
        }
    }
}

/// What the session says, in the task's log, when `config` is set: an https webhook is kept and
/// never delivered to. `None` for one it delivers to.
pub fn undeliverable(config: &Config) -> Option<String> {
    config.target.https.then(|| {
        format!(
            "push to {}: https, and mur has no TLS client: the config is kept, and no update is ever delivered to it (an http:// forwarder on an allowed host can relay to an https receiver)",
            config.target.authority()
        )
    })
}

impl Registry {
    /// Forget the configs of the task that ended longest ago; whether there was one.
    fn forget_oldest_ended(&mut self) -> bool {
        let Some((_, id)) = self.ended.pop_first() else {
            return false;
        };
        let forgotten = self.tasks.remove(&id);
        self.held -= forgotten.map_or(0, |held| held.configs.len());
        true
    }
}

/// The number of an end seen now: ends are numbered in the order they are seen, from 1.
fn end_number(next_end: &mut u64) -> u64 {
    *next_end += 1;
    *next_end
}

#[cfg(test)]
mod tests;
