//! Files users share in a message (https://api.slack.com/types/file): what each one is
//! ([`SharedFile`], read from the raw event, since slack-morphism's `SlackFile` lacks `size`,
//! `subtype` and `duration_ms`), and, for allowed senders only, the download into the media
//! cache ([`fetch_all`]). The declared size and duration are checked before anything is
//! requested, the byte cap holds while the body streams in, and the bot token goes only to the
//! configured Slack file host: an event names its files' URLs, and a URL on any other host is
//! never requested.

use crate::settings::SlackSettings;
use hermes_adapter::{Attachment, MediaCache, MessageKind, Refusal, save_capped};
use serde_json::Value;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;

/// Where Slack serves files when no API URL is configured.
const SLACK_FILE_HOST: &str = "https://files.slack.com";
/// A whole download.
const DOWNLOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// A file as the event describes it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SharedFile {
    pub id: String,
    pub name: String,
    pub mimetype: Option<String>,
    /// `slack_audio` for an audio clip recorded in Slack, `slack_video` for a video clip.
    pub subtype: Option<String>,
    pub size: Option<u64>,
    pub duration_ms: Option<u64>,
    pub url_private_download: Option<String>,
}

/// The `files` of a raw message event.
pub(crate) fn files_of(event: Option<&Value>) -> Vec<SharedFile> {
    let files = event.and_then(|e| e.get("files")).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    files
        .iter()
        .map(|f| {
            let text = |key: &str| f.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
            SharedFile {
                id: text("id").unwrap_or_default(),
                name: text("name").or_else(|| text("title")).unwrap_or_default(),
                mimetype: text("mimetype").map(|m| m.to_ascii_lowercase()),
                subtype: text("subtype"),
                size: f.get("size").and_then(Value::as_u64),
                duration_ms: f.get("duration_ms").and_then(Value::as_u64),
                url_private_download: text("url_private_download"),
            }
        })
        .collect()
}

/// What each file is, as declared (nothing fetched), in the same order.
pub(crate) fn declared(files: &[SharedFile]) -> Vec<Attachment> {
    files
        .iter()
        .map(|f| {
            let kind = kind_of(f);
            let secs = f.duration_ms.map(|ms| ms as f64 / 1000.0);
            Attachment::declared(kind, f.name.clone(), f.mimetype.clone(), f.size, secs)
        })
        .collect()
}

/// An audio clip recorded in Slack is a voice note; otherwise the MIME type decides.
fn kind_of(file: &SharedFile) -> MessageKind {
    let mime = file.mimetype.as_deref().unwrap_or_default();
    match file.subtype.as_deref() {
        Some("slack_audio") => MessageKind::Voice,
        Some("slack_video") => MessageKind::Video,
        _ if mime.starts_with("audio/") && file.duration_ms.is_some() => MessageKind::Voice,
        _ if mime.starts_with("audio/") => MessageKind::Audio,
        _ if mime.starts_with("image/") => MessageKind::Photo,
        _ if mime.starts_with("video/") => MessageKind::Video,
        _ => MessageKind::Document,
    }
}

/// Downloads `files` into the media cache, updating `attachments` (from [`declared`], same
/// order): each is saved or marked refused with the reason the user is told. The caller has made
/// sure the sender is allowed.
pub(crate) async fn fetch_all(
    settings: &SlackSettings,
    tls: &Arc<rustls::ClientConfig>,
    files: &[SharedFile],
    attachments: &mut [Attachment],
) {
    let Some(dir) = settings.media_dir.as_deref() else { return };
    let cache = MediaCache::new(dir);
    for (file, attachment) in files.iter().zip(attachments.iter_mut()) {
        *attachment = match fetch_one(settings, tls, &cache, file, attachment).await {
            Ok((path, bytes)) => attachment.clone().saved(&path, bytes),
            Err(refusal) => {
                tracing::info!(file = %file.id, "a Slack file was not saved: {refusal}");
                attachment.clone().refuse(refusal)
            }
        };
    }
}

async fn fetch_one(
    settings: &SlackSettings,
    tls: &Arc<rustls::ClientConfig>,
    cache: &MediaCache,
    file: &SharedFile,
    attachment: &Attachment,
) -> Result<(std::path::PathBuf, u64), Refusal> {
    let cap = settings.media_limits.admit(attachment, settings.max_media_bytes)?;
    let url = file
        .url_private_download
        .as_deref()
        .and_then(|u| slack_file_url(u, settings.api_base_url.as_deref()))
        .ok_or_else(|| Refusal::Failed { detail: "its address is not on Slack's file server".to_string() })?;
    let folder = cache.folder(attachment.kind.cache_folder()).map_err(|e| Refusal::Failed { detail: e.to_string() })?;
    let path = folder.join(attachment.cache_file_name(&format!("slack-{}", file.id)));
    let token = settings.bot_token.trim().to_string();
    let saved = save_capped(&path, cap, async |w| {
        let mut body = crate::download::get(url, token, tls.clone());
        let copy = async {
            while let Some(chunk) = body.recv().await {
                w.write_all(&chunk?).await.map_err(|e| e.to_string())?;
            }
            Ok::<(), String>(())
        };
        tokio::time::timeout(DOWNLOAD_TIMEOUT, copy).await.map_err(|_| "the download took too long".to_string())?
    })
    .await
    .map_err(|e| e.refusal())?;
    Ok((path, saved))
}

/// `url` when it is on Slack's file host, or on the configured API URL's origin (a local
/// stand-in serves its files there); `None` for anything else, which is never requested: the
/// bot token goes with the request.
pub(crate) fn slack_file_url(url: &str, api_base: Option<&str>) -> Option<url::Url> {
    let parsed = url::Url::parse(url).ok()?;
    let home = url::Url::parse(api_base.unwrap_or(SLACK_FILE_HOST)).ok()?;
    let same_origin = parsed.origin() == home.origin() && parsed.username().is_empty() && parsed.password().is_none();
    same_origin.then_some(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_goes_only_to_slacks_file_host_or_the_configured_one() {
        assert!(slack_file_url("https://files.slack.com/files-pri/T1-F1/download/a.m4a", None).is_some());
        assert!(slack_file_url("http://127.0.0.1:9/files-pri/T1-F1/download/a.m4a", Some("http://127.0.0.1:9/api/")).is_some());
        for foreign in [
            "http://files.slack.com/files-pri/T1-F1/download/a.m4a",
            "https://files.slack.com.evil.example/a",
            "https://evil.example/files.slack.com/a",
            "https://user@files.slack.com/a",
            "https://files.slack.com:8443/a",
        ] {
            assert!(slack_file_url(foreign, None).is_none(), "{foreign}");
        }
        assert!(slack_file_url("http://127.0.0.1:10/a", Some("http://127.0.0.1:9/api/")).is_none(), "another port is another host");
    }

    #[test]
    fn clips_are_voice_notes_and_other_files_go_by_mime_type() {
        let raw = serde_json::json!({"files": [
            {"id": "F1", "name": "audio_message.webm", "mimetype": "audio/webm", "subtype": "slack_audio", "size": 900, "duration_ms": 4200,
             "url_private_download": "https://files.slack.com/x"},
            {"id": "F2", "name": "song.mp3", "mimetype": "audio/mpeg", "size": 5},
            {"id": "F3", "title": "cat", "mimetype": "image/png"},
            {"id": "F4", "name": "report.pdf", "mimetype": "application/pdf"},
        ]});
        let files = files_of(Some(&raw));
        let declared = declared(&files);
        let kinds: Vec<MessageKind> = declared.iter().map(|a| a.kind).collect();
        assert_eq!(kinds, [MessageKind::Voice, MessageKind::Audio, MessageKind::Photo, MessageKind::Document]);
        assert_eq!((declared[0].bytes, declared[0].duration_secs), (Some(900), Some(4.2)));
        assert_eq!(declared[2].name, "cat");
    }
}
