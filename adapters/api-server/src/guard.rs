//! What a web page must not do to the API: call it from an origin that is not listed, reach a
//! keyless server through a rebound DNS name, or send a body a browser can send without a CORS
//! preflight. Checked before authentication and routing; listed origins get proper CORS headers.

use crate::error::ApiError;
use crate::server::AppState;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hermes_http_guard::{AllowedOrigins, AuthThrottle, HostPolicy, check_origin, require_json_if_body};
use std::time::Duration;
use tower_http::cors::{AllowOrigin, CorsLayer};

/// How long a browser may cache a preflight answer.
const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(600);

/// The request headers a page may send (besides the CORS-safelisted ones).
const ALLOWED_REQUEST_HEADERS: [HeaderName; 4] = [
    header::AUTHORIZATION,
    header::CONTENT_TYPE,
    HeaderName::from_static(crate::conversation::SESSION_HEADER),
    HeaderName::from_static(crate::conversation::IDEMPOTENCY_HEADER),
];

/// The rules of one server, fixed when the adapter is built.
#[derive(Debug)]
pub(crate) struct Guards {
    pub origins: AllowedOrigins,
    pub hosts: HostPolicy,
    pub throttle: AuthThrottle,
}

/// Outermost: counts the request as progress, then refuses foreign Host names (421) and
/// unlisted origins (403).
pub(crate) async fn refuse_foreign_pages(State(state): State<AppState>, request: Request, next: Next) -> Response {
    state.ctx.health.progress();
    let guards = &state.guards;
    if let Err(refusal) =
        guards.hosts.check(request.headers(), request.uri()).and_then(|()| check_origin(request.headers(), &guards.origins))
    {
        return ApiError::from(refusal).into_response();
    }
    next.run(request).await
}

/// After authentication: a request with a body must declare it JSON (415).
pub(crate) async fn json_bodies_only(request: Request, next: Next) -> Response {
    if !matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS)
        && let Err(refusal) = require_json_if_body(request.headers())
    {
        return ApiError::from(refusal).into_response();
    }
    next.run(request).await
}

/// CORS for the listed origins: preflights answered, the session header exposed, and
/// `Vary: Origin` on every answer. `None` without origins: no page may call, so no page is told
/// anything.
pub(crate) fn cors_layer(origins: &AllowedOrigins) -> Option<CorsLayer> {
    let allow_origin = match origins {
        AllowedOrigins::None => return None,
        AllowedOrigins::Any => AllowOrigin::any(),
        // Validated origins are printable ASCII, so every one converts.
        AllowedOrigins::List(list) => AllowOrigin::list(list.iter().filter_map(|o| HeaderValue::from_str(o).ok())),
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow_origin)
            .allow_methods([Method::GET, Method::POST, Method::DELETE])
            .allow_headers(ALLOWED_REQUEST_HEADERS)
            .expose_headers([HeaderName::from_static(crate::conversation::SESSION_HEADER)])
            // A listed page served from the internet may call this loopback server (Chrome asks
            // first with `Access-Control-Request-Private-Network`); unlisted ones never get here.
            .allow_private_network(true)
            .max_age(PREFLIGHT_MAX_AGE),
    )
}
