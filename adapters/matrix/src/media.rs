//! Inbound images and files saved under `HERMES_HOME/cache` (size capped) so the agent can read
//! them by path. Only for senders the gateway allows (the sync loop asks first); the sender's
//! file name is untrusted and is reduced to a safe one; files are private (0600 in 0700 folders,
//! see [`hermes_adapter::media_cache`]) and the gateway prunes them. Encrypted attachments are
//! decrypted by the SDK.

use crate::inbound::Attachment;
use hermes_adapter::MessageKind;
use hermes_adapter::media_cache::{MediaCache, create_private_file};
use matrix_sdk::Client;
use matrix_sdk::media::{MediaFormat, MediaRequestParameters};
use matrix_sdk::ruma::events::room::MediaSource;
use std::path::{Path, PathBuf};
use tokio::io::AsyncWriteExt;

/// What became of an attachment: a local path, or a note for the agent saying why not.
pub(crate) enum Saved {
    Path(PathBuf),
    Skipped(String),
}

/// The sender's file name reduced to letters, digits, `.`, `-` and `_`, no leading dots, at
/// most 100 characters: it can neither leave the folder nor hide.
pub(crate) fn safe_name(name: &str) -> String {
    let cleaned: String = name.chars().map(|c| if c.is_alphanumeric() || ".-_".contains(c) { c } else { '_' }).take(100).collect();
    match cleaned.trim_start_matches('.') {
        "" => "file".to_string(),
        rest => rest.to_string(),
    }
}

pub(crate) async fn save(client: &Client, attachment: &Attachment, event_id: &str, media_dir: &Path, max_bytes: u64) -> Saved {
    let shown = hermes_adapter::untrusted::mark(&attachment.name);
    let human_max = max_bytes / (1024 * 1024);
    if attachment.size.is_some_and(|size| size > max_bytes) {
        return Saved::Skipped(format!("[{shown} was not downloaded: larger than {human_max} MB]"));
    }
    let source: MediaSource = match serde_json::from_value(attachment.source.clone()) {
        Ok(source) => source,
        Err(e) => return Saved::Skipped(format!("[{shown} could not be downloaded: {e}]")),
    };
    let request = MediaRequestParameters { source, format: MediaFormat::File };
    let bytes = match client.media().get_media_content(&request, false).await {
        Ok(bytes) => bytes,
        Err(e) => return Saved::Skipped(format!("[{shown} could not be downloaded: {e}]")),
    };
    if bytes.len() as u64 > max_bytes {
        return Saved::Skipped(format!("[{shown} was not downloaded: larger than {human_max} MB]"));
    }
    let cache = MediaCache::new(media_dir);
    let folder = match cache.folder(match attachment.kind {
        MessageKind::Photo => "images",
        _ => "documents",
    }) {
        Ok(folder) => folder,
        Err(e) => return Saved::Skipped(format!("[{shown} could not be saved: {e}]")),
    };
    // The event id keeps two files of the same name apart.
    let unique: String = event_id.chars().filter(char::is_ascii_alphanumeric).take(24).collect();
    let path = folder.join(format!("{unique}-{}", safe_name(&attachment.name)));
    let partial = path.with_extension("part");
    let result = async {
        // A part left by a crash would make the private create fail; it is ours to replace.
        let _ = tokio::fs::remove_file(&partial).await;
        let mut out = create_private_file(&partial).await.map_err(|e| e.to_string())?;
        out.write_all(&bytes).await.map_err(|e| e.to_string())?;
        out.flush().await.map_err(|e| e.to_string())?;
        tokio::fs::rename(&partial, &path).await.map_err(|e| e.to_string())
    }
    .await;
    match result {
        Ok(()) => Saved::Path(path),
        Err(e) => {
            let _ = tokio::fs::remove_file(&partial).await;
            Saved::Skipped(format!("[{shown} could not be saved: {e}]"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_file_names_stay_in_the_folder() {
        assert_eq!(safe_name("../../etc/passwd"), "_.._etc_passwd");
        assert_eq!(safe_name(".bashrc"), "bashrc");
        assert_eq!(safe_name("..."), "file");
        assert_eq!(safe_name("report 2024.pdf"), "report_2024.pdf");
        assert!(safe_name(&"a".repeat(500)).len() <= 100);
        assert!(!safe_name("a/b\\c\0d").contains(['/', '\\', '\0']));
    }
}
