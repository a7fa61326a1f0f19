//! The session's door: the agent card, A2A in both generations and both of its HTTP bindings —
//! JSON-RPC 2.0 on `POST /`, HTTP+JSON at its paths (`rest`) — and the control routes.
//!
//! Both bindings reach one dispatch (`Door::call`); only the framing differs (`binding`). Every
//! `POST /` passes the same steps in order, and the first refusal answers it (an HTTP+JSON
//! request the same, its method named by its path and its generation by its path and header):
//!
//! 1. at an authenticated door, the bearer token (401) — from the head, before a byte of the
//!    body is reserved or read (`admit`), so an unauthenticated caller learns nothing else and
//!    costs nothing more;
//! 2. the body is JSON (-32700) with a JSON-RPC 2.0 envelope (-32600);
//! 3. `A2A-Version` names a generation the door speaks (-32009);
//! 4. the method is known (-32601) and is one of that generation's: a 1.0 method without the 1.0
//!    header is -32009 (the spec reads a missing header as 0.3), a 0.3 method under `1.0` is
//!    -32601 (1.0 has no such method); mur's own stop methods answer under either;
//! 5. the token grants the method or its twin (403);
//! 6. the params are valid (-32602 naming the member), and the method runs.
//!
//! JSON-RPC's errors travel with HTTP 200 in the shape of the method's generation
//! ([`crate::a2a::error`]); HTTP+JSON's as HTTP statuses.
//! A malformed request costs only its own answer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};

use super::auth::{self, Caller, DoorAuth};
use super::budget::{Budget, Charge};
use super::control::Control;
use super::feed::Feed;
use super::tasks::{Engine, Lookup, Taken};
use super::watch::Watch;
use crate::a2a::card::{CardFacts, CardFor, DOOR_EXTENSION_URI, agent_card};
use crate::a2a::error::RpcError;
use crate::a2a::fields;
use crate::a2a::params;
use crate::a2a::quote::quoted;
use crate::a2a::rpc::{self, Method, Op};
use crate::a2a::stream::Trail;
use crate::a2a::task::View;
use crate::a2a::version::Generation;
use crate::id::SessionId;
use crate::json::strict::Refusal;
use crate::net::server::{Request, Response};
use binding::Binding;
use envelope::{asked_generation, envelope, lookup, not_found, readable_id, refusal, resolve};
use later::Later;
use sse::Sse;
pub use streams::Streams;
use streams::{PER_CALLER, Slot};

mod admit;
mod binding;
mod cors;
mod envelope;
mod later;
mod push;
mod rest;
mod route;
mod sse;
mod streams;

/// What a method produced: its `result`, a task's feed to stream, or a result to wait for.
enum Answered {
    Value(Value),
    Feed(Arc<Feed>),
    Later(Later),
}

/// What a JSON-RPC request gets: one answer, or a stream of them.
enum Reply {
    Value(Value),
    Stream(Sse),
    /// The answer of one of the original runtime's session methods: its host tools expect the
    /// door extension echoed in `A2A-Extensions`.
    Door(Box<Reply>),
    /// `murmur.WatchSession`'s observer stream.
    Watch(Box<Watch>),
    /// A stream, counted among its caller's open ones until it has been written out.
    Held(Box<Reply>, Slot),
    /// An answer once what it waits for has happened.
    Later(Box<later::Answer>),
}

/// A JSON answer whose parts' data (markers in the tree) are written as their text.
fn json_response(status: u16, answer: &Value) -> Response {
    Response::json_bytes(status, crate::json::raw::to_vec(answer))
}

/// The JSON-RPC code of a demand the memory budget refused (HTTP 503): beside the -3203x codes
/// of the door's other HTTP-level refusals, outside the range A2A has taken.
pub const BUDGET_FULL: i64 = -32032;

/// How long a client refused for memory is asked to wait (`Retry-After`, seconds).
const RETRY_AFTER_SECS: u32 = 1;

/// What a request costs the budget before its body is parsed, beyond the body itself: the
/// thread's answer and bookkeeping.
const REQUEST_OVERHEAD: usize = 16 << 10;

/// A demand the memory budget refused: answered HTTP 503 with `Retry-After` (the condition is
/// transient, and HTTP clients and proxies know to retry it), its body saying why (-32032,
/// `RESOURCE_EXHAUSTED`) for SDKs that read it ([`Binding::error`]).
fn budget_full(why: String) -> RpcError {
    RpcError::new(BUDGET_FULL, why)
}

/// Why a stream was refused: its caller holds its share of the door's streams
/// ([`streams`](Streams)).
fn too_many_streams() -> String {
    format!(
        "busy: this caller holds {PER_CALLER} open streams, the most one caller may (every unauthenticated client of a public door counts as one caller); close one, or retry after {RETRY_AFTER_SECS}s"
    )
}

/// One session's door.
pub struct Door {
    pub session_id: SessionId,
    pub name: String,
    pub version: String,
    /// `host:port`.
    pub addr: String,
    pub engine: Arc<Engine>,
    /// The share of the engine's budget requests without a valid token draw on
    /// ([`Budget::guests`]; who is a guest: `door::admit`).
    pub guests: Arc<Budget>,
    pub auth: Option<DoorAuth>,
    pub control: Option<Arc<Control>>,
    /// `network.cors`: the browser origins answered CORS; empty, none is (and nothing about the
    /// door's answers changes).
    pub cors: Vec<String>,
    /// The URL the card advertises (`--advertise-url`, `network.advertise_url`); `None`:
    /// `http://addr/`.
    pub advertise: Option<String>,
    /// Set by `session/stop`; the session's main loop winds down when it sees it.
    pub stop_requested: Arc<AtomicBool>,
    /// The streams open at this door, by caller.
    pub streams: Arc<Streams>,
    /// The public card as JSON, written at its first GET: it is made of the fields above, none
    /// of which changes, and building and writing its tree was most of a card GET's cost.
    pub public_card: OnceLock<Vec<u8>>,
}

impl Door {
    /// The public card (`extended` false: both generations' members, DESIGN §5), or the
    /// extended one in the shape of the generation that asked for it.
    fn card(&self, extended: bool, written_for: CardFor) -> Value {
        let bearer = self.auth.is_some();
        let facts = CardFacts {
            name: &self.name,
            version: &self.version,
            addr: &self.addr,
            advertised: self.advertise.as_deref(),
            session: (extended || !bearer).then_some(self.session_id.as_str()),
            bearer,
        };
        let mut card = agent_card(&facts, written_for);
        if self.engine.push().is_some() {
            card["capabilities"]["pushNotifications"] = Value::Bool(true);
        }
        card
    }

    /// Answer one JSON-RPC request from `caller`: a JSON-RPC answer, an event stream, or an
    /// HTTP-level refusal (403, 503).
    ///
    /// Its body was counted against the memory budget when its head arrived, before it was read
    /// (`charge`, [`admit`]); the tree it is read into is counted as it grows, and a request the
    /// budget has no room for is refused 503 ([`budget_full`]) and costs nothing more.
    fn rpc(&self, request: &Request, caller: &Caller, charge: &Charge) -> Response {
        match self.answer(request, caller, charge) {
            Ok(reply) => reply_response(reply),
            Err(refusal) => refusal,
        }
    }

    /// The budget's share for `request`'s body of `bytes` and what reading it builds, or the
    /// 503 that refuses it. The operator's (module [`admit`]) comes from the whole budget, and
    /// evicts finished tasks only when that makes it fit; a guest's from the guests' share, and
    /// never evicts.
    fn reserve(
        &self,
        request: &Request,
        bytes: usize,
        operator: bool,
        rest: bool,
    ) -> Result<Charge, Response> {
        let demand = bytes + REQUEST_OVERHEAD;
        let charge = match operator {
            true => self.engine.reserve(demand),
            false => {
                let charge = Charge::new(&self.guests);
                charge.grow(demand).then_some(charge)
            }
        };
        charge.ok_or_else(|| {
            let why = match operator {
                true => self.memory_refusal(bytes),
                false => self.guest_refusal(bytes),
            };
            let shape = asked_generation(request).unwrap_or(Generation::V1_0);
            let id = (!rest).then(|| readable_id(&request.body));
            binding::error(id.as_ref(), &budget_full(why), shape)
        })
    }

    /// Why a request of `bytes` was refused for memory.
    fn memory_refusal(&self, bytes: usize) -> String {
        let budget = self.engine.budget();
        format!(
            "busy: the session's memory budget ({} MiB, lifecycle.memory_budget_mib; {} MiB in use) has no room for this request ({} KiB); retry after {RETRY_AFTER_SECS}s",
            budget.limit() >> 20,
            budget.used() >> 20,
            bytes.div_ceil(1024)
        )
    }

    /// Why a request without a valid token of `bytes` was refused for memory.
    fn guest_refusal(&self, bytes: usize) -> String {
        format!(
            "busy: requests without a valid token share {} KiB of the session's memory budget ({} KiB in use), with no room for this one ({} KiB); retry after {RETRY_AFTER_SECS}s",
            self.guests.limit() >> 10,
            self.guests.used() >> 10,
            bytes.div_ceil(1024)
        )
    }

    /// The request's body as JSON, counted against the memory budget as it is read; else why
    /// not (no room, not JSON, a key twice).
    fn read_body(&self, request: &Request, charge: &Charge) -> Result<Value, RpcError> {
        let grant =
            |bytes| charge.grow(bytes) || (self.engine.make_room(bytes) && charge.grow(bytes));
        crate::json::strict::from_request(&request.body, &grant).map_err(|refusal| match refusal {
            Refusal::Budget => budget_full(self.memory_refusal(request.body.len())),
            // JSON, but two equal keys in one object: which one counts would be a guess.
            Refusal::Json(err) if err.is_data() => {
                let why = format!("invalid request: {err}; send each key once");
                RpcError::new(rpc::INVALID_REQUEST, why)
            }
            // serde's words say where: "expected value at line 1 column 7".
            Refusal::Json(err) => RpcError::new(
                rpc::PARSE_ERROR,
                format!("parse error: the body is not JSON ({err})"),
            ),
        })
    }

    /// One JSON-RPC request: its envelope, generation and method, then [`Door::call`].
    fn answer(
        &self,
        request: &Request,
        caller: &Caller,
        charge: &Charge,
    ) -> Result<Reply, Response> {
        let generation = asked_generation(request);
        // Before the method is known, errors take the shape the header asked for.
        let shape = *generation.as_ref().unwrap_or(&Generation::V1_0);
        let mut body = match self.read_body(request, charge) {
            Ok(body) => body,
            Err(err) => {
                let id = match err.code {
                    BUDGET_FULL => readable_id(&request.body),
                    _ => Value::Null,
                };
                return Err(binding::error(Some(&id), &err, shape));
            }
        };
        let (id, name) = match envelope(&body) {
            Ok(found) => found,
            Err((id, err)) => return Err(binding::error(Some(&id), &err, shape)),
        };
        let binding = Binding::Rpc(id);
        let generation = match generation {
            Ok(generation) => generation,
            Err(why) => {
                let err = RpcError::new(rpc::VERSION_NOT_SUPPORTED, why);
                return Err(binding.error(&err, Generation::V1_0));
            }
        };
        let method = match resolve(name, generation) {
            Ok(method) => method,
            Err((err, shape)) => return Err(binding.error(&err, shape)),
        };
        let params = body
            .get_mut("params")
            .map(Value::take)
            .unwrap_or(Value::Null);
        // 1.0's params are proto JSON, whose fields may be named either way (the TCK sends
        // `task_id`); 0.3's JSON-RPC schema and mur's own methods name them one way only.
        let proto_json = method.generation == Generation::V1_0 && !method.own;
        let params = move || match params {
            params @ Value::Object(_) if proto_json => fields::lower_camel(params),
            params => Ok(params),
        };
        self.call(method, generation, params, caller, charge, binding)
    }

    /// Run `method`, called under `generation` by `caller`, its answers framed by `binding`: the
    /// steps both bindings share, in order — the token grants the method or its twin (403), the
    /// caller's stream bound (503), the params (`params`, read only now: -32602), the method.
    fn call(
        &self,
        method: &'static Method,
        generation: Generation,
        params: impl FnOnce() -> Result<Value, RpcError>,
        caller: &Caller,
        charge: &Charge,
        binding: Binding,
    ) -> Result<Reply, Response> {
        let shape = if method.own {
            generation
        } else {
            method.generation
        };
        if let Some(needed) = rpc::grant(method.op)
            && !caller.may_call(needed)
        {
            let denied = auth::forbidden(method.name);
            return Err(binding.denied(&self.name, &denied, shape));
        }
        let streaming = matches!(method.op, Op::Stream | Op::Subscribe | Op::Watch);
        let slot = match streaming.then(|| self.streams.take(caller)) {
            Some(None) => return Err(binding.error(&budget_full(too_many_streams()), shape)),
            slot => slot.flatten(),
        };
        let held = |reply| match slot {
            Some(slot) => Reply::Held(Box::new(reply), slot),
            None => reply,
        };
        if method.op == Op::Watch {
            let watch = Watch::new(
                self.engine.clone(),
                self.stop_requested.clone(),
                self.session_id.to_string(),
                binding.id(),
            );
            return Ok(held(Reply::Door(Box::new(Reply::Watch(Box::new(watch))))));
        }
        let answered = params().and_then(|p| self.dispatch(method, p, caller, shape, charge));
        match answered {
            Ok(Answered::Value(result)) if method.op == Op::StopSession => {
                let reply = Reply::Value(binding.result(result));
                Ok(Reply::Door(Box::new(reply)))
            }
            Ok(Answered::Value(result)) => Ok(Reply::Value(binding.result(result))),
            Ok(Answered::Later(later)) => {
                let reply = Reply::Later(Box::new(later::Answer {
                    later,
                    binding,
                    shape,
                }));
                match method.op {
                    Op::StopSession => Ok(Reply::Door(Box::new(reply))),
                    _ => Ok(reply),
                }
            }
            Ok(Answered::Feed(feed)) => {
                // A formation peer is mur's own relay of stdout ([`Trail::exact`]); every other
                // reader assembles an artifact that must equal the stored answer.
                let trail = match caller {
                    Caller::Member { .. } => Trail::exact(),
                    _ => Trail::default(),
                };
                let writing = Charge::new(self.engine.stream_budget());
                Ok(held(Reply::Stream(Sse::feed(
                    feed, binding, shape, trail, writing,
                ))))
            }
            // A 0.3 JSON-RPC stream carries the errors of a well-formed request as its one event
            // (0.3's `SendStreamingMessageResponse` is a success or an error response; the 0.3
            // SDKs and conformance kit read it so). A malformed request, a refusal for memory,
            // any 1.0 error and any HTTP+JSON one is answered before a stream opens.
            Err(err)
                if streaming
                    && shape == Generation::V0_3
                    && matches!(binding, Binding::Rpc(_))
                    && ![rpc::INVALID_PARAMS, BUDGET_FULL].contains(&err.code) =>
            {
                let event = binding.error_body(&err, shape);
                Ok(held(Reply::Stream(Sse::Once(Some(event)))))
            }
            Err(err) => Err(binding.error(&err, shape)),
        }
    }

    fn dispatch(
        &self,
        method: &Method,
        params: Value,
        caller: &Caller,
        generation: Generation,
        charge: &Charge,
    ) -> Result<Answered, RpcError> {
        let viewer = caller.viewer();
        // Rendering a task costs a copy of it as a tree of text and again as bytes: counted
        // without asking (the task exists; its reader waits for it), so newer demands wait.
        let rendering = |task: &crate::a2a::task::Task| charge.force(3 * Engine::weight_of(task));
        let value = match method.op {
            Op::Stream => return self.stream(params, caller, generation).map(Answered::Feed),
            Op::Subscribe => {
                return self
                    .subscribe(&params, caller, generation)
                    .map(Answered::Feed);
            }
            Op::Send => return self.send(params, caller, generation, &rendering),
            Op::Get => {
                let asked = params::task_ref(&params)?;
                let task = lookup(self.engine.get(&asked.id, viewer), &asked.id, generation)?;
                let view = View {
                    history_length: asked.history_length,
                    artifacts: true,
                };
                rendering(&task);
                Ok(task.render(generation, view))
            }
            Op::Cancel => return self.cancel(&params, viewer, generation),
            Op::List => self.list(&params, viewer),
            Op::PushConfig => self.push_config(method, &params, caller, generation),
            Op::ExtendedCard => match (&self.auth, generation) {
                (Some(_), _) => Ok(self.card(true, CardFor::Only(generation))),
                (None, Generation::V0_3) => Err(RpcError::new(
                    rpc::EXTENDED_CARD_NOT_CONFIGURED,
                    "this door is public: its card is at /.well-known/agent-card.json",
                )),
                (None, Generation::V1_0) => Err(RpcError::new(
                    rpc::UNSUPPORTED_OPERATION,
                    "this door is public (capabilities.extendedAgentCard is false): its card is at /.well-known/agent-card.json",
                )),
            },
            Op::Stop => {
                self.request_stop();
                Ok(json!({"stopping": true, "sessionId": self.session_id}))
            }
            Op::StopSession => return Ok(Answered::Later(self.stop_session())),
            // Answered as a stream before dispatch ([`Door::answer`]).
            Op::Watch => Err(RpcError::new(rpc::INTERNAL_ERROR, "not a plain answer")),
        };
        value.map(Answered::Value)
    }

    fn request_stop(&self) {
        self.stop_requested.store(true, Ordering::Release);
        crate::sys::wake::notify();
    }

    /// Take a message (a new task, or the next turn of one waiting for input), with a feed of
    /// its events when `stream`.
    fn take(
        &self,
        asked: params::Send,
        caller: &Caller,
        generation: Generation,
        stream: bool,
    ) -> Result<Taken, RpcError> {
        if self.stop_requested.load(Ordering::Acquire) {
            return Err(RpcError::new(
                rpc::INTERNAL_ERROR,
                "the session is stopping",
            ));
        }
        let named = asked.message.task_id.clone().unwrap_or_default();
        let push = self.push_in_send(asked.push.as_ref(), generation)?;
        self.engine
            .submit(caller.owner(), caller.viewer(), asked.message, stream, push)
            .map_err(|refused| refusal(refused, &named, generation))
    }

    /// `message/stream`, `SendStreamingMessage`: the task's events as they happen.
    fn stream(
        &self,
        params: Value,
        caller: &Caller,
        generation: Generation,
    ) -> Result<Arc<Feed>, RpcError> {
        let asked = params::send(params, generation)?;
        self.take(asked, caller, generation, true)?
            .feed
            .ok_or_else(|| RpcError::new(rpc::INTERNAL_ERROR, "the task has no stream"))
    }

    /// `tasks/resubscribe`, `SubscribeToTask`: a live task's events from now on.
    fn subscribe(
        &self,
        params: &Value,
        caller: &Caller,
        generation: Generation,
    ) -> Result<Arc<Feed>, RpcError> {
        let asked = params::task_ref(params)?;
        let read_with = match generation {
            Generation::V0_3 => "tasks/get",
            Generation::V1_0 => "GetTask",
        };
        self.engine
            .subscribe(&asked.id, caller.viewer())
            .map_err(|lookup| match lookup {
                Lookup::NotFound => not_found(),
                Lookup::Ended(state) => RpcError::new(
                    rpc::UNSUPPORTED_OPERATION,
                    format!(
                        "task {} has ended ({}): there is nothing more to stream; read it with {read_with}",
                        quoted(&asked.id),
                        state.wire(generation),
                    ),
                ),
            })
    }

    /// `message/send`, `SendMessage`: the task as it stands, or — blocking — once it has
    /// settled (ended, or asking for input).
    fn send(
        &self,
        params: Value,
        caller: &Caller,
        generation: Generation,
        rendering: &dyn Fn(&crate::a2a::task::Task),
    ) -> Result<Answered, RpcError> {
        let asked = params::send(params, generation)?;
        let (blocking, history_length) = (asked.blocking, asked.history_length);
        let taken = self.take(asked, caller, generation, false)?;
        let view = View {
            history_length,
            artifacts: true,
        };
        if blocking {
            let settled = taken.settled;
            return Ok(Answered::Later(Box::new(move |waker| {
                settled
                    .poll(waker)
                    .map(|task| Ok(sent(&task, generation, view)))
            })));
        }
        // As it stands; one that is no longer in memory has settled, so its claim holds it.
        let now = || self.engine.get(taken.id.as_str(), None).ok();
        let settled = || taken.settled.get();
        let task = settled()
            .or_else(now)
            .or_else(settled)
            .ok_or_else(|| RpcError::new(rpc::INTERNAL_ERROR, "the task was lost"))?;
        rendering(&task);
        Ok(Answered::Value(sent(&task, generation, view)))
    }

    /// `ListTasks`: the caller's tasks, newest first, one page at a time.
    fn list(&self, params: &Value, viewer: Option<&str>) -> Result<Value, RpcError> {
        let query = params::list(params)?;
        let listing = self.engine.list(viewer, &query);
        let view = View {
            history_length: query.history_length,
            artifacts: query.include_artifacts,
        };
        let tasks: Vec<Value> = listing
            .tasks
            .iter()
            .map(|t| t.render(Generation::V1_0, view))
            .collect();
        Ok(json!({
            "tasks": tasks,
            "nextPageToken": listing.next.map(|n| n.to_string()).unwrap_or_default(),
            "pageSize": query.page_size,
            "totalSize": listing.total,
        }))
    }
}

/// A sent message's task as `message/send` answers it in `generation`.
fn sent(task: &crate::a2a::task::Task, generation: Generation, view: View) -> Value {
    let rendered = task.render(generation, view);
    match generation {
        Generation::V0_3 => rendered,
        Generation::V1_0 => crate::json::object([("task", rendered)]),
    }
}

/// The HTTP response carrying `reply`.
fn reply_response(reply: Reply) -> Response {
    match reply {
        Reply::Later(answer) => Response::deferred(answer),
        Reply::Value(answer) => json_response(200, &answer),
        Reply::Stream(stream) => Response::event_stream(Box::new(stream)),
        Reply::Watch(watch) => Response::event_stream(watch),
        Reply::Held(reply, slot) => {
            let mut response = reply_response(*reply);
            response.hold = Some(Box::new(slot));
            response
        }
        Reply::Door(reply) => {
            let mut response = reply_response(*reply);
            response
                .headers
                .push(("A2A-Extensions", DOOR_EXTENSION_URI.to_string()));
            response
        }
    }
}
