//! `hermes-http-guard`: the rules hermes' own HTTP listeners (the API server, the webhook
//! listener, the admin listener) share to keep out what should never reach them.
//!
//! A web page the user happens to visit can send requests to a listener on the user's machine:
//! simple requests (a form POST, a `text/plain` `fetch`) need no CORS preflight, and DNS
//! rebinding turns a hostile name into `127.0.0.1`. These rules make such requests fail before
//! any handler runs, and keep keys from being guessed:
//!
//! - [`origin`]: a request carrying an `Origin` that is not listed is refused (403).
//! - [`host`]: an unauthenticated loopback listener answers only to loopback names (421).
//! - [`content_type`]: a body must be declared `application/json` (415).
//! - [`throttle`]: repeated authentication failures from one peer lock it out for a while (429).
//! - [`bearer`]: the key a request carries, compared in constant time.
//! - [`secret`]: keys and secrets a guesser would try first are refused at start-up.
//!
//! Everything here is a pure function over `http` types. A refused request is a [`Refusal`];
//! each listener writes it in its own error shape.

pub mod bearer;
pub mod content_type;
pub mod host;
pub mod origin;
mod refusal;
pub mod secret;
pub mod throttle;

pub use bearer::bearer_matches;
pub use content_type::{require_json, require_json_if_body};
pub use host::HostPolicy;
pub use origin::{AllowedOrigins, OriginError, check_origin};
pub use refusal::Refusal;
pub use secret::{MIN_SECRET_CHARS, WeakSecret, check_secret};
pub use throttle::{AuthThrottle, ThrottleLimits, locked_out, retry_after_secs};
