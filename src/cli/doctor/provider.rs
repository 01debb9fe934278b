//! The model provider: a one-token completion of the configured model, with the configured key,
//! in the provider's own wire format (Chat Completions or Anthropic Messages). It proves the base
//! URL, the key and the model name at the cost of a few tokens. The answer's `Date` header is
//! kept for the clock check.

use super::report::Report;
use crate::agent::ModelSpec;
use crate::agent::providers::{WireFormat, anthropic, http::same_origin_redirects, wire_format};
use crate::config::Config;
use chrono::{DateTime, Utc};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);
const KEY_FIX: &str = "set model.api_key, or OPENAI_API_KEY / LLM_API_KEY (ANTHROPIC_API_KEY for Claude), to a valid key";

/// Ask the model for one token; returns the provider's clock when it answered.
pub(super) async fn check(report: &mut Report, config: &Config) -> Option<DateTime<Utc>> {
    let m = &config.model;
    let spec = ModelSpec {
        model: m.default.clone(),
        provider: m.provider.clone(),
        base_url: m.base_url.clone(),
        api_key: m.api_key.as_ref().map(|k| k.expose().to_string()),
    };
    let client = match reqwest::Client::builder().timeout(TIMEOUT).redirect(same_origin_redirects()).build() {
        Ok(c) => c,
        Err(e) => {
            report.fail(&format!("cannot build an HTTP client: {e}"), "check the system's TLS configuration (ca-certificates)");
            return None;
        }
    };
    let base = spec.base_url.trim_end_matches('/').to_string();
    let what = format!("model provider {base} (model {})", spec.model);
    let response = match one_token(&client, &spec).send().await {
        Ok(r) => r,
        Err(e) => {
            report.fail(
                &format!("model provider {base} is unreachable ({})", e.without_url()),
                "check model.base_url (or OPENAI_BASE_URL / LLM_BASE_URL), DNS and the network",
            );
            return None;
        }
    };
    let date = server_date(response.headers());
    let status = response.status();
    let detail = error_detail(&response.text().await.unwrap_or_default());
    judge(report, &what, status, &detail);
    date
}

/// The request for one token of `spec`'s model, in its wire format.
fn one_token(client: &reqwest::Client, spec: &ModelSpec) -> reqwest::RequestBuilder {
    let ask = json!([{ "role": "user", "content": "Reply with OK." }]);
    match wire_format(spec) {
        WireFormat::ChatCompletions => {
            let url = format!("{}/chat/completions", spec.base_url.trim_end_matches('/'));
            let request = client.post(url).json(&json!({ "model": spec.model, "messages": ask, "max_tokens": 1, "stream": false }));
            match &spec.api_key {
                Some(key) => request.bearer_auth(key),
                None => request,
            }
        }
        WireFormat::AnthropicMessages => {
            let request = client
                .post(anthropic::endpoint(&spec.base_url))
                .header("anthropic-version", anthropic::ANTHROPIC_VERSION)
                .json(&json!({ "model": spec.model, "messages": ask, "max_tokens": 1 }));
            match &spec.api_key {
                Some(key) => request.header("x-api-key", key),
                None => request,
            }
        }
    }
}

fn judge(report: &mut Report, what: &str, status: StatusCode, detail: &str) {
    match status.as_u16() {
        200..=299 => report.ok(&format!("{what} answered a one-token completion")),
        401 | 403 => report.fail(&format!("{what}: the provider rejected the API key ({status}: {detail})"), KEY_FIX),
        404 => report.fail(
            &format!("{what}: not found ({status}: {detail})"),
            "check model.default (the model's exact name at this provider) and model.base_url (most end in /v1)",
        ),
        // The key was accepted; the account is busy or out of credit, which the owner should know.
        429 => report.warn(&format!("{what}: rate limited or out of quota ({detail}); the key itself was accepted")),
        400 | 422 => report.fail(
            &format!("{what}: the provider refused the request ({status}: {detail})"),
            "check model.default and model.provider against the provider's documentation",
        ),
        _ => report.fail(
            &format!("{what}: the provider failed ({status}: {detail})"),
            "retry later; if it persists, check the provider's status page or model.base_url",
        ),
    }
}

/// The provider's error message, not its whole body (short, and never the key: providers do
/// not echo it).
fn error_detail(body: &str) -> String {
    let parsed = serde_json::from_str::<Value>(body).ok();
    let message = parsed.as_ref().and_then(|v| v.pointer("/error/message").or_else(|| v.get("message"))).and_then(Value::as_str);
    let text = message.unwrap_or(body).trim();
    let short: String = text.chars().take(200).collect();
    if short.is_empty() { "no details".to_string() } else { short }
}

/// The `Date` header (RFC 7231's IMF-fixdate, which is RFC 2822 with `GMT`).
pub(super) fn server_date(headers: &reqwest::header::HeaderMap) -> Option<DateTime<Utc>> {
    let text = headers.get(reqwest::header::DATE)?.to_str().ok()?;
    DateTime::parse_from_rfc2822(text).ok().map(|d| d.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_date_is_read() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(reqwest::header::DATE, "Fri, 27 Nov 2026 08:02:35 GMT".parse().unwrap());
        assert_eq!(server_date(&headers).map(|d| d.to_rfc3339()), Some("2026-11-27T08:02:35+00:00".to_string()));
        headers.insert(reqwest::header::DATE, "yesterday".parse().unwrap());
        assert_eq!(server_date(&headers), None);
    }

    #[test]
    fn the_error_message_is_taken_from_the_body() {
        assert_eq!(error_detail(r#"{"error":{"message":"Incorrect API key provided"}}"#), "Incorrect API key provided");
        assert_eq!(error_detail(""), "no details");
    }
}
