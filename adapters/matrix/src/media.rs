//! Inbound attachments saved under `HERMES_HOME/cache` so the agent can use them: only for
//! senders the gateway allows (the sync loop asks first), only after the declared size and
//! length pass [`hermes_adapter::MediaLimits::admit`], and only as many bytes as the cap it
//! returns, whatever was declared: the body is streamed from the configured homeserver's
//! authenticated media endpoint (`GET /_matrix/client/v1/media/download/{serverName}/{mediaId}`)
//! into [`hermes_adapter::save_capped`], never from the server the `mxc://` URI names and never
//! through a redirect.
//!
//! Encrypted attachments (`file` instead of `url`) are AES-CTR ciphertext exactly as long as the
//! file; matrix-sdk decrypts only whole bodies, so their size is established under the cap
//! first and the SDK downloads them after (see `save_encrypted`). The sender's file name is
//! untrusted and reduced to a safe one ([`hermes_adapter::Attachment::cache_file_name`]).

use crate::inbound;
use crate::settings::MatrixSettings;
use hermes_adapter::media_cache::MediaCache;
use hermes_adapter::{Attachment, CappedWriter, Refusal, SaveError, save_capped};
use matrix_sdk::Client;
use matrix_sdk::media::{MediaFormat, MediaRequestParameters};
use matrix_sdk::ruma::OwnedMxcUri;
use matrix_sdk::ruma::events::room::EncryptedFile;
use matrix_sdk::ruma::events::room::MediaSource;
use std::path::Path;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// What the homeserver is asked with: its configured address and the bot's access token.
pub(crate) struct Homeserver<'a> {
    pub base: &'a url::Url,
    pub token: &'a str,
    /// The longest wait for the answer and then for each next piece of a body (a stalled
    /// download is given up on).
    pub idle: Duration,
}

/// The client downloads go through: it follows no redirect, so the configured homeserver is the
/// only host ever asked.
fn http_client(idle: Duration) -> Result<reqwest::Client, Fetch> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(idle)
        .build()
        .map_err(|e| Fetch::Failed(format!("no HTTP client: {e}")))
}

/// Why a download went wrong, before or while streaming.
#[derive(Debug, thiserror::Error)]
enum Fetch {
    #[error("{0}")]
    Refused(Refusal),
    #[error("{0}")]
    Failed(String),
}

impl From<Fetch> for Refusal {
    fn from(fetch: Fetch) -> Self {
        match fetch {
            Fetch::Refused(refusal) => refusal,
            Fetch::Failed(detail) => Refusal::Failed { detail },
        }
    }
}

/// The attachment as declared, then saved (with its real size) or refused (and why).
pub(crate) async fn save(
    client: &Client,
    server: &Homeserver<'_>,
    settings: &MatrixSettings,
    attachment: &inbound::Attachment,
    event_id: &str,
) -> Attachment {
    let declared =
        Attachment::declared(attachment.kind, attachment.name.clone(), attachment.mime.clone(), attachment.size, attachment.duration_secs);
    let cap = match settings.media_limits.admit(&declared, settings.max_media_bytes) {
        Ok(cap) => cap,
        Err(refusal) => return declared.refuse(refusal),
    };
    let folder = match MediaCache::new(&settings.media_dir).folder(attachment.kind.cache_folder()) {
        Ok(folder) => folder,
        Err(e) => return declared.refuse(Refusal::Failed { detail: e.to_string() }),
    };
    let path = folder.join(file_name(&declared, event_id));
    let http = match http_client(server.idle) {
        Ok(http) => http,
        Err(fetch) => return declared.refuse(fetch.into()),
    };
    let saved = match serde_json::from_value::<MediaSource>(attachment.source.clone()) {
        Ok(MediaSource::Plain(uri)) => save_plain(&http, server, &uri, &path, cap).await,
        Ok(MediaSource::Encrypted(file)) => save_encrypted(&http, server, client, file, &path, cap).await,
        Err(e) => Err(Fetch::Failed(format!("the attachment's source is malformed: {e}"))),
    };
    match saved {
        Ok(bytes) => declared.saved(&path, bytes),
        Err(fetch) => declared.refuse(fetch.into()),
    }
}

/// `eventid-name.ext`: the event id keeps two files of one name apart, and a name without an
/// extension (Element calls every voice note "Voice message") gets the one its MIME type implies,
/// so a voice note is a `.ogg` that speech services accept.
fn file_name(declared: &Attachment, event_id: &str) -> String {
    let unique: String = event_id.chars().filter(char::is_ascii_alphanumeric).take(24).collect();
    let name = declared.cache_file_name(&unique);
    let has_extension = Path::new(&declared.name).extension().is_some_and(|e| !e.is_empty() && e.len() <= 5);
    match extension_for(declared.mime.as_deref()) {
        Some(extension) if !has_extension && !declared.name.is_empty() => format!("{name}.{extension}"),
        _ => name,
    }
}

fn extension_for(mime: Option<&str>) -> Option<&'static str> {
    Some(match mime?.split(';').next()?.trim() {
        "audio/ogg" | "audio/opus" => "ogg",
        "audio/mpeg" => "mp3",
        "audio/mp4" | "audio/x-m4a" => "m4a",
        "audio/webm" => "webm",
        "audio/wav" | "audio/x-wav" => "wav",
        "image/jpeg" => "jpg",
        "image/png" => "png",
        "image/webp" => "webp",
        "image/gif" => "gif",
        "video/mp4" => "mp4",
        _ => return None,
    })
}

/// The authenticated media URL of `uri` on the configured homeserver (which fetches remote media
/// over federation itself), or why there is none: the server name and media id must be what the
/// spec allows, so nothing of the sender's can change the path.
pub(crate) fn download_url(base: &url::Url, uri: &OwnedMxcUri) -> Result<url::Url, String> {
    let (server, media_id) = uri.parts().map_err(|e| format!("`{uri}` is not a media URI: {e}"))?;
    if media_id.is_empty() || !media_id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return Err(format!("`{uri}` has a media id the spec does not allow"));
    }
    let text = format!("{}/_matrix/client/v1/media/download/{server}/{media_id}", base.as_str().trim_end_matches('/'));
    url::Url::parse(&text).map_err(|e| format!("`{uri}` makes no URL: {e}"))
}

/// The download started: a 200 whose `Content-Length`, when given, is within `cap`.
async fn open(http: &reqwest::Client, server: &Homeserver<'_>, uri: &OwnedMxcUri, cap: u64) -> Result<reqwest::Response, Fetch> {
    let url = download_url(server.base, uri).map_err(Fetch::Failed)?;
    let response = tokio::time::timeout(server.idle, http.get(url).bearer_auth(server.token).send())
        .await
        .map_err(|_| Fetch::Failed("the homeserver did not answer in time".to_string()))?
        .map_err(|e| Fetch::Failed(e.without_url().to_string()))?;
    if !response.status().is_success() {
        return Err(Fetch::Failed(format!("the homeserver answered {}", response.status())));
    }
    match response.content_length() {
        Some(length) if length > cap => Err(Fetch::Refused(Refusal::TooLarge { limit_bytes: cap })),
        _ => Ok(response),
    }
}

/// The next piece of the body; `None` at its end.
async fn next_chunk(response: &mut reqwest::Response, idle: Duration) -> Result<Option<matrix_sdk::bytes::Bytes>, String> {
    match tokio::time::timeout(idle, response.chunk()).await {
        Ok(chunk) => chunk.map_err(|e| e.without_url().to_string()),
        Err(_) => Err("the download stalled".to_string()),
    }
}

async fn save_plain(http: &reqwest::Client, server: &Homeserver<'_>, uri: &OwnedMxcUri, path: &Path, cap: u64) -> Result<u64, Fetch> {
    let mut response = open(http, server, uri, cap).await?;
    let idle = server.idle;
    save_capped(path, cap, async |out: &mut CappedWriter<tokio::fs::File>| {
        while let Some(chunk) = next_chunk(&mut response, idle).await? {
            out.write_all(&chunk).await.map_err(|e| e.to_string())?;
        }
        Ok::<(), String>(())
    })
    .await
    .map_err(saved_error)
}

/// There is no streaming decryption in matrix-sdk (its decryptor is not public, and no crate of
/// ours could decrypt instead), so the ciphertext's size is established first: a request to the
/// same URL whose `Content-Length` (or, without one, its body counted and dropped) must be
/// within `cap`; AES-CTR keeps the length, and media is immutable, so the SDK's own download
/// that follows (whole, into memory, decrypted and hash-checked) is as large. That costs a
/// second request, never more than `cap` bytes held.
async fn save_encrypted(
    http: &reqwest::Client,
    server: &Homeserver<'_>,
    client: &Client,
    file: Box<EncryptedFile>,
    path: &Path,
    cap: u64,
) -> Result<u64, Fetch> {
    let mut response = open(http, server, &file.url, cap).await?;
    if response.content_length().is_none() {
        let mut seen = 0u64;
        while let Some(chunk) = next_chunk(&mut response, server.idle).await.map_err(Fetch::Failed)? {
            seen += chunk.len() as u64;
            if seen > cap {
                return Err(Fetch::Refused(Refusal::TooLarge { limit_bytes: cap }));
            }
        }
    }
    drop(response);
    let request = MediaRequestParameters { source: MediaSource::Encrypted(file), format: MediaFormat::File };
    let plain = client.media().get_media_content(&request, false).await.map_err(|e| Fetch::Failed(e.to_string()))?;
    save_capped(path, cap, async |out: &mut CappedWriter<tokio::fs::File>| out.write_all(&plain).await).await.map_err(saved_error)
}

fn saved_error(error: SaveError) -> Fetch {
    Fetch::Refused(error.refusal())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::MessageKind;

    #[test]
    fn hostile_file_names_stay_in_the_folder_and_voice_notes_are_ogg() {
        let named = |name: &str, mime: Option<&str>| {
            file_name(&Attachment::declared(MessageKind::Voice, name, mime.map(str::to_string), None, None), "$abc:localhost")
        };
        assert_eq!(named("../../etc/passwd", None), "abclocalhost-_.._etc_passwd");
        assert_eq!(named("Voice message", Some("audio/ogg")), "abclocalhost-Voice_message.ogg");
        assert_eq!(named("note.oga", Some("audio/ogg")), "abclocalhost-note.ogg");
        assert_eq!(named("", Some("audio/ogg")), "abclocalhost-voice-note.ogg");
        assert!(!named("a/b\\c\0d", None).contains(['/', '\\', '\0']));
    }

    /// A homeserver on loopback that answers any request with `body_len` bytes and no
    /// `Content-Length` (a size nobody declared), counting what it managed to send.
    async fn endless_server(body_len: usize) -> (url::Url, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = url::Url::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = sent.clone();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request).await;
            let _ = socket.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: audio/ogg\r\nConnection: close\r\n\r\n").await;
            let piece = vec![7u8; 16 * 1024];
            while counter.load(std::sync::atomic::Ordering::Relaxed) < body_len {
                if socket.write_all(&piece).await.is_err() {
                    break;
                }
                counter.fetch_add(piece.len(), std::sync::atomic::Ordering::Relaxed);
            }
        });
        (base, sent)
    }

    #[tokio::test]
    async fn a_body_without_a_declared_size_stops_at_the_cap() {
        const CAP: u64 = 256 * 1024;
        const BODY: usize = 64 * 1024 * 1024;
        let (base, sent) = endless_server(BODY).await;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("note.ogg");
        let server = Homeserver { base: &base, token: "t", idle: Duration::from_secs(10) };
        let uri = OwnedMxcUri::from("mxc://localhost/abc");
        let result = save_plain(&http_client(server.idle).unwrap(), &server, &uri, &path, CAP).await;
        assert!(matches!(result, Err(Fetch::Refused(Refusal::TooLarge { limit_bytes: CAP }))), "{result:?}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "neither the file nor its part is left");
        // The server keeps writing until the socket is closed; what it got out is the cap plus
        // the kernel's socket buffers, nowhere near the 64 MB body.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let served = sent.load(std::sync::atomic::Ordering::Relaxed);
        assert!(served < BODY / 2, "the download stopped at the cap: {served} bytes left the server");
    }

    #[test]
    fn media_is_asked_of_the_configured_homeserver_only() {
        let base = url::Url::parse("https://matrix.example.org").unwrap();
        let uri = OwnedMxcUri::from("mxc://elsewhere.example:8448/AbC_d-9");
        let url = download_url(&base, &uri).unwrap();
        assert_eq!(url.as_str(), "https://matrix.example.org/_matrix/client/v1/media/download/elsewhere.example:8448/AbC_d-9");
        for hostile in ["mxc://x/../../admin", "mxc://x/a?b=c", "mxc://x/", "https://x/y", "mxc://x/a%2Fb"] {
            assert!(download_url(&base, &OwnedMxcUri::from(hostile)).is_err(), "{hostile}");
        }
    }
}
