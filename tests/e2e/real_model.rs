//! One smoke run against a real small model server (SmolLM2 behind an OpenAI-compatible server,
//! see test-peers.md §3.4), when one is reachable: the gateway talks to it and streams some text.
//! Set `HERMES_SMOKE_LLM_URL` (e.g. `http://127.0.0.1:8090/v1`) and optionally
//! `HERMES_SMOKE_LLM_MODEL`. Without them the test records itself as not run (`.ci/run` lists it). It proves only that
//! a real server works end to end; behaviour is proven with the scripted fake.

use crate::api_server::read_sse;
use crate::support::{API_KEY, Setup, not_run};
use serde_json::{Value, json};

const TEST: &str = "e2e real_model::a_real_small_model_answers_through_the_gateway";

#[tokio::test(flavor = "multi_thread")]
async fn a_real_small_model_answers_through_the_gateway() {
    let Ok(url) = std::env::var("HERMES_SMOKE_LLM_URL") else {
        not_run(TEST, "HERMES_SMOKE_LLM_URL is not set (no local model server; see test-peers.md §3.4 for SmolLM2)");
        return;
    };
    if reqwest::get(format!("{url}/models")).await.is_err() {
        not_run(TEST, &format!("no model server answers at {url}"));
        return;
    }
    let model = std::env::var("HERMES_SMOKE_LLM_MODEL").unwrap_or_else(|_| "smollm2".into());
    let mut setup = Setup::new(&url);
    setup.set("LLM_MODEL", &model);
    setup.write_config("model:\n  request_timeout_secs: 300\n");
    let _gateway = setup.start().await;
    let response = reqwest::Client::new()
        .post(setup.api("/v1/chat/completions"))
        .bearer_auth(API_KEY)
        .json(&json!({"stream": true, "messages": [{"role": "user", "content": "What is the capital of France?"}]}))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    let text: String = read_sse(response)
        .await
        .into_iter()
        .filter(|(event, _, data)| event == "message" && data != "[DONE]")
        .filter_map(|(_, _, data)| serde_json::from_str::<Value>(&data).ok())
        .filter_map(|v| v["choices"][0]["delta"]["content"].as_str().map(str::to_string))
        .collect();
    println!("the real model answered: {text:?}");
    assert!(!text.trim().is_empty(), "the real model streamed no text");
}
