//! OpenAI's audio endpoints, as documented in the API reference
//! (platform.openai.com/docs/api-reference/audio):
//!
//! * `POST /v1/audio/transcriptions`: `multipart/form-data` with `file` (required; "in one of
//!   these formats: flac, mp3, mp4, mpeg, mpga, m4a, ogg, wav, or webm"), `model` (required),
//!   optional `language`, `prompt`, `response_format` (`json` default, `text`, `srt`,
//!   `verbose_json`, `vtt`), `temperature`. Answers `{"text": …}` for `json`.
//! * `POST /v1/audio/speech`: JSON with `model`, `input` (required, "maximum length is 4096
//!   characters"), `voice` (required), `response_format` (`mp3` default, `opus`, `aac`, `flac`,
//!   `wav`, `pcm`), `speed`, `instructions`. Answers the audio bytes.
//!
//! Every request is recorded before it is answered; tests script the transcript and failures.

use std::collections::VecDeque;
use std::sync::Arc;

use axum::extract::{Multipart, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{AppState, FakeLlm, lock, reply};

/// What the transcription route answers when nothing is scripted.
pub const DEFAULT_TRANSCRIPT: &str = "This is the fake transcript.";
/// The file formats OpenAI's reference lists for transcriptions (by file name extension).
const TRANSCRIPTION_FORMATS: [&str; 9] = ["flac", "mp3", "mp4", "mpeg", "mpga", "m4a", "ogg", "wav", "webm"];
const MAX_SPEECH_INPUT_CHARS: usize = 4096;

/// One `POST /v1/audio/transcriptions`, field by field as received.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RecordedTranscription {
    /// The `file` part's `filename`.
    pub file_name: Option<String>,
    /// The `file` part's `Content-Type`.
    pub content_type: Option<String>,
    /// The `file` part's bytes.
    pub bytes: Vec<u8>,
    pub model: Option<String>,
    pub language: Option<String>,
    pub response_format: Option<String>,
    /// The `Authorization` header verbatim.
    pub authorization: Option<String>,
    /// Every part's name in arrival order (duplicates and unknown fields show here).
    pub field_names: Vec<String>,
}

/// One `POST /v1/audio/speech`.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedSpeech {
    /// The parsed JSON body; `Null` if it was not JSON.
    pub body: Value,
    pub authorization: Option<String>,
}

impl RecordedSpeech {
    /// The `input` text.
    pub fn input(&self) -> Option<&str> {
        self.body.get("input").and_then(Value::as_str)
    }
}

/// The audio routes' script and recording.
#[derive(Default)]
pub(super) struct AudioState {
    transcriptions: Vec<RecordedTranscription>,
    speech: Vec<RecordedSpeech>,
    transcripts: VecDeque<String>,
    failing_transcriptions: Option<(u16, usize)>,
    failing_speech: Option<(u16, usize)>,
}

impl FakeLlm {
    /// Every transcription request so far, in arrival order.
    pub fn transcriptions(&self) -> Vec<RecordedTranscription> {
        lock(&self.inner.state.audio).transcriptions.clone()
    }

    /// Every speech request so far, in arrival order.
    pub fn speech_requests(&self) -> Vec<RecordedSpeech> {
        lock(&self.inner.state.audio).speech.clone()
    }

    /// The next transcription answers `text` (FIFO; then [`DEFAULT_TRANSCRIPT`]).
    pub fn script_transcript(&self, text: impl Into<String>) {
        lock(&self.inner.state.audio).transcripts.push_back(text.into());
    }

    /// The next `n` transcription requests get HTTP `status` with an OpenAI error body.
    pub fn fail_transcriptions(&self, status: u16, n: usize) {
        lock(&self.inner.state.audio).failing_transcriptions = Some((status, n));
    }

    /// The next `n` speech requests get HTTP `status` with an OpenAI error body.
    pub fn fail_speech(&self, status: u16, n: usize) {
        lock(&self.inner.state.audio).failing_speech = Some((status, n));
    }
}

/// Takes one scripted failure, if any is left.
fn take_failure(failing: &mut Option<(u16, usize)>) -> Option<u16> {
    let (status, left) = failing.as_mut().filter(|(_, left)| *left > 0)?;
    *left -= 1;
    Some(*status)
}

fn error(status: u16, message: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, axum::Json(reply::error_body(status, message))).into_response()
}

fn authorization(headers: &HeaderMap) -> Option<String> {
    headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

pub(super) async fn transcriptions(State(state): State<Arc<AppState>>, headers: HeaderMap, multipart: Multipart) -> Response {
    let recorded = match read_form(multipart).await {
        Ok(fields) => RecordedTranscription { authorization: authorization(&headers), ..fields },
        Err(message) => return error(400, &message),
    };
    let (failure, transcript) = {
        let mut audio = lock(&state.audio);
        audio.transcriptions.push(recorded.clone());
        let failure = take_failure(&mut audio.failing_transcriptions);
        (failure, if failure.is_none() { audio.transcripts.pop_front() } else { None })
    };
    if let Some(status) = failure {
        return error(status, "scripted transcription failure (fake LLM)");
    }
    if let Err(message) = validate(&recorded) {
        return error(400, &message);
    }
    let text = transcript.unwrap_or_else(|| DEFAULT_TRANSCRIPT.to_owned());
    match recorded.response_format.as_deref().unwrap_or("json") {
        "text" => text.into_response(),
        "verbose_json" => {
            axum::Json(json!({"task": "transcribe", "language": "english", "duration": 0.0, "text": text, "segments": []})).into_response()
        }
        _ => axum::Json(json!({"text": text})).into_response(),
    }
}

/// The form's parts; an unreadable multipart body is an error (OpenAI answers 400).
async fn read_form(mut multipart: Multipart) -> Result<RecordedTranscription, String> {
    let mut recorded = RecordedTranscription::default();
    while let Some(field) = multipart.next_field().await.map_err(|e| format!("malformed multipart body: {e}"))? {
        let name = field.name().unwrap_or_default().to_owned();
        recorded.field_names.push(name.clone());
        if name == "file" {
            recorded.file_name = field.file_name().map(str::to_owned);
            recorded.content_type = field.content_type().map(str::to_owned);
            recorded.bytes = field.bytes().await.map_err(|e| format!("malformed file part: {e}"))?.to_vec();
            continue;
        }
        let value = field.text().await.map_err(|e| format!("malformed field {name}: {e}"))?;
        match name.as_str() {
            "model" => recorded.model = Some(value),
            "language" => recorded.language = Some(value),
            "response_format" => recorded.response_format = Some(value),
            _ => {}
        }
    }
    Ok(recorded)
}

/// What OpenAI refuses with a 400.
fn validate(recorded: &RecordedTranscription) -> Result<(), String> {
    let Some(file_name) = &recorded.file_name else {
        return Err("you must provide a file".to_owned());
    };
    if recorded.model.as_deref().is_none_or(str::is_empty) {
        return Err("you must provide a model parameter".to_owned());
    }
    let extension = file_name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    if !TRANSCRIPTION_FORMATS.contains(&extension.as_str()) {
        return Err(format!("Invalid file format. Supported formats: {TRANSCRIPTION_FORMATS:?}"));
    }
    match recorded.response_format.as_deref() {
        None | Some("json" | "text" | "verbose_json") => Ok(()),
        Some(other) => Err(format!("response_format {other:?} is not served by the fake")),
    }
}

pub(super) async fn speech(State(state): State<Arc<AppState>>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let parsed = serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null);
    let recorded = RecordedSpeech { body: parsed, authorization: authorization(&headers) };
    let failure = {
        let mut audio = lock(&state.audio);
        audio.speech.push(recorded.clone());
        take_failure(&mut audio.failing_speech)
    };
    if let Some(status) = failure {
        return error(status, "scripted speech failure (fake LLM)");
    }
    let text = |key: &str| recorded.body.get(key).and_then(Value::as_str).filter(|v| !v.is_empty());
    let (Some(input), Some(_), Some(_)) = (text("input"), text("model"), text("voice")) else {
        return error(400, "model, input and voice are required");
    };
    if input.chars().count() > MAX_SPEECH_INPUT_CHARS {
        return error(400, &format!("input is longer than {MAX_SPEECH_INPUT_CHARS} characters"));
    }
    let (format, input) = (text("response_format").unwrap_or("mp3").to_owned(), input.to_owned());
    let spoken = tokio::task::spawn_blocking(move || match format.as_str() {
        "opus" => Some(("audio/ogg", crate::media::voice_note(&input))),
        "wav" => Some(("audio/wav", crate::media::wav(&input))),
        _ => None,
    });
    match spoken.await {
        Ok(Some((content_type, audio))) => ([(header::CONTENT_TYPE, content_type)], audio).into_response(),
        Ok(None) => error(400, "the fake speaks opus and wav only"),
        Err(_) => error(500, "espeak-ng | opusenc failed in the fake (apt install espeak-ng opus-tools)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A multipart body as a client writes it: `(name, filename, value)`.
    fn form(parts: &[(&str, Option<&str>, &str)]) -> (String, String) {
        let mut body = String::new();
        for (name, file_name, value) in parts {
            body.push_str(&format!("--XyZ\r\nContent-Disposition: form-data; name=\"{name}\""));
            if let Some(file_name) = file_name {
                body.push_str(&format!("; filename=\"{file_name}\"\r\nContent-Type: audio/ogg"));
            }
            body.push_str(&format!("\r\n\r\n{value}\r\n"));
        }
        body.push_str("--XyZ--\r\n");
        ("multipart/form-data; boundary=XyZ".to_owned(), body)
    }

    async fn post(llm: &FakeLlm, parts: &[(&str, Option<&str>, &str)]) -> (u16, Value) {
        let (content_type, body) = form(parts);
        let response = reqwest::Client::new()
            .post(format!("{}/audio/transcriptions", llm.base_url()))
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.json().await.unwrap())
    }

    #[tokio::test]
    async fn what_openai_refuses_is_refused_and_still_recorded() {
        let llm = FakeLlm::start().await;
        let (status, body) = post(&llm, &[("file", Some("voice.oga"), "OggS"), ("model", None, "whisper-1")]).await;
        assert_eq!(status, 400, "{body}");
        assert!(body["error"]["message"].as_str().unwrap().starts_with("Invalid file format"));
        let (status, _) = post(&llm, &[("file", Some("voice.ogg"), "OggS")]).await;
        assert_eq!(status, 400, "the model is required");

        llm.script_transcript("Book a table for four.");
        let (status, body) = post(&llm, &[("file", Some("voice.ogg"), "OggS"), ("model", None, "whisper-1")]).await;
        assert_eq!((status, body), (200, json!({"text": "Book a table for four."})));
        let recorded = llm.transcriptions();
        assert_eq!(recorded.len(), 3);
        assert_eq!((recorded[0].file_name.as_deref(), recorded[2].bytes.as_slice()), (Some("voice.oga"), b"OggS".as_slice()));
    }
}
