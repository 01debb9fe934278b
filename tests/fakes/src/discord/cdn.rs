//! Discord's CDN for users' attachments: a message's `attachments[].url` points here, and the
//! bytes are served without authentication (Discord signs the URL instead). What was sent is
//! counted chunk by chunk as the client reads it, so a test can tell that a download stopped at
//! a cap, or never started.

use super::state::{DcAttachment, Shared, State};
use axum::body::{Body, Bytes};
use axum::extract::{Path, State as AxumState};
use axum::http::{StatusCode, header};
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
    let length = bytes.len();
    let chunks: Vec<Bytes> = bytes.chunks(CHUNK).map(Bytes::copy_from_slice).collect();
    // Counted when the client pulls the chunk: a client that stops reading stops the count.
    let stream = futures::stream::iter(chunks).map(move |chunk| {
        shared.with(|s| s.cdn_bytes_served += chunk.len() as u64);
        Ok::<Bytes, std::io::Error>(chunk)
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_LENGTH, length)
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .body(Body::from_stream(stream))
        .unwrap_or_default()
}

use futures::StreamExt;
