//! What the door decides from a request's head alone, before a byte of its body is reserved or
//! read (issue 30, point 5): where it goes, who is calling — the bearer token is checked here,
//! once, on every route, and the caller travels with the request ([`Admitted`]) — how much body
//! that route may take, and which part of the memory budget counts it.
//!
//! | request | decided from the head | its body |
//! |---|---|---|
//! | `POST /`, a valid token (anyone, at a public door) | admitted with its caller | counted in the budget |
//! | `POST /` without one, body ≤ 16 KiB | admitted as a guest, answered 401 (from the head when the guests' share is full) | counted in the guests' share; read only for the id the 401 echoes |
//! | `POST /` without one, a larger body | 401 | never read: drained while the refusal lingers |
//! | an HTTP+JSON path (`crate::a2a::rest`), a valid token (anyone, at a public door) | admitted with its caller and the call its path names | counted in the budget |
//! | an HTTP+JSON path without one | 401 (no id to read the body for) | never read |
//! | an HTTP+JSON `GET` or `DELETE` with a body | 400 (it takes none) | never read |
//! | `/control…` without the control token, body ≤ 16 KiB | as `POST /` without a token | counted in the guests' share, read and dropped |
//! | `/control…` without it, a larger body; with it, a body over 8 KiB | 401; 413 | never read |
//! | `/control…` with it | admitted, as the operator | counted in the budget |
//! | the card, a CORS preflight | admitted: a guest unless it carries a valid token | a body is refused 413, never read |
//! | anything else (the 404/405 pointers) | admitted like the card | a body: the pointer is answered from the head, the body never read |
//!
//! Who is *the operator*, for the budget: at an authenticated door, a caller with a valid token
//! (any credential's or formation peer's; at `/control`, the control token); at a public door,
//! everyone — there is one principal there, who may read every task, so there is nobody to keep
//! the finished tasks from and no share to put anyone in. The operator's requests are counted in
//! the whole budget, and may evict finished tasks only when that makes them fit
//! ([`crate::session::store::Store::make_room`]); a guest's are counted in the guests' share (an
//! eighth, [`crate::session::budget::Budget::guests`]) and never evict, so guests can neither
//! refuse the operator nor cost it an answer it has not read. A refused request evicts nothing.

use super::Door;
use super::auth::{Caller, Denied, DoorAuth};
use super::binding::Binding;
use super::cors::{allow_origin, is_a2a_path};
use super::envelope::{asked_generation, readable_id};
use crate::a2a::error::RpcError;
use crate::a2a::rest::{self, Call};
use crate::a2a::version::Generation;
use crate::net::server::{MAX_HEAD, Request, Response};
use crate::session::budget::Charge;
use crate::session::control::Authorized;

/// The most of the body of a request refused for its token that the door reads, counted in the
/// guests' share: for the id a 401 at `POST /` echoes, and so the refusal is answered in turn on
/// a connection that stays open (a refusal from the head closes it, draining the body unread).
/// What the head alone may hold, so a caller without a token makes the door read at most twice
/// what its head costs; a larger body is refused from the head (a 401's id is null then).
const SMALL_BODY: usize = MAX_HEAD;

/// What [`Door::admitted`] decided for one request, handed from the server's
/// [`crate::net::server::Handler::admit`] to `handle` inside the request's hold.
pub(super) struct Admitted {
    pub(super) route: Route,
    /// The request's `Origin`, when `network.cors` lists it (for an A2A path).
    pub(super) origin: Option<String>,
    /// What the request holds of the budget: its body and bookkeeping, then its answer.
    pub(super) charge: Charge,
}

/// Where a request goes, with what its head proved.
pub(super) enum Route {
    Card,
    Preflight,
    /// `POST /` from this caller.
    Rpc(Caller),
    /// An HTTP+JSON call from this caller.
    Rest(Caller, Box<Call>),
    /// `POST /` without a valid token at an authenticated door: its 401, once its small body
    /// has been read for its id.
    Unauthenticated(Denied),
    Control(Authorized),
    /// `/control…` without the control token: its 401, once its small body has been read.
    Refused(Box<Response>),
    /// The 404s and 405s that say where to go instead.
    Pointer,
}

impl Door {
    /// Everything decided from `head` (no body read yet; `body_len` announced), or the refusal
    /// to answer from the head — then the body is never read (the server drains it).
    pub(super) fn admitted(&self, head: &Request, body_len: usize) -> Result<Admitted, Response> {
        let path = head.path.split('?').next().unwrap_or("");
        let origin = match self.cors.is_empty() {
            true => None,
            false => self.listed_origin(head, path),
        };
        let admitted = self
            .route_head(head, path, body_len)
            .and_then(|(route, operator)| self.counted(head, route, body_len, operator));
        match admitted {
            Ok((route, charge)) => Ok(Admitted {
                route,
                origin,
                charge,
            }),
            // A listed origin reads its refusals too (so a browser client can read a 401).
            Err(mut refusal) => {
                if let Some(origin) = origin {
                    allow_origin(&mut refusal, origin);
                }
                Err(refusal)
            }
        }
    }

    /// `route` with what its body and bookkeeping hold of the budget (the operator's, or the
    /// guests' share), or the refusal that answers it from the head.
    fn counted(
        &self,
        head: &Request,
        route: Route,
        body_len: usize,
        operator: bool,
    ) -> Result<(Route, Charge), Response> {
        let rest = matches!(route, Route::Rest(..));
        match self.reserve(head, body_len, operator, rest) {
            Ok(charge) => Ok((route, charge)),
            // A refusal the share has no room to answer in turn is answered from the head: its
            // caller learns what matters (its token), and the share stays for others.
            Err(busy) => Err(match route {
                Route::Unauthenticated(denied) => self.unauthenticated(head, &denied),
                Route::Refused(refusal) => *refusal,
                _ => busy,
            }),
        }
    }

    /// The route `head` takes and whether its caller is the operator (module docs), or the
    /// refusal that answers it from the head.
    fn route_head(
        &self,
        head: &Request,
        path: &str,
        body_len: usize,
    ) -> Result<(Route, bool), Response> {
        let caller = || {
            self.auth
                .as_ref()
                .map_or(Ok(Caller::Public), |a| a.check(head))
        };
        let bodiless = |route| match body_len {
            0 => Ok((route, caller().is_ok())),
            _ => Err(Response::text(
                413,
                "this request takes no body: the card is read by GET, a preflight is an OPTIONS without one",
            )),
        };
        match (head.method.as_str(), path) {
            ("OPTIONS", path) if !self.cors.is_empty() && is_a2a_path(path) => {
                bodiless(Route::Preflight)
            }
            ("GET", "/.well-known/agent-card.json" | "/.well-known/agent.json") => {
                bodiless(Route::Card)
            }
            ("POST", "/") => match caller() {
                Ok(caller) => Ok((Route::Rpc(caller), true)),
                Err(denied) if body_len <= SMALL_BODY => {
                    Ok((Route::Unauthenticated(denied), false))
                }
                Err(denied) => Err(self.unauthenticated(head, &denied)),
            },
            (_, path) if path == "/control" || path.starts_with("/control/") => {
                match self.control.as_ref().map(|c| c.admit(head, body_len)) {
                    Some(Ok(authorized)) => Ok((Route::Control(authorized), true)),
                    Some(Err(refusal)) if body_len <= SMALL_BODY => {
                        Ok((Route::Refused(Box::new(refusal)), false))
                    }
                    Some(Err(refusal)) => Err(refusal),
                    None => self.pointed(head, path, body_len, caller().is_ok()),
                }
            }
            // An HTTP+JSON call, as `POST /`, except that a caller without a valid token is
            // refused from the head whatever its body: there is no id to read it for. A GET or
            // DELETE has nothing to read a body for either: one that carries one is refused
            // from the head rather than held in the budget for nothing.
            _ => match rest::route(&head.method, &head.path) {
                Some(call) => match caller() {
                    Ok(_) if body_len > 0 && matches!(head.method.as_str(), "GET" | "DELETE") => {
                        let generation = call.generation;
                        let why = format!(
                            "{} {} takes no body: send it without one (its parameters are in \
                             the path and query)",
                            head.method, path
                        );
                        let err = RpcError::new(crate::a2a::rpc::INVALID_REQUEST, why);
                        Err(Binding::Rest(call.method, generation).error(&err, generation))
                    }
                    Ok(caller) => Ok((Route::Rest(caller, Box::new(call)), true)),
                    Err(denied) => {
                        let generation = call.generation;
                        Err(Binding::Rest(call.method, generation).denied(
                            self.realm(),
                            &denied,
                            generation,
                        ))
                    }
                },
                None => self.pointed(head, path, body_len, caller().is_ok()),
            },
        }
    }

    /// A request a pointer answers: admitted without a body; with one, answered from its head.
    fn pointed(
        &self,
        head: &Request,
        path: &str,
        body_len: usize,
        operator: bool,
    ) -> Result<(Route, bool), Response> {
        match body_len {
            0 => Ok((Route::Pointer, operator)),
            _ => Err(self.pointer(&head.method, path)),
        }
    }

    /// The 401 for a `POST /` without a valid token, echoing the request's id when its body has
    /// been read (`null` from the head alone).
    pub(super) fn unauthenticated(&self, request: &Request, denied: &Denied) -> Response {
        let shape = asked_generation(request).unwrap_or(Generation::V1_0);
        Binding::Rpc(readable_id(&request.body)).denied(self.realm(), denied, shape)
    }

    /// The realm a 401's challenge names.
    fn realm(&self) -> &str {
        self.auth
            .as_ref()
            .map_or(self.name.as_str(), DoorAuth::realm)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    use super::super::REQUEST_OVERHEAD;
    use super::*;
    use crate::json::manifest::Lifecycle;
    use crate::session::budget::Budget;
    use crate::session::tasks::{Capsule, Engine};

    /// An echo door with a 16 MiB budget, behind bearer tokens; its operator token.
    fn guarded() -> (Door, String) {
        let lifecycle = Lifecycle {
            memory_budget_mib: 16,
            ..Lifecycle::default()
        };
        let engine = Engine::new(
            Capsule::Echo,
            lifecycle,
            vec![],
            Arc::new(Vec::new),
            None,
            None,
        );
        let auth = DoorAuth::new("guarded", None).unwrap();
        let operator = auth.mint_operator().expose().to_string();
        let door = Door {
            session_id: crate::id::SessionId::parse("ses_0199c4e2f1b7712a9d3e4f5061728394")
                .unwrap(),
            name: "guarded".into(),
            version: "0".into(),
            addr: "127.0.0.1:1".into(),
            guests: Budget::guests(engine.budget()),
            engine,
            auth: Some(auth),
            control: None,
            cors: Vec::new(),
            advertise: None,
            stop_requested: Arc::new(AtomicBool::new(false)),
            streams: Arc::default(),
            public_card: std::sync::OnceLock::new(),
        };
        (door, operator)
    }

    fn head(method: &str, path: &str, token: Option<&str>) -> Request {
        let headers = token
            .map(|t| {
                vec![(
                    "authorization".to_string(),
                    format!("Bearer {t}").into_bytes(),
                )]
            })
            .unwrap_or_default();
        Request {
            method: method.into(),
            path: path.into(),
            headers,
            body: Vec::new(),
            peer: "127.0.0.1:2".parse().unwrap(),
            keep_alive: true,
            hold: None,
        }
    }

    fn used(door: &Door) -> (usize, usize) {
        (door.engine.budget().used(), door.guests.used())
    }

    #[test]
    fn a_large_body_without_a_token_is_refused_from_its_head_and_counts_nothing() {
        let (door, _) = guarded();
        for token in [None, Some("mdt1.e30.AAAA")] {
            let refused = door
                .admitted(&head("POST", "/", token), 1 << 20)
                .err()
                .unwrap();
            assert_eq!(refused.status, 401);
            for put in ["/control/settings/X", "/nowhere"] {
                let refused = door
                    .admitted(&head("PUT", put, token), 1 << 20)
                    .err()
                    .unwrap();
                assert_eq!(refused.status, 404, "{put}: no control here, a pointer");
            }
        }
        assert_eq!(used(&door), (0, 0));
    }

    #[test]
    fn the_operator_is_counted_in_the_budget_and_guests_in_their_share() {
        let (door, operator) = guarded();
        let admitted = door
            .admitted(&head("POST", "/", Some(&operator)), 1 << 20)
            .unwrap();
        assert!(matches!(admitted.route, Route::Rpc(Caller::Operator)));
        assert_eq!(used(&door), ((1 << 20) + REQUEST_OVERHEAD, 0));
        drop(admitted);
        let guest = door.admitted(&head("POST", "/", None), 100).unwrap();
        assert!(matches!(guest.route, Route::Unauthenticated(_)));
        let card = door.admitted(&head("GET", "/.well-known/agent-card.json", None), 0);
        assert!(matches!(card.as_ref().unwrap().route, Route::Card));
        let guests = 100 + 2 * REQUEST_OVERHEAD;
        assert_eq!(
            used(&door),
            (guests, guests),
            "a guest's bytes count in the budget too"
        );
    }

    #[test]
    fn guests_hold_at_most_their_share_and_the_operator_is_still_admitted() {
        let (door, operator) = guarded();
        let held: Vec<Admitted> =
            std::iter::from_fn(|| door.admitted(&head("POST", "/", None), SMALL_BODY).ok())
                .take(1000)
                .collect();
        assert!(held.len() < 1000, "the share is full at some point");
        assert!(door.guests.used() <= door.guests.limit());
        assert_eq!(door.guests.limit(), door.engine.budget().limit() / 8);
        let refused = door
            .admitted(&head("POST", "/", None), SMALL_BODY)
            .err()
            .unwrap();
        assert_eq!(refused.status, 401, "past the share: refused from the head");
        let admitted = door.admitted(&head("POST", "/", Some(&operator)), 1 << 20);
        assert!(admitted.is_ok());
    }

    #[test]
    fn a_body_on_a_route_that_takes_none_is_refused_from_its_head() {
        let (door, operator) = guarded();
        let refused = door
            .admitted(&head("GET", "/.well-known/agent-card.json", None), 10)
            .err()
            .unwrap();
        assert_eq!(refused.status, 413);
        let refused = door.admitted(&head("GET", "/", None), 10).err().unwrap();
        assert_eq!(refused.status, 405);
        for (method, path) in [
            ("GET", "/tasks/t1"),
            ("DELETE", "/v1/tasks/t1/pushNotificationConfigs/c"),
        ] {
            let refused = door
                .admitted(&head(method, path, Some(&operator)), 10)
                .err()
                .unwrap();
            assert_eq!(refused.status, 400, "{method} {path}");
            let body = String::from_utf8_lossy(&refused.body).into_owned();
            assert!(body.contains("takes no body"), "{body}");
        }
        assert_eq!(used(&door), (0, 0));
    }
}
