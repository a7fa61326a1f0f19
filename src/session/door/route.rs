//! Where a request goes — the card, JSON-RPC, the control plane, or a pointer to them — and the
//! door's side of the HTTP server ([`Handler`]): every request decided from its head and counted
//! against the memory budget before a byte of its body is read ([`super::admit`]), CORS around
//! the A2A routes.

use super::Door;
use super::admit::{Admitted, Route};
use super::cors::allow_origin;
use crate::a2a::card::CardFor;
use crate::net::server::{Deferred, Handler, Hold, Request, Response};
use crate::session::budget::Charge;

impl Door {
    /// Every route but the CORS preflight, as its head decided.
    fn route(&self, request: &Request, route: Route, charge: &Charge) -> Response {
        match route {
            Route::Card => {
                let card = self
                    .public_card
                    .get_or_init(|| Response::json(200, &self.card(false, CardFor::Both)).body);
                Response::json_bytes(200, card.clone())
            }
            Route::Rpc(caller) => self.rpc(request, &caller, charge),
            Route::Rest(caller, call) => self.rest(request, &caller, *call, charge),
            Route::Unauthenticated(denied) => self.unauthenticated(request, &denied),
            Route::Refused(refusal) => *refusal,
            Route::Control(authorized) => match &self.control {
                Some(control) => control.handle(request, &authorized),
                None => self.pointer(&request.method, "/control"),
            },
            Route::Preflight | Route::Pointer => {
                let path = request.path.split('?').next().unwrap_or("");
                self.pointer(&request.method, path)
            }
        }
    }

    /// What a person or a browser probing the door gets: where to go, not a bare status.
    pub(super) fn pointer(&self, method: &str, path: &str) -> Response {
        match (method, path) {
            (_, p) if p == "/control" || p.starts_with("/control/") => {
                Response::text(404, "this capsule declares no control")
            }
            (_, "/") => {
                let mut response = Response::text(
                    405,
                    "method not allowed: / takes A2A JSON-RPC 2.0 by POST; \
                     the agent card is GET /.well-known/agent-card.json",
                );
                response.headers.push(("Allow", "POST".into()));
                response
            }
            (_, "/.well-known/agent-card.json") => {
                let mut response =
                    Response::text(405, "method not allowed: the agent card is read by GET");
                response.headers.push(("Allow", "GET".into()));
                response
            }
            _ => Response::text(
                404,
                "not found: the agent card is GET /.well-known/agent-card.json; \
                 A2A JSON-RPC 2.0 is POST /; A2A HTTP+JSON is at /message:send, /tasks/{id}, \
                 /tasks and /extendedAgentCard (1.0) and under /v1 (0.3)",
            ),
        }
    }
}

impl Handler for Door {
    /// Every request is decided from its head: its route, its caller (the token checked here,
    /// once), the body it may have, counted in the budget — or refused then, its body never read
    /// (`Door::admitted`).
    fn admit(&self, request: &Request, body_len: usize) -> Result<Option<Hold>, Response> {
        Ok(Some(Box::new(self.admitted(request, body_len)?)))
    }

    /// Answer the request as its head decided; at a door with `network.cors`, answer preflights
    /// and let a listed origin read the A2A answers.
    fn handle(&self, mut request: Request) -> Response {
        let held = request
            .hold
            .take()
            .and_then(|hold| hold.downcast::<Admitted>().ok());
        let admitted = match held {
            Some(admitted) => *admitted,
            // A request handed over whole, never admitted: the same decisions, now.
            None => match self.admitted(&request, request.body.len()) {
                Ok(admitted) => admitted,
                Err(refusal) => return refusal,
            },
        };
        let Admitted {
            route,
            origin,
            charge,
        } = admitted;
        if let Route::Preflight = route {
            return self.preflight(origin);
        }
        let mut response = self.route(&request, route, &charge);
        // A written answer stays counted until it has gone to the socket, however slowly its
        // client reads; a stream counts what it writes itself; an answer given later is
        // counted when it is given (a task's whole answer, rendered once per waiter).
        if let Some(later) = response.deferred.take() {
            charge.set(0);
            response.deferred = Some(Box::new(Counted {
                later,
                charge: Some(charge),
            }));
        } else if response.stream.is_none() && response.hold.is_none() {
            charge.set(response.body.len());
            response.hold = Some(Box::new(charge));
        }
        if let Some(origin) = origin {
            allow_origin(&mut response, origin);
        }
        response
    }
}

/// A deferred answer counted in its request's charge once it is given, until it is written.
struct Counted {
    later: Box<dyn Deferred>,
    charge: Option<Charge>,
}

impl Deferred for Counted {
    fn poll(&mut self, waker: &std::task::Waker) -> std::task::Poll<Response> {
        self.later.poll(waker).map(|mut response| {
            if let Some(charge) = self.charge.take()
                && response.stream.is_none()
                && response.hold.is_none()
            {
                charge.set(response.body.len());
                response.hold = Some(Box::new(charge));
            }
            response
        })
    }
}
