//! `model:`: which LLM the agent talks to. Hermes accepts both `model: some-name` and a mapping,
//! so `ModelConfig` deserializes from either.

use super::agent_sections::Price;
use super::secret::{self, Secret};
use serde::de::{self, Deserializer, MapAccess, Visitor, value::MapAccessDeserializer};
use serde::{Deserialize, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;

/// The LLM endpoint and model (`model.*`).
// `remote = "Self"` makes the derives generate inherent `ModelConfig::serialize/deserialize`
// functions instead of trait impls; the trait impls below wrap them to add the string form while
// keeping serde's field handling (defaults, unknown-key reporting, error paths).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", default)]
pub struct ModelConfig {
    /// Model name sent to the provider.
    pub default: String,
    /// Provider id (`openrouter`, `anthropic`, …); `None` means an OpenAI-compatible endpoint.
    pub provider: Option<String>,
    /// OpenAI-compatible base URL (must start with `http://` or `https://`).
    pub base_url: String,
    #[serde(deserialize_with = "secret::optional")]
    pub api_key: Option<Secret>,
    /// Context window in tokens, when the provider cannot report it.
    pub context_length: Option<u64>,
    pub request_timeout_secs: u64,
    /// How tools are offered: `native`, `hermes` (text blocks, for models without function
    /// calling) or `auto`.
    pub tool_protocol: ToolProtocol,
    /// Models `/model` lists as choices (besides the default and the fallbacks).
    pub choices: Vec<String>,
    /// `/model <name>` without `--session`/`--global` writes config.yaml when true. Off by
    /// default: on a shared gateway one chat's switch should not change everyone's model.
    pub persist_switch_by_default: bool,
    /// Prices per model for cost accounting.
    pub pricing: BTreeMap<String, Price>,
    /// Whether the model is given images (`auto`: the provider's model info, else a built-in
    /// table); without vision, `vision_analyze` asks `auxiliary.vision` instead.
    pub vision: super::media::VisionMode,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            default: "gpt-4o-mini".to_string(),
            provider: None,
            base_url: "https://api.openai.com/v1".to_string(),
            api_key: None,
            context_length: None,
            request_timeout_secs: 120,
            tool_protocol: ToolProtocol::Auto,
            choices: Vec::new(),
            persist_switch_by_default: false,
            pricing: BTreeMap::new(),
            vision: super::media::VisionMode::Auto,
        }
    }
}

impl Serialize for ModelConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // The inherent (derived) function, not this trait method: inherent items win.
        ModelConfig::serialize(self, serializer)
    }
}

impl<'de> Deserialize<'de> for ModelConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ModelVisitor)
    }
}

struct ModelVisitor;

impl<'de> Visitor<'de> for ModelVisitor {
    type Value = ModelConfig;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a model name or a mapping with `default`, `provider`, `base_url`, …")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<ModelConfig, E> {
        let name = v.trim();
        if name.is_empty() {
            return Ok(ModelConfig::default());
        }
        Ok(ModelConfig { default: name.to_string(), ..ModelConfig::default() })
    }

    fn visit_unit<E: de::Error>(self) -> Result<ModelConfig, E> {
        Ok(ModelConfig::default())
    }

    fn visit_none<E: de::Error>(self) -> Result<ModelConfig, E> {
        Ok(ModelConfig::default())
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ModelConfig, A::Error> {
        ModelConfig::deserialize(MapAccessDeserializer::new(map))
    }
}

/// How tools are offered to the model (`model.tool_protocol`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolProtocol {
    /// Native function calling only.
    Native,
    /// Text blocks only; no `tools` field is sent.
    Hermes,
    /// Native function calling, and text blocks are honoured when a model writes them anyway.
    #[default]
    Auto,
}
