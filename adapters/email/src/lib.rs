//! `hermes-email`: the email adapter. Mail comes in over IMAP (async-imap, IDLE with a polling
//! fallback) and answers go out over SMTP (lettre); TLS is rustls with the ring provider.
//!
//! * [`adapter`]: the [`hermes_adapter::PlatformAdapter`] implementation — threaded replies
//!   (`Re:`, `In-Reply-To`, `References`), Message-IDs derived from the idempotency key, files.
//! * [`imap`](crate::imap): the mailbox loop — cursor (UIDVALIDITY + UID), `\Seen` after the
//!   inbox, IDLE and polling, reconnects, health.
//! * [`inbound`]: a fetched mail → verdict (from headers) → event (whole mail, attachments).
//! * [`decide`]: machine mail (auto-replies, bounces, lists, no-reply) and sender
//!   authentication (`Authentication-Results`).
//! * [`text`]: quoted history and signatures removed, subjects, safe file names.
//! * [`smtp`](crate::smtp): one SMTP delivery, its failures classified by where they happened.
//! * `tls`: which CAs are trusted (the system's, or only `EMAIL_CA_FILE`'s), certificate checks
//!   always on, and a refused certificate told with the server, the problem and the fix.
//! * [`state`]: the cursor and conversation threads kept on disk.
//! * `position`: the mailbox cursor, fenced through the gateway when replicas share a store.
//! * [`config`], [`settings`]: the `platforms.email` block and its [`REGISTRATION`].
//! * [`allowlist`]: allowlist entries are full addresses.

pub mod adapter;
pub mod allowlist;
pub mod config;
pub mod decide;
pub(crate) mod imap;
pub mod inbound;
mod position;
mod probe;
pub mod settings;
pub(crate) mod smtp;
pub mod state;
pub mod text;
pub(crate) mod tls;

pub use adapter::EmailAdapter;
pub use config::{EmailConfig, REGISTRATION};
pub use settings::{EmailSendBudget, EmailSettings, TlsMode};
