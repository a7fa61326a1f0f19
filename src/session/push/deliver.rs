//! The delivery thread: takes the updates that are due from the queue, in rounds, and POSTs
//! them — every webhook of a round at once, non-blocking, on one `poll` loop
//! ([`crate::net::multi`]), each exchange under its own deadlines ([`DEADLINES`]). A receiver
//! that never answers costs one connection until its deadline, never a thread.
//!
//! A webhook's updates go out in the order they happened: one exchange at a time per webhook,
//! and an update waiting to be retried holds back the later ones of its webhook. A failed
//! update (no connection, no answer in time, a status other than 2xx) is retried after 1, 2, 4
//! s; after [`ATTEMPTS`] it is given up and logged. An update whose webhook was deleted meanwhile
//! is dropped. Log lines name the task and the webhook's host and port, never its path (which
//! may carry a secret of the client's), token or credentials.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Delivery, Push};
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

/// One webhook's updates in a round, in order, and where they go.
struct Job {
    to: SocketAddr,
    items: VecDeque<Delivery>,
}

/// The thread's life: rounds, for as long as the session lives.
pub(super) fn run(push: &Arc<Push>) {
    loop {
        let jobs = targets(push, next_round(push));
        if jobs.is_empty() {
            continue;
        }
        deliver(push, jobs);
    }
}

/// Wait until some update is due, then take every due one whose webhook has nothing earlier
/// still waiting, grouped by webhook (at most [`ROUND`] webhooks); updates of a deleted webhook
/// are dropped here.
fn next_round(push: &Push) -> Vec<VecDeque<Delivery>> {
    let mut queue = push.queue();
    loop {
        if queue.dropped > 0 {
            let dropped = std::mem::take(&mut queue.dropped);
            drop(queue);
            log::event(
                "push",
                &format!("{dropped} update(s) dropped: the push queue was full"),
            );
            queue = push.queue();
        }
        let now = Instant::now();
        let mut jobs: Vec<VecDeque<Delivery>> = Vec::new();
        let mut held_back: Vec<Arc<crate::a2a::push::Config>> = Vec::new();
        let mut kept = VecDeque::new();
        for item in queue.items.drain(..) {
            let same = |c: &Arc<_>| Arc::ptr_eq(c, &item.config);
            if held_back.iter().any(same) || item.due > now {
                held_back.push(item.config.clone());
                kept.push_back(item);
            } else if let Some(job) = jobs.iter_mut().find(|j| same(&j[0].config)) {
                job.push_back(item);
            } else if jobs.len() < ROUND {
                jobs.push(VecDeque::from([item]));
            } else {
                held_back.push(item.config.clone());
                kept.push_back(item);
            }
        }
        queue.items = kept;
        if !jobs.is_empty() {
            drop(queue);
            jobs.iter_mut()
                .for_each(|job| job.retain(|d| push.current(&d.task_id, &d.config)));
            jobs.retain(|job| !job.is_empty());
            return jobs;
        }
        let wait = queue
            .items
            .iter()
            .map(|d| d.due.saturating_duration_since(now))
            .min()
            .unwrap_or(IDLE);
        queue = push
            .queued
            .wait_timeout(queue, wait)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

/// Each webhook's address, resolved and checked; a webhook refused (a forbidden address, a
/// name that does not resolve) has its updates dropped, and says so in its task's log once.
fn targets(push: &Push, rounds: Vec<VecDeque<Delivery>>) -> Vec<Job> {
    let mut jobs = Vec::new();
    for items in rounds {
        let url = &items[0].config.target;
        match push.target(url) {
            Ok(to) => jobs.push(Job { to, items }),
            Err(why) => log::event(
                &items[0].task_id,
                &format!(
                    "push to {}: refused, never connected to: {why}; {} update(s) not delivered",
                    url.authority(),
                    items.len()
                ),
            ),
        }
    }
    jobs
}

/// One round: every job's updates, one exchange at a time per job, all jobs at once. What
/// failed goes back to the queue, due after its backoff, or is given up.
fn deliver(push: &Push, mut jobs: Vec<Job>) {
    let mut again: Vec<Delivery> = Vec::new();
    let mut lines: Vec<(String, String)> = Vec::new();
    multi::run(jobs.len(), DEADLINES, |j, answer| {
        let job = &mut jobs[j];
        if let Some(answer) = answer {
            let sent = job.items.pop_front()?;
            if let Err(why) = accepted(answer) {
                failed(sent, job, &why, &mut again, &mut lines);
                return None;
            }
        }
        job.items.front().map(|d| exchange(d, job.to))
    });
    for (task, line) in lines {
        log::event(&task, &line);
    }
    if !again.is_empty() {
        let mut queue = push.queue();
        // Ahead of what came meanwhile, in order: a webhook's updates stay in order.
        for item in again.into_iter().rev() {
            queue.items.push_front(item);
        }
        drop(queue);
        push.queued.notify_one();
    }
}

/// An update that failed, and those of its webhook behind it: back to the queue after a
/// backoff, or — its attempts spent — given up and logged (the ones behind it are retried).
fn failed(
    mut sent: Delivery,
    job: &mut Job,
    why: &str,
    again: &mut Vec<Delivery>,
    lines: &mut Vec<(String, String)>,
) {
    let host = sent.config.target.authority();
    sent.attempt += 1;
    let backoff = Duration::from_secs(1 << sent.attempt.min(8).saturating_sub(1));
    let due = Instant::now() + backoff;
    if sent.attempt >= ATTEMPTS {
        let line = format!(
            "push to {host}: given up after {ATTEMPTS} attempts: {why}"
        );
        lines.push((sent.task_id.clone(), line));
    } else {
        if sent.attempt == 1 {
            let line = format!("push to {host}: failed ({why}); retrying");
            lines.push((sent.task_id.clone(), line));
        }
        sent.due = due;
        again.push(sent);
    }
    for mut rest in job.items.drain(..) {
        rest.due = due;
        again.push(rest);
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
