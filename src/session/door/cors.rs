//! Opt-in CORS (`network.cors`): which origins a browser may call the door from, the preflight
//! answer, and the headers every answer to a listed origin carries. Nothing here applies to a
//! door without the list, nor ever to `/control`.

use super::Door;
use crate::net::server::{Request, Response};

/// The paths a browser may reach cross-origin: the card, JSON-RPC and HTTP+JSON, never
/// `/control`.
pub(super) fn is_a2a_path(path: &str) -> bool {
    matches!(
        path,
        "/" | "/.well-known/agent-card.json" | "/.well-known/agent.json"
    ) || crate::a2a::rest::is_rest_path(path)
}

/// The request headers a cross-origin caller may send: what A2A clients set.
const CORS_HEADERS: &str = "Authorization, Content-Type, A2A-Version, A2A-Extensions";

impl Door {
    /// The request's `Origin`, when it is one `network.cors` lists (compared byte for byte, as
    /// browsers serialize origins) and the path is one of the door's A2A paths.
    pub(super) fn listed_origin(&self, request: &Request, path: &str) -> Option<String> {
        let mut origins = request.header_values("origin");
        let (Some(origin), None) = (origins.next(), origins.next()) else {
            return None;
        };
        let origin = std::str::from_utf8(origin).ok()?;
        (is_a2a_path(path) && self.cors.iter().any(|o| o == origin)).then(|| origin.to_string())
    }

    /// The answer to `OPTIONS` at a door with a CORS list: a preflight from a listed origin is
    /// allowed (`POST`, `GET` and HTTP+JSON's `DELETE`, the headers A2A clients send, cached ten minutes); anything
    /// else is 403, with no CORS header, so the browser refuses the call.
    pub(super) fn preflight(&self, origin: Option<String>) -> Response {
        let Some(origin) = origin else {
            return Response::text(403, "this origin is not allowed (network.cors)");
        };
        let mut response = Response::text(200, "");
        response.body.clear();
        allow_origin(&mut response, origin);
        response.headers.extend([
            (
                "Access-Control-Allow-Methods",
                "GET, POST, DELETE".to_string(),
            ),
            ("Access-Control-Allow-Headers", CORS_HEADERS.to_string()),
            ("Access-Control-Max-Age", "600".to_string()),
        ]);
        response
    }
}

/// Let `origin` read `response` (a listed origin's): the answer varies by `Origin`, and the
/// headers an A2A client reads are exposed to it.
pub(super) fn allow_origin(response: &mut Response, origin: String) {
    response.headers.extend([
        ("Access-Control-Allow-Origin", origin),
        ("Vary", "Origin".to_string()),
        (
            "Access-Control-Expose-Headers",
            "A2A-Extensions, WWW-Authenticate".to_string(),
        ),
    ]);
}
