//! Text to speech: one part of an answer spoken into an OGG/Opus file, by an OpenAI-compatible
//! `POST {base_url}/audio/speech` or by the operator's command (espeak-ng | opusenc by default).
//! What is spoken, and in how many parts, is [`super::speakable`]'s and the caller's business.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncWriteExt;

use super::ogg::{self, OggError};
use super::stt::{Capped, CommandError, Endpoint, error_chain, excerpt, read_capped, run_shell};
use crate::agent::providers::http::ModelClient;
use crate::config::{ModelConfig, SpeechProvider, TtsConfig};

/// Telegram's `sendVoice` takes up to 50 MB; nothing spoken in one part comes near it, so more
/// is a misbehaving engine.
const MAX_AUDIO_BYTES: usize = 50 * 1000 * 1000;

/// Speaks text into voice notes.
pub struct Speaker {
    engine: Engine,
    voice: String,
    max_chars_per_part: usize,
    timeout: Duration,
}

enum Engine {
    Http { http: ModelClient, endpoint: Endpoint, model: String },
    Command { template: String },
}

/// One spoken part, written where the caller asked.
#[derive(Debug, Clone, PartialEq)]
pub struct SpokenPart {
    pub path: PathBuf,
    /// How long it plays (from the OGG pages).
    pub duration_secs: f64,
    /// Characters spoken, for `tts.price_per_million_chars`.
    pub chars: usize,
}

/// Why a part was not spoken; the Display is the sentence a user reads.
#[derive(Debug, thiserror::Error)]
pub enum TtsError {
    #[error("the voice {0:?} is not a voice name (letters, digits, `_`, `+` and `-` only)")]
    BadVoice(String),
    #[error("{service} could not be reached: {detail}")]
    Unreachable { service: String, detail: String },
    #[error("{service} did not answer within {secs} s")]
    TimedOut { service: String, secs: u64 },
    #[error("{service} refused to speak (HTTP {status}): {detail}")]
    Refused { service: String, status: u16, detail: String },
    #[error("{service} sent more than {MAX_AUDIO_BYTES} bytes of audio")]
    TooLarge { service: String },
    #[error("the speech command {0}")]
    Command(#[from] CommandError),
    #[error("{service} did not produce an OGG/Opus voice note: {source}")]
    NotOpus { service: String, source: OggError },
    #[error("{service} produced no audio")]
    Silent { service: String },
    #[error("the voice note could not be saved: {0}")]
    Write(std::io::Error),
}

impl Speaker {
    /// base_url/api_key fall back to model.base_url/model.api_key (the key only when the base
    /// URL is the model's).
    pub fn from_config(tts: &TtsConfig, model: &ModelConfig, http: ModelClient) -> Self {
        let engine = match tts.provider {
            SpeechProvider::Command => Engine::Command { template: tts.command.clone() },
            SpeechProvider::Openai => Engine::Http {
                http,
                endpoint: Endpoint::resolve(tts.base_url.as_deref(), tts.api_key.as_ref(), model),
                model: tts.model.clone(),
            },
        };
        Self {
            engine,
            voice: tts.voice.clone(),
            max_chars_per_part: tts.max_chars_per_part,
            timeout: Duration::from_secs(tts.timeout_secs),
        }
    }

    /// The longest text one [`Speaker::speak`] should get (`tts.max_chars_per_part`), for
    /// [`super::speakable::plan`].
    pub fn max_chars_per_part(&self) -> usize {
        self.max_chars_per_part
    }

    /// "gpt-4o-mini-tts (alloy) at https://api.openai.com/v1" (for logs and `/status`).
    pub fn describe(&self) -> String {
        match &self.engine {
            Engine::Http { endpoint, model, .. } => format!("{model} ({}) at {}", self.voice, endpoint.shown()),
            Engine::Command { template } => {
                format!("the command `{}` ({})", template.split_whitespace().next().unwrap_or("(empty)"), self.voice)
            }
        }
    }

    fn service(&self) -> String {
        match &self.engine {
            Engine::Http { endpoint, .. } => format!("the text-to-speech service at {}", endpoint.shown()),
            Engine::Command { .. } => "the speech command".to_owned(),
        }
    }

    /// Speaks `text` into a new private OGG/Opus file at `out` (which must not exist). Nothing is
    /// written unless the audio is a valid, non-empty OGG/Opus stream.
    pub async fn speak(&self, text: &str, out: &Path) -> Result<SpokenPart, TtsError> {
        let audio = match &self.engine {
            Engine::Http { http, endpoint, model } => self.request(http, endpoint, model, text).await?,
            Engine::Command { template } => {
                let script = template.replace("{voice}", checked_voice(&self.voice)?);
                run_shell(&script, Some(text.as_bytes()), self.timeout, MAX_AUDIO_BYTES).await?
            }
        };
        let duration_secs = ogg::opus_duration(&audio).map_err(|source| TtsError::NotOpus { service: self.service(), source })?;
        if duration_secs <= 0.0 {
            return Err(TtsError::Silent { service: self.service() });
        }
        let mut file = hermes_adapter::media_cache::create_private_file(out).await.map_err(TtsError::Write)?;
        file.write_all(&audio).await.map_err(TtsError::Write)?;
        file.flush().await.map_err(TtsError::Write)?;
        Ok(SpokenPart { path: out.to_path_buf(), duration_secs, chars: text.chars().count() })
    }

    async fn request(&self, http: &ModelClient, endpoint: &Endpoint, model: &str, text: &str) -> Result<Vec<u8>, TtsError> {
        let service = self.service();
        let http = http.get().map_err(|e| TtsError::Unreachable { service: service.clone(), detail: e.to_string() })?;
        let body = json!({"model": model, "voice": self.voice, "input": text, "response_format": "opus"});
        let mut request = http.post(format!("{}/audio/speech", endpoint.base_url)).json(&body).timeout(self.timeout);
        if let Some(key) = &endpoint.api_key {
            request = request.bearer_auth(key.expose());
        }
        let secs = self.timeout.as_secs();
        let failed = |e: reqwest::Error| {
            if e.is_timeout() {
                TtsError::TimedOut { service: service.clone(), secs }
            } else {
                TtsError::Unreachable { service: service.clone(), detail: error_chain(e) }
            }
        };
        let response = request.send().await.map_err(failed)?;
        let status = response.status();
        let audio = match read_capped(response, MAX_AUDIO_BYTES).await {
            Ok(audio) => audio,
            Err(Capped::Http(e)) => return Err(failed(e)),
            Err(Capped::TooLarge) => return Err(TtsError::TooLarge { service }),
        };
        if !status.is_success() {
            return Err(TtsError::Refused { service, status: status.as_u16(), detail: excerpt(&audio) });
        }
        Ok(audio)
    }
}

/// The voice goes into a shell command line: only characters no shell gives a meaning to.
fn checked_voice(voice: &str) -> Result<&str, TtsError> {
    let plain = !voice.is_empty() && voice.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'+' | b'-'));
    if plain { Ok(voice) } else { Err(TtsError::BadVoice(voice.to_owned())) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::Secret;
    use hermes_fakes::FakeLlm;
    use hermes_fakes::media::ogg_opus_secs;
    use std::os::unix::fs::PermissionsExt;

    const SENTENCE: &str = "The train to Lisbon leaves at seven, and it arrives before noon.";

    fn command(command: &str, voice: &str) -> TtsConfig {
        TtsConfig {
            provider: SpeechProvider::Command,
            command: command.to_owned(),
            voice: voice.to_owned(),
            timeout_secs: 30,
            ..TtsConfig::default()
        }
    }

    fn speaker(tts: &TtsConfig) -> Speaker {
        Speaker::from_config(tts, &ModelConfig::default(), ModelClient::new(Duration::from_secs(30)))
    }

    /// The file is a private, valid voice note whose length is what `opusinfo` says.
    fn assert_voice_note(part: &SpokenPart) {
        let bytes = std::fs::read(&part.path).unwrap();
        assert!(ogg::is_ogg_opus(&bytes));
        assert!(part.duration_secs > 1.0, "{part:?}");
        assert!((part.duration_secs - ogg_opus_secs(&bytes)).abs() < 0.01, "{part:?}");
        assert_eq!(std::fs::metadata(&part.path).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[tokio::test]
    async fn the_default_command_speaks_a_private_voice_note() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("reply-1.ogg");
        let part = speaker(&command(&TtsConfig::default().command, "en-us")).speak(SENTENCE, &out).await.unwrap();
        assert_eq!((part.path.as_path(), part.chars), (out.as_path(), SENTENCE.chars().count()));
        assert_voice_note(&part);
    }

    #[tokio::test]
    async fn a_voice_that_is_not_a_name_a_failing_command_and_junk_leave_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("reply.ogg");
        let default = TtsConfig::default().command;

        let hostile = speaker(&command(&default, "en-us; touch pwned")).speak(SENTENCE, &out).await.unwrap_err();
        assert_eq!(hostile.to_string(), "the voice \"en-us; touch pwned\" is not a voice name (letters, digits, `_`, `+` and `-` only)");
        let failed =
            speaker(&command("cat >/dev/null; echo 'voice xx not found' >&2; exit 2", "xx")).speak(SENTENCE, &out).await.unwrap_err();
        assert_eq!(failed.to_string(), "the speech command failed (exit status: 2): voice xx not found");
        let junk = speaker(&command("cat", "en")).speak(SENTENCE, &out).await.unwrap_err();
        assert_eq!(junk.to_string(), "the speech command did not produce an OGG/Opus voice note: the audio is not an Ogg file");

        assert!(!out.exists() && !dir.path().join("pwned").exists());
    }

    #[tokio::test]
    async fn the_openai_provider_asks_for_opus_and_keeps_what_it_gets() {
        let llm = FakeLlm::start().await;
        let tts = TtsConfig {
            base_url: Some(llm.base_url()),
            model: "tts-1".into(),
            api_key: Some(Secret::new("sk-tts")),
            ..TtsConfig::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("reply.ogg");
        let speaker = speaker(&tts);
        assert_eq!(speaker.describe(), format!("tts-1 (alloy) at {}", llm.base_url()));

        let part = speaker.speak(SENTENCE, &out).await.unwrap();

        assert_voice_note(&part);
        let [sent] = llm.speech_requests().try_into().unwrap();
        assert_eq!(sent.body, serde_json::json!({"model": "tts-1", "voice": "alloy", "input": SENTENCE, "response_format": "opus"}));
        assert_eq!(sent.authorization.as_deref(), Some("Bearer sk-tts"));

        llm.fail_speech(503, 1);
        let refused = speaker.speak(SENTENCE, &dir.path().join("second.ogg")).await.unwrap_err();
        assert_eq!(
            refused.to_string(),
            format!("the text-to-speech service at {} refused to speak (HTTP 503): scripted speech failure (fake LLM)", llm.base_url())
        );
        let taken = speaker.speak(SENTENCE, &out).await.unwrap_err();
        assert!(matches!(taken, TtsError::Write(_)), "an existing file is never overwritten: {taken:?}");
    }
}
