//! Where a request goes: the card, JSON-RPC, the control plane, or a pointer to them — and
//! the door's side of the HTTP server ([`Handler`]): a JSON-RPC body counted against the
//! memory budget before it is read, CORS around the A2A routes.

use super::Door;
use super::auth::{self, Caller};
use super::cors::{allow_origin, is_a2a_path};
use super::envelope::{asked_generation, readable_id};
use crate::a2a::card::CardFor;
use crate::a2a::version::Generation;
use crate::net::server::{Handler, Hold, Request, Response};

impl Door {
    /// Every route but the CORS preflight.
    fn route(&self, mut request: Request, path: &str) -> Response {
        match (request.method.as_str(), path) {
            ("GET", "/.well-known/agent-card.json" | "/.well-known/agent.json") => {
                Response::json(200, &self.card(false, CardFor::Both))
            }
            ("POST", "/") => {
                let caller = match &self.auth {
                    Some(auth) => match auth.check(&request) {
                        Ok(caller) => caller,
                        Err(denied) => {
                            let shape = asked_generation(&request).unwrap_or(Generation::V1_0);
                            let id = readable_id(&request.body);
                            return auth::refuse(auth.realm(), &denied, id, shape);
                        }
                    },
                    None => Caller::Public,
                };
                self.rpc(&mut request, &caller)
            }
            (_, p) if p == "/control" || p.starts_with("/control/") => match &self.control {
                Some(control) => control.handle(&request),
                None => Response::text(404, "this capsule declares no control"),
            },
            // A person or a browser probing the door gets where to go, not a bare status.
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
                 A2A JSON-RPC 2.0 is POST /",
            ),
        }
    }
}

impl Handler for Door {
    /// A JSON-RPC request's body is counted against the memory budget before it is read: one
    /// the budget has no room for is refused 503 and never held (`Door::reserve`).
    fn admit(&self, request: &Request, body_len: usize) -> Result<Option<Hold>, Response> {
        if request.method != "POST" || request.path.split('?').next() != Some("/") {
            return Ok(None);
        }
        Ok(Some(Box::new(self.reserve(request, body_len)?)))
    }

    /// Route the request; at a door with `network.cors`, answer preflights and let a listed
    /// origin read the A2A answers (refusals included, so a browser client can read a 401).
    fn handle(&self, request: Request) -> Response {
        let path = request.path.split('?').next().unwrap_or("").to_string();
        if self.cors.is_empty() {
            return self.route(request, &path);
        }
        let origin = self.listed_origin(&request, &path);
        if request.method == "OPTIONS" && is_a2a_path(&path) {
            return self.preflight(origin);
        }
        let mut response = self.route(request, &path);
        if let Some(origin) = origin {
            allow_origin(&mut response, origin);
        }
        response
    }
}
