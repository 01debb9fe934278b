//! The REST surface under `/api/v10`: gateway discovery, the bot's user and application, channels,
//! channel history, message create / edit / delete (JSON or multipart with `payload_json`), typing, reactions,
//! interaction callbacks and responses (`@original`), and application commands. Every call is authenticated with the bot token,
//! logged, and may be answered by a fault first. Errors use Discord's JSON shape and codes.

use super::state::{DcSent, DcUpload, Fault, RestCall, Shared, State};
use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Multipart, Request, State as AxumState};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Instant;

/// Discord's limit on message content, in characters.
pub const MAX_CONTENT: usize = 2000;

fn reply(status: StatusCode, body: Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

fn error(status: u16, code: u64, message: &str) -> Response {
    reply(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST), json!({"message": message, "code": code}))
}

fn too_long() -> Response {
    reply(
        StatusCode::BAD_REQUEST,
        json!({"message": "Invalid Form Body", "code": 50035, "errors": {"content": {"_errors": [
            {"code": "BASE_TYPE_MAX_LENGTH", "message": format!("Must be {MAX_CONTENT} or fewer in length.")}]}}}),
    )
}

fn rate_limited(retry_after: f64) -> Response {
    let mut response = reply(
        StatusCode::TOO_MANY_REQUESTS,
        json!({"message": "You are being rate limited.", "retry_after": retry_after, "global": false}),
    );
    let headers = response.headers_mut();
    for (name, value) in [
        ("retry-after", format!("{retry_after}")),
        ("x-ratelimit-limit", "5".to_string()),
        ("x-ratelimit-remaining", "0".to_string()),
        ("x-ratelimit-reset-after", format!("{retry_after}")),
        ("x-ratelimit-bucket", "fake-bucket".to_string()),
        ("x-ratelimit-scope", "user".to_string()),
    ] {
        if let Ok(v) = value.parse() {
            headers.insert(name, v);
        }
    }
    response
}

/// A response whose body breaks off: the client sees the connection die mid-answer.
fn reset() -> Response {
    let stream = futures::stream::once(async { Err::<Bytes, std::io::Error>(std::io::Error::other("connection reset by the fake")) });
    Response::builder().status(StatusCode::OK).header(header::CONTENT_LENGTH, "64").body(Body::from_stream(stream)).unwrap_or_default()
}

/// The JSON body (or multipart `payload_json`) and any uploaded files.
async fn read_body(request: Request) -> Result<(Value, Vec<DcUpload>), Response> {
    let content_type = request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    if content_type.starts_with("multipart/form-data") {
        let mut multipart =
            Multipart::from_request(request, &()).await.map_err(|e| error(400, 50035, &format!("Invalid Form Body: {e}")))?;
        let mut payload = json!({});
        let mut files = Vec::new();
        while let Ok(Some(field)) = multipart.next_field().await {
            let name = field.name().unwrap_or_default().to_string();
            let file_name = field.file_name().map(str::to_string);
            let content_type = field.content_type().map(str::to_string);
            let bytes = field.bytes().await.map_err(|e| error(400, 50035, &format!("Invalid Form Body: {e}")))?;
            match file_name {
                Some(file_name) => files.push(DcUpload { field: name, file_name, content_type, bytes: bytes.to_vec() }),
                None if name == "payload_json" => {
                    payload = serde_json::from_slice(&bytes).map_err(|_| error(400, 50109, "The request body contains invalid JSON."))?
                }
                None => {}
            }
        }
        return Ok((payload, files));
    }
    let body = axum::body::to_bytes(request.into_body(), 64 * 1024 * 1024).await.map_err(|e| error(400, 50035, &e.to_string()))?;
    if body.is_empty() {
        return Ok((Value::Null, Vec::new()));
    }
    serde_json::from_slice(&body).map(|v| (v, Vec::new())).map_err(|_| error(400, 50109, "The request body contains invalid JSON."))
}

/// A message create over the enforced limits: Discord's 429 with the seconds to wait.
fn over_limit(shared: &Shared, method: &Method, path: &str) -> Option<Fault> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let ["channels", channel, "messages"] = segments.as_slice() else { return None };
    if *method != Method::POST {
        return None;
    }
    let wait = shared.with(|s| s.limits.admit(channel, false, Instant::now())).err()?;
    Some(Fault::RateLimited { retry_after: wait.as_secs_f64() })
}

pub(crate) async fn handle(AxumState(shared): AxumState<Arc<Shared>>, request: Request) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().strip_prefix("/api/v10").unwrap_or(request.uri().path()).to_string();
    let query = request.uri().query().unwrap_or_default().to_string();
    let authorized = {
        let presented = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        shared.with(|s| presented == format!("Bot {}", s.token))
    };
    let (body, files) = match read_body(request).await {
        Ok(b) => b,
        Err(response) => return response,
    };
    let call = shared.with(|s| {
        s.calls.push(RestCall { method: method.to_string(), path: path.clone(), body: body.clone(), status: 0, at: Instant::now() });
        s.calls.len() - 1
    });
    let mut was_reset = false;
    let response = if !authorized {
        error(401, 0, "401: Unauthorized")
    } else {
        let matches = |scope: &super::state::FaultScope| scope.matches(method.as_str(), &path);
        let (fault, latency) = shared.with(|s| (s.faults.fault_for(matches), s.faults.latency_for(matches)));
        if let Some(d) = latency {
            tokio::time::sleep(d).await;
        }
        let fault = fault.or_else(|| over_limit(&shared, &method, &path));
        match fault {
            Some(Fault::RateLimited { retry_after }) => rate_limited(retry_after),
            Some(Fault::ServerError(code)) => error(code, 0, "500: Internal Server Error"),
            Some(Fault::Reset) => {
                was_reset = true;
                reset()
            }
            Some(Fault::LostAnswer) => {
                was_reset = true;
                shared.with(|s| route(s, &method, &path, &query, body, files));
                reset()
            }
            None => shared.with(|s| route(s, &method, &path, &query, body, files)),
        }
    };
    let status = if was_reset { 0 } else { response.status().as_u16() };
    shared.with(|s| s.calls[call].status = status);
    shared.changed.notify_waiters();
    response
}

fn route(s: &mut State, method: &Method, path: &str, query: &str, body: Value, files: Vec<DcUpload>) -> Response {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method.as_str(), segments.as_slice()) {
        ("GET", ["gateway"]) => reply(StatusCode::OK, json!({"url": s.ws_url})),
        ("GET", ["gateway", "bot"]) => reply(
            StatusCode::OK,
            json!({"url": s.ws_url, "shards": 1,
                   "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 86_400_000, "max_concurrency": 1}}),
        ),
        ("GET", ["users", "@me"]) => reply(StatusCode::OK, s.bot_json()),
        ("GET", ["oauth2", "applications", "@me"]) | ("GET", ["applications", "@me"]) => reply(
            StatusCode::OK,
            json!({"id": s.application_id.to_string(), "name": "Hermes", "icon": null, "description": "", "bot_public": true,
                   "bot_require_code_grant": false, "verify_key": "00", "flags": 0, "team": null, "owner": s.bot_json()}),
        ),
        ("PUT", ["applications", _, "commands"]) => {
            s.commands = body.clone();
            let commands: Vec<Value> = body
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .enumerate()
                .map(|(i, mut c)| {
                    c["id"] = json!((i + 1).to_string());
                    c["application_id"] = json!(s.application_id.to_string());
                    c["version"] = json!("1");
                    c["default_member_permissions"] = Value::Null;
                    c["type"] = json!(1);
                    c
                })
                .collect();
            reply(StatusCode::OK, Value::Array(commands))
        }
        ("GET", ["channels", id]) => match id.parse().ok().and_then(|id: u64| s.channels.get(&id)) {
            Some(channel) => reply(StatusCode::OK, s.channel_json(channel)),
            None => error(404, 10003, "Unknown Channel"),
        },
        ("POST", ["channels", id, "typing"]) => match known_channel(s, id) {
            Some(channel) => {
                *s.typing.entry(channel).or_default() += 1;
                no_content()
            }
            None => error(404, 10003, "Unknown Channel"),
        },
        ("GET", ["channels", id, "messages"]) => list_messages(s, id, query),
        ("POST", ["channels", id, "messages"]) => create_message(s, id, body, files),
        ("PATCH", ["channels", id, "messages", message]) => edit_message(s, id, message, body),
        ("DELETE", ["channels", _, "messages", message]) => match message.parse().ok().and_then(|m: u64| s.sent_index.get(&m).copied()) {
            Some(i) if !s.sent[i].deleted => {
                s.sent[i].deleted = true;
                no_content()
            }
            _ => error(404, 10008, "Unknown Message"),
        },
        ("PUT", ["channels", _, "messages", message, "reactions", emoji, "@me"]) => {
            s.reactions.push((message.parse().unwrap_or(0), emoji.to_string()));
            no_content()
        }
        ("DELETE", ["channels", _, "messages", message, "reactions", emoji, "@me"]) => {
            let message: u64 = message.parse().unwrap_or(0);
            s.reactions.retain(|(m, e)| !(*m == message && e == emoji));
            no_content()
        }
        ("POST", ["interactions", id, token, "callback"]) => {
            let kind = body.get("type").and_then(Value::as_u64).unwrap_or(0);
            s.interaction_callbacks.push((id.parse().unwrap_or(0), kind));
            if let Some(content) = body.pointer("/data/content").and_then(Value::as_str) {
                let ephemeral = body.pointer("/data/flags").and_then(Value::as_u64).is_some_and(|f| f & 64 != 0);
                s.interaction_messages.push((content.to_string(), ephemeral));
            }
            if let Some(interaction) = s.interactions.get_mut(*token) {
                if Some(interaction.id) != id.parse().ok() {
                    return error(404, 10062, "Unknown interaction");
                }
                if interaction.acknowledged {
                    return error(400, 40060, "Interaction has already been acknowledged.");
                }
                interaction.acknowledged = true;
            }
            no_content()
        }
        ("PATCH", ["webhooks", application, token, "messages", "@original"]) => edit_original(s, application, token, body),
        _ => error(404, 0, "404: Not Found"),
    }
}

fn known_channel(s: &State, id: &str) -> Option<u64> {
    id.parse().ok().filter(|id| s.channels.contains_key(id))
}

/// A channel's history, newest first as Discord answers it: users' messages and the bot's (not
/// deleted), `limit` (1–100, default 50) of them after `after` or the latest ones. Like Discord's,
/// these message objects carry no `guild_id`.
fn list_messages(s: &State, channel: &str, query: &str) -> Response {
    let Some(channel_id) = known_channel(s, channel) else {
        return error(404, 10003, "Unknown Channel");
    };
    let param = |name: &str| query.split('&').filter_map(|kv| kv.split_once('=')).find(|(k, _)| *k == name).map(|(_, v)| v);
    let Ok(limit) = param("limit").unwrap_or("50").parse::<usize>() else {
        return error(400, 50035, "Invalid Form Body (limit)");
    };
    if !(1..=100).contains(&limit) {
        return error(400, 50035, "Invalid Form Body (limit: must be between 1 and 100)");
    }
    let after: Option<u64> = param("after").and_then(|a| a.parse().ok());
    let in_channel = |m: &Value| m["channel_id"].as_str() == Some(&channel_id.to_string());
    let mut history: Vec<(u64, Value)> = s
        .user_messages
        .iter()
        .filter(|(_, m)| in_channel(m))
        .map(|(id, m)| (*id, m.clone()))
        .chain(s.sent.iter().filter(|m| m.channel_id == channel_id && !m.deleted).map(|m| (m.id, s.sent_message_json(m))))
        .collect();
    history.sort_by_key(|(id, _)| *id);
    let page: Vec<Value> = match after {
        Some(after) => history.into_iter().filter(|(id, _)| *id > after).take(limit).collect::<Vec<_>>(),
        None => {
            let skip = history.len().saturating_sub(limit);
            history.into_iter().skip(skip).collect()
        }
    }
    .into_iter()
    .rev()
    .map(|(_, mut m)| {
        if let Some(object) = m.as_object_mut() {
            object.remove("guild_id");
        }
        m
    })
    .collect();
    reply(StatusCode::OK, Value::Array(page))
}

/// The response of an acknowledged interaction: written by the first edit of a deferred
/// response, edited by later ones. It is the bot's message in the interaction's channel.
fn edit_original(s: &mut State, application: &str, token: &str, body: Value) -> Response {
    let Some(interaction) = s.interactions.get(token).cloned().filter(|_| application == s.application_id.to_string()) else {
        return error(404, 10015, "Unknown Webhook");
    };
    if !interaction.acknowledged {
        return error(404, 10008, "Unknown Message");
    }
    if let Some(id) = interaction.original {
        return edit_message(s, &interaction.channel_id.to_string(), &id.to_string(), body);
    }
    let content = body.get("content").and_then(Value::as_str).unwrap_or_default().to_string();
    if content.chars().count() > MAX_CONTENT {
        return too_long();
    }
    let components = body.get("components").cloned().unwrap_or(json!([]));
    if let Some(what) = components_problem(&components) {
        return invalid_components(what);
    }
    let id = s.snowflake();
    if let Some(i) = s.interactions.get_mut(token) {
        i.original = Some(id);
    }
    let sent = DcSent {
        at: Instant::now(),
        id,
        channel_id: interaction.channel_id,
        content,
        edits: Vec::new(),
        deleted: false,
        components,
        reply_to: None,
        allowed_mentions: body.get("allowed_mentions").cloned(),
        files: Vec::new(),
        uploads: Vec::new(),
        attachment_meta: json!([]),
        flags: body.get("flags").and_then(Value::as_u64).unwrap_or(0),
    };
    let json = s.store_sent(sent);
    reply(StatusCode::OK, json)
}

fn create_message(s: &mut State, channel: &str, body: Value, files: Vec<DcUpload>) -> Response {
    let Some(channel_id) = known_channel(s, channel) else {
        return error(404, 10003, "Unknown Channel");
    };
    let content = body.get("content").and_then(Value::as_str).unwrap_or_default().to_string();
    let components = body.get("components").cloned().unwrap_or(json!([]));
    let has_components = components.as_array().is_some_and(|c| !c.is_empty());
    if content.chars().count() > MAX_CONTENT {
        return too_long();
    }
    if content.trim().is_empty()
        && files.is_empty()
        && !has_components
        && body.get("embeds").is_none_or(|e| e.as_array().is_none_or(Vec::is_empty))
    {
        return error(400, 50006, "Cannot send an empty message");
    }
    if let Some(what) = components_problem(&components) {
        return invalid_components(what);
    }
    let flags = body.get("flags").and_then(Value::as_u64).unwrap_or(0);
    if flags & IS_VOICE_MESSAGE != 0
        && let Some(refused) = voice_message_problem(s, channel_id, &content, &body, &files)
    {
        return refused;
    }
    // Discord keeps one message per nonce for a few minutes when asked to.
    let nonce = body.get("nonce").map(|n| n.as_str().map(str::to_string).unwrap_or_else(|| n.to_string()));
    let enforce = body.get("enforce_nonce").and_then(Value::as_bool).unwrap_or(false);
    if let Some(nonce) = nonce.as_ref().filter(|_| enforce)
        && let Some(i) = s.nonces.get(&(channel_id, nonce.clone())).and_then(|id| s.sent_index.get(id)).copied()
    {
        return reply(StatusCode::OK, s.sent_message_json(&s.sent[i]));
    }
    let reply_to = body.pointer("/message_reference/message_id").and_then(|v| v.as_str().and_then(|s| s.parse().ok()).or(v.as_u64()));
    if let Some(target) = reply_to {
        let exists = s.user_messages.contains_key(&target) || s.sent_index.contains_key(&target);
        let fail = body.pointer("/message_reference/fail_if_not_exists").and_then(Value::as_bool).unwrap_or(true);
        if !exists && fail {
            return reply(
                StatusCode::BAD_REQUEST,
                json!({"message": "Invalid Form Body", "code": 50035, "errors": {"message_reference": {"_errors": [
                    {"code": "REPLIES_UNKNOWN_MESSAGE", "message": "Unknown message"}]}}}),
            );
        }
    }
    let id = s.snowflake();
    if let Some(nonce) = nonce.filter(|_| enforce) {
        s.nonces.insert((channel_id, nonce), id);
    }
    let sent = DcSent {
        at: Instant::now(),
        id,
        channel_id,
        content,
        edits: Vec::new(),
        deleted: false,
        components,
        reply_to,
        allowed_mentions: body.get("allowed_mentions").cloned(),
        files: files.iter().map(|f| (f.file_name.clone(), f.bytes.len())).collect(),
        attachment_meta: body.get("attachments").cloned().unwrap_or(json!([])),
        uploads: files,
        flags,
    };
    reply(StatusCode::OK, s.store_sent(sent))
}

/// Message flag `IS_VOICE_MESSAGE`.
const IS_VOICE_MESSAGE: u64 = 1 << 13;

/// Discord's rules for a voice message: allowed in the channel (50173), no content (50159), one
/// audio file (50160) with `duration_secs` and `waveform` metadata (50161).
fn voice_message_problem(s: &State, channel: u64, content: &str, body: &Value, files: &[DcUpload]) -> Option<Response> {
    if s.no_voice_channels.contains(&channel) {
        return Some(error(400, 50173, "Cannot send voice messages in this channel"));
    }
    if !content.is_empty() || body.get("embeds").is_some_and(|e| e.as_array().is_some_and(|e| !e.is_empty())) {
        return Some(error(400, 50159, "Voice messages do not support additional content."));
    }
    let audio = |f: &DcUpload| f.content_type.as_deref().is_some_and(|t| t.starts_with("audio/"));
    if files.len() != 1 || !files.iter().all(audio) {
        return Some(error(400, 50160, "Voice messages must have a single audio attachment."));
    }
    let meta = body.pointer("/attachments/0");
    let has = |key: &str| meta.and_then(|m| m.get(key)).is_some_and(|v| !v.is_null());
    if !has("duration_secs") || !has("waveform") {
        return Some(error(400, 50161, "Voice messages must have supporting metadata."));
    }
    None
}

fn invalid_components(what: &str) -> Response {
    reply(
        StatusCode::BAD_REQUEST,
        json!({"message": "Invalid Form Body", "code": 50035, "errors": {"components": {"_errors": [
        {"code": "COMPONENT_INVALID", "message": what}]}}}),
    )
}

/// At most 5 action rows of at most 5 buttons, custom ids 1-100 characters, labels up to 80.
fn components_problem(components: &Value) -> Option<&'static str> {
    let rows = components.as_array().map(Vec::as_slice).unwrap_or_default();
    let invalid = Some;
    if rows.len() > 5 {
        return invalid("Must be 5 or fewer in length.");
    }
    for row in rows {
        let buttons = row.get("components").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        if buttons.is_empty() || buttons.len() > 5 {
            return invalid("An action row needs 1 to 5 components.");
        }
        for button in buttons {
            let custom_id = button.get("custom_id").and_then(Value::as_str).unwrap_or_default();
            let label = button.get("label").and_then(Value::as_str).unwrap_or_default();
            if button.get("url").is_none() && (custom_id.is_empty() || custom_id.chars().count() > 100) {
                return invalid("custom_id must be 1 to 100 characters.");
            }
            if label.chars().count() > 80 {
                return invalid("label must be 80 or fewer in length.");
            }
        }
    }
    None
}

fn edit_message(s: &mut State, channel: &str, message: &str, body: Value) -> Response {
    if known_channel(s, channel).is_none() {
        return error(404, 10003, "Unknown Channel");
    }
    let Some(i) = message.parse().ok().and_then(|m: u64| s.sent_index.get(&m).copied()).filter(|i| !s.sent[*i].deleted) else {
        return error(404, 10008, "Unknown Message");
    };
    if let Some(content) = body.get("content").and_then(Value::as_str) {
        if content.chars().count() > MAX_CONTENT {
            return too_long();
        }
        if content != s.sent[i].content {
            let previous = std::mem::replace(&mut s.sent[i].content, content.to_string());
            s.sent[i].edits.push(previous);
        }
    }
    if let Some(flags) = body.get("flags").and_then(Value::as_u64) {
        s.sent[i].flags = flags;
    }
    if let Some(components) = body.get("components") {
        if let Some(what) = components_problem(components) {
            return invalid_components(what);
        }
        s.sent[i].components = components.clone();
    }
    let json = s.sent_message_json(&s.sent[i]);
    reply(StatusCode::OK, json)
}
