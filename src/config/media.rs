//! `stt:`, `tts:` and `vision:`: how voice notes are transcribed, how answers are spoken, and
//! how images reach the model. The limits here are also what every adapter checks before it
//! fetches a file ([`MediaSettings::limits`]).

use super::error::ConfigError;
use super::secret::{self, Secret};
use hermes_adapter::MediaLimits;
use serde::{Deserialize, Serialize};

const MB: u64 = 1024 * 1024;

/// Which speech service a section talks to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpeechProvider {
    /// An OpenAI-compatible HTTP endpoint (OpenAI, Groq, a local faster-whisper or whisper.cpp
    /// server, a local TTS server).
    #[default]
    Openai,
    /// A local program run once per request (see the section's `command`).
    Command,
}

/// `stt:`: speech to text for voice notes and audio files.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SttConfig {
    /// Off: voice notes reach the agent as files, untranscribed.
    pub enabled: bool,
    pub provider: SpeechProvider,
    /// `openai`: the endpoint's base URL (`…/v1`); defaults to `model.base_url`.
    pub base_url: Option<String>,
    /// `openai`: the model asked for (`whisper-1`, `gpt-4o-mini-transcribe`,
    /// `whisper-large-v3-turbo` on Groq).
    pub model: String,
    /// `openai`: defaults to `model.api_key` when the base URL is the model's.
    #[serde(deserialize_with = "secret::optional")]
    pub api_key: Option<Secret>,
    /// ISO-639-1 code (`en`, `de`) to skip language detection.
    pub language: Option<String>,
    /// `command`: run with the audio file's path in place of `{file}` (or as the last argument),
    /// prints the transcript on stdout.
    pub command: Option<String>,
    /// Voice notes longer than this are refused before they are downloaded.
    pub max_duration_secs: u64,
    /// Audio files larger than this are refused before (or while) they are downloaded.
    pub max_bytes: u64,
    /// How long one transcription may take.
    pub timeout_secs: u64,
    /// Also post the transcript in the chat (Hermes' `stt_echo_transcripts`).
    pub echo_transcript: bool,
    /// Cost per minute of audio, for `/usage`.
    pub price_per_minute: f64,
}

impl Default for SttConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            provider: SpeechProvider::Openai,
            base_url: None,
            model: "whisper-1".to_string(),
            api_key: None,
            language: None,
            command: None,
            max_duration_secs: 600,
            max_bytes: 25 * MB,
            timeout_secs: 120,
            echo_transcript: false,
            price_per_minute: 0.0,
        }
    }
}

/// `tts:`: text to speech for `/voice on|only`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TtsConfig {
    pub provider: SpeechProvider,
    /// `openai`: the endpoint's base URL (`…/v1`); defaults to `model.base_url`.
    pub base_url: Option<String>,
    /// `openai`: `gpt-4o-mini-tts`, `tts-1`, or what a local server serves.
    pub model: String,
    /// The voice (`alloy` for OpenAI; an espeak-ng voice such as `en-us` for the command).
    pub voice: String,
    #[serde(deserialize_with = "secret::optional")]
    pub api_key: Option<Secret>,
    /// `command`: a shell pipeline that reads the text on stdin and writes OGG/Opus on stdout;
    /// `{voice}` is replaced by the voice.
    pub command: String,
    /// The longest part spoken in one request; longer answers are spoken in several parts.
    pub max_chars_per_part: usize,
    pub timeout_secs: u64,
    /// Cost per million characters spoken, for `/usage`.
    pub price_per_million_chars: f64,
}

impl Default for TtsConfig {
    fn default() -> Self {
        Self {
            provider: SpeechProvider::Openai,
            base_url: None,
            model: "gpt-4o-mini-tts".to_string(),
            voice: "alloy".to_string(),
            api_key: None,
            command: "espeak-ng --stdout -v {voice} | opusenc --quiet --bitrate 32 - -".to_string(),
            max_chars_per_part: 4000,
            timeout_secs: 120,
            price_per_million_chars: 0.0,
        }
    }
}

/// `model.vision`: whether the model is given images.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VisionMode {
    /// Decided per model: the provider's model info where it has one, else a built-in table.
    #[default]
    Auto,
    On,
    Off,
}

/// `vision:`: images in and how many stay in a conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VisionConfig {
    /// Images larger than this are refused before (or while) they are downloaded.
    pub max_image_bytes: u64,
    /// The newest images of a session sent with each request; older ones become a line of text.
    pub max_images_per_request: usize,
    /// The encoded size all images of one request may add up to.
    pub max_request_image_bytes: u64,
}

impl Default for VisionConfig {
    fn default() -> Self {
        Self { max_image_bytes: 20 * MB, max_images_per_request: 8, max_request_image_bytes: 20 * MB }
    }
}

/// The three sections together, as the gateway reads them.
pub struct MediaSettings<'a> {
    pub stt: &'a SttConfig,
    pub vision: &'a VisionConfig,
}

impl MediaSettings<'_> {
    /// What every adapter may fetch.
    pub fn limits(&self) -> MediaLimits {
        MediaLimits {
            max_audio_bytes: self.stt.max_bytes,
            max_audio_secs: self.stt.max_duration_secs,
            max_image_bytes: self.vision.max_image_bytes,
            ..MediaLimits::default()
        }
    }
}

/// The first problem of the three sections, naming its key.
pub(crate) fn check(stt: &SttConfig, tts: &TtsConfig, vision: &VisionConfig) -> Result<(), ConfigError> {
    for (key, url) in [("stt.base_url", &stt.base_url), ("tts.base_url", &tts.base_url)] {
        if let Some(url) = url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(ConfigError::invalid(key, format!("expected a URL starting with http:// or https://, found {url:?}")));
        }
    }
    if stt.enabled && stt.provider == SpeechProvider::Command && stt.command.as_deref().is_none_or(|c| c.trim().is_empty()) {
        return Err(ConfigError::invalid(
            "stt.command",
            "stt.provider is `command` but no command is set; set the program that prints a transcript of {file}",
        ));
    }
    if tts.provider == SpeechProvider::Command && tts.command.trim().is_empty() {
        return Err(ConfigError::invalid("tts.command", "tts.provider is `command` but the command is empty"));
    }
    let positive = [
        ("stt.max_duration_secs", stt.max_duration_secs),
        ("stt.max_bytes", stt.max_bytes),
        ("stt.timeout_secs", stt.timeout_secs),
        ("tts.timeout_secs", tts.timeout_secs),
        ("tts.max_chars_per_part", tts.max_chars_per_part as u64),
        ("vision.max_image_bytes", vision.max_image_bytes),
        ("vision.max_request_image_bytes", vision.max_request_image_bytes),
    ];
    if let Some((key, _)) = positive.iter().find(|(_, v)| *v == 0) {
        return Err(ConfigError::invalid(*key, "must be greater than 0"));
    }
    for (key, price) in [("stt.price_per_minute", stt.price_per_minute), ("tts.price_per_million_chars", tts.price_per_million_chars)] {
        if !(price.is_finite() && price >= 0.0) {
            return Err(ConfigError::invalid(key, format!("expected a price of 0 or more, found {price}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_pass_and_set_the_adapters_limits() {
        let (stt, tts, vision) = (SttConfig::default(), TtsConfig::default(), VisionConfig::default());
        check(&stt, &tts, &vision).unwrap();
        let limits = MediaSettings { stt: &stt, vision: &vision }.limits();
        assert_eq!((limits.max_audio_secs, limits.max_audio_bytes, limits.max_image_bytes), (600, 25 * MB, 20 * MB));
    }

    fn key_of(e: ConfigError) -> String {
        match e {
            ConfigError::Invalid { key, .. } => key,
            other => panic!("{other}"),
        }
    }

    #[test]
    fn a_bad_value_is_named_by_its_key() {
        let stt = SttConfig { provider: SpeechProvider::Command, ..SttConfig::default() };
        assert_eq!(key_of(check(&stt, &TtsConfig::default(), &VisionConfig::default()).unwrap_err()), "stt.command");
        let tts = TtsConfig { base_url: Some("localhost:8000".into()), ..TtsConfig::default() };
        assert_eq!(key_of(check(&SttConfig::default(), &tts, &VisionConfig::default()).unwrap_err()), "tts.base_url");
        let vision = VisionConfig { max_image_bytes: 0, ..VisionConfig::default() };
        assert_eq!(key_of(check(&SttConfig::default(), &TtsConfig::default(), &vision).unwrap_err()), "vision.max_image_bytes");
    }
}
