//! Discord's CDN for users' attachments: a message's `attachments[].url` points here, and the
//! bytes are served without authentication (Discord signs the URL instead). What was sent is
//! counted chunk by chunk as the client reads it, so a test can tell that a download stopped at
//! a cap, or never started.

use super::state::{DcAttachment, Shared, State};
use axum::extract::{Path, State as AxumState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;

/// Bytes per chunk of a CDN body.
const CHUNK: usize = 16 * 1024;

/// Stores `attachment` on the CDN and describes it as a message's attachment object.
pub(super) fn publish(s: &mut State, channel: u64, attachment: &DcAttachment) -> Value {
    let id = s.snowflake();
    let safe: String = attachment.filename.chars().map(|c| if c.is_ascii_alphanumeric() || ".-_".contains(c) { c } else { '_' }).collect();
    let path = format!("attachments/{channel}/{id}/{safe}");
    s.cdn.insert(path.clone(), attachment.bytes.clone());
    let url = format!("{}/{path}", s.cdn_base);
    let mut object = json!({
        "id": id.to_string(), "filename": attachment.filename,
        "size": attachment.declared_size.unwrap_or(attachment.bytes.len() as u64),
        "url": url, "proxy_url": url, "content_type": attachment.content_type,
    });
    if let (Some(duration), Some(waveform)) = (attachment.duration_secs, attachment.waveform.as_ref()) {
        object["duration_secs"] = json!(duration);
        object["waveform"] = json!(waveform);
    }
    object
}

pub(super) async fn serve(AxumState(shared): AxumState<Arc<Shared>>, Path(path): Path<String>) -> Response {
    let bytes = shared.with(|s| {
        s.cdn_requests += 1;
        s.cdn.get(&path).cloned()
    });
    shared.changed.notify_waiters();
    let Some(bytes) = bytes else {
        return (StatusCode::NOT_FOUND, "Not Found").into_response();
    };
    crate::media::counted_download(bytes, CHUNK, move |n| shared.with(|s| s.cdn_bytes_served += n))
}
