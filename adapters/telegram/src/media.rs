//! Inbound voice notes, audio, photos, videos and documents saved under `HERMES_HOME/cache` so the
//! gateway can transcribe, show or hand them to the agent by path. Only for senders the gateway
//! allows (the poll loop asks first). What Telegram declared (size, duration) is checked against
//! the gateway's [`MediaLimits`] before `getFile`; the download streams into
//! [`hermes_adapter::save_capped`], which stops at the cap whatever was declared. Files are
//! private (0600 in 0700 folders, see [`hermes_adapter::media_cache`]) and the gateway prunes them.

use crate::inbound::{IncomingFile, declared_size};
use hermes_adapter::media_cache::MediaCache;
use hermes_adapter::{Attachment, CappedWriter, MediaLimits, Refusal, save_capped};
use teloxide::net::Download;
use teloxide::prelude::Requester;
use teloxide::types::FileId;
use teloxide::{ApiError, Bot, RequestError};

/// "For the moment, bots can download files of up to 20MB in size" (Bot API, getFile).
const BOT_API_DOWNLOAD_LIMIT: u64 = 20 * 1024 * 1024;

/// Where a download is saved and how large it may grow.
pub struct Fetch<'a> {
    pub cache: &'a MediaCache,
    pub limits: MediaLimits,
    /// The adapter's own cap (`max_media_bytes`).
    pub adapter_max: u64,
}

/// The attachment saved (with its path and real size), or refused with the reason; nothing is
/// fetched when the declared facts are over a limit.
pub async fn fetch(bot: &Bot, file: &IncomingFile, to: &Fetch<'_>) -> Attachment {
    let attachment = file.attachment.clone();
    let cap = match to.limits.admit(&attachment, to.adapter_max) {
        Ok(cap) => cap,
        Err(refusal) => return attachment.refuse(refusal),
    };
    let found = match bot.get_file(FileId(file.file_id.clone())).await {
        Ok(found) => found,
        Err(e) => return attachment.refuse(get_file_refusal(e)),
    };
    // getFile may state a size the message did not.
    if declared_size(&found.meta).is_some_and(|size| size > cap) {
        return attachment.refuse(Refusal::TooLarge { limit_bytes: cap });
    }
    let folder = match to.cache.folder(attachment.kind.cache_folder()) {
        Ok(folder) => folder,
        Err(e) => return attachment.refuse(Refusal::Failed { detail: e.to_string() }),
    };
    let path = folder.join(attachment.cache_file_name(&file.unique_id));
    let saved = save_capped(&path, cap, async |out: &mut CappedWriter<tokio::fs::File>| bot.download_file(&found.path, out).await).await;
    match saved {
        Ok(bytes) => attachment.saved(&path, bytes),
        Err(e) => attachment.refuse(e.refusal()),
    }
}

/// Telegram refuses to serve bots files over 20 MB ("Bad Request: file is too big"): that is a
/// size refusal the user can act on, not a failure.
fn get_file_refusal(error: RequestError) -> Refusal {
    match error {
        RequestError::Api(ApiError::Unknown(detail)) if detail.contains("file is too big") => {
            Refusal::TooLarge { limit_bytes: BOT_API_DOWNLOAD_LIMIT }
        }
        // Telegram's own words, without teloxide's "A Telegram's error: Unknown error:" around them.
        RequestError::Api(ApiError::Unknown(detail)) => Refusal::Failed { detail },
        other => Refusal::Failed { detail: other.to_string() },
    }
}
