//! Answers spoken aloud (`/voice on|only`): the answer's prose is turned into voice notes by the
//! configured speech engine ([`crate::media::tts`]), in parts no longer than it takes, and the
//! notes join the answer as `MEDIA:<path> [[audio_as_voice]]` tags, so they leave through the
//! same outbox (keys, retries, the files' checks) as every file. Code blocks are never read out:
//! under `only` they are all the text that is still sent. A part that cannot be spoken leaves
//! the written answer in place, so nothing is lost.

use crate::media::speakable;
use crate::media::tts::Speaker;
use crate::observe::metrics;
use hermes_adapter::media::MediaTag;
use hermes_adapter::{Capabilities, MediaCache};

/// How a session's answers arrive, set by `/voice` (stored with the session's overrides).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum VoiceMode {
    /// Written only (the default).
    #[default]
    Off,
    /// Written, and spoken after.
    On,
    /// Spoken only; code blocks are still written.
    Only,
}

/// The key of the session override `/voice` writes.
pub(crate) const OVERRIDE_KEY: &str = "voice";

impl VoiceMode {
    /// The mode stored in a session's overrides.
    pub(crate) fn of(overrides: &serde_json::Value) -> Self {
        match overrides.get(OVERRIDE_KEY).and_then(|v| v.as_str()) {
            Some("on") => VoiceMode::On,
            Some("only") => VoiceMode::Only,
            _ => VoiceMode::Off,
        }
    }

    pub(crate) fn parse(word: &str) -> Option<Self> {
        match word {
            "on" => Some(VoiceMode::On),
            "only" => Some(VoiceMode::Only),
            "off" => Some(VoiceMode::Off),
            _ => None,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            VoiceMode::Off => "off",
            VoiceMode::On => "on",
            VoiceMode::Only => "only",
        }
    }

    /// Whether the written answer gives way to the spoken one (so it is not streamed either).
    pub(crate) fn replaces_text(self) -> bool {
        self == VoiceMode::Only
    }
}

/// The speech engine and where its voice notes are written; built once at start-up.
pub(crate) struct Voice {
    pub speaker: Speaker,
    pub cache: MediaCache,
    /// `tts.max_chars_per_part`.
    pub max_chars: usize,
    /// `tts.price_per_million_chars`, for `/usage`.
    pub price_per_million_chars: f64,
    /// The name `/usage` shows speech costs under.
    pub label: String,
}

/// An answer as it is sent, and what speaking it cost.
pub(crate) struct SpokenAnswer {
    pub text: String,
    /// Characters spoken (0: nothing was).
    pub chars: usize,
    pub cost_usd: f64,
}

impl Voice {
    /// `text` (the answer as it would be sent) with its spoken parts added as voice-note tags
    /// (`on`), or reduced to its code blocks and the tags (`only`). Off, or on a platform that
    /// takes no files, the text is returned unchanged.
    pub(crate) async fn speak_answer(&self, text: &str, mode: VoiceMode, caps: &Capabilities) -> SpokenAnswer {
        let unchanged = || SpokenAnswer { text: text.to_string(), chars: 0, cost_usd: 0.0 };
        if mode == VoiceMode::Off || !caps.supports_files || text.trim().is_empty() {
            return unchanged();
        }
        let plan = speakable::plan(text, self.max_chars);
        let mut tags = Vec::new();
        let mut chars = 0;
        for (i, part) in plan.spoken.iter().enumerate() {
            match self.speak_part(part, i).await {
                Ok(tag) => {
                    metrics::global().speech("ok");
                    chars += part.chars().count();
                    tags.push(tag.to_string());
                }
                Err(why) => {
                    metrics::global().speech("failed");
                    tracing::warn!(error = %why, "the answer could not be spoken; it is sent written");
                    let cost_usd = self.cost(chars);
                    return SpokenAnswer { text: format!("{text}\n\n(The voice reply failed: {why}.)"), chars, cost_usd };
                }
            }
        }
        if tags.is_empty() {
            return unchanged();
        }
        let written = match mode {
            VoiceMode::Only => plan.code.join("\n\n"),
            _ => text.to_string(),
        };
        let text = [written, tags.join("\n")].into_iter().filter(|s| !s.trim().is_empty()).collect::<Vec<_>>().join("\n\n");
        SpokenAnswer { text, chars, cost_usd: self.cost(chars) }
    }

    fn cost(&self, chars: usize) -> f64 {
        chars as f64 / 1_000_000.0 * self.price_per_million_chars
    }

    async fn speak_part(&self, part: &str, index: usize) -> Result<MediaTag, String> {
        let folder = self.cache.folder("voice").map_err(|e| e.to_string())?;
        let name = format!("reply-{}-{index}.ogg", uuid_like());
        let spoken = self.speaker.speak(part, &folder.join(name)).await.map_err(|e| e.to_string())?;
        Ok(MediaTag { path: spoken.path.to_string_lossy().into_owned(), as_document: false, as_voice: true })
    }
}

/// A name no two replies share: the time in nanoseconds and a random number.
fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{nanos:x}-{:08x}", rand::random::<u32>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::providers::http::ModelClient;
    use crate::config::{ModelConfig, SpeechProvider, TtsConfig};
    use hermes_adapter::media::extract_media_tags;

    fn voice(cache: &std::path::Path) -> Voice {
        let tts = TtsConfig { provider: SpeechProvider::Command, voice: "en-us".into(), ..TtsConfig::default() };
        let speaker = Speaker::from_config(&tts, &ModelConfig::default(), ModelClient::new(std::time::Duration::from_secs(30)));
        Voice { speaker, cache: MediaCache::new(cache), max_chars: 4000, price_per_million_chars: 15.0, label: "tts".into() }
    }

    fn chat() -> Capabilities {
        Capabilities { supports_files: true, voice_notes: true, ..Capabilities::http() }
    }

    const ANSWER: &str = "Run this to list the files:\n\n```\nls -la /srv\n```\n\nIt shows hidden ones too.";

    #[tokio::test]
    async fn only_keeps_the_code_written_and_adds_a_real_voice_note() {
        let home = tempfile::tempdir().unwrap();
        let spoken = voice(&home.path().join("cache")).speak_answer(ANSWER, VoiceMode::Only, &chat()).await;
        let (text, tags) = extract_media_tags(&spoken.text);
        assert_eq!(text, "```\nls -la /srv\n```", "under `only` the code is all that is written");
        assert_eq!(tags.len(), 1, "{}", spoken.text);
        assert!(tags[0].as_voice);
        let bytes = std::fs::read(&tags[0].path).unwrap();
        assert!(crate::media::ogg::opus_duration(&bytes).unwrap() > 0.5, "a real OGG/Opus note");
        assert!(spoken.chars > 0 && spoken.cost_usd > 0.0, "what was spoken is priced");
    }

    #[tokio::test]
    async fn on_keeps_the_whole_answer_and_off_or_a_chat_without_files_changes_nothing() {
        let home = tempfile::tempdir().unwrap();
        let voice = voice(&home.path().join("cache"));
        let on = voice.speak_answer(ANSWER, VoiceMode::On, &chat()).await;
        assert!(on.text.starts_with(ANSWER) && on.text.contains("[[audio_as_voice]]"), "{}", on.text);
        assert_eq!(voice.speak_answer(ANSWER, VoiceMode::Off, &chat()).await.text, ANSWER);
        assert_eq!(voice.speak_answer(ANSWER, VoiceMode::Only, &Capabilities::http()).await.text, ANSWER);
    }

    #[tokio::test]
    async fn a_failing_engine_leaves_the_written_answer_and_says_so() {
        let home = tempfile::tempdir().unwrap();
        let tts = TtsConfig { provider: SpeechProvider::Command, command: "exit 3".into(), ..TtsConfig::default() };
        let speaker = Speaker::from_config(&tts, &ModelConfig::default(), ModelClient::new(std::time::Duration::from_secs(30)));
        let voice = Voice {
            speaker,
            cache: MediaCache::new(home.path().join("cache")),
            max_chars: 4000,
            price_per_million_chars: 0.0,
            label: "tts".into(),
        };
        let spoken = voice.speak_answer(ANSWER, VoiceMode::Only, &chat()).await;
        assert!(spoken.text.starts_with(ANSWER) && spoken.text.contains("The voice reply failed"), "{}", spoken.text);
    }
}
