//! An HTTP+JSON request ([`crate::a2a::rest`]): its generation checked against its path, its
//! params gathered from path, query and body, then the same [`Door::call`] a JSON-RPC request
//! reaches, its answers framed as HTTP+JSON ([`Binding::Rest`]).

use super::auth::Caller;
use super::binding::Binding;
use super::envelope::asked_generation;
use super::{Door, reply_response};
use crate::a2a::error::RpcError;
use crate::a2a::rest::{self, Call};
use crate::a2a::rpc;
use crate::net::server::{Request, Response};
use crate::session::budget::Charge;

impl Door {
    /// Answer HTTP+JSON `call` from `caller`; its body was counted when its head arrived, as a
    /// `POST /`'s is, and is read only if the call takes one (a `POST`).
    pub(super) fn rest(
        &self,
        request: &Request,
        caller: &Caller,
        call: Call,
        charge: &Charge,
    ) -> Response {
        let Call {
            method,
            generation,
            params: named,
            body: takes_body,
        } = call;
        let binding = Binding::Rest(method, generation);
        // The path names the generation; the header must name the same one, as a JSON-RPC
        // request's must its method's (a missing header is 0.3).
        match asked_generation(request) {
            Ok(asked) if asked == generation => {}
            asked => {
                let why = asked.err().unwrap_or_else(|| {
                    format!(
                        "{} is an A2A {} path: send it with \"A2A-Version: {}\"{}",
                        request.path.split('?').next().unwrap_or(""),
                        generation.header(),
                        generation.header(),
                        match generation {
                            crate::a2a::version::Generation::V1_0 =>
                                " (a request without it is 0.3, whose paths start /v1)",
                            crate::a2a::version::Generation::V0_3 =>
                                ", or none (1.0's paths have no /v1)",
                        }
                    )
                });
                let err = RpcError::new(rpc::VERSION_NOT_SUPPORTED, why);
                return binding.error(&err, generation);
            }
        }
        let params = || {
            let body = match takes_body && !request.body.is_empty() {
                true => Some(self.read_body(request, charge)?),
                false => None,
            };
            rest::params(generation, method.op, named, body)
        };
        match self.call(method, generation, params, caller, charge, binding) {
            Ok(reply) => reply_response(reply),
            Err(refusal) => refusal,
        }
    }
}
