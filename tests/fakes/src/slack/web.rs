//! The Web API: `POST` (or `GET`) `/api/<method>` with a bearer token (or a `token` parameter),
//! parameters from the query string and a JSON, form or multipart body; the upload URLs of the
//! external file upload; and `response_url`s. Every call is logged and may be answered by a fault
//! first. Answers are Slack's: HTTP 200 with `{"ok":false,"error":…}` for errors, 404 for an
//! unknown method, 429 with `Retry-After` when rate limited.

use super::mrkdwn;
use super::state::{ApiCall, Shared, SlEphemeral, SlFault, SlFile, SlSent, SlUser, State, Upload, UserMessage, random_hex};
use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Multipart, Path, Request, State as AxumState};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::Instant;

/// Slack refuses texts longer than this (characters) with `msg_too_long`.
pub const MAX_TEXT: usize = 40_000;

/// The methods the fake implements; anything else is `unknown_method`.
const METHODS: [&str; 16] = [
    "auth.test",
    "apps.connections.open",
    "chat.postMessage",
    "chat.postEphemeral",
    "chat.update",
    "chat.delete",
    "conversations.info",
    "conversations.open",
    "conversations.history",
    "conversations.replies",
    "users.info",
    "reactions.add",
    "reactions.remove",
    "files.getUploadURLExternal",
    "files.completeUploadExternal",
    "assistant.threads.setStatus",
];

/// Form fields whose values are JSON documents in Slack's form encoding.
const JSON_FIELDS: [&str; 4] = ["blocks", "attachments", "metadata", "files"];

const BODY_LIMIT: usize = 64 * 1024 * 1024;

fn answer(status: StatusCode, body: &Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json; charset=utf-8")], body.to_string()).into_response()
}

fn error(code: &str) -> Value {
    json!({"ok": false, "error": code})
}

fn rate_limited(retry_after_secs: u64) -> Response {
    let mut response = answer(StatusCode::TOO_MANY_REQUESTS, &error("ratelimited"));
    if let Ok(value) = retry_after_secs.to_string().parse() {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// A response whose body breaks off: the client sees the connection die instead of an answer.
fn cut() -> Response {
    let stream = futures::stream::once(async { Err::<Bytes, std::io::Error>(std::io::Error::other("connection cut by the fake")) });
    Response::builder().status(StatusCode::OK).header(header::CONTENT_LENGTH, "64").body(Body::from_stream(stream)).unwrap_or_default()
}

/// `application/x-www-form-urlencoded` (and query strings) into pairs, `+` and `%XX` decoded.
pub(crate) fn parse_urlencoded(text: &str) -> Vec<(String, String)> {
    fn decode(s: &str) -> String {
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            let escaped = || bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
            match (bytes[i], escaped()) {
                (b'+', _) => out.push(b' '),
                (b'%', Some(b)) => {
                    out.push(b);
                    i += 2;
                }
                (b, _) => out.push(b),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    text.split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

/// The fields of a multipart body: (name, file name, bytes).
async fn multipart_fields(content_type: &str, body: Bytes) -> Option<Vec<(String, Option<String>, Bytes)>> {
    let request = Request::builder().header(header::CONTENT_TYPE, content_type).body(Body::from(body)).ok()?;
    let mut multipart = Multipart::from_request(request, &()).await.ok()?;
    let mut fields = Vec::new();
    while let Ok(Some(field)) = multipart.next_field().await {
        let name = field.name().unwrap_or_default().to_string();
        let file_name = field.file_name().map(str::to_string);
        fields.push((name, file_name, field.bytes().await.ok()?));
    }
    Some(fields)
}

/// Query parameters and body parameters merged into one JSON object; `None` when the body is
/// not what its content type says.
async fn parameters(query: &str, content_type: &str, body: Bytes) -> Option<Map<String, Value>> {
    let mut params = Map::new();
    let put_text = |params: &mut Map<String, Value>, key: String, value: String| {
        let parsed = if JSON_FIELDS.contains(&key.as_str()) { serde_json::from_str(&value).ok() } else { None };
        params.insert(key, parsed.unwrap_or(Value::String(value)));
    };
    for (key, value) in parse_urlencoded(query) {
        put_text(&mut params, key, value);
    }
    if content_type.starts_with("application/json") {
        if !body.iter().all(u8::is_ascii_whitespace) {
            match serde_json::from_slice::<Value>(&body).ok()? {
                Value::Object(object) => params.extend(object),
                _ => return None,
            }
        }
    } else if content_type.starts_with("multipart/form-data") {
        for (key, file_name, bytes) in multipart_fields(content_type, body).await? {
            if file_name.is_none() {
                put_text(&mut params, key, String::from_utf8_lossy(&bytes).into_owned());
            }
        }
    } else if let Ok(text) = std::str::from_utf8(&body) {
        for (key, value) in parse_urlencoded(text) {
            put_text(&mut params, key, value);
        }
    }
    Some(params)
}

/// A string parameter (numbers are accepted as their text, as Slack does with ts values).
fn text(p: &Map<String, Value>, name: &str) -> Option<String> {
    match p.get(name)? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn flag(p: &Map<String, Value>, name: &str) -> Option<bool> {
    match p.get(name)? {
        Value::Bool(b) => Some(*b),
        Value::String(s) => Some(s == "true" || s == "1"),
        Value::Number(n) => Some(n.as_u64() != Some(0)),
        _ => None,
    }
}

fn number(p: &Map<String, Value>, name: &str) -> Option<u64> {
    match p.get(name)? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// A JSON parameter, parsed from its text when it came as a string.
fn document(p: &Map<String, Value>, name: &str) -> Option<Value> {
    match p.get(name)? {
        Value::String(s) => serde_json::from_str(s).ok(),
        Value::Null => None,
        v => Some(v.clone()),
    }
}

/// A list parameter: a JSON array or a comma-separated string.
fn list(p: &Map<String, Value>, name: &str) -> Vec<String> {
    match p.get(name) {
        Some(Value::Array(items)) => items.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
        Some(Value::String(s)) => s.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect(),
        _ => Vec::new(),
    }
}

/// A ts as a sortable pair (seconds, microseconds).
fn ts_key(ts: &str) -> (u64, u64) {
    let (secs, frac) = ts.split_once('.').unwrap_or((ts, "0"));
    let micros = format!("{frac:0<6}");
    (secs.parse().unwrap_or(0), micros.get(..6).and_then(|m| m.parse().ok()).unwrap_or(0))
}

pub(crate) async fn handle(AxumState(shared): AxumState<Arc<Shared>>, request: Request) -> Response {
    let path = request.uri().path().to_string();
    // `{api_url}/{method}` with a trailing slash on the api url gives `/api//method`.
    let Some(method) = path.trim_start_matches('/').strip_prefix("api").map(|m| m.trim_start_matches('/').to_string()) else {
        return (StatusCode::NOT_FOUND, "Not Found").into_response();
    };
    let query = request.uri().query().unwrap_or_default().to_string();
    let content_type = request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.strip_prefix("Bearer ").unwrap_or(v).trim().to_string());
    let body = axum::body::to_bytes(request.into_body(), BODY_LIMIT).await.unwrap_or_default();
    let params = parameters(&query, &content_type, body).await;
    let logged = params.clone().map(Value::Object).unwrap_or(Value::Null);
    let call = shared.with(|s| {
        s.calls.push(ApiCall { method: method.clone(), params: logged, status: 0, ok: false, error: None, at: Instant::now() });
        s.calls.len() - 1
    });
    let (response, status, body) = respond(&shared, &method, bearer, params).await;
    shared.with(|s| {
        let call = &mut s.calls[call];
        call.status = status;
        call.ok = body.get("ok").and_then(Value::as_bool).unwrap_or(false);
        call.error = body.get("error").and_then(Value::as_str).map(str::to_string);
    });
    shared.changed.notify_waiters();
    response
}

/// A post over the enforced limits: Slack's 429 with `Retry-After` in whole seconds.
fn over_limit(shared: &Shared, method: &str, params: &Map<String, Value>) -> Option<SlFault> {
    if method != "chat.postMessage" {
        return None;
    }
    let channel = text(params, "channel").unwrap_or_default();
    let wait = shared.with(|s| s.limits.admit(&channel, false, Instant::now())).err()?;
    Some(SlFault::RateLimited { retry_after_secs: u64::try_from(wait.as_millis().div_ceil(1000)).unwrap_or(u64::MAX) })
}

/// The answer to one call, with its status (0 when cut) and JSON body for the log.
async fn respond(shared: &Shared, method: &str, bearer: Option<String>, params: Option<Map<String, Value>>) -> (Response, u16, Value) {
    let done = |status: StatusCode, body: Value| (answer(status, &body), status.as_u16(), body);
    if !METHODS.contains(&method) {
        return done(StatusCode::NOT_FOUND, error("unknown_method"));
    }
    let Some(params) = params else {
        return done(StatusCode::OK, error("invalid_json"));
    };
    let token = bearer.filter(|t| !t.is_empty()).or_else(|| text(&params, "token"));
    let refusal = shared.with(|s| {
        let wants_app_token = method == "apps.connections.open";
        match token.as_deref() {
            None => Some("not_authed"),
            Some(t) if t == s.app_token && !wants_app_token => Some("not_allowed_token_type"),
            Some(t) if t == s.bot_token && wants_app_token => Some("not_allowed_token_type"),
            Some(t) if t == s.app_token || t == s.bot_token => None,
            Some(_) => Some("invalid_auth"),
        }
    });
    if let Some(code) = refusal {
        return done(StatusCode::OK, error(code));
    }
    let (fault, latency) =
        shared.with(|s| (s.faults.fault_for(|scope| scope.matches(method)), s.faults.latency_for(|scope| scope.matches(method))));
    if let Some(d) = latency {
        tokio::select! {
            _ = tokio::time::sleep(d) => {}
            _ = shared.shutdown.wait() => {}
        }
    }
    let fault = fault.or_else(|| over_limit(shared, method, &params));
    match fault {
        Some(SlFault::RateLimited { retry_after_secs }) => (rate_limited(retry_after_secs), 429, error("ratelimited")),
        Some(SlFault::ServerError) => done(StatusCode::INTERNAL_SERVER_ERROR, error("fatal_error")),
        Some(SlFault::Refused(code)) => done(StatusCode::OK, error(&code)),
        Some(SlFault::CutBeforeApply) => (cut(), 0, Value::Null),
        Some(SlFault::CutAfterApply) => {
            let body = shared.with(|s| route(s, method, &params));
            (cut(), 0, body)
        }
        None => done(StatusCode::OK, shared.with(|s| route(s, method, &params))),
    }
}

fn route(s: &mut State, method: &str, p: &Map<String, Value>) -> Value {
    match method {
        "auth.test" => json!({
            "ok": true, "url": "https://fake.slack.com/", "team": "Fake Team", "user": "hermes", "team_id": s.team_id,
            "user_id": s.bot_user_id, "bot_id": s.bot_id, "is_enterprise_install": false,
        }),
        "apps.connections.open" => {
            let ticket = random_hex(32);
            s.tickets.insert(ticket.clone());
            json!({"ok": true, "url": format!("ws://{}/socket?ticket={ticket}", s.host)})
        }
        "chat.postMessage" => post_message(s, p),
        "chat.postEphemeral" => post_ephemeral(s, p),
        "chat.update" => update(s, p),
        "chat.delete" => delete(s, p),
        "conversations.info" => match text(p, "channel").and_then(|c| s.channels.get(&c)) {
            Some(channel) => json!({"ok": true, "channel": s.channel_json(channel)}),
            None => error("channel_not_found"),
        },
        "conversations.open" => open(s, p),
        "conversations.history" => history(s, p),
        "conversations.replies" => replies(s, p),
        "users.info" => match text(p, "user").and_then(|u| s.users.get(&u)) {
            Some(user) => json!({"ok": true, "user": s.user_json(user)}),
            None => error("user_not_found"),
        },
        "reactions.add" | "reactions.remove" => react(s, p, method == "reactions.add"),
        "files.getUploadURLExternal" => {
            let (Some(name), Some(length)) = (text(p, "filename"), number(p, "length")) else {
                return error("invalid_arguments");
            };
            let _ = length;
            let id = format!("F0{:08X}", s.next_id());
            s.uploads.insert(id.clone(), Upload { name, size: None, bytes: Vec::new(), mimetype: None });
            json!({"ok": true, "upload_url": format!("http://{}/upload/{id}", s.host), "file_id": id})
        }
        "files.completeUploadExternal" => complete_upload(s, p),
        "assistant.threads.setStatus" => match text(p, "channel_id") {
            Some(c) if s.channels.contains_key(&c) => json!({"ok": true}),
            _ => error("channel_not_found"),
        },
        _ => error("unknown_method"),
    }
}

/// The channel a post goes to: a channel id, or a user id (the bot's DM with that user).
fn target_channel(s: &mut State, p: &Map<String, Value>, name: &str) -> Option<String> {
    let id = text(p, name)?;
    if s.channels.contains_key(&id) {
        return Some(id);
    }
    s.users.contains_key(&id).then(|| s.dm_channel(&id))
}

fn display(s: &State, text: &str, mrkdwn_on: bool) -> (String, Vec<String>) {
    if !mrkdwn_on {
        return (mrkdwn::plain(text), Vec::new());
    }
    let users = &s.users;
    mrkdwn::render(text, &|id| users.get(id).map(|u: &SlUser| u.display_name.clone()))
}

fn blocks_problem(blocks: &Option<Value>) -> Option<&'static str> {
    match blocks {
        None => None,
        Some(Value::Array(items)) if items.len() <= 50 && items.iter().all(|b| b.get("type").is_some_and(Value::is_string)) => None,
        Some(_) => Some("invalid_blocks"),
    }
}

fn post_message(s: &mut State, p: &Map<String, Value>) -> Value {
    let Some(channel) = target_channel(s, p, "channel") else {
        return error("channel_not_found");
    };
    let text = text(p, "text").unwrap_or_default();
    let blocks = document(p, "blocks");
    if let Some(code) = blocks_problem(&blocks) {
        return error(code);
    }
    let has_blocks = blocks.as_ref().and_then(Value::as_array).is_some_and(|b| !b.is_empty());
    let has_attachments = document(p, "attachments").and_then(|a| a.as_array().map(|a| !a.is_empty())).unwrap_or(false);
    if text.trim().is_empty() && !has_blocks && !has_attachments {
        return error("no_text");
    }
    if text.chars().count() > MAX_TEXT {
        return error("msg_too_long");
    }
    let thread_ts = text_opt_ts(p, "thread_ts");
    if let Some(thread) = &thread_ts
        && !s.message_exists(&channel, thread)
    {
        return error("thread_not_found");
    }
    let (shown, styles) = display(s, &text, flag(p, "mrkdwn").unwrap_or(true));
    let ts = s.new_ts();
    let sent = SlSent {
        at: Instant::now(),
        ts: ts.clone(),
        channel: channel.clone(),
        thread_ts,
        text,
        shown,
        styles,
        blocks: blocks.unwrap_or(json!([])),
        edits: Vec::new(),
        deleted: false,
        files: Vec::new(),
        uploaded: Vec::new(),
        unfurl_links: flag(p, "unfurl_links"),
        unfurl_media: flag(p, "unfurl_media"),
        metadata: document(p, "metadata"),
    };
    let message = s.sent_json(&sent, true);
    s.sent.push(sent);
    json!({"ok": true, "channel": channel, "ts": ts, "message": message})
}

/// `chat.postEphemeral` (<https://api.slack.com/methods/chat.postEphemeral>): `channel`, `user`
/// (who alone sees it) and `text` or `blocks` are required, `thread_ts` optional. The answer
/// carries `message_ts`; the message joins no history. Errors as documented: `channel_not_found`,
/// `user_not_found`, `no_text`, `msg_too_long`, `invalid_blocks`.
fn post_ephemeral(s: &mut State, p: &Map<String, Value>) -> Value {
    let Some(channel) = text(p, "channel").filter(|c| s.channels.contains_key(c)) else {
        return error("channel_not_found");
    };
    let Some(user) = text(p, "user").filter(|u| s.users.contains_key(u)) else {
        return error("user_not_found");
    };
    let text = text(p, "text").unwrap_or_default();
    let blocks = document(p, "blocks");
    if let Some(code) = blocks_problem(&blocks) {
        return error(code);
    }
    if text.trim().is_empty() && blocks.as_ref().and_then(Value::as_array).is_none_or(|b| b.is_empty()) {
        return error("no_text");
    }
    if text.chars().count() > MAX_TEXT {
        return error("msg_too_long");
    }
    let ts = s.new_ts();
    s.ephemerals.push(SlEphemeral { at: Instant::now(), channel, user, thread_ts: text_opt_ts(p, "thread_ts"), text });
    json!({"ok": true, "message_ts": ts})
}

/// A ts parameter; an empty one counts as absent (clients send `thread_ts: ""` for "no thread").
fn text_opt_ts(p: &Map<String, Value>, name: &str) -> Option<String> {
    text(p, name).filter(|t| !t.trim().is_empty())
}

/// The index of the bot's live message `ts` in `channel`.
fn own_message(s: &State, p: &Map<String, Value>) -> Result<usize, Value> {
    let channel = text(p, "channel").ok_or_else(|| error("channel_not_found"))?;
    if !s.channels.contains_key(&channel) {
        return Err(error("channel_not_found"));
    }
    let ts = text(p, "ts").ok_or_else(|| error("message_not_found"))?;
    match s.sent.iter().position(|m| m.channel == channel && m.ts == ts && !m.deleted) {
        Some(i) => Ok(i),
        // Slack lets a bot edit and delete only its own messages.
        None if s.user_messages.iter().any(|m| m.channel == channel && m.ts == ts) => Err(error("cant_update_message")),
        None => Err(error("message_not_found")),
    }
}

fn update(s: &mut State, p: &Map<String, Value>) -> Value {
    let i = match own_message(s, p) {
        Ok(i) => i,
        Err(e) => return e,
    };
    let blocks = document(p, "blocks");
    if let Some(code) = blocks_problem(&blocks) {
        return error(code);
    }
    // An explicit `""` clears the text (allowed when blocks remain); an absent text keeps it.
    if let Some(Value::String(text)) = p.get("text").cloned() {
        if text.chars().count() > MAX_TEXT {
            return error("msg_too_long");
        }
        let blocks_left = blocks.as_ref().unwrap_or(&s.sent[i].blocks).as_array().is_some_and(|b| !b.is_empty());
        if text.trim().is_empty() && !blocks_left {
            return error("no_text");
        }
        if text != s.sent[i].text {
            let (shown, styles) = display(s, &text, flag(p, "mrkdwn").unwrap_or(true));
            let sent = &mut s.sent[i];
            let previous = std::mem::replace(&mut sent.text, text);
            sent.edits.push(previous);
            sent.shown = shown;
            sent.styles = styles;
        }
    }
    if let Some(blocks) = blocks {
        s.sent[i].blocks = blocks;
    }
    if let Some(metadata) = document(p, "metadata") {
        s.sent[i].metadata = Some(metadata);
    }
    let sent = &s.sent[i];
    let mut reply = json!({"ok": true, "channel": sent.channel, "ts": sent.ts, "text": sent.text, "message": s.sent_json(sent, true)});
    if let Some(thread_ts) = &sent.thread_ts {
        reply["thread_ts"] = json!(thread_ts);
    }
    reply
}

fn delete(s: &mut State, p: &Map<String, Value>) -> Value {
    match own_message(s, p) {
        Ok(i) => {
            s.sent[i].deleted = true;
            json!({"ok": true, "channel": s.sent[i].channel, "ts": s.sent[i].ts})
        }
        Err(e) if e["error"] == "cant_update_message" => error("cant_delete_message"),
        Err(e) => e,
    }
}

fn open(s: &mut State, p: &Map<String, Value>) -> Value {
    if let Some(channel) = text(p, "channel") {
        return match s.channels.get(&channel) {
            Some(c) => json!({"ok": true, "no_op": true, "already_open": true, "channel": s.channel_json(c)}),
            None => error("channel_not_found"),
        };
    }
    let users = list(p, "users");
    match users.as_slice() {
        [] => error("users_list_not_supplied"),
        [user] if s.users.contains_key(user) => {
            let existed = s.dm_channels.contains_key(user);
            let id = s.dm_channel(user);
            let channel = s.channels.get(&id).map(|c| s.channel_json(c)).unwrap_or(json!({"id": id}));
            json!({"ok": true, "no_op": existed, "already_open": existed, "channel": channel})
        }
        [_] => error("user_not_found"),
        // Group DMs are not modelled.
        _ => error("not_implemented"),
    }
}

/// Every live message of `channel` as (ts, thread_ts, JSON).
fn channel_messages(s: &State, channel: &str, with_metadata: bool) -> Vec<(String, Option<String>, Value)> {
    let users = s
        .user_messages
        .iter()
        .filter(|m| m.channel == channel)
        .map(|m: &UserMessage| (m.ts.clone(), m.thread_ts.clone(), s.user_message_json(m)));
    let bots = s
        .sent
        .iter()
        .filter(|m| m.channel == channel && !m.deleted)
        .map(|m| (m.ts.clone(), m.thread_ts.clone(), s.sent_json(m, with_metadata)));
    let mut all: Vec<_> = users.chain(bots).collect();
    all.sort_by_key(|(ts, _, _)| ts_key(ts));
    all
}

/// Top-level messages (and thread parents), newest first, as Slack's history answers.
fn history(s: &State, p: &Map<String, Value>) -> Value {
    let Some(channel) = text(p, "channel").filter(|c| s.channels.contains_key(c)) else {
        return error("channel_not_found");
    };
    let limit = number(p, "limit").filter(|l| *l > 0).unwrap_or(100).min(999) as usize;
    let inclusive = flag(p, "inclusive").unwrap_or(false);
    let oldest = text(p, "oldest").map(|t| ts_key(&t));
    let latest = text(p, "latest").map(|t| ts_key(&t));
    let in_range = |ts: &str| {
        let key = ts_key(ts);
        oldest.is_none_or(|o| if inclusive { key >= o } else { key > o })
            && latest.is_none_or(|l| if inclusive { key <= l } else { key < l })
    };
    let mut messages: Vec<Value> = channel_messages(s, &channel, flag(p, "include_all_metadata").unwrap_or(false))
        .into_iter()
        .filter(|(ts, thread, _)| thread.as_ref().is_none_or(|t| t == ts) && in_range(ts))
        .map(|(_, _, m)| m)
        .rev()
        .collect();
    let has_more = messages.len() > limit;
    messages.truncate(limit);
    json!({"ok": true, "messages": messages, "has_more": has_more, "pin_count": 0,
           "response_metadata": {"next_cursor": ""}})
}

/// A thread: its parent first, then the replies, oldest first.
fn replies(s: &State, p: &Map<String, Value>) -> Value {
    let Some(channel) = text(p, "channel").filter(|c| s.channels.contains_key(c)) else {
        return error("channel_not_found");
    };
    let Some(ts) = text(p, "ts").filter(|ts| s.message_exists(&channel, ts)) else {
        return error("thread_not_found");
    };
    let limit = number(p, "limit").filter(|l| *l > 0).unwrap_or(1000) as usize;
    let mut messages: Vec<Value> = channel_messages(s, &channel, flag(p, "include_all_metadata").unwrap_or(false))
        .into_iter()
        .filter(|(m_ts, thread, _)| *m_ts == ts || thread.as_deref() == Some(&ts))
        .map(|(_, _, m)| m)
        .collect();
    let has_more = messages.len() > limit;
    messages.truncate(limit);
    json!({"ok": true, "messages": messages, "has_more": has_more, "response_metadata": {"next_cursor": ""}})
}

fn react(s: &mut State, p: &Map<String, Value>, add: bool) -> Value {
    let Some(channel) = text(p, "channel").filter(|c| s.channels.contains_key(c)) else {
        return error("channel_not_found");
    };
    let Some(ts) = text(p, "timestamp").filter(|ts| s.message_exists(&channel, ts)) else {
        return error("message_not_found");
    };
    let Some(name) = text(p, "name").map(|n| n.trim_matches(':').to_string()) else {
        return error("invalid_name");
    };
    let key = (channel, ts, name);
    let present = s.reactions.iter().position(|r| *r == key);
    match (add, present) {
        (true, Some(_)) => error("already_reacted"),
        (true, None) => {
            s.reactions.push(key);
            json!({"ok": true})
        }
        (false, Some(i)) => {
            s.reactions.remove(i);
            json!({"ok": true})
        }
        (false, None) => error("no_reaction"),
    }
}

fn complete_upload(s: &mut State, p: &Map<String, Value>) -> Value {
    let Some(Value::Array(files)) = document(p, "files") else {
        return error("invalid_arguments");
    };
    let mut done = Vec::new();
    let mut uploaded = Vec::new();
    for file in &files {
        let id = file.get("id").and_then(Value::as_str).unwrap_or_default();
        let Some(upload) = s.uploads.get(id) else {
            return error("file_not_found");
        };
        let Some(size) = upload.size else {
            // Announced but its bytes never arrived.
            return error("invalid_arguments");
        };
        let title = file.get("title").and_then(Value::as_str).unwrap_or(&upload.name).to_string();
        uploaded.push(SlFile { name: upload.name.clone(), mimetype: upload.mimetype.clone(), bytes: upload.bytes.clone() });
        done.push((id.to_string(), upload.name.clone(), title, size));
    }
    if done.is_empty() {
        return error("invalid_arguments");
    }
    let channel = match text(p, "channel_id") {
        Some(c) if s.channels.contains_key(&c) => Some(c),
        Some(_) => return error("channel_not_found"),
        None => None,
    };
    let thread_ts = text_opt_ts(p, "thread_ts");
    if let (Some(channel), Some(thread)) = (&channel, &thread_ts)
        && !s.message_exists(channel, thread)
    {
        return error("thread_not_found");
    }
    if let Some(channel) = channel {
        let comment = text(p, "initial_comment").unwrap_or_default();
        let (shown, styles) = display(s, &comment, true);
        let ts = s.new_ts();
        s.file_ids.insert(ts.clone(), done.iter().map(|(id, ..)| id.clone()).collect());
        s.sent.push(SlSent {
            at: Instant::now(),
            ts,
            channel,
            thread_ts,
            text: comment,
            shown,
            styles,
            blocks: json!([]),
            edits: Vec::new(),
            deleted: false,
            files: done.iter().map(|(_, name, _, size)| (name.clone(), *size)).collect(),
            uploaded,
            unfurl_links: None,
            unfurl_media: None,
            metadata: None,
        });
    }
    let files: Vec<Value> =
        done.iter().map(|(id, name, title, size)| json!({"id": id, "name": name, "title": title, "size": size})).collect();
    json!({"ok": true, "files": files})
}

/// `POST /upload/<file_id>`: the file's bytes, raw or as the one file part of a multipart body.
pub(crate) async fn upload(AxumState(shared): AxumState<Arc<Shared>>, Path(file_id): Path<String>, request: Request) -> Response {
    let content_type = request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let body = axum::body::to_bytes(request.into_body(), BODY_LIMIT).await.unwrap_or_default();
    // The multipart part's type, else the request's.
    let (bytes, mimetype) = if content_type.starts_with("multipart/form-data") {
        let parts = multipart_parts(&content_type, body).await;
        let file = parts.iter().find(|p| p.file_name.is_some()).or(parts.first());
        file.map(|p| (p.bytes.clone(), p.content_type.clone())).unwrap_or_default()
    } else {
        (body.to_vec(), Some(content_type.clone()).filter(|t| !t.is_empty()))
    };
    let size = bytes.len();
    let known = shared.with(|s| {
        let known = match s.uploads.get_mut(&file_id) {
            Some(upload) => {
                upload.size = Some(size);
                upload.bytes = bytes;
                upload.mimetype = mimetype;
                true
            }
            None => false,
        };
        let status = if known { 200 } else { 404 };
        s.calls.push(ApiCall {
            method: "upload".to_string(),
            params: json!({"file_id": file_id, "size": size}),
            status,
            ok: known,
            error: (!known).then(|| "file_not_found".to_string()),
            at: Instant::now(),
        });
        known
    });
    shared.changed.notify_waiters();
    if known { (StatusCode::OK, format!("OK - {size}")).into_response() } else { (StatusCode::NOT_FOUND, "Not Found").into_response() }
}

/// One part of a multipart body, with its own type.
struct Part {
    file_name: Option<String>,
    content_type: Option<String>,
    bytes: Vec<u8>,
}

async fn multipart_parts(content_type: &str, body: Bytes) -> Vec<Part> {
    let Ok(request) = Request::builder().header(header::CONTENT_TYPE, content_type).body(Body::from(body)) else { return Vec::new() };
    let Ok(mut multipart) = Multipart::from_request(request, &()).await else { return Vec::new() };
    let mut parts = Vec::new();
    while let Ok(Some(field)) = multipart.next_field().await {
        let file_name = field.file_name().map(str::to_string);
        let content_type = field.content_type().map(str::to_string);
        let Ok(bytes) = field.bytes().await else { break };
        parts.push(Part { file_name, content_type, bytes: bytes.to_vec() });
    }
    parts
}

/// `GET /files-pri/<team>-<file id>/download/<name>`: a user's file, to a bearer of the bot
/// token only (401 otherwise), counted chunk by chunk as the client reads it.
pub(crate) async fn private_file(AxumState(shared): AxumState<Arc<Shared>>, Path(path): Path<String>, request: Request) -> Response {
    let presented = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let file_id = path.split('/').next().and_then(|first| first.rsplit('-').next()).unwrap_or_default().to_string();
    let found = shared.with(|s| {
        s.file_requests += 1;
        if presented != format!("Bearer {}", s.bot_token) {
            return Err(StatusCode::UNAUTHORIZED);
        }
        s.user_files.get(&file_id).cloned().ok_or(StatusCode::NOT_FOUND)
    });
    shared.changed.notify_waiters();
    let bytes = match found {
        Ok(bytes) => bytes,
        Err(status) => return (status, "").into_response(),
    };
    crate::media::counted_download(bytes, 16 * 1024, move |n| shared.with(|s| s.file_bytes_served += n))
}

/// `POST /response/<id>`: a message sent through an interaction's `response_url`.
pub(crate) async fn response_url(AxumState(shared): AxumState<Arc<Shared>>, Path(id): Path<String>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.with(|s| s.responses.push((id, body)));
    shared.changed.notify_waiters();
    answer(StatusCode::OK, &json!({"ok": true}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urlencoded_decodes_plus_and_percent() {
        let pairs = parse_urlencoded("text=a+b%2Ac&blocks=%5B%5D&empty=&odd=%zz&tail=%4");
        assert_eq!(pairs[0], ("text".to_string(), "a b*c".to_string()));
        assert_eq!(pairs[1], ("blocks".to_string(), "[]".to_string()));
        assert_eq!(pairs[2], ("empty".to_string(), String::new()));
        assert_eq!(pairs[3], ("odd".to_string(), "%zz".to_string()));
        assert_eq!(pairs[4], ("tail".to_string(), "%4".to_string()));
    }

    #[test]
    fn ts_keys_order_numerically() {
        assert!(ts_key("1700000000.000100") < ts_key("1700000000.000101"));
        assert!(ts_key("999.9") < ts_key("1000.0"));
        assert_eq!(ts_key("0"), (0, 0));
    }
}
