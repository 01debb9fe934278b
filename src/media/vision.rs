//! Whether a model is given images (`model.vision`): `on` and `off` decide; `auto` asks the
//! provider's model list where it says ([`reported_vision`]: OpenRouter's
//! `architecture.input_modalities`, the `capabilities` of Ollama-style and Mistral lists), else
//! a built-in table of model families that see images ([`sees_images`]). A model that does not
//! see images gets `vision_analyze` instead, which asks `auxiliary.vision` about a picture.

use crate::config::VisionMode;
use serde_json::Value;
use std::time::Duration;

/// How long the model list may take; a slow list only means the table decides.
const MODELS_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether `model` (of `provider`, when known) is sent images under `mode`. `reported` is what
/// the provider's model list said about it, when the caller asked ([`reported_vision`]).
pub fn sees_images(mode: VisionMode, model: &str, provider: Option<&str>, reported: Option<bool>) -> bool {
    match mode {
        VisionMode::On => true,
        VisionMode::Off => false,
        VisionMode::Auto => reported.unwrap_or_else(|| known_vision_model(model, provider)),
    }
}

/// The built-in table: model families known to take images. An unknown model is taken as
/// text-only (it then gets `vision_analyze`, which works either way).
fn known_vision_model(model: &str, _provider: Option<&str>) -> bool {
    let lower = model.trim().to_ascii_lowercase();
    // `openai/gpt-4o`, `anthropic/claude-…`, `meta-llama/llama-3.2-11b-vision-instruct`.
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    // Bedrock and Vertex spell Claude `anthropic.claude-3-5-sonnet-…` or `claude-…@date`.
    if let Some(at) = name.find("claude-") {
        let rest = &name[at + "claude-".len()..];
        return !(rest.starts_with('1') || rest.starts_with('2') || rest.starts_with("instant"));
    }
    if let Some(rest) = name.strip_prefix("gpt-") {
        return ["4o", "4.1", "4.5", "5", "4-turbo", "4-vision"].iter().any(|p| rest.starts_with(p)) && !rest.contains("audio");
    }
    if let Some(reasoning) = openai_reasoning(name) {
        return reasoning;
    }
    if name.starts_with("gemini") {
        // Gemini 1.0 Pro was text-only (its images went to `gemini-pro-vision`).
        return !(name == "gemini-pro" || name.starts_with("gemini-1.0-pro")) || name.contains("vision");
    }
    const FAMILIES: &[&str] =
        &["llava", "bakllava", "pixtral", "moondream", "minicpm-v", "llama-4", "llama4", "gemma3", "gemma-3", "grok-4"];
    const MARKERS: &[&str] = &["vision", "-vl", "_vl", "vl-", "-omni"];
    if FAMILIES.iter().any(|f| name.starts_with(f)) || MARKERS.iter().any(|m| name.contains(m)) {
        // Gemma 3 1B is the one text-only size of its family.
        return !(name.starts_with("gemma") && name.contains("1b"));
    }
    mistral_with_vision(name)
}

/// `o1`, `o3`, `o4…`: the full models see images, the first minis (`o1-mini`, `o3-mini`) and
/// `o1-preview` do not. `None` for other names.
fn openai_reasoning(name: &str) -> Option<bool> {
    let family = ["o1", "o3", "o4"].into_iter().find(|f| name == *f || name.starts_with(&format!("{f}-")))?;
    let text_only = matches!(family, "o1" | "o3") && (name.contains("-mini") || name.contains("-preview"));
    Some(!text_only)
}

/// Mistral Medium 3 and Small 3.1 and later see images (Small 3.0, 2501, does not).
fn mistral_with_vision(name: &str) -> bool {
    let versioned = |family: &str, from: &[&str]| name.strip_prefix(family).is_some_and(|rest| from.iter().any(|v| rest.starts_with(v)));
    let small = versioned("mistral-small-", &["3.1", "3.2", "25", "26", "latest"]) && !name.starts_with("mistral-small-2501");
    small || versioned("mistral-medium-", &["3", "25", "26", "latest"])
}

/// What the provider's model list (`GET {base_url}/models`) says about whether `model` takes
/// images: `Some` only when the list has an entry for it that says (OpenRouter's
/// `architecture.input_modalities`, a `capabilities` list with or without `"vision"`, or a
/// `capabilities.vision` flag); `None` when the list is unreachable or silent.
pub async fn reported_vision(http: &reqwest::Client, base_url: &str, api_key: Option<&str>, model: &str) -> Option<bool> {
    let url = format!("{}/models", base_url.trim_end_matches('/'));
    let mut request = http.get(&url).timeout(MODELS_TIMEOUT);
    if let Some(key) = api_key.filter(|k| !k.is_empty()) {
        request = request.bearer_auth(key);
    }
    let response = match request.send().await {
        Ok(r) if r.status().is_success() => r,
        Ok(r) => {
            tracing::debug!(status = %r.status(), "the model list was refused; the built-in table decides vision");
            return None;
        }
        Err(e) => {
            tracing::debug!(error = %e, "the model list is unreachable; the built-in table decides vision");
            return None;
        }
    };
    let list: Value = response.json().await.ok()?;
    entry_vision(&list, model)
}

/// The vision answer of `model`'s entry in a model list (`{"data": [...]}` or `{"models": [...]}`).
fn entry_vision(list: &Value, model: &str) -> Option<bool> {
    let entries = list.get("data").or_else(|| list.get("models")).and_then(Value::as_array)?;
    let names = |e: &Value| {
        ["id", "name", "model"].into_iter().filter_map(|k| e.get(k).and_then(Value::as_str).map(str::to_string)).collect::<Vec<_>>()
    };
    let entry = entries.iter().find(|e| names(e).iter().any(|n| n == model))?;
    if let Some(modalities) = entry.pointer("/architecture/input_modalities").and_then(Value::as_array) {
        return Some(modalities.iter().any(|m| m.as_str() == Some("image")));
    }
    match entry.get("capabilities") {
        Some(Value::Array(caps)) => Some(caps.iter().any(|c| c.as_str() == Some("vision"))),
        Some(Value::Object(caps)) => caps.get("vision").and_then(Value::as_bool),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Json;
    use axum::http::HeaderMap;
    use axum::routing::get;
    use serde_json::json;

    #[test]
    fn on_and_off_decide_whatever_the_model() {
        assert!(sees_images(VisionMode::On, "some-text-model", None, Some(false)));
        assert!(!sees_images(VisionMode::Off, "gpt-4o", None, Some(true)));
    }

    #[test]
    fn auto_prefers_what_the_provider_reported() {
        assert!(sees_images(VisionMode::Auto, "my-private-finetune", None, Some(true)));
        assert!(!sees_images(VisionMode::Auto, "gpt-4o", None, Some(false)));
    }

    #[test]
    fn auto_knows_the_vision_families() {
        let sees = [
            "claude-3-5-sonnet-20241022",
            "anthropic/claude-sonnet-4-5",
            "claude-opus-4-1",
            "us.anthropic.claude-3-7-sonnet-20250219-v1:0",
            "gpt-4o",
            "openai/gpt-4o-mini",
            "gpt-4.1-nano",
            "gpt-5",
            "gpt-5-mini",
            "o1",
            "o3",
            "o4-mini",
            "gemini-2.5-flash",
            "google/gemini-2.0-flash-001",
            "qwen/qwen2.5-vl-72b-instruct",
            "Qwen3-VL-8B",
            "llava:13b",
            "pixtral-12b-2409",
            "meta-llama/llama-3.2-11b-vision-instruct",
            "llama3.2-vision",
            "grok-2-vision-1212",
            "mistral-medium-3",
            "mistral-small-3.2",
            "gemma3:27b",
        ];
        for model in sees {
            assert!(sees_images(VisionMode::Auto, model, None, None), "{model} sees images");
        }
        let blind = [
            "claude-2.1",
            "claude-instant-1.2",
            "gpt-3.5-turbo",
            "gpt-4",
            "o1-mini",
            "o3-mini",
            "o1-preview",
            "gemini-pro",
            "deepseek-chat",
            "llama-3.1-70b-instruct",
            "qwen2.5-72b-instruct",
            "mistral-small-2501",
            "mistral-large-latest",
            "gemma3:1b",
            "gpt-4o-audio-preview",
        ];
        for model in blind {
            assert!(!sees_images(VisionMode::Auto, model, None, None), "{model} is text-only");
        }
    }

    async fn serve_models(list: Value) -> String {
        let app = axum::Router::new().route(
            "/v1/models",
            get(move |headers: HeaderMap| {
                let list = list.clone();
                async move {
                    let authorized = headers.get("authorization").and_then(|v| v.to_str().ok()) == Some("Bearer sk-list");
                    Json(if authorized { list } else { json!({"error": "unauthorized"}) })
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}/v1")
    }

    #[tokio::test]
    async fn the_provider_model_list_is_read_where_it_says() {
        let base = serve_models(json!({"data": [
            {"id": "openai/gpt-4o", "architecture": {"input_modalities": ["text", "image"], "output_modalities": ["text"]}},
            {"id": "deepseek/deepseek-chat", "architecture": {"input_modalities": ["text"]}},
            {"id": "llava:7b", "capabilities": ["completion", "vision"]},
            {"id": "qwen3:8b", "capabilities": ["completion", "tools"]},
            {"id": "mistral-small-latest", "capabilities": {"completion_chat": true, "vision": true}},
            {"id": "plain-model", "object": "model"}
        ]}))
        .await;
        let http = reqwest::Client::new();
        let ask = |model: &'static str| {
            let (http, base) = (http.clone(), base.clone());
            async move { reported_vision(&http, &base, Some("sk-list"), model).await }
        };
        assert_eq!(ask("openai/gpt-4o").await, Some(true));
        assert_eq!(ask("deepseek/deepseek-chat").await, Some(false));
        assert_eq!(ask("llava:7b").await, Some(true));
        assert_eq!(ask("qwen3:8b").await, Some(false));
        assert_eq!(ask("mistral-small-latest").await, Some(true));
        assert_eq!(ask("plain-model").await, None, "an entry that says nothing leaves it to the table");
        assert_eq!(ask("not-listed").await, None);
        assert_eq!(reported_vision(&http, &base, None, "openai/gpt-4o").await, None, "an unauthorized list says nothing");
        assert_eq!(reported_vision(&http, "http://127.0.0.1:9/v1", None, "gpt-4o").await, None, "an unreachable list says nothing");
    }
}
