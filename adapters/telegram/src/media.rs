//! Inbound photos and documents saved under `HERMES_HOME/cache` (size capped) so the agent can
//! read them by path. Only for senders the gateway allows (the poll loop asks first); files are
//! private (0600 in 0700 folders, see [`hermes_adapter::media_cache`]) and the gateway prunes them.

use crate::inbound::Attachment;
use hermes_adapter::MessageKind;
use hermes_adapter::media_cache::{MediaCache, create_private_file};
use std::path::PathBuf;
use teloxide::Bot;
use teloxide::net::Download;
use teloxide::prelude::Requester;
use teloxide::types::FileId;

/// What became of an attachment: a local path, or a note for the agent saying why not.
pub enum Saved {
    Path(PathBuf),
    Skipped(String),
}

pub async fn save(bot: &Bot, attachment: &Attachment, cache: &MediaCache, max_bytes: u64) -> Saved {
    let human_max = max_bytes / (1024 * 1024);
    if attachment.size.is_some_and(|size| size > max_bytes) {
        return Saved::Skipped(format!("[{} was not downloaded: larger than {human_max} MB]", attachment.file_name));
    }
    let file = match bot.get_file(FileId(attachment.file_id.clone())).await {
        Ok(file) => file,
        Err(e) => return Saved::Skipped(format!("[{} could not be downloaded: {e}]", attachment.file_name)),
    };
    if u64::from(file.size) > max_bytes {
        return Saved::Skipped(format!("[{} was not downloaded: larger than {human_max} MB]", attachment.file_name));
    }
    let folder = match cache.folder(match attachment.kind {
        MessageKind::Photo => "images",
        _ => "documents",
    }) {
        Ok(folder) => folder,
        Err(e) => return Saved::Skipped(format!("[{} could not be saved: {e}]", attachment.file_name)),
    };
    // The unique id keeps two files with the same name apart; the name is reduced to a safe one.
    let safe_name: String = attachment.file_name.chars().map(|c| if c.is_alphanumeric() || ".-_".contains(c) { c } else { '_' }).collect();
    let path = folder.join(format!("{}-{}", file.meta.unique_id.0, safe_name.trim_start_matches('.')));
    let partial = path.with_extension("part");
    let result = async {
        // A part left by a crash would make the private create fail; it is ours to replace.
        let _ = tokio::fs::remove_file(&partial).await;
        let mut out = create_private_file(&partial).await.map_err(|e| e.to_string())?;
        bot.download_file(&file.path, &mut out).await.map_err(|e| e.to_string())?;
        tokio::fs::rename(&partial, &path).await.map_err(|e| e.to_string())
    }
    .await;
    match result {
        Ok(()) => Saved::Path(path),
        Err(e) => {
            let _ = tokio::fs::remove_file(&partial).await;
            Saved::Skipped(format!("[{} could not be downloaded: {e}]", attachment.file_name))
        }
    }
}
