//! The delivery thread: takes the updates that are due from the queue and POSTs them — every
//! webhook at once, non-blocking, on one `poll` loop ([`crate::net::multi::run_growing`]), each
//! exchange under its own deadlines ([`DEADLINES`]); updates that fall due while exchanges are
//! in flight join within [`TICK`]. A receiver that never answers costs one connection until its
//! deadline, never a thread, and holds back no other receiver's updates.
//!
//! A webhook's updates go out in the order they happened: one exchange at a time per webhook,
//! and an update waiting to be retried holds back the later ones of its webhook. A failed
//! update (no connection, no answer in time, a status other than 2xx) is retried after 1, 2, 4
//! s; after [`ATTEMPTS`] it is given up and logged. An update whose webhook was deleted meanwhile
//! is dropped. Log lines name the task and the webhook's host and port, never its path (which
//! may carry a secret of the client's), token or credentials.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Delivery, Push};
use crate::a2a::push::Config;
use crate::a2a::version::Generation;
use crate::net::client::{Deadlines, Request};
use crate::net::multi::{self, Answer, Exchange};
use crate::session::log;

/// Each exchange's deadlines: the connection, then the whole answer (the spec recommends 10 to
/// 30 s for a webhook).
pub const DEADLINES: Deadlines = Deadlines {
    connect: Duration::from_secs(3),
    response: Duration::from_secs(10),
};
/// Attempts per update before it is given up.
pub const ATTEMPTS: u32 = 4;
/// The most webhooks served in one round.
const ROUND: usize = 1024;
/// How long the thread sleeps with nothing due, at most (a retry's backoff is shorter).
const IDLE: Duration = Duration::from_secs(5);

/// How long a round's loop waits at most before it looks for new updates.
const TICK: Duration = Duration::from_millis(20);

/// One webhook's updates, in order, and where they go.
struct Job {
    to: SocketAddr,
    items: VecDeque<Delivery>,
    /// Its last exchange has ended and it asked for none after: new updates start a new job.
    done: bool,
}

/// The jobs of one round: it lasts while any exchange is in flight, taking the updates that
/// fall due meanwhile.
#[derive(Default)]
struct Round {
    jobs: Vec<Job>,
}

/// The thread's life: rounds, for as long as the session lives; between them it sleeps until an
/// update is queued or a retry falls due.
pub(super) fn run(push: &Arc<Push>) {
    loop {
        let round = RefCell::new(Round::default());
        if !round.borrow_mut().take_due(push) {
            wait(push);
            continue;
        }
        multi::run_growing(
            DEADLINES,
            Some(TICK),
            || {
                let mut round = round.borrow_mut();
                round.take_due(push);
                round.jobs.len()
            },
            |j, answer| round.borrow_mut().step(push, j, answer),
        );
    }
}

/// Sleep until an update is queued, or the earliest retry falls due (at most [`IDLE`]); and
/// say how many updates were dropped for want of room, if any.
fn wait(push: &Push) {
    let mut queue = push.queue();
    let dropped = std::mem::take(&mut queue.dropped);
    if dropped > 0 {
        drop(queue);
        let line = format!("{dropped} update(s) dropped: the push queue was full");
        log::event("push", &line);
        return;
    }
    let now = Instant::now();
    let wait = queue
        .items
        .iter()
        .map(|d| d.due.saturating_duration_since(now))
        .min()
        .unwrap_or(IDLE);
    if wait.is_zero() {
        return;
    }
    let _ = push.queued.wait_timeout(queue, wait);
}

impl Round {
    /// Take every due update whose webhook has nothing earlier still waiting: onto its
    /// webhook's job while that job goes on, else into a new job (at most [`ROUND`] in a
    /// round), its host resolved and checked — a webhook refused has its updates dropped and
    /// says so once in its task's log. Updates of a deleted webhook are dropped. Whether any
    /// was taken.
    fn take_due(&mut self, push: &Push) -> bool {
        let now = Instant::now();
        let mut fresh: Vec<VecDeque<Delivery>> = Vec::new();
        let mut taken = 0;
        {
            let mut queue = push.queue();
            let mut held_back: Vec<Arc<Config>> = Vec::new();
            let mut kept = VecDeque::new();
            for item in queue.items.drain(..) {
                let same = |c: &Arc<Config>| Arc::ptr_eq(c, &item.config);
                let going = self
                    .jobs
                    .iter_mut()
                    .find(|j| !j.done && same(&j.items[0].config));
                if held_back.iter().any(same) || item.due > now {
                    held_back.push(item.config.clone());
                    kept.push_back(item);
                } else if let Some(job) = going {
                    job.items.push_back(item);
                    taken += 1;
                } else if let Some(new) = fresh.iter_mut().find(|f| same(&f[0].config)) {
                    new.push_back(item);
                    taken += 1;
                } else if self.jobs.len() + fresh.len() < ROUND {
                    fresh.push(VecDeque::from([item]));
                    taken += 1;
                } else {
                    held_back.push(item.config.clone());
                    kept.push_back(item);
                }
            }
            queue.items = kept;
        }
        for mut items in fresh {
            items.retain(|d| push.current(&d.task_id, &d.config));
            let Some(first) = items.front() else {
                continue;
            };
            let url = &first.config.target;
            match push.target(url) {
                Ok(to) => self.jobs.push(Job {
                    to,
                    items,
                    done: false,
                }),
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
        taken > 0
    }

    /// Job `j`'s next exchange, after `answer` to its last one: the next update once the last
    /// was taken; none once it failed (it and the rest go back to the queue: [`failed`]).
    fn step(&mut self, push: &Push, j: usize, answer: Option<Answer>) -> Option<Exchange> {
        let job = &mut self.jobs[j];
        if let Some(answer) = answer {
            let sent = job.items.pop_front()?;
            if let Err(why) = accepted(answer) {
                failed(push, sent, job, &why);
            }
        }
        let next = job.items.front().map(|d| exchange(d, job.to));
        job.done = next.is_none();
        next
    }
}

/// An update that failed, and those of its webhook behind it: back to the queue after a
/// backoff (1, 2, 4 s), or — its attempts spent — given up and logged (the ones behind it are
/// tried on).
fn failed(push: &Push, mut sent: Delivery, job: &mut Job, why: &str) {
    let host = sent.config.target.authority();
    sent.attempt += 1;
    let due = Instant::now() + Duration::from_secs(1 << (sent.attempt - 1).min(8));
    let mut again: Vec<Delivery> = Vec::new();
    if sent.attempt >= ATTEMPTS {
        let line = format!("push to {host}: given up after {ATTEMPTS} attempts: {why}");
        log::event(&sent.task_id, &line);
    } else {
        if sent.attempt == 1 {
            let line = format!("push to {host}: failed ({why}); retrying");
            log::event(&sent.task_id, &line);
        }
        sent.due = due;
        again.push(sent);
    }
    for mut rest in job.items.drain(..) {
        rest.due = due;
        again.push(rest);
    }
    let mut queue = push.queue();
    // Ahead of what came meanwhile, in order: a webhook's updates stay in order.
    for item in again.into_iter().rev() {
        queue.items.push_front(item);
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
