//! Running one turn of a task: its directory and environment, the handler from spawn to reap,
//! its stdout streamed to readers as it arrives.

use std::ffi::OsString;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::super::handler::{self, CallSocket, MAX_ANSWER, Serving, TurnOutcome};
use super::super::journal::format::Kind;
use super::super::log::TaskStderr;
use super::super::sandbox::{Domain, Policy};
use super::super::taskdir::TaskDir;
use super::live::{self, LiveTask, Turn};
use super::outbox::Outbox;
use super::{Capsule, ENTRY_OVERHEAD, Engine, MAX_TURNS};
use crate::a2a::message::{Content, Part};
use crate::a2a::stream::{Chunker, Event};
use crate::a2a::task::State;
use crate::json::channel::env;
use crate::sys::spawn::Spawned;

/// What one handler is started as: its argv, workdir and variables, and its Landlock domain.
struct Started<'a> {
    argv: &'a [String],
    workdir: &'a std::path::Path,
    vars: &'a [(String, OsString)],
    domain: Option<&'a Domain>,
}

/// A turn as the thread that started it leaves it to a task thread ([`Engine::spawn`]).
pub(super) enum Prepared {
    /// Its handler runs, to be watched to its end.
    Launched(Box<Launched>),
    /// It could not start, and why.
    Ended(TurnOutcome),
}

/// A turn whose handler has been started and is not yet watched.
pub(super) struct Launched {
    dir: Option<Arc<TaskDir>>,
    spawned: Spawned,
    serving: Option<Result<Serving, String>>,
    /// The handler's program, named when it turns out not to have run.
    program: String,
    sandboxed: bool,
    /// The turn's message text: the handler's stdin.
    text: String,
}

impl Launched {
    /// Nothing will watch this turn (no task thread could be started): its handler's tree is
    /// killed and its subreaper reaped here, so neither outlives the turn nor is leaked.
    fn abandon(self) {
        let mut shim = self.spawned.shim;
        shim.remote().kill();
        let _ = shim.end();
        if let Some(Ok(serving)) = self.serving {
            serving.close();
        }
    }
}

/// The largest chunk one stream event carries: a handler writing megabytes at once is streamed
/// in pieces a reader's buffer can hold.
const MAX_CHUNK: usize = 64 << 10;

/// `text` cut into pieces of at most [`MAX_CHUNK`] bytes, on character boundaries.
fn pieces(mut text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    while text.len() > MAX_CHUNK {
        let mut at = MAX_CHUNK;
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        let (piece, rest) = text.split_at(at);
        pieces.push(piece);
        text = rest;
    }
    pieces.push(text);
    pieces
}

impl Engine {
    /// Start task `id`'s turn, marked working, and leave it to a thread of its own — one a
    /// finished turn left waiting, or a new one ([`super::threads`]) — to watch to its end; the
    /// engine lock not held: a spawn may wait on the kernel.
    ///
    /// The handler is started here, by the thread that started the turn (most often a door
    /// worker, already running), and the task thread is woken only to watch it: that wake-up —
    /// some 35 µs when it lands on an idle vCPU — overlaps the handler's exec instead of coming
    /// before all of the turn's work. A thread that cannot be started (`RLIMIT_NPROC`, memory)
    /// fails the task with the reason, its handler's tree killed and reaped here, so it never
    /// stays `working` with nothing to end it, and whoever waits for it is answered.
    pub(super) fn spawn(&self, id: String) {
        let Some(engine) = self.me.upgrade() else {
            return;
        };
        let began = Instant::now();
        // Kept here too: a thread that cannot be started gives the turn back through it, so a
        // running handler is never dropped unwatched.
        let slot = Arc::new(Mutex::new(self.prepare(&id)));
        let theirs = slot.clone();
        let runs = id.clone();
        let Err(err) = self.threads.run(move || {
            let prepared = theirs.lock().unwrap_or_else(|p| p.into_inner()).take();
            engine.execute(&runs, began, prepared);
        }) else {
            return;
        };
        let prepared = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(Prepared::Launched(launched)) = prepared {
            launched.abandon();
        }
        let mut tasks = self.lock();
        tasks.running -= 1;
        if let Some(mut entry) = tasks.by_id.remove(&id) {
            let why = format!("no thread to run the task: {err}");
            entry.move_to(State::Failed, Some(why), &mut tasks.out);
            super::insert_finished(&mut tasks, entry);
        }
        tasks.out.due.idle = tasks.running == 0;
    }

    /// Task `id`'s turn started, or `None` when there is none to run: the task is gone, or the
    /// capsule answers itself (`take` answers an echo task and never schedules it; an echo task
    /// never waits for input, so it is never resumed either).
    fn prepare(&self, id: &str) -> Option<Prepared> {
        let turn = self.turn_of(id)?;
        let Capsule::Handler {
            argv,
            workdir,
            sandbox,
        } = &self.capsule
        else {
            return None;
        };
        super::super::log::turn_started(id, &format!("started turn {}", turn.number));
        Some(self.prepare_turn(id, argv, workdir, sandbox.as_deref(), &turn))
    }

    /// Watch task `id`'s started turn to its end and record the outcome; then give back its
    /// slot (whatever happened: a task gone before its turn ran still held one) and start the
    /// next queued task.
    fn execute(&self, id: &str, began: Instant, prepared: Option<Prepared>) {
        let ran = prepared.map(|prepared| match prepared {
            Prepared::Launched(launched) => self.finish_turn(id, *launched),
            Prepared::Ended(outcome) => (outcome, Vec::new()),
        });
        let mut tasks = self.lock();
        tasks.running -= 1;
        if let Some((outcome, files)) = ran
            && let Some(mut entry) = tasks.by_id.remove(id)
        {
            self.record(&mut entry, outcome, files, &mut tasks.out);
            let task = &entry.task;
            let ended =
                super::super::log::turn_ended(task.state, task.note.as_deref(), began.elapsed());
            tasks.out.due.logs.push((id.to_string(), ended));
            if entry.task.state.is_final() {
                super::insert_finished(&mut tasks, entry);
            } else {
                tasks.journal_live(&entry, Kind::Waiting);
                tasks.by_id.insert(id.to_string(), entry);
            }
        }
        if !tasks.stopping
            && let Some(next) = tasks.queue.pop_front()
        {
            self.start(&mut tasks, next);
        }
        tasks.out.due.idle = tasks.running == 0;
        // This thread answers the task's waiters itself once the lock is released.
        tasks.out.due.serve_here = true;
    }

    /// What one turn of task `id` needs, read under the lock.
    pub(super) fn turn_of(&self, id: &str) -> Option<Turn> {
        let tasks = self.lock();
        let entry = tasks.by_id.get(id)?;
        let (message, earlier) = entry.task.history.split_last()?;
        Some(Turn {
            task_id: entry.task.id.clone(),
            context_id: entry.task.context_id.clone(),
            number: entry.turn,
            message: message.clone(),
            earlier: earlier.to_vec(),
            dir: entry.dir.clone(),
        })
    }

    /// Start one turn's handler: its directory written, its environment set, in a Landlock
    /// domain of `sandbox`'s rules and its task directory when the session has a sandbox. What
    /// is yet to be done — watching it to its end ([`Engine::finish_turn`]) — is left to a task
    /// thread; a turn that could not start is [`Prepared::Ended`] already.
    fn prepare_turn(
        &self,
        id: &str,
        argv: &[String],
        workdir: &std::path::Path,
        sandbox: Option<&Policy>,
        turn: &Turn,
    ) -> Prepared {
        let dir = match self.task_dir(id, turn) {
            Ok(dir) => dir,
            Err(why) => return Prepared::Ended(TurnOutcome::Failed(why)),
        };
        let domain = sandbox.map(|policy| match &dir {
            Some(dir) => dir.domain(|| policy.ruleset(Some(&dir.path()))),
            None => policy.ruleset(None).map(Arc::new),
        });
        let domain = match domain.transpose() {
            Ok(domain) => domain,
            Err(err) => {
                let why = format!("the handler's sandbox could not be made: {err}");
                return Prepared::Ended(TurnOutcome::Failed(why));
            }
        };
        let mut vars = self.base_env.clone();
        vars.push((env::TASK_ID.into(), turn.task_id.to_string().into()));
        vars.push((env::CONTEXT_ID.into(), turn.context_id.clone().into()));
        vars.push((env::TURN.into(), turn.number.to_string().into()));
        if let Some(dir) = &dir {
            if let Err(why) = dir.write_turn(&turn.message, &turn.earlier) {
                return Prepared::Ended(TurnOutcome::Failed(why));
            }
            vars.push((env::TASK_DIR.into(), dir.path().into()));
        }
        vars.extend((self.extra_env)());
        let started = Started {
            argv,
            workdir,
            vars: &vars,
            domain: domain.as_deref(),
        };
        match self.launch(&started) {
            Ok((spawned, serving)) => Prepared::Launched(Box::new(Launched {
                dir,
                spawned,
                serving,
                program: argv[0].clone(),
                sandboxed: started.domain.is_some(),
                text: turn.message.text(),
            })),
            Err(outcome) => Prepared::Ended(outcome),
        }
    }

    /// Watch a launched turn's handler to its end: its answer streamed to readers as it
    /// arrives, and the files it left in `out/` (for a completed turn).
    fn finish_turn(&self, id: &str, launched: Launched) -> (TurnOutcome, Vec<Part>) {
        let Launched {
            dir,
            spawned,
            serving,
            program,
            sandboxed,
            text,
        } = launched;
        // The answer streams to readers as it arrives; what came after the last read (drained
        // once the handler was gone) follows when it ends.
        let mut chunker = Chunker::default();
        let mut sent = 0;
        let mut on_output = |bytes: &[u8]| {
            if let Some(text) = chunker.push(bytes) {
                sent += text.len();
                for piece in pieces(&text) {
                    self.publish_chunk(id, piece.to_string());
                }
            }
        };
        let registration = self.supervisor.register(&spawned);
        let outcome = self
            .watch(id, spawned, serving.as_ref(), text, &mut on_output)
            .unwrap_or_else(|err| could_not_start(&program, &err, sandboxed));
        drop(registration);
        let outcome = match serving {
            Some(Ok(serving)) => {
                serving.close();
                outcome
            }
            Some(Err(why)) => TurnOutcome::Failed(why),
            None => outcome,
        };
        if let TurnOutcome::Completed(answer) | TurnOutcome::InputRequired(answer) = &outcome
            && let Some(rest) = answer.get(sent..).filter(|rest| !rest.is_empty())
        {
            for piece in pieces(rest) {
                self.publish_chunk(id, piece.to_string());
            }
        }
        let files = match (&outcome, &dir) {
            (TurnOutcome::Completed(answer), Some(dir)) => {
                let (parts, notes) = dir.collect_out(MAX_ANSWER.saturating_sub(answer.len()));
                for note in notes {
                    crate::cli::warn("run", &format!("task {id}: {note}"));
                }
                parts
            }
            _ => Vec::new(),
        };
        (outcome, files)
    }

    /// Task `id`'s directory: the one its first turn made, or a new one; `None` for a session
    /// that has none (its home could not hold them).
    fn task_dir(&self, id: &str, turn: &Turn) -> Result<Option<Arc<TaskDir>>, String> {
        if let Some(dir) = &turn.dir {
            return Ok(Some(dir.clone()));
        }
        let Some(dirs) = &self.dirs else {
            return Ok(None);
        };
        let dir = Arc::new(dirs.task(id)?);
        if let Some(entry) = self.lock().by_id.get_mut(id) {
            entry.dir = Some(dir.clone());
        }
        Ok(Some(dir))
    }

    /// Stream a piece of task `id`'s answer to its readers.
    ///
    /// The text streamed so far is kept as the task's answer while it works, so a reader who
    /// joins mid-way (or reads the task) starts from it, and the chunks that follow append to
    /// it. It is bounded by the handler's output bound.
    pub(super) fn publish_chunk(&self, id: &str, text: String) {
        let mut tasks = self.lock();
        let super::Tasks { by_id, out, .. } = &mut *tasks;
        if let Some(entry) = by_id.get_mut(id) {
            let append = entry.chunked;
            entry.chunked = true;
            // The answer grows by the text, and so does the event every reader shares: counted,
            // never refused (the turn is under way; [`Engine::record`] sets the count exactly).
            entry.charge.force(2 * text.len());
            match entry.task.answer.first_mut().map(|p| &mut p.content) {
                Some(Content::Text(so_far)) if append => so_far.push_str(&text),
                _ => entry.task.answer = vec![Part::text(text.clone())],
            }
            let chunk = Event::Artifact {
                parts: vec![Part::text(text)],
                append,
                last: false,
            };
            entry.publish(chunk, out);
        }
    }

    /// Start a turn's handler under its own subreaper, and serve its calls when it makes any;
    /// the `Err`: it could not start, and why.
    fn launch(
        &self,
        started: &Started<'_>,
    ) -> Result<(Spawned, Option<Result<Serving, String>>), TurnOutcome> {
        let argv = started.argv;
        let mut spec = handler::spec(argv, started.workdir, started.vars);
        spec.user = self.dirs.as_ref().and_then(|d| d.user()).map(|u| u.becomes);
        let call_socket = match self
            .calls
            .as_ref()
            .map(|s| CallSocket::attach(&mut spec, s))
        {
            Some(Err(why)) => return Err(TurnOutcome::Failed(why)),
            attached => attached.and_then(Result::ok),
        };
        let sandboxed = started.domain.is_some();
        match self
            .supervisor
            .spawn(&spec, started.domain.map(Domain::raw_fd))
        {
            Ok(spawned) => Ok((spawned, call_socket.map(CallSocket::serve))),
            Err(err) => Err(could_not_start(&argv[0], &err, sandboxed)),
        }
    }

    /// Watch task `id`'s started handler to its end: its stdin written, its output passed on,
    /// its stderr to the session's log (tagged with the task, never to a caller), stopped on
    /// cancel or at the task's timeout — or at once, when its calls have no thread to serve them.
    /// The `Err`: it never ran, and why.
    fn watch(
        &self,
        id: &str,
        spawned: Spawned,
        serving: Option<&Result<Serving, String>>,
        text: String,
        on_output: &mut dyn FnMut(&[u8]),
    ) -> std::io::Result<TurnOutcome> {
        let timeout = Duration::from_secs(self.lifecycle.task_timeout_secs);
        let mut stderr = TaskStderr::new(id);
        let on_stderr = &mut |bytes: &[u8]| stderr.push(bytes);
        match serving {
            // No thread to serve its calls: the handler is stopped at once, as on cancel.
            Some(Err(_)) => {
                handler::run(spawned, Vec::new(), timeout, || true, on_output, on_stderr)
            }
            _ => handler::run(
                spawned,
                handler::stdin(text),
                timeout,
                || self.lock().by_id.get(id).is_some_and(|e| e.cancel),
                on_output,
                on_stderr,
            ),
        }
    }

    /// Record how a turn ended. A question keeps the task (its directory too) for the next
    /// turn, holding no slot, until the input timeout. A turn a cancel was taken for ends the
    /// task `canceled` however its handler ended: the cancel was answered as taken, and must not
    /// carry into a later turn.
    pub(super) fn record(
        &self,
        entry: &mut LiveTask,
        outcome: TurnOutcome,
        files: Vec<Part>,
        out: &mut Outbox,
    ) {
        let outcome = if entry.cancel {
            TurnOutcome::Canceled
        } else {
            outcome
        };
        match outcome {
            TurnOutcome::Completed(answer) => {
                let mut parts = Vec::new();
                if !answer.is_empty() || files.is_empty() {
                    parts.push(Part::text(answer));
                }
                parts.extend(files);
                entry.task.answer = parts;
                entry.move_to(State::Completed, None, out);
            }
            TurnOutcome::InputRequired(_) if entry.turn >= MAX_TURNS => entry.move_to(
                State::Failed,
                Some(format!(
                    "the handler asked for input at turn {MAX_TURNS}, the most one task takes (its history is bounded)"
                )),
                out,
            ),
            TurnOutcome::InputRequired(question) => {
                entry.task.answer = vec![Part::text(question)];
                entry.move_to(State::InputRequired, None, out);
                let wait = Duration::from_secs(self.lifecycle.input_timeout_secs);
                entry.input_until = Some(Instant::now() + wait);
            }
            TurnOutcome::Failed(why) => entry.move_to(State::Failed, Some(why), out),
            TurnOutcome::Canceled => entry.move_to(State::Canceled, Some("canceled".into()), out),
        }
        // What the turn produced is counted, never refused: a client waits on this task.
        entry
            .charge
            .set(live::weight(&entry.task, self.on_disk) + ENTRY_OVERHEAD);
    }

    /// The session ends in order and no handler runs: its task directories go, its journal is
    /// synced and closed, and the subreapers kept for later tasks end.
    pub fn finish(&self) {
        self.supervisor.retire_idle();
        self.close_journal();
        if let Some(dirs) = &self.dirs {
            dirs.remove();
        }
    }

    /// Kill every running handler's whole tree now: the session is ending at once.
    pub fn kill_all(&self) {
        self.supervisor.kill_all();
    }
}

/// A handler that could not start fails its turn saying why; in a sandbox, an `EACCES` is
/// most likely a program outside what the sandbox lets a handler run, so the reason says what
/// it may run.
fn could_not_start(program: &str, err: &std::io::Error, sandboxed: bool) -> TurnOutcome {
    let hint = match err.raw_os_error() {
        Some(libc::EACCES) if sandboxed => {
            "; in its sandbox a handler runs programs from the system's directories, \
             its capsule directory and what sandbox.read declares"
        }
        _ => "",
    };
    TurnOutcome::Failed(format!(
        "the handler {program} could not start: {err}{hint}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_output_streams_in_pieces_on_character_boundaries() {
        let text = "é".repeat(MAX_CHUNK);
        let cut = pieces(&text);
        assert!(cut.iter().all(|p| p.len() <= MAX_CHUNK && !p.is_empty()));
        assert_eq!(cut.concat(), text);
        assert_eq!(pieces("short"), ["short"]);
    }
}
