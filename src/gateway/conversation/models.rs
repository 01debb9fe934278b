//! [`Models`]: which model a conversation talks to. It owns the configured model, the default
//! `/model --global` chose since the start, the fallbacks, the compression model, the context
//! window and the prices; every "which model, at what cost" question is answered here.

use crate::agent::ModelSpec;
use crate::agent::providers::http::ModelClient;
use crate::config::Config;
use hermes_adapter::Usage;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

/// A model a chat switched to: the name and, when given, its provider.
type Choice = (String, Option<String>);

/// How a session's model takes the pictures users send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sight {
    /// It sees them: they go to it as images.
    Sees,
    /// It does not, but `vision_analyze` can ask a model that does.
    ThroughTool,
    /// Nothing here can look at them.
    Blind,
}

pub(crate) struct Models {
    config: Arc<Config>,
    /// `config.yaml`, where `/model --global` writes the new default.
    config_file: PathBuf,
    /// Set by `/model --global`: the default model for every chat until the next restart (which
    /// reads it back from config.yaml).
    global: RwLock<Option<Choice>>,
    /// What each provider's model list said about a model taking images (`model.vision: auto`),
    /// asked once per base URL and model, the first time a picture arrives for it.
    reported_vision: RwLock<HashMap<String, Option<bool>>>,
    /// The client that asks, built on first use.
    http: ModelClient,
}

impl Models {
    pub(crate) fn new(config: Arc<Config>, config_file: PathBuf) -> Self {
        let http = ModelClient::new(std::time::Duration::from_secs(config.model.request_timeout_secs));
        Self { config, config_file, global: RwLock::new(None), reported_vision: RwLock::new(HashMap::new()), http }
    }

    /// The configured model (or the one `/model --global` chose since).
    pub(crate) fn default_model(&self) -> ModelSpec {
        let m = &self.config.model;
        let mut spec = ModelSpec {
            model: m.default.clone(),
            provider: m.provider.clone(),
            base_url: m.base_url.clone(),
            api_key: m.api_key.as_ref().map(|k| k.expose().to_string()),
        };
        if let Ok(guard) = self.global.read()
            && let Some((model, provider)) = guard.as_ref()
        {
            spec.model = model.clone();
            if provider.is_some() {
                spec.provider = provider.clone();
            }
        }
        spec
    }

    /// Make `model` the default of every chat: written to config.yaml (so a restart keeps it),
    /// then used at once.
    pub(crate) fn switch_global(&self, model: &str, provider: Option<&str>) -> Result<(), crate::config::PersistError> {
        crate::config::write_model_default(&self.config_file, model, provider)?;
        if let Ok(mut guard) = self.global.write() {
            *guard = Some((model.to_string(), provider.map(str::to_string)));
        }
        Ok(())
    }

    /// The configured fallback models, in order.
    pub(crate) fn fallbacks(&self) -> Vec<ModelSpec> {
        let primary = self.default_model();
        self.config
            .fallback_providers
            .iter()
            .map(|f| ModelSpec {
                model: f.model.clone(),
                provider: f.provider.clone(),
                base_url: f.base_url.clone().unwrap_or_else(|| primary.base_url.clone()),
                api_key: f.api_key.as_ref().map(|k| k.expose().to_string()).or_else(|| primary.api_key.clone()),
            })
            .collect()
    }

    /// The models `/model` offers: the default, the fallbacks, then `model.choices`.
    pub(crate) fn choices(&self) -> Vec<String> {
        let mut choices = vec![self.default_model().model];
        choices.extend(self.fallbacks().into_iter().map(|f| f.model));
        choices.extend(self.config.model.choices.iter().cloned());
        choices.dedup();
        choices
    }

    /// Whether a switch by an admin changes every chat unless they say `--session`.
    pub(crate) fn switches_persist_by_default(&self) -> bool {
        self.config.model.persist_switch_by_default
    }

    /// The model that summarizes conversations (`auxiliary.compression`, else the session's).
    pub(crate) fn compression_model(&self, session_model: &ModelSpec) -> ModelSpec {
        auxiliary(&self.config.auxiliary.compression, session_model)
    }

    /// The model that judges flagged commands in smart mode (`auxiliary.approval`, else the
    /// default model).
    pub(crate) fn approval_model(&self) -> ModelSpec {
        auxiliary(&self.config.auxiliary.approval, &self.default_model())
    }

    /// The model `vision_analyze` asks about a picture (`auxiliary.vision`, else the default
    /// model).
    pub(crate) fn vision_model(&self) -> ModelSpec {
        auxiliary(&self.config.auxiliary.vision, &self.default_model())
    }

    /// How a session on `model` takes pictures: it sees them (`model.vision`, or the built-in
    /// table under `auto`), or `vision_analyze` asks a model that does, or neither can.
    pub(crate) fn sight(&self, model: &ModelSpec) -> Sight {
        let mode = self.config.model.vision;
        let reported = self.reported_vision.read().ok().and_then(|known| known.get(&vision_key(model)).copied().flatten());
        if crate::media::vision::sees_images(mode, &model.model, model.provider.as_deref(), reported) {
            return Sight::Sees;
        }
        let aux = &self.config.auxiliary.vision;
        // Told `vision: off`, the default model may still see (its pictures go through the tool);
        // a model judged blind is not asked again unless a vision model is named.
        if aux.model.is_some() || mode == crate::config::VisionMode::Off { Sight::ThroughTool } else { Sight::Blind }
    }

    /// Asks `model`'s provider whether it takes images (its `GET /models` entry), once per base
    /// URL and model, under `model.vision: auto`; [`Self::sight`] reads the answer. Silent or
    /// unreachable lists leave the built-in table to decide.
    pub(crate) async fn learn_sight(&self, model: &ModelSpec) {
        let key = vision_key(model);
        let known = self.reported_vision.read().map(|k| k.contains_key(&key)).unwrap_or(true);
        if self.config.model.vision != crate::config::VisionMode::Auto || known {
            return;
        }
        let reported = match self.http.get() {
            Ok(client) => crate::media::vision::reported_vision(client, &model.base_url, model.api_key.as_deref(), &model.model).await,
            Err(_) => None,
        };
        if let Ok(mut known) = self.reported_vision.write() {
            known.insert(key, reported);
        }
    }

    /// How many of a conversation's images a request carries, and their total encoded size
    /// (`vision.max_images_per_request`, `vision.max_request_image_bytes`).
    pub(crate) fn image_budget(&self) -> (usize, u64) {
        (self.config.vision.max_images_per_request, self.config.vision.max_request_image_bytes)
    }

    /// How tool calls are put to the model (`model.tool_protocol`).
    pub(crate) fn tool_protocol(&self) -> crate::agent::tool_protocol::ToolProtocol {
        self.config.model.tool_protocol
    }

    /// The context window of `model` in tokens (configured, else a conservative default).
    pub(crate) fn context_length(&self, _model: &str) -> u64 {
        self.config.model.context_length.unwrap_or(128_000)
    }

    /// Cost of one call in USD; 0 when no price is configured for the model.
    pub(crate) fn cost_of(&self, model: &str, usage: &Usage) -> f64 {
        self.config
            .model
            .pricing
            .get(model)
            .map(|p| p.cost(usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens, usage.cache_write_tokens))
            .unwrap_or(0.0)
    }

    /// Whether every one of `models` has a configured price (else a cost shown is a lower bound).
    pub(crate) fn all_priced(&self, models: &[String]) -> bool {
        models.iter().all(|m| self.config.model.pricing.contains_key(m) || self.speech_priced(m))
    }

    /// Transcription and speech are priced by `stt.price_per_minute` and
    /// `tts.price_per_million_chars`, under the names [`Self::stt_label`] and [`Self::tts_label`].
    fn speech_priced(&self, name: &str) -> bool {
        (name == self.stt_label() && self.config.stt.price_per_minute > 0.0)
            || (name == self.tts_label() && self.config.tts.price_per_million_chars > 0.0)
    }

    /// The name transcription costs are recorded under in `/usage`.
    pub(crate) fn stt_label(&self) -> String {
        format!("speech-to-text ({})", self.config.stt.model)
    }

    /// The name speech costs are recorded under in `/usage`.
    pub(crate) fn tts_label(&self) -> String {
        format!("text-to-speech ({})", self.config.tts.model)
    }

    /// The model for a session: the configured one, with the session's `model_override`
    /// (`{model, provider, base_url}`) applied when present.
    pub(crate) fn model_for(&self, overrides: Option<&serde_json::Value>) -> ModelSpec {
        let mut spec = self.default_model();
        if let Some(o) = overrides.and_then(|o| o.get("model_override")) {
            if let Some(m) = o.get("model").and_then(|v| v.as_str()) {
                spec.model = m.to_string();
            }
            if let Some(p) = o.get("provider").and_then(|v| v.as_str()) {
                spec.provider = Some(p.to_string());
            }
            if let Some(u) = o.get("base_url").and_then(|v| v.as_str()) {
                spec.base_url = u.to_string();
            }
        }
        spec
    }
}

/// `aux`'s settings over `base`: what `aux` leaves unset stays as in `base`.
fn vision_key(model: &ModelSpec) -> String {
    format!("{}\n{}", model.base_url, model.model)
}

fn auxiliary(aux: &crate::config::AuxiliaryModel, base: &ModelSpec) -> ModelSpec {
    let mut spec = base.clone();
    if let Some(m) = &aux.model {
        spec.model = m.clone();
    }
    if aux.provider.is_some() {
        spec.provider = aux.provider.clone();
    }
    if let Some(u) = &aux.base_url {
        spec.base_url = u.clone();
    }
    if let Some(k) = &aux.api_key {
        spec.api_key = Some(k.expose().to_string());
    }
    spec
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Json;
    use axum::routing::get;
    use serde_json::json;

    async fn list(entries: serde_json::Value) -> String {
        let app = axum::Router::new().route("/v1/models", get(move || async move { Json(json!({ "data": entries.clone() })) }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        base
    }

    fn models(base: &str, vision: &str) -> Models {
        let yaml = format!("model:\n  default: acme-7b\n  base_url: {base}\n  vision: {vision}\n");
        let (config, _) = crate::config::parse_yaml(&yaml, std::path::Path::new("config.yaml")).unwrap();
        Models::new(Arc::new(config), PathBuf::from("/nonexistent/config.yaml"))
    }

    #[tokio::test]
    async fn auto_learns_from_the_providers_model_list_what_the_table_does_not_know() {
        let base = list(json!([
            {"id": "acme-7b", "architecture": {"input_modalities": ["text", "image"]}},
            {"id": "gpt-4o", "architecture": {"input_modalities": ["text"]}}
        ]))
        .await;
        let models = models(&base, "auto");
        let omni = models.default_model();
        assert_eq!(models.sight(&omni), Sight::Blind, "unknown to the table before the list is read");
        models.learn_sight(&omni).await;
        assert_eq!(models.sight(&omni), Sight::Sees);
        // The provider's word wins over the table: this gpt-4o is served text-only here.
        let text_only = ModelSpec { model: "gpt-4o".into(), ..omni.clone() };
        assert_eq!(models.sight(&text_only), Sight::Sees, "the table's answer until asked");
        models.learn_sight(&text_only).await;
        assert_eq!(models.sight(&text_only), Sight::Blind);
    }

    #[tokio::test]
    async fn on_and_off_are_never_second_guessed_and_off_goes_through_the_tool() {
        let base = list(json!([{"id": "acme-7b", "architecture": {"input_modalities": ["image"]}}])).await;
        let off = models(&base, "off");
        let spec = off.default_model();
        off.learn_sight(&spec).await;
        assert_eq!(off.sight(&spec), Sight::ThroughTool, "told off, the model's pictures go through vision_analyze");
        let on = models("http://127.0.0.1:9/v1", "on");
        assert_eq!(on.sight(&on.default_model()), Sight::Sees);
    }
}
