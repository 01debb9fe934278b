//! Speech to text: one client for any OpenAI-compatible `POST {base_url}/audio/transcriptions`
//! (OpenAI, Groq, a local faster-whisper-server) and a `command` provider that runs a local
//! program per voice note. Also the pieces the text-to-speech engine shares: the endpoint and key
//! rule, bounded reads of untrusted answers, and running an operator's shell pipeline with a
//! deadline.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use hermes_adapter::Secret;
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::multipart::Form;
use super::ogg;
use crate::agent::providers::http::ModelClient;
use crate::config::{ModelConfig, SpeechProvider, SttConfig};

/// A transcript answer is a line of JSON; more than this is not a transcript.
const MAX_TRANSCRIPT_BYTES: usize = 1024 * 1024;
/// How much of an error answer (or a command's stderr) a user gets to read.
const EXCERPT_CHARS: usize = 300;

/// Turns voice notes and audio files into text.
pub struct Transcriber {
    engine: Engine,
    timeout: Duration,
}

enum Engine {
    Http { http: ModelClient, endpoint: Endpoint, model: String, language: Option<String> },
    Command { template: String },
}

/// What a voice note said.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    /// Trimmed; empty when the engine heard no speech.
    pub text: String,
    /// How long the audio plays, when it is OGG/Opus (read from its pages).
    pub audio_secs: Option<f64>,
}

/// Why a voice note has no transcript; the Display is the sentence a user reads.
#[derive(Debug, thiserror::Error)]
pub enum SttError {
    #[error("the voice note could not be read from the media cache: {0}")]
    Read(std::io::Error),
    #[error("{service} could not be reached: {detail}")]
    Unreachable { service: String, detail: String },
    #[error("{service} did not answer within {secs} s")]
    TimedOut { service: String, secs: u64 },
    #[error("{service} refused the audio (HTTP {status}){}", colon(detail))]
    Refused { service: String, status: u16, detail: String },
    #[error("{service} answered with something that is not a transcript{}", colon(detail))]
    NotATranscript { service: String, detail: String },
    #[error("the transcription command {0}")]
    Command(#[from] CommandError),
}

impl Transcriber {
    /// None when `stt.enabled` is false. `http` is built on the first voice note. base_url/api_key fall back to model.base_url/model.api_key
    /// (the key only when the base URL is the model's, never sent to another host).
    pub fn from_config(stt: &SttConfig, model: &ModelConfig, http: ModelClient) -> Option<Self> {
        if !stt.enabled {
            return None;
        }
        let engine = match stt.provider {
            SpeechProvider::Command => Engine::Command { template: stt.command.clone().unwrap_or_default() },
            SpeechProvider::Openai => Engine::Http {
                http,
                endpoint: Endpoint::resolve(stt.base_url.as_deref(), stt.api_key.as_ref(), model),
                model: stt.model.clone(),
                language: stt.language.clone().filter(|l| !l.trim().is_empty()),
            },
        };
        Some(Self { engine, timeout: Duration::from_secs(stt.timeout_secs) })
    }

    /// "whisper-1 at https://api.openai.com/v1" (for logs and `/status`; no key, no password).
    pub fn describe(&self) -> String {
        match &self.engine {
            Engine::Http { endpoint, model, .. } => format!("{model} at {}", endpoint.shown()),
            Engine::Command { template } => format!("the command `{}`", program_of(template)),
        }
    }

    /// The transcript of the audio at `path` (`mime` as the platform declared it).
    pub async fn transcribe(&self, path: &Path, mime: Option<&str>) -> Result<Transcript, SttError> {
        let audio = tokio::fs::read(path).await.map_err(SttError::Read)?;
        let audio_secs = ogg::opus_duration(&audio).ok();
        let text = match &self.engine {
            Engine::Http { http, endpoint, model, language } => {
                let request = Upload { path, mime, audio: &audio, model, language: language.as_deref() };
                self.post(http, endpoint, request).await?
            }
            Engine::Command { template } => {
                let script = with_file(template, path);
                let stdout = run_shell(&script, None, self.timeout, MAX_TRANSCRIPT_BYTES).await?;
                String::from_utf8_lossy(&stdout).into_owned()
            }
        };
        Ok(Transcript { text: text.trim().to_owned(), audio_secs })
    }

    async fn post(&self, http: &ModelClient, endpoint: &Endpoint, upload: Upload<'_>) -> Result<String, SttError> {
        let service = format!("the speech-to-text service at {}", endpoint.shown());
        let http = http.get().map_err(|e| SttError::Unreachable { service: service.clone(), detail: e.to_string() })?;
        let (content_type, body) = upload.form();
        let mut request = http
            .post(format!("{}/audio/transcriptions", endpoint.base_url))
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(body)
            .timeout(self.timeout);
        if let Some(key) = &endpoint.api_key {
            request = request.bearer_auth(key.expose());
        }
        let secs = self.timeout.as_secs();
        let failed = |e: reqwest::Error| {
            if e.is_timeout() {
                SttError::TimedOut { service: service.clone(), secs }
            } else {
                SttError::Unreachable { service: service.clone(), detail: error_chain(e) }
            }
        };
        let response = request.send().await.map_err(failed)?;
        let status = response.status();
        let body = match read_capped(response, MAX_TRANSCRIPT_BYTES).await {
            Ok(body) => body,
            Err(Capped::Http(e)) => return Err(failed(e)),
            Err(Capped::TooLarge) => return Err(SttError::NotATranscript { service, detail: "the answer is too large".into() }),
        };
        if !status.is_success() {
            return Err(SttError::Refused { service, status: status.as_u16(), detail: excerpt(&body) });
        }
        #[derive(Deserialize)]
        struct Answer {
            text: String,
        }
        serde_json::from_slice::<Answer>(&body).map(|a| a.text).map_err(|_| SttError::NotATranscript { service, detail: excerpt(&body) })
    }
}

/// One transcription request's fields.
struct Upload<'a> {
    path: &'a Path,
    mime: Option<&'a str>,
    audio: &'a [u8],
    model: &'a str,
    language: Option<&'a str>,
}

impl Upload<'_> {
    /// The multipart body as OpenAI documents it: `file`, `model`, `language`, `response_format`.
    fn form(&self) -> (String, Vec<u8>) {
        let extension = upload_extension(self.path, self.mime);
        let content_type = self.mime.filter(|m| !m.trim().is_empty()).unwrap_or_else(|| mime_of(&extension));
        let mut form = Form::new(&[self.audio]);
        form.file("file", &format!("audio.{extension}"), content_type, self.audio);
        form.text("model", self.model);
        if let Some(language) = self.language {
            form.text("language", language);
        }
        form.text("response_format", "json");
        form.finish()
    }
}

/// The extension the upload is named with. Servers pick the decoder by it and refuse what they
/// do not list: Telegram's `.oga` is sent as `.ogg` (Groq and gpt-4o-mini-transcribe refuse
/// `oga`). The user's file name never leaves: only its extension, when it is a plain one.
fn upload_extension(path: &Path, mime: Option<&str>) -> String {
    let from_path = path
        .extension()
        .and_then(OsStr::to_str)
        .map(str::to_ascii_lowercase)
        .filter(|e| (1..=5).contains(&e.len()) && e.bytes().all(|b| b.is_ascii_alphanumeric()));
    let extension = from_path.or_else(|| mime.and_then(extension_of).map(str::to_owned)).unwrap_or_else(|| "ogg".to_owned());
    if extension == "oga" { "ogg".to_owned() } else { extension }
}

const AUDIO_TYPES: [(&str, &str); 8] = [
    ("ogg", "audio/ogg"),
    ("opus", "audio/ogg"),
    ("mp3", "audio/mpeg"),
    ("m4a", "audio/mp4"),
    ("mp4", "audio/mp4"),
    ("wav", "audio/wav"),
    ("webm", "audio/webm"),
    ("flac", "audio/flac"),
];

fn extension_of(mime: &str) -> Option<&'static str> {
    let essence = mime.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    AUDIO_TYPES.iter().find(|(_, m)| *m == essence).map(|(e, _)| *e)
}

fn mime_of(extension: &str) -> &'static str {
    AUDIO_TYPES.iter().find(|(e, _)| *e == extension).map_or("application/octet-stream", |(_, m)| m)
}

/// Where a speech service is and the key it gets.
pub(crate) struct Endpoint {
    /// Without a trailing `/`.
    pub(crate) base_url: String,
    pub(crate) api_key: Option<Secret>,
}

impl Endpoint {
    /// The section's own base URL and key, else the model's. The model's key goes only to the
    /// model's base URL: a speech service elsewhere must never receive it.
    pub(crate) fn resolve(own_url: Option<&str>, own_key: Option<&Secret>, model: &ModelConfig) -> Self {
        let model_url = model.base_url.trim_end_matches('/');
        let base_url = own_url.map_or(model_url, |u| u.trim_end_matches('/')).to_owned();
        let api_key = match own_key.filter(|k| !k.is_empty()) {
            Some(key) => Some(key.clone()),
            None => model.api_key.clone().filter(|k| !k.is_empty() && base_url == model_url),
        };
        Self { base_url, api_key }
    }

    /// The base URL without a user name or password, for messages.
    pub(crate) fn shown(&self) -> String {
        match reqwest::Url::parse(&self.base_url) {
            Ok(mut url) => {
                let _ = url.set_username("");
                let _ = url.set_password(None);
                url.as_str().trim_end_matches('/').to_owned()
            }
            Err(_) => "a misconfigured URL".to_owned(),
        }
    }
}

/// An error and its causes, without the request URL (a query string may carry a key).
pub(crate) fn error_chain(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

pub(crate) enum Capped {
    Http(reqwest::Error),
    TooLarge,
}

/// The response body, refused past `cap` bytes (answers are untrusted; none may fill memory).
pub(crate) async fn read_capped(mut response: reqwest::Response, cap: usize) -> Result<Vec<u8>, Capped> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(Capped::Http)? {
        if body.len() + chunk.len() > cap {
            return Err(Capped::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A short, single-line excerpt of an untrusted error answer: the JSON error message when there
/// is one (OpenAI's `error.message`, FastAPI's `detail`), else the text.
pub(crate) fn excerpt(body: &[u8]) -> String {
    let json = serde_json::from_slice::<serde_json::Value>(body).ok();
    let message = json.as_ref().and_then(|v| {
        let candidates = [v.pointer("/error/message"), v.get("detail"), v.get("error"), v.get("message")];
        candidates.into_iter().flatten().find_map(|m| m.as_str().map(str::to_owned))
    });
    let text = message.unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

fn colon(detail: &str) -> String {
    if detail.is_empty() { String::new() } else { format!(": {detail}") }
}

/// The command's program name (its first word), never its arguments, for messages.
fn program_of(template: &str) -> &str {
    template.split_whitespace().next().unwrap_or("(empty)")
}

/// The template with `{file}` replaced by the single-quoted path, or the path appended when the
/// template has no `{file}`. Single quotes make any path one word to `sh`.
fn with_file(template: &str, path: &Path) -> String {
    let quoted = format!("'{}'", path.to_string_lossy().replace('\'', r"'\''"));
    if template.contains("{file}") { template.replace("{file}", &quoted) } else { format!("{template} {quoted}") }
}

/// Why an operator's speech command gave nothing usable; read after "the … command".
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("could not start: {0}")]
    Start(std::io::Error),
    #[error("did not finish within {0} s and was stopped")]
    TimedOut(u64),
    #[error("failed ({status}){}", colon(stderr))]
    Failed { status: String, stderr: String },
    #[error("printed more than {0} bytes")]
    TooMuchOutput(usize),
}

/// Runs `script` with `sh -c` in its own process group, feeding `stdin`, and returns its stdout
/// (at most `max_stdout` bytes). On timeout or when the call is dropped, the whole group is
/// killed: a pipeline's programs do not outlive it.
pub(crate) async fn run_shell(script: &str, stdin: Option<&[u8]>, timeout: Duration, max_stdout: usize) -> Result<Vec<u8>, CommandError> {
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(script)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = command.spawn().map_err(CommandError::Start)?;
    let mut group = GroupGuard(child.id().and_then(|p| i32::try_from(p).ok()));
    let (input, output, errors) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let work = async {
        let feed = async {
            if let (Some(mut pipe), Some(data)) = (input, stdin) {
                // A command that does not read all its input is its own business; its exit
                // status tells whether it worked.
                let _ = pipe.write_all(data).await;
            }
        };
        let (_, (stdout, overflow), (stderr, _)) = tokio::join!(feed, drain(output, max_stdout), drain_tail(errors));
        (child.wait().await, stdout, overflow, stderr)
    };
    let (status, stdout, overflow, stderr) =
        tokio::time::timeout(timeout, work).await.map_err(|_| CommandError::TimedOut(timeout.as_secs()))?;
    let status = status.map_err(CommandError::Start)?;
    // The leader was reaped: its pid (the group id) may be reused, so the guard stands down.
    group.0 = None;
    if !status.success() {
        return Err(CommandError::Failed { status: status.to_string(), stderr: excerpt_tail(&stderr) });
    }
    if overflow {
        return Err(CommandError::TooMuchOutput(max_stdout));
    }
    Ok(stdout)
}

struct GroupGuard(Option<i32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0.filter(|p| *p > 0) {
            // SAFETY: kill(2) with a negative pid signals the process group made by
            // process_group(0), whose id is the shell's pid, not yet reaped (see run_shell).
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }
}

/// Reads to the end, keeping at most `cap` bytes; `true` when more came (the rest is read and
/// dropped so the writer never blocks on a full pipe).
async fn drain(pipe: Option<impl AsyncRead + Unpin>, cap: usize) -> (Vec<u8>, bool) {
    let (mut kept, mut overflow) = (Vec::new(), false);
    let Some(mut pipe) = pipe else { return (kept, overflow) };
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n @ 1..) = pipe.read(&mut buf).await {
        let room = cap.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
        overflow |= n > room;
    }
    (kept, overflow)
}

/// Reads to the end, keeping the last few KiB (where a program says why it failed).
async fn drain_tail(pipe: Option<impl AsyncRead + Unpin>) -> (Vec<u8>, bool) {
    const TAIL: usize = 4096;
    let mut tail = Vec::new();
    let Some(mut pipe) = pipe else { return (tail, false) };
    let mut buf = vec![0u8; 8192];
    while let Ok(n @ 1..) = pipe.read(&mut buf).await {
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > 2 * TAIL {
            tail.drain(..tail.len() - TAIL);
        }
    }
    (tail, false)
}

/// The end of a command's stderr on one line, at most [`EXCERPT_CHARS`] characters.
fn excerpt_tail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let skip = line.chars().count().saturating_sub(EXCERPT_CHARS);
    match line.char_indices().nth(skip) {
        Some((start, _)) if skip > 0 => format!("…{}", &line[start..]),
        _ => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_fakes::FakeLlm;
    use hermes_fakes::media::{ogg_opus_secs, voice_note};

    fn openai(base_url: &str) -> SttConfig {
        SttConfig { base_url: Some(base_url.to_owned()), timeout_secs: 30, ..SttConfig::default() }
    }

    fn transcriber(stt: &SttConfig, model: &ModelConfig) -> Transcriber {
        Transcriber::from_config(stt, model, ModelClient::new(Duration::from_secs(30))).expect("stt is enabled")
    }

    /// A voice note saved the way Telegram names them (`.oga`).
    fn saved_note(dir: &tempfile::TempDir, text: &str) -> (std::path::PathBuf, Vec<u8>) {
        let audio = voice_note(text);
        let path = dir.path().join("voice-123.oga");
        std::fs::write(&path, &audio).unwrap();
        (path, audio)
    }

    #[tokio::test]
    async fn the_upload_is_the_form_openai_documents() {
        let llm = FakeLlm::start().await;
        llm.script_transcript(" Remind me about the tomatoes. ");
        let dir = tempfile::tempdir().unwrap();
        let (path, audio) = saved_note(&dir, "Remind me about the tomatoes.");
        let stt = SttConfig { language: Some("en".into()), api_key: Some(Secret::new("sk-stt")), ..openai(&llm.base_url()) };

        let transcript = transcriber(&stt, &ModelConfig::default()).transcribe(&path, Some("audio/ogg")).await.unwrap();

        assert_eq!(transcript.text, "Remind me about the tomatoes.");
        let secs = transcript.audio_secs.expect("an OGG/Opus note has a length");
        assert!((secs - ogg_opus_secs(&audio)).abs() < 0.01, "{secs}");
        let [sent] = llm.transcriptions().try_into().unwrap();
        assert_eq!(sent.field_names, ["file", "model", "language", "response_format"]);
        assert_eq!(sent.file_name.as_deref(), Some("audio.ogg"), "`.oga` is sent as `.ogg`, the user's name never");
        assert_eq!(sent.content_type.as_deref(), Some("audio/ogg"));
        assert!(sent.bytes == audio, "the audio arrives byte for byte");
        assert_eq!(sent.model.as_deref(), Some("whisper-1"));
        assert_eq!(sent.language.as_deref(), Some("en"));
        assert_eq!(sent.response_format.as_deref(), Some("json"));
        assert_eq!(sent.authorization.as_deref(), Some("Bearer sk-stt"));
    }

    #[tokio::test]
    async fn the_models_key_goes_to_the_models_host_only() {
        let (model_host, elsewhere) = (FakeLlm::start().await, FakeLlm::start().await);
        let model = ModelConfig {
            base_url: format!("{}/", model_host.base_url()),
            api_key: Some(Secret::new("sk-model")),
            ..ModelConfig::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = saved_note(&dir, "Call the plumber on Monday.");

        let fallback = SttConfig { base_url: None, ..openai("unused") };
        let same = transcriber(&fallback, &model);
        assert_eq!(same.describe(), format!("whisper-1 at {}", model_host.base_url()));
        same.transcribe(&path, None).await.unwrap();
        transcriber(&openai(&elsewhere.base_url()), &model).transcribe(&path, None).await.unwrap();

        assert_eq!(model_host.transcriptions()[0].authorization.as_deref(), Some("Bearer sk-model"));
        assert_eq!(elsewhere.transcriptions()[0].authorization, None, "another host never gets the model's key");
        assert_eq!(model_host.transcriptions()[0].content_type.as_deref(), Some("audio/ogg"), "the type follows the extension");
    }

    #[tokio::test]
    async fn an_empty_transcript_is_no_error_and_a_disabled_section_no_transcriber() {
        let llm = FakeLlm::start().await;
        llm.script_transcript("   ");
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = saved_note(&dir, "Mm.");
        let transcript = transcriber(&openai(&llm.base_url()), &ModelConfig::default()).transcribe(&path, None).await.unwrap();
        assert_eq!(transcript.text, "");

        let off = SttConfig { enabled: false, ..SttConfig::default() };
        assert!(Transcriber::from_config(&off, &ModelConfig::default(), ModelClient::new(Duration::from_secs(30))).is_none());
    }

    #[tokio::test]
    async fn a_refusal_a_silent_server_and_no_server_read_as_sentences_without_the_key() {
        let llm = FakeLlm::start().await;
        llm.fail_transcriptions(500, 1);
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = saved_note(&dir, "Book a table for four.");
        let keyed = |url: &str| SttConfig { api_key: Some(Secret::new("sk-secret-stt")), timeout_secs: 1, ..openai(url) };

        let refused = transcriber(&keyed(&llm.base_url()), &ModelConfig::default()).transcribe(&path, None).await.unwrap_err();
        assert_eq!(
            refused.to_string(),
            format!(
                "the speech-to-text service at {} refused the audio (HTTP 500): scripted transcription failure (fake LLM)",
                llm.base_url()
            )
        );

        // Accepts the connection and never answers.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let silent_url = format!("http://{}/v1", silent.local_addr().unwrap());
        let hold = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((connection, _)) = silent.accept().await {
                held.push(connection);
            }
        });
        let timed_out = transcriber(&keyed(&silent_url), &ModelConfig::default()).transcribe(&path, None).await.unwrap_err();
        assert_eq!(timed_out.to_string(), format!("the speech-to-text service at {silent_url} did not answer within 1 s"));
        hold.abort();

        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let unreachable =
            transcriber(&keyed(&format!("http://{closed}/v1")), &ModelConfig::default()).transcribe(&path, None).await.unwrap_err();
        assert!(
            unreachable.to_string().starts_with(&format!("the speech-to-text service at http://{closed}/v1 could not be reached: ")),
            "{unreachable}"
        );

        for error in [refused, timed_out, unreachable] {
            assert!(!format!("{error} {error:?}").contains("sk-secret-stt"), "{error:?}");
        }
    }

    #[tokio::test]
    async fn the_command_provider_gets_the_path_as_one_word_and_reports_failures() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("it's a note; rm -rf x.ogg");
        std::fs::write(&path, b"0123456789").unwrap();
        let command = |command: &str| SttConfig {
            provider: SpeechProvider::Command,
            command: Some(command.to_owned()),
            timeout_secs: 1,
            ..SttConfig::default()
        };
        let run = |config: SttConfig| {
            let path = path.clone();
            async move { transcriber(&config, &ModelConfig::default()).transcribe(&path, None).await }
        };

        assert_eq!(run(command("printf 'heard %s bytes' $(wc -c < {file})")).await.unwrap().text, "heard 10 bytes");
        assert_eq!(run(command("wc -c <")).await.unwrap().text, "10", "the path is appended when there is no {{file}}");
        assert_eq!(run(command("wc -c <")).await.unwrap().audio_secs, None, "not OGG/Opus: no length");

        let failed = run(command("echo 'model not found: tiny.xx' >&2; exit 3")).await.unwrap_err();
        assert_eq!(failed.to_string(), "the transcription command failed (exit status: 3): model not found: tiny.xx");
        let hung = run(command("sleep 30 | cat; true")).await.unwrap_err();
        assert_eq!(hung.to_string(), "the transcription command did not finish within 1 s and was stopped");
        assert_eq!(
            transcriber(&command("whisper-cli -m /models/x {file}"), &ModelConfig::default()).describe(),
            "the command `whisper-cli`"
        );
    }

    /// The real engine of tests/peers/run.sh (faster-whisper-server, Whisper tiny.en) hears an
    /// espeak-ng voice note sent by this client.
    #[tokio::test]
    async fn the_local_engine_transcribes_a_spoken_question() {
        let url = std::env::var("HERMES_TEST_STT_URL")
            .expect("HERMES_TEST_STT_URL is not set: run the tests under tests/peers/run.sh (it starts faster-whisper-server)");
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = saved_note(&dir, "What is the weather going to be like in Paris this weekend?");
        let stt = SttConfig { language: Some("en".into()), timeout_secs: 120, ..openai(&url) };

        let transcript = transcriber(&stt, &ModelConfig::default()).transcribe(&path, Some("audio/ogg")).await.unwrap();

        let heard = transcript.text.to_lowercase();
        for word in ["weather", "paris", "weekend"] {
            assert!(heard.contains(word), "{word:?} not heard in {:?}", transcript.text);
        }
    }
}
