//! Files users attach to their messages: what each one is ([`declared`]: voice message, audio,
//! picture, video or document, from the message flags and the MIME type Discord reports) and,
//! for allowed senders only, the download into the media cache ([`fetch_all`]). The declared
//! size and duration are checked before anything is requested, and the byte cap holds while the
//! body streams in, whatever size Discord declared. Only Discord's own CDN (or the configured
//! API base, for a local stand-in) is ever asked: a message names its attachments' URLs, and no
//! other host gets a request from here.

use crate::settings::DiscordSettings;
use hermes_adapter::{Attachment, MediaCache, MessageKind, Refusal, save_capped};
use serenity::model::channel::{Attachment as DiscordAttachment, Message, MessageFlags};
use tokio::io::AsyncWriteExt;

/// A whole download (the client's own timeout is sized for API calls).
const DOWNLOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);
/// The hosts Discord serves attachments from.
const CDN_HOSTS: &[&str] = &["cdn.discordapp.com", "media.discordapp.net"];

/// What `message` carries, one [`Attachment`] per Discord attachment in the same order, as
/// declared (nothing fetched).
pub(crate) fn declared(message: &Message) -> Vec<Attachment> {
    let voice_message = message.flags.is_some_and(|f| f.contains(MessageFlags::IS_VOICE_MESSAGE));
    message.attachments.iter().map(|a| declared_one(a, voice_message)).collect()
}

fn declared_one(attachment: &DiscordAttachment, voice_message: bool) -> Attachment {
    let mime = attachment.content_type.as_deref().map(|m| m.split(';').next().unwrap_or(m).trim().to_ascii_lowercase());
    let recorded = attachment.duration_secs.is_some() && attachment.waveform.is_some();
    let kind = kind_of(voice_message || recorded, mime.as_deref());
    let duration = attachment.duration_secs.filter(|_| matches!(kind, MessageKind::Voice | MessageKind::Audio | MessageKind::Video));
    Attachment::declared(kind, attachment.filename.clone(), mime, Some(u64::from(attachment.size)), duration)
}

/// A voice message is Voice whatever its MIME type; otherwise the MIME type decides.
fn kind_of(voice_message: bool, mime: Option<&str>) -> MessageKind {
    match mime.unwrap_or_default() {
        _ if voice_message => MessageKind::Voice,
        m if m.starts_with("audio/") => MessageKind::Audio,
        m if m.starts_with("image/") => MessageKind::Photo,
        m if m.starts_with("video/") => MessageKind::Video,
        _ => MessageKind::Document,
    }
}

/// The message's kind: that of its first attachment, else text.
pub(crate) fn message_kind(attachments: &[Attachment]) -> MessageKind {
    attachments.first().map(|a| a.kind).unwrap_or(MessageKind::Text)
}

/// Downloads `message`'s attachments into the media cache, updating `attachments` (from
/// [`declared`], same order): each is saved, or marked refused with the reason the user is told.
/// The caller has made sure the sender is allowed.
pub(crate) async fn fetch_all(settings: &DiscordSettings, client: &reqwest012::Client, message: &Message, attachments: &mut [Attachment]) {
    let Some(dir) = settings.media_dir.as_deref() else { return };
    let cache = MediaCache::new(dir);
    for (source, attachment) in message.attachments.iter().zip(attachments.iter_mut()) {
        let outcome = fetch_one(settings, client, &cache, source, attachment).await;
        *attachment = match outcome {
            Ok((path, bytes)) => attachment.clone().saved(&path, bytes),
            Err(refusal) => {
                tracing::info!(attachment = source.id.get(), "a Discord attachment was not saved: {refusal}");
                attachment.clone().refuse(refusal)
            }
        };
    }
}

async fn fetch_one(
    settings: &DiscordSettings,
    client: &reqwest012::Client,
    cache: &MediaCache,
    source: &DiscordAttachment,
    attachment: &Attachment,
) -> Result<(std::path::PathBuf, u64), Refusal> {
    let cap = settings.media_limits.admit(attachment, settings.max_media_bytes)?;
    if !is_discord_url(&source.url, settings.api_base_url.as_deref()) {
        return Err(Refusal::Failed { detail: "its address is not on Discord's file server".to_string() });
    }
    let folder = cache.folder(attachment.kind.cache_folder()).map_err(|e| Refusal::Failed { detail: e.to_string() })?;
    let path = folder.join(attachment.cache_file_name(&format!("discord-{}", source.id.get())));
    let saved = save_capped(&path, cap, async |w| {
        // Attachment URLs are signed; the bot token is never sent with them.
        let mut response =
            client.get(&source.url).timeout(DOWNLOAD_TIMEOUT).send().await.map_err(without_url)?.error_for_status().map_err(without_url)?;
        while let Some(chunk) = response.chunk().await.map_err(without_url)? {
            w.write_all(&chunk).await.map_err(|e| e.to_string())?;
        }
        Ok::<(), String>(())
    })
    .await
    .map_err(|e| e.refusal())?;
    Ok((path, saved))
}

/// Whether `url` is on Discord's CDN over https, or on the configured API base (a local stand-in
/// serves its files there).
pub(crate) fn is_discord_url(url: &str, api_base: Option<&str>) -> bool {
    let Ok(url) = url::Url::parse(url) else { return false };
    let on_cdn = url.scheme() == "https" && url.host_str().is_some_and(|h| CDN_HOSTS.iter().any(|c| h.eq_ignore_ascii_case(c)));
    let on_base = api_base.and_then(|b| url::Url::parse(b.trim_end_matches('/')).ok()).is_some_and(|base| base.origin() == url.origin());
    on_cdn || on_base
}

/// reqwest names the URL in its errors; a signed URL is not for logs or users.
fn without_url(e: reqwest012::Error) -> String {
    let mut text = e.without_url().to_string();
    if text.is_empty() {
        text = "the download failed".to_string();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_discords_cdn_or_the_configured_base_is_fetched_from() {
        let base = Some("http://127.0.0.1:4000");
        assert!(is_discord_url("https://cdn.discordapp.com/attachments/1/2/a.ogg?ex=1", None));
        assert!(is_discord_url("https://media.discordapp.net/attachments/1/2/a.png", None));
        assert!(is_discord_url("http://127.0.0.1:4000/cdn/attachments/1/2/a.ogg", base));
        for foreign in [
            "http://cdn.discordapp.com/attachments/1/2/a.ogg",
            "https://cdn.discordapp.com.evil.example/a.ogg",
            "http://127.0.0.1:4001/cdn/a.ogg",
            "https://169.254.169.254/latest/meta-data",
            "file:///etc/passwd",
        ] {
            assert!(!is_discord_url(foreign, base), "{foreign}");
        }
    }

    #[test]
    fn kinds_follow_the_voice_flag_then_the_mime_type() {
        assert_eq!(kind_of(true, Some("audio/ogg")), MessageKind::Voice);
        assert_eq!(kind_of(false, Some("audio/mpeg")), MessageKind::Audio);
        assert_eq!(kind_of(false, Some("image/png")), MessageKind::Photo);
        assert_eq!(kind_of(false, Some("video/mp4")), MessageKind::Video);
        assert_eq!(kind_of(false, Some("application/pdf")), MessageKind::Document);
        assert_eq!(kind_of(false, None), MessageKind::Document);
    }
}
