//! The delivery thread: takes the updates that are due from the queue and POSTs them — every
//! webhook at once, non-blocking, on one `poll` loop ([`crate::net::multi::run_growing`]), each
//! exchange under its own deadlines ([`DEADLINES`]). A receiver that never answers costs one
//! connection until its deadline, never a thread, and holds back no other receiver's updates.
//!
//! The queue is read again only when something may have changed there: an update was queued
//! (the publisher arms the thread's wake-up pipe, written once the engine lock is released),
//! an exchange ended (its job may take more, a failure parked its updates), or a retry falls
//! due — never on a timer, so webhooks that hang cost the door nothing while they hang.
//!
//! Bounds, so that no webhook holds back another: at most [`IN_FLIGHT`] exchanges at once, at
//! most [`PER_JOB`] updates taken by one webhook's job (the rest wait in the queue, in order,
//! for its next read), at most [`JOBS`] jobs not done at once — a round takes new jobs while
//! others are in flight, forgets each job once it is done (so a round that never runs dry,
//! webhooks hanging one after another, never stops taking new ones), and ends when none is in
//! flight.
//!
//! A webhook's updates go out in the order they happened: one exchange at a time per webhook,
//! and an update waiting to be retried holds back the later ones of its webhook. A failed
//! update (no connection, no answer in time, a status other than 2xx) is retried after 1, 2, 4
//! s; after [`ATTEMPTS`] it is given up and logged. What waits for a retry is parked on the
//! thread, by webhook and due time ([`Parked`]), never in the shared queue: a look at the queue
//! takes it whole in one swap under its lock — what publishers wait for is never a walk of
//! updates waiting for their time, however many receivers hang. An update whose webhook was deleted meanwhile
//! is dropped. Log lines name the task and the webhook's host and port, never its path (which
//! may carry a secret of the client's), token or credentials.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Delivery, MAX_QUEUED, Push};
use crate::a2a::push::Config;
use crate::a2a::version::Generation;
use crate::net::client::{Deadlines, Request};
use crate::net::multi::{self, Answer, Exchange, Grown};
use crate::session::log;

/// Each exchange's deadlines: the connection, then the whole answer (the spec recommends 10 to
/// 30 s for a webhook).
pub const DEADLINES: Deadlines = Deadlines {
    connect: Duration::from_secs(3),
    response: Duration::from_secs(10),
};
/// Attempts per update before it is given up.
pub const ATTEMPTS: u32 = 4;
/// The most exchanges in flight at once.
pub const IN_FLIGHT: usize = 1024;
/// The most jobs not done at once (a job is one webhook's run of updates).
pub const JOBS: usize = 16_384;
/// The most updates one job holds: a webhook with more has them taken as it goes.
pub const PER_JOB: usize = 64;
/// The least time between two looks at the queue that queued updates cause: an update waits
/// this long at most before it is taken, and a thread holding a thousand stuck exchanges walks
/// them at most a hundred times a second rather than once per update queued.
const LOOK_GAP: Duration = Duration::from_millis(10);
/// How long the thread sleeps with nothing due, at most (a retry's backoff is shorter).
const IDLE: Duration = Duration::from_secs(5);

/// One webhook's updates, in order, and where they go.
struct Job {
    /// Its webhook's [`key`].
    key: usize,
    to: SocketAddr,
    items: VecDeque<Delivery>,
}

/// Updates whose webhook's last exchange failed, parked until its retry falls due: the failed
/// update first, then every later one of the same webhook, in order. At most [`MAX_QUEUED`] in
/// all; past that, a later update of a parked webhook is dropped and counted as the queue's are.
#[derive(Default)]
struct Parked {
    by_key: HashMap<usize, VecDeque<Delivery>>,
    /// When each parked webhook's retry falls due, soonest first.
    due: BTreeSet<(Instant, usize)>,
    len: usize,
}

impl Parked {
    /// Park webhook `key`'s `updates` until `at`.
    fn park(&mut self, key: usize, at: Instant, updates: VecDeque<Delivery>) {
        self.len += updates.len();
        self.by_key.insert(key, updates);
        self.due.insert((at, key));
    }

    /// Add `update` behind its webhook's parked ones; `Err` with it when the webhook is not
    /// parked, `Ok(false)` when it was dropped for want of room.
    fn join(&mut self, update: Delivery, key: usize) -> Result<bool, Delivery> {
        let Some(parked) = self.by_key.get_mut(&key) else {
            return Err(update);
        };
        if self.len >= MAX_QUEUED {
            return Ok(false);
        }
        parked.push_back(update);
        self.len += 1;
        Ok(true)
    }

    /// The updates of every webhook whose retry is due at `now` — every one once the session
    /// winds down (`closing`) — each webhook's in order.
    fn release(&mut self, now: Instant, closing: bool) -> Vec<Delivery> {
        let mut released = Vec::new();
        while let Some(&(at, key)) = self.due.first() {
            if at > now && !closing {
                break;
            }
            self.due.pop_first();
            let updates = self.by_key.remove(&key).unwrap_or_default();
            self.len -= updates.len();
            released.extend(updates);
        }
        released
    }

    /// When the next retry falls due.
    fn next(&self) -> Option<Instant> {
        self.due.first().map(|&(at, _)| at)
    }
}

/// The new jobs one look at the queue makes, before their webhooks are resolved and checked.
#[derive(Default)]
struct Fresh {
    jobs: Vec<VecDeque<Delivery>>,
    /// Each webhook's new job, by its [`key`].
    of: HashMap<usize, usize>,
}

/// The jobs of one round: it lasts while any exchange is in flight, taking the updates that
/// fall due meanwhile.
#[derive(Default)]
struct Round {
    /// Carried from round to round by [`run`].
    parked: Parked,
    /// The jobs not done, by their number in the round (`net::multi`'s job index).
    jobs: HashMap<usize, Job>,
    /// How many jobs the round has taken, done ones included: the next one's number.
    taken: usize,
    /// The jobs still going, by their webhook's config (its address: the job holds the config,
    /// so no other config has it meanwhile): new updates of that webhook join them.
    going: HashMap<usize, usize>,
}

/// The identity of a webhook's config, while something holds it.
fn key(config: &Arc<Config>) -> usize {
    Arc::as_ptr(config) as usize
}

/// The thread's life: rounds, for as long as the session lives; between them it sleeps until an
/// update is queued or a retry falls due. Once the session winds down ([`Push::finish`]), a
/// last round at most until its end; then what is left is logged, and the thread ends.
pub(super) fn run(push: &Arc<Push>) {
    let mut parked = Parked::default();
    loop {
        push.wake.take();
        let closing = push.closing.get().copied();
        if closing.is_some_and(|until| Instant::now() >= until) {
            break;
        }
        let round = RefCell::new(Round {
            parked: std::mem::take(&mut parked),
            ..Round::default()
        });
        let first = round.borrow_mut().take_due(push);
        if round.borrow().taken == 0 {
            parked = round.into_inner().parked;
            if closing.is_some() {
                break;
            }
            wait(push, first.recheck);
            continue;
        }
        multi::run_growing(
            DEADLINES,
            Some(&push.wake),
            LOOK_GAP,
            IN_FLIGHT,
            || round.borrow_mut().take_due(push),
            |j, answer| round.borrow_mut().step(push, j, answer),
        );
        parked = round.into_inner().parked;
    }
    let mut left: Vec<Delivery> = push.queue().items.drain(..).collect();
    left.extend(parked.release(Instant::now(), true));
    not_delivered(&left, "the session ended first");
    *push.finished.lock().unwrap_or_else(|p| p.into_inner()) = true;
    push.finished_cv.notify_all();
}

/// Log `updates`, which were not delivered because `why`: one line per task and webhook, naming
/// its host and port and how many.
fn not_delivered(updates: &[Delivery], why: &str) {
    let mut counted: BTreeMap<(&str, String), usize> = BTreeMap::new();
    for update in updates {
        let webhook = update.config.target.authority();
        *counted
            .entry((update.task_id.as_str(), webhook))
            .or_default() += 1;
    }
    for ((task, webhook), n) in counted {
        let line = format!("push to {webhook}: {n} update(s) not delivered: {why}");
        log::event(task, &line);
    }
}

/// Sleep until an update is queued, or `until` (the earliest retry) passes — at most [`IDLE`].
fn wait(push: &Push, until: Option<Instant>) {
    let timeout = until.map_or(IDLE, |at| {
        at.saturating_duration_since(Instant::now()).min(IDLE)
    });
    // A failed poll is a plain wait: the loop looks at the queue again either way.
    if crate::sys::poll::poll_fds(&[push.wake.fd()], timeout).is_err() {
        std::thread::sleep(timeout);
    }
}

impl Round {
    /// Take every due update whose webhook has nothing earlier still waiting: onto its
    /// webhook's job while that job goes on (up to [`PER_JOB`]), else into a new job (at most
    /// [`JOBS`] not done), its host resolved and checked — a webhook refused has its updates
    /// dropped and says so once in its task's log. Updates of a deleted webhook are dropped;
    /// those of a parked webhook join it. The queue is taken whole in one swap under its lock,
    /// and what no job can take yet goes back to its head. The jobs so far, and when the
    /// earliest parked retry falls due. Once the session winds down every update is due, a last
    /// chance, until its end.
    fn take_due(&mut self, push: &Push) -> Grown {
        let until = push.closing.get().copied();
        let (queued, mut dropped) = {
            let mut queue = push.queue();
            let dropped = std::mem::take(&mut queue.dropped);
            (std::mem::take(&mut queue.items), dropped)
        };
        // Retries now due first: they are older than anything queued for their webhook.
        let released = self.parked.release(Instant::now(), until.is_some());
        let mut fresh = Fresh::default();
        let mut held_back: HashSet<usize> = HashSet::new();
        let mut kept = VecDeque::new();
        for item in released.into_iter().chain(queued) {
            let key = key(&item.config);
            let item = match self.parked.join(item, key) {
                Ok(joined) => {
                    dropped += u64::from(!joined);
                    continue;
                }
                Err(item) => item,
            };
            let left = if held_back.contains(&key) {
                Some(item)
            } else {
                self.take(item, key, &mut fresh)
            };
            // Not taken: neither are the later ones of its webhook, so they stay in order.
            if let Some(item) = left {
                held_back.insert(key);
                kept.push_back(item);
            }
        }
        if !kept.is_empty() {
            let mut queue = push.queue();
            // Ahead of what was queued meanwhile, in order.
            for item in kept.into_iter().rev() {
                queue.items.push_front(item);
            }
        }
        if dropped > 0 {
            let line = format!("{dropped} update(s) dropped: the push queue was full");
            log::event("push", &line);
        }
        for mut items in fresh.jobs {
            items.retain(|d| push.current(&d.task_id, &d.config));
            let Some(first) = items.front() else {
                continue;
            };
            let url = &first.config.target;
            match push.target(url) {
                Ok(to) => {
                    let key = key(&first.config);
                    self.going.insert(key, self.taken);
                    self.jobs.insert(self.taken, Job { key, to, items });
                    self.taken += 1;
                }
                Err(why) => log::event(
                    &first.task_id,
                    &format!(
                        "push to {}: refused, never connected to: {why}; {} update(s) not delivered",
                        url.authority(),
                        items.len()
                    ),
                ),
            }
        }
        Grown {
            jobs: self.taken,
            recheck: self.parked.next(),
            until,
        }
    }

    /// Put `item` (of webhook `key`) on its webhook's job going on, or on the new one this look
    /// makes for it, or make that: up to [`PER_JOB`] a job, [`JOBS`] not done. `Some` with the
    /// item when there is no room for it.
    fn take(&mut self, item: Delivery, key: usize, fresh: &mut Fresh) -> Option<Delivery> {
        let job = match self.going.get(&key).and_then(|j| self.jobs.get_mut(j)) {
            Some(going) => &mut going.items,
            None => match fresh.of.get(&key) {
                Some(&f) => &mut fresh.jobs[f],
                None if self.jobs.len() + fresh.jobs.len() < JOBS => {
                    fresh.of.insert(key, fresh.jobs.len());
                    fresh.jobs.push(VecDeque::from([item]));
                    return None;
                }
                None => return Some(item),
            },
        };
        if job.len() >= PER_JOB {
            return Some(item);
        }
        job.push_back(item);
        None
    }

    /// Job `j`'s next exchange, after `answer` to its last one: the next update once the last
    /// was taken; none once it failed (it and the rest are parked: [`failed`]). A job
    /// with nothing left is done and forgotten: its webhook's next updates start a new one.
    fn step(&mut self, push: &Push, j: usize, answer: Option<Answer>) -> Option<Exchange> {
        let job = self.jobs.get_mut(&j)?;
        if let Some(answer) = answer
            && let Some(sent) = job.items.pop_front()
            && let Err(why) = accepted(answer)
        {
            failed(push, sent, job, &why, &mut self.parked);
        }
        let next = job.items.front().map(|d| exchange(d, job.to));
        if next.is_none() {
            let key = job.key;
            self.jobs.remove(&j);
            if self.going.get(&key) == Some(&j) {
                self.going.remove(&key);
            }
        }
        next
    }
}

/// An update that failed, and those of its webhook behind it: parked until a backoff (1, 2, 4
/// s) has passed, or — its attempts spent — given up and logged (the ones behind it are tried
/// on, after the same backoff). Once the session winds down, none is tried again: all are
/// logged.
fn failed(push: &Push, mut sent: Delivery, job: &mut Job, why: &str, parked: &mut Parked) {
    if push.closing.get().is_some() {
        job.items.push_front(sent);
        let lost: Vec<Delivery> = job.items.drain(..).collect();
        not_delivered(&lost, &format!("the session ended ({why})"));
        return;
    }
    let host = sent.config.target.authority();
    sent.attempt += 1;
    let due = Instant::now() + Duration::from_secs(1 << (sent.attempt - 1).min(8));
    let mut again = std::mem::take(&mut job.items);
    if sent.attempt >= ATTEMPTS {
        let line = format!("push to {host}: given up after {ATTEMPTS} attempts: {why}");
        log::event(&sent.task_id, &line);
    } else {
        if sent.attempt == 1 {
            let line = format!("push to {host}: failed ({why}); retrying");
            log::event(&sent.task_id, &line);
        }
        again.push_front(sent);
    }
    if !again.is_empty() {
        parked.park(job.key, due, again);
    }
}

/// Whether a receiver took the update: a 2xx answer.
fn accepted(answer: Answer) -> Result<(), String> {
    match answer {
        Ok(response) if (200..300).contains(&response.status) => Ok(()),
        Ok(response) => Err(format!("answered HTTP {}", response.status)),
        Err(err) => Err(err),
    }
}

/// The POST carrying `update` to `to`: its body in the shape of the generation its config was
/// set in (1.0 a `StreamResponse`, 0.3 the task), its token and authentication as headers.
fn exchange(update: &Delivery, to: SocketAddr) -> Exchange {
    let config = &update.config;
    let generation = config.generation;
    let body = update
        .event
        .render(&update.task_id, &update.context_id, generation);
    let body = crate::json::raw::to_vec(&body);
    let content_type = match generation {
        Generation::V0_3 => "application/json",
        Generation::V1_0 => "application/a2a+json",
    };
    let secrets = config.headers();
    let mut headers = vec![("Content-Type", content_type)];
    headers.extend(secrets.iter().map(|(name, value)| (*name, value.as_str())));
    let request = Request {
        method: "POST",
        path: &config.target.path,
        headers: &headers,
        body: Some(&body),
    };
    Exchange {
        addr: to,
        request: request.encode_for(&config.target.authority()),
    }
}

#[cfg(test)]
mod tests;
