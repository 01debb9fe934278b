//! The MCP server over real HTTP on loopback, with the in-process gateway of
//! `gateway::tests::support`: the guards attacked (no key, a wrong key guessed, a web page, a
//! rebound Host, a body that is not JSON), the protocol (negotiation, batches, unknown tools),
//! and each tool against the real store, board and outbox.

use super::serve;
use crate::gateway::tests::support::{RecordingChat, Wiring, rig};
use crate::gateway::turn::approvals::board::Answer;
use crate::store::PendingApproval;
use hermes_adapter::{ChatTarget, ChatType, Platform, SessionSource};
use serde_json::{Value, json};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const KEY: &str = "7c1f0e9a4b2d86e35f10a9c4";

struct Served {
    _dir: tempfile::TempDir,
    wiring: Wiring,
    chat: Arc<RecordingChat>,
    url: String,
    http: reqwest::Client,
    _stop: tokio_util::sync::DropGuard,
}

async fn served() -> Served {
    let (dir, wiring, chat) = rig().await;
    let stop = CancellationToken::new();
    let addr = "127.0.0.1:0".parse().unwrap();
    let bound = serve(addr, crate::config::Secret::new(KEY), wiring.mcp_serve_handles(), stop.clone()).await.unwrap();
    Served { _dir: dir, wiring, chat, url: format!("http://{bound}/mcp"), http: reqwest::Client::new(), _stop: stop.drop_guard() }
}

impl Served {
    async fn post(&self, body: Value) -> reqwest::Response {
        self.http.post(&self.url).bearer_auth(KEY).json(&body).send().await.unwrap()
    }

    async fn rpc(&self, method: &str, params: Value) -> Value {
        let response = self.post(json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})).await;
        assert_eq!(response.status(), 200);
        response.json().await.unwrap()
    }

    /// A tool's structured answer, or its error text as `Err`.
    async fn tool(&self, name: &str, arguments: Value) -> Result<Value, String> {
        let answer = self.rpc("tools/call", json!({"name": name, "arguments": arguments})).await;
        let result = &answer["result"];
        match result["isError"].as_bool() {
            Some(false) => Ok(result["structuredContent"].clone()),
            _ => Err(result["content"][0]["text"].as_str().unwrap_or_default().to_string()),
        }
    }

    /// A conversation on `platform` with one user message; its id.
    async fn conversation(&self, platform: &str, chat_id: &str, text: &str) -> String {
        let source = SessionSource::new(Platform::new(platform), chat_id, ChatType::Dm).with_user(format!("u{chat_id}"));
        let key = format!("agent:main:{platform}:dm:{chat_id}");
        let route = self.wiring.store.route_get_or_create(&key, &source, "m").await.unwrap();
        let message =
            crate::store::NewMessage { session_id: route.session_id, role: "user".into(), content: text.into(), ..Default::default() };
        self.wiring.store.message_append(message).await.unwrap();
        key
    }
}

#[tokio::test]
async fn requests_without_the_key_from_web_pages_or_rebound_names_never_reach_a_tool() {
    let s = served().await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let none = s.http.post(&s.url).json(&list).send().await.unwrap();
    assert_eq!(none.status(), 401);
    assert_eq!(none.headers()["www-authenticate"], "Bearer");
    let page = s.http.post(&s.url).bearer_auth(KEY).header("Origin", "https://evil.example").json(&list).send().await.unwrap();
    assert_eq!(page.status(), 403, "a browser-borne request is refused even with the key");
    let rebound = s.http.post(&s.url).bearer_auth(KEY).header("Host", "evil.example").json(&list).send().await.unwrap();
    assert_eq!(rebound.status(), 421, "a DNS-rebound name is refused");
    let form = s.http.post(&s.url).bearer_auth(KEY).header("Content-Type", "text/plain").body(list.to_string()).send().await.unwrap();
    assert_eq!(form.status(), 415, "a simple (no-preflight) request is refused");
    let mut statuses = Vec::new();
    for _ in 0..12 {
        statuses.push(s.http.post(&s.url).bearer_auth("wrong-key-wrong-key").json(&list).send().await.unwrap().status().as_u16());
    }
    assert_eq!(statuses.first(), Some(&401));
    assert_eq!(statuses.last(), Some(&429), "a peer guessing keys is locked out: {statuses:?}");
    let locked = s.post(list.clone()).await;
    assert_eq!(locked.status(), 429, "even the right key waits out the lockout");
    assert!(locked.headers().contains_key("retry-after"));
}

#[tokio::test]
async fn the_lifecycle_is_the_specifications_and_mistakes_are_json_rpc_errors() {
    let s = served().await;
    let init = s
        .rpc("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}))
        .await;
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "a revision we speak is kept");
    assert_eq!(init["result"]["serverInfo"]["name"], "hermes");
    assert!(init["result"]["capabilities"]["tools"].is_object());
    let future = s.rpc("initialize", json!({"protocolVersion": "2099-01-01"})).await;
    assert_eq!(future["result"]["protocolVersion"], "2025-11-25", "an unknown revision gets our newest");
    let note = s.post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    assert_eq!(note.status(), 202, "a notification is accepted with no body");

    let tools = s.rpc("tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "conversations_list",
            "messages_read",
            "events_poll",
            "events_wait",
            "messages_send",
            "permissions_list_open",
            "permissions_respond"
        ]
    );
    let send = tools["result"]["tools"].as_array().unwrap().iter().find(|t| t["name"] == "messages_send").unwrap();
    assert_eq!(send["annotations"]["readOnlyHint"], false, "a client's own approval gate sees that sending writes");

    let unknown = s.rpc("tools/call", json!({"name": "shell", "arguments": {}})).await;
    assert_eq!(unknown["error"]["code"], -32602);
    let method = s.rpc("resources/list", json!({})).await;
    assert_eq!(method["error"]["code"], -32601);
    let batch = s.post(json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])).await.json::<Value>().await.unwrap();
    assert_eq!(batch["error"]["code"], -32600);
    let garbage = s.http.post(&s.url).bearer_auth(KEY).header("Content-Type", "application/json").body("{not json").send().await.unwrap();
    assert_eq!(garbage.status(), 400);
    assert_eq!(garbage.json::<Value>().await.unwrap()["error"]["code"], -32700);
    assert_eq!(s.http.get(&s.url).bearer_auth(KEY).send().await.unwrap().status(), 405, "no server-initiated stream");
}

#[tokio::test]
async fn conversations_are_listed_read_and_followed_with_a_cursor() {
    let s = served().await;
    let start = s.tool("events_poll", json!({})).await.unwrap();
    assert_eq!(start["events"], json!([]), "a first poll starts from now");
    let chat = s.conversation("chat", "42", "hello from chat").await;
    let api = s.conversation("api_server", "web-1", "hello from the API").await;

    let listed = s.tool("conversations_list", json!({})).await.unwrap();
    let rows = listed["conversations"].as_array().unwrap();
    let find = |id: &str| rows.iter().find(|c| c["conversation_id"] == id).cloned().unwrap();
    assert_eq!((find(&chat)["platform"].clone(), find(&chat)["can_send"].clone()), (json!("chat"), json!(true)));
    assert_eq!(find(&api)["can_send"], false, "a platform this gateway does not run cannot be sent to");
    let only_chat = s.tool("conversations_list", json!({"platform": "chat"})).await.unwrap();
    assert_eq!(only_chat["conversations"].as_array().unwrap().len(), 1);

    let read = s.tool("messages_read", json!({"conversation_id": chat})).await.unwrap();
    assert_eq!(read["messages"][0]["text"], "hello from chat");
    assert_eq!(read["messages"][0]["role"], "user");

    let events = s.tool("events_poll", json!({"after": start["next_cursor"]})).await.unwrap();
    let texts: Vec<&str> = events["events"].as_array().unwrap().iter().map(|e| e["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["hello from chat", "hello from the API"]);
    let again = s.tool("events_poll", json!({"after": events["next_cursor"]})).await.unwrap();
    assert_eq!(again["events"], json!([]), "nothing is seen twice");

    let wiring_store = s.wiring.store.clone();
    let route = wiring_store.route_get(&chat).await.unwrap().unwrap();
    let waiting = tokio::spawn({
        let (http, url, after) = (s.http.clone(), s.url.clone(), events["next_cursor"].clone());
        async move {
            let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "events_wait", "arguments": {"after": after, "timeout_seconds": 30}}});
            http.post(&url).bearer_auth(KEY).json(&call).send().await.unwrap().json::<Value>().await.unwrap()
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let reply = crate::store::NewMessage {
        session_id: route.session_id,
        role: "assistant".into(),
        content: "the answer".into(),
        ..Default::default()
    };
    wiring_store.message_append(reply).await.unwrap();
    let woke = waiting.await.unwrap();
    assert_eq!(woke["result"]["structuredContent"]["events"][0]["text"], "the answer", "a waiting client wakes for the new message");

    let missing = s.tool("messages_read", json!({"conversation_id": "agent:main:chat:dm:nobody"})).await.unwrap_err();
    assert!(missing.contains("conversations_list"), "{missing}");
    let bad = s.tool("messages_read", json!({"conversation_id": chat, "limit": 100000})).await.unwrap_err();
    assert!(bad.contains("`limit`"), "{bad}");
}

#[tokio::test]
async fn a_message_is_sent_once_per_key_and_only_where_a_message_can_go() {
    let s = served().await;
    let chat = s.conversation("chat", "42", "hi").await;
    let api = s.conversation("api_server", "web-1", "hi").await;
    let sent =
        s.tool("messages_send", json!({"conversation_id": chat, "text": "from the operator", "idempotency_key": "k-1"})).await.unwrap();
    assert_eq!(sent["status"], "delivered");
    let again =
        s.tool("messages_send", json!({"conversation_id": chat, "text": "from the operator", "idempotency_key": "k-1"})).await.unwrap();
    assert_eq!(again["status"], "delivered");
    assert_eq!(*s.chat.sent.lock().unwrap(), ["from the operator"], "a retry with the same key posts nothing new");

    let refused = s.tool("messages_send", json!({"conversation_id": api, "text": "x"})).await.unwrap_err();
    assert!(refused.contains("`api_server` is not a platform this gateway runs"), "a platform this gateway does not run: {refused}");
    let unknown = s.tool("messages_send", json!({"conversation_id": "agent:main:chat:dm:999", "text": "x"})).await.unwrap_err();
    assert!(unknown.contains("no conversation"), "{unknown}");
    let bad_key = s.tool("messages_send", json!({"conversation_id": chat, "text": "x", "idempotency_key": "a b/../c"})).await.unwrap_err();
    assert!(bad_key.contains("`idempotency_key`"), "{bad_key}");
    let cache = s._dir.path().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(cache.join("someone-elses.pdf"), "private").unwrap();
    let file = format!("see this\nMEDIA:{}", cache.join("someone-elses.pdf").display());
    let media = s.tool("messages_send", json!({"conversation_id": chat, "text": file})).await.unwrap_err();
    assert!(media.contains("`MEDIA:` tags are not sent"), "no file from the gateway's cache: {media}");
    assert_eq!(s.chat.sent.lock().unwrap().len(), 1, "nothing refused was sent");
}

#[tokio::test]
async fn a_waiting_approval_is_listed_answered_once_and_its_chat_told() {
    let s = served().await;
    let board = s.wiring.turns().approvals.clone();
    let asked = PendingApproval {
        id: "#c0ffee00".into(),
        session_key: "agent:main:chat:dm:42".into(),
        target: ChatTarget { platform: Platform::new("chat"), chat_id: "42".into(), thread_id: None },
        command: "rm -rf build".into(),
        created_at: chrono::Utc::now(),
    };
    let mut answer = board.open(&asked, Some("rm -rf build"), ["recursive delete"]);
    let listed = s.tool("permissions_list_open", json!({})).await.unwrap();
    assert_eq!(listed["approvals"][0]["id"], "#c0ffee00");
    assert_eq!(listed["approvals"][0]["request"], "rm -rf build");
    let bad = s.tool("permissions_respond", json!({"id": "#c0ffee00", "decision": "always"})).await.unwrap_err();
    assert!(bad.contains("`decision`"), "{bad}");
    assert!(answer.try_recv().is_err(), "a refused answer answers nothing");

    let done = s.tool("permissions_respond", json!({"id": "#c0ffee00", "decision": "deny", "reason": "not now"})).await.unwrap();
    assert_eq!(done["decision"], "denied");
    assert_eq!(answer.try_recv().ok(), Some(Answer::Deny { reason: Some("not now".into()) }), "the agent gets the answer");
    let told = s.chat.sent.lock().unwrap().clone();
    assert!(told.iter().any(|t| t.contains("Command denied") && t.contains("MCP client")), "{told:?}");
    let stale = s.tool("permissions_respond", json!({"id": "#c0ffee00", "decision": "approve"})).await.unwrap_err();
    assert!(stale.contains("no approval"), "{stale}");
}
