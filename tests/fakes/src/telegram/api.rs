//! The HTTP surface: `/bot<token>/<method>` (any case; GET or POST; JSON, form, multipart or query
//! parameters) and `/file/bot<token>/<path>`, with faults applied before a method runs.

use super::html::{Parsed, parse_html, parse_markdown};
use super::media::{MAX_DOWNLOAD_BYTES, SentFile};
use super::state::{ApiCall, Fault, SentKind, SentMessage, Shared, State, now_unix};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Multipart, Path, Request, State as AxumState};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MAX_TEXT: usize = 4096;
const MAX_CAPTION: usize = 1024;

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new().route("/{bot}/{method}", any(method)).route("/file/{bot}/{*path}", get(download)).with_state(shared)
}

type Params = Map<String, Value>;

/// A file part of a multipart request.
struct Upload {
    field: String,
    file_name: String,
    bytes: Vec<u8>,
}

fn reply(status: StatusCode, body: Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

fn ok(result: Value) -> Response {
    reply(StatusCode::OK, json!({"ok": true, "result": result}))
}

fn error(code: u16, description: &str) -> Response {
    reply(
        StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST),
        json!({"ok": false, "error_code": code, "description": description}),
    )
}

fn bad_request(description: &str) -> Response {
    error(400, description)
}

/// A response whose body breaks off: the client sees the connection die mid-answer.
fn reset() -> Response {
    let stream = futures::stream::once(async { Err::<Bytes, std::io::Error>(std::io::Error::other("connection reset by the fake")) });
    Response::builder().status(StatusCode::OK).header(header::CONTENT_LENGTH, "64").body(Body::from_stream(stream)).unwrap_or_default()
}

async fn read_params(request: Request) -> Result<(Params, Vec<Upload>), Response> {
    let mut params = Params::new();
    if let Some(query) = request.uri().query() {
        for (k, v) in url_decode_pairs(query) {
            params.insert(k, Value::String(v));
        }
    }
    let content_type = request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let mut uploads = Vec::new();
    if content_type.starts_with("multipart/form-data") {
        let mut multipart = Multipart::from_request(request, &()).await.map_err(|e| bad_request(&format!("Bad Request: {e}")))?;
        while let Ok(Some(field)) = multipart.next_field().await {
            let name = field.name().unwrap_or_default().to_string();
            let file_name = field.file_name().map(str::to_string);
            let bytes = field.bytes().await.map_err(|e| bad_request(&format!("Bad Request: {e}")))?;
            match file_name {
                Some(file_name) => uploads.push(Upload { field: name, file_name, bytes: bytes.to_vec() }),
                None => {
                    params.insert(name, Value::String(String::from_utf8_lossy(&bytes).into_owned()));
                }
            }
        }
        return Ok((params, uploads));
    }
    let body = axum::body::to_bytes(request.into_body(), 64 * 1024 * 1024).await.map_err(|e| bad_request(&format!("Bad Request: {e}")))?;
    if body.is_empty() {
        return Ok((params, uploads));
    }
    if content_type.starts_with("application/json") {
        match serde_json::from_slice::<Value>(&body) {
            Ok(Value::Object(map)) => params.extend(map),
            _ => return Err(bad_request("Bad Request: invalid JSON in the request body")),
        }
    } else {
        for (k, v) in url_decode_pairs(&String::from_utf8_lossy(&body)) {
            params.insert(k, Value::String(v));
        }
    }
    Ok((params, uploads))
}

fn url_decode_pairs(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(hi), Some(lo)) => {
                    out.push(hi * 16 + lo);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

fn int(params: &Params, key: &str) -> Option<i64> {
    match params.get(key)? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn string(params: &Params, key: &str) -> Option<String> {
    match params.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// A parameter that is JSON, sent either as JSON or as a JSON-encoded string (form, multipart).
fn json_param(params: &Params, key: &str) -> Option<Value> {
    match params.get(key)? {
        Value::String(s) => serde_json::from_str(s).ok(),
        Value::Null => None,
        other => Some(other.clone()),
    }
}

fn boolean(params: &Params, key: &str) -> bool {
    match params.get(key) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s == "true" || s == "1",
        _ => false,
    }
}

async fn method(AxumState(shared): AxumState<Arc<Shared>>, Path((bot, method)): Path<(String, String)>, request: Request) -> Response {
    let method = method.to_ascii_lowercase();
    let (params, uploads) = match read_params(request).await {
        Ok(p) => p,
        Err(response) => return response,
    };
    let authorized = shared.with(|s| bot.strip_prefix("bot") == Some(s.token.as_str()));
    if !authorized {
        return error(401, "Unauthorized");
    }
    // Logged on arrival (a long poll answers much later); the status is filled in when answered.
    let call = shared.with(|s| {
        s.calls.push(ApiCall { method: method.clone(), params: Value::Object(params.clone()), status: 0, at: Instant::now() });
        s.calls.len() - 1
    });
    let (fault, latency) =
        shared.with(|s| (s.faults.fault_for(|scope| scope.matches(&method)), s.faults.latency_for(|scope| scope.matches(&method))));
    if let Some(d) = latency {
        tokio::time::sleep(d).await;
    }
    let fault = fault.or_else(|| flood_limited(&shared, &method, &params));
    let was_reset = matches!(fault, Some(Fault::Reset));
    let response = match fault {
        Some(Fault::RateLimited { retry_after }) => reply(
            StatusCode::TOO_MANY_REQUESTS,
            json!({"ok": false, "error_code": 429, "description": format!("Too Many Requests: retry after {retry_after}"),
                   "parameters": {"retry_after": retry_after}}),
        ),
        Some(Fault::ServerError(code)) => {
            let reason = StatusCode::from_u16(code).ok().and_then(|s| s.canonical_reason()).unwrap_or("Internal Server Error");
            error(code, reason)
        }
        Some(Fault::Reset) => reset(),
        Some(Fault::Conflict) => {
            error(409, "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running")
        }
        Some(Fault::BadRequest(description)) => bad_request(&description),
        None if method == "getupdates" => get_updates(&shared, &params).await,
        None => shared.with(|s| dispatch(s, &method, &params, uploads)),
    };
    let status = if was_reset { 0 } else { response.status().as_u16() };
    shared.with(|s| s.calls[call].status = status);
    shared.changed.notify_waiters();
    response
}

/// Sends over the enforced flood limits get Telegram's 429 with a whole number of seconds to wait.
fn flood_limited(shared: &Shared, method: &str, params: &Params) -> Option<Fault> {
    const SENDS: [&str; 5] = ["sendmessage", "sendphoto", "senddocument", "sendvoice", "sendaudio"];
    if !SENDS.contains(&method) {
        return None;
    }
    let chat = int(params, "chat_id").unwrap_or_default();
    let wait = shared.with(|s| s.limits.admit(&chat.to_string(), chat < 0, Instant::now())).err()?;
    Some(Fault::RateLimited { retry_after: u32::try_from(wait.as_millis().div_ceil(1000)).unwrap_or(u32::MAX) })
}

async fn get_updates(shared: &Shared, params: &Params) -> Response {
    hold_while_stalled(shared).await;
    let offset = int(params, "offset").unwrap_or(0);
    let limit = int(params, "limit").unwrap_or(100).clamp(1, 100) as usize;
    let timeout = Duration::from_secs(int(params, "timeout").unwrap_or(0).clamp(0, 50) as u64);
    let allowed = json_param(params, "allowed_updates").and_then(|v| serde_json::from_value::<Vec<String>>(v).ok());
    let generation = shared.with(|s| {
        if let Some(kinds) = allowed {
            s.allowed_updates = Some(kinds);
        }
        s.poll_generation += 1;
        s.active_polls += 1;
        s.poll_generation
    });
    // Wake an older poll so it can see it was superseded.
    shared.updates.notify_waiters();
    let deadline = tokio::time::Instant::now() + timeout;
    let result = loop {
        let notified = shared.updates.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let outcome = shared.with(|s| {
            if s.poll_generation != generation {
                return Some(Err(()));
            }
            if !s.webhook_url.is_empty() {
                return Some(Ok(None));
            }
            let updates = s.take_updates(offset, limit);
            (!updates.is_empty() || timeout.is_zero()).then_some(Ok(Some(updates)))
        });
        match outcome {
            Some(Err(())) => {
                break error(409, "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running");
            }
            Some(Ok(None)) => {
                break error(
                    409,
                    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
                );
            }
            Some(Ok(Some(updates))) => break ok(Value::Array(updates)),
            None => {}
        }
        tokio::select! {
            _ = &mut notified => {}
            _ = tokio::time::sleep_until(deadline) => {
                let updates = shared.with(|s| if s.poll_generation == generation { Some(s.take_updates(offset, limit)) } else { None });
                break match updates {
                    Some(u) => ok(Value::Array(u)),
                    None => error(409, "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"),
                };
            }
            _ = shared.shutdown.wait() => break ok(json!([])),
        }
    };
    hold_while_stalled(shared).await;
    shared.with(|s| s.active_polls = s.active_polls.saturating_sub(1));
    result
}

/// Hold a poll while [`super::FakeTelegram::stall_polls`] is on (or until the fake shuts down).
async fn hold_while_stalled(shared: &Shared) {
    loop {
        let released = shared.updates.notified();
        tokio::pin!(released);
        released.as_mut().enable();
        if !shared.with(|s| s.polls_stalled) {
            return;
        }
        tokio::select! {
            _ = &mut released => {}
            _ = shared.shutdown.wait() => return,
        }
    }
}

/// Whether the request switched link previews off.
fn link_preview_disabled(params: &Params) -> bool {
    let options = json_param(params, "link_preview_options");
    options.as_ref().and_then(|o| o.get("is_disabled")).and_then(Value::as_bool).unwrap_or(false)
        || boolean(params, "disable_web_page_preview")
}

/// A text parameter as Telegram keeps it: markup parsed, then cleaned ([`super::clean`]).
fn parse_text(text: &str, params: &Params) -> Result<Parsed, String> {
    parse_markup(text, params).map(super::clean::clean)
}

fn parse_markup(text: &str, params: &Params) -> Result<Parsed, String> {
    match string(params, "parse_mode").as_deref() {
        Some("HTML") | Some("html") => parse_html(text),
        Some("MarkdownV2") => parse_markdown(text, true),
        Some("Markdown") => parse_markdown(text, false),
        Some(other) if !other.is_empty() => Err(format!("Bad Request: unsupported parse_mode \"{other}\"")),
        _ => Ok(Parsed {
            text: text.to_string(),
            entities: json_param(params, "entities").and_then(|v| v.as_array().cloned()).unwrap_or_default(),
        }),
    }
}

fn dispatch(s: &mut State, method: &str, params: &Params, uploads: Vec<Upload>) -> Response {
    match method {
        "getme" => ok(s.bot_user_json(true)),
        "getwebhookinfo" => ok(super::webhook::info(s)),
        "deletewebhook" => {
            super::webhook::delete(s, boolean(params, "drop_pending_updates"));
            ok(json!(true))
        }
        "setwebhook" => {
            let allowed = json_param(params, "allowed_updates").and_then(|v| serde_json::from_value::<Vec<String>>(v).ok());
            let set = super::webhook::Set {
                url: string(params, "url").unwrap_or_default(),
                secret_token: string(params, "secret_token"),
                allowed_updates: allowed,
                drop_pending_updates: boolean(params, "drop_pending_updates"),
            };
            match super::webhook::set(s, set) {
                Ok(()) => ok(json!(true)),
                Err(description) => bad_request(description),
            }
        }
        // A private chat whose user blocked the bot: Telegram answers 403 to every send.
        "sendmessage" | "senddocument" | "sendphoto" | "sendvoice" | "sendaudio"
            if int(params, "chat_id").is_some_and(|c| s.blocked_by.contains(&c)) =>
        {
            error(403, "Forbidden: bot was blocked by the user")
        }
        // The user's privacy settings refuse voice messages (Premium users may set this).
        "sendvoice" if int(params, "chat_id").is_some_and(|c| s.voice_forbidden.contains(&c)) => {
            bad_request("Bad Request: VOICE_MESSAGES_FORBIDDEN")
        }
        "sendmessage" => send_message(s, params),
        "editmessagetext" => edit_message(s, params),
        "deletemessage" => {
            let (Some(chat), Some(id)) = (int(params, "chat_id"), int(params, "message_id")) else {
                return bad_request("Bad Request: message identifier is not specified");
            };
            match s.sent_index.get(&(chat, id)).copied() {
                Some(i) if !s.sent[i].deleted => {
                    s.sent[i].deleted = true;
                    ok(json!(true))
                }
                _ if s.messages.remove(&(chat, id)).is_some() => ok(json!(true)),
                _ => bad_request("Bad Request: message to delete not found"),
            }
        }
        "sendchataction" => {
            let Some(chat) = int(params, "chat_id") else { return bad_request("Bad Request: chat_id is empty") };
            if !s.chats.contains_key(&chat) {
                return bad_request("Bad Request: chat not found");
            }
            s.chat_actions.entry(chat).or_default().push(string(params, "action").unwrap_or_default());
            ok(json!(true))
        }
        "setmycommands" => {
            let commands = json_param(params, "commands").and_then(|v| v.as_array().cloned()).unwrap_or_default();
            let mut parsed = Vec::new();
            for c in &commands {
                let name = c.get("command").and_then(Value::as_str).unwrap_or_default();
                let description = c.get("description").and_then(Value::as_str).unwrap_or_default();
                let valid_name =
                    !name.is_empty() && name.len() <= 32 && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
                if !valid_name {
                    return bad_request("Bad Request: BOT_COMMAND_INVALID");
                }
                if description.is_empty() || description.chars().count() > 256 {
                    return bad_request("Bad Request: BOT_COMMAND_DESCRIPTION_INVALID");
                }
                parsed.push((name.to_string(), description.to_string()));
            }
            s.commands = parsed;
            ok(json!(true))
        }
        "deletemycommands" => {
            s.commands.clear();
            ok(json!(true))
        }
        "getmycommands" => ok(Value::Array(s.commands.iter().map(|(c, d)| json!({"command": c, "description": d})).collect())),
        "answercallbackquery" => {
            let id = string(params, "callback_query_id").unwrap_or_default();
            s.callback_texts.push((id.clone(), string(params, "text")));
            s.answered_callbacks.push(id);
            ok(json!(true))
        }
        "getfile" => get_file(s, params),
        "getchat" => match int(params, "chat_id").and_then(|c| s.chats.get(&c)) {
            Some(chat) => {
                let mut full = chat.json.clone();
                full["accent_color_id"] = json!(0);
                full["max_reaction_count"] = json!(11);
                ok(full)
            }
            None => bad_request("Bad Request: chat not found"),
        },
        "senddocument" | "sendphoto" | "sendvoice" | "sendaudio" => send_file(s, method, params, uploads),
        _ => error(404, "Not Found"),
    }
}

/// Checks shared by every kind of send: the chat and the topic exist.
/// Errors are Telegram's descriptions, answered as 400.
fn check_target(s: &State, params: &Params) -> Result<(i64, Option<i64>), &'static str> {
    let Some(chat) = int(params, "chat_id") else { return Err("Bad Request: chat_id is empty") };
    let Some(info) = s.chats.get(&chat) else { return Err("Bad Request: chat not found") };
    let thread = int(params, "message_thread_id");
    if let Some(t) = thread
        && !info.topics.contains(&t)
    {
        return Err("Bad Request: message thread not found");
    }
    Ok((chat, thread))
}

fn reply_target(s: &State, chat: i64, params: &Params) -> Result<Option<i64>, &'static str> {
    let reply = json_param(params, "reply_parameters")
        .and_then(|r| {
            r.get("message_id")
                .and_then(Value::as_i64)
                .map(|id| (id, r.get("allow_sending_without_reply").and_then(Value::as_bool).unwrap_or(false)))
        })
        .or_else(|| int(params, "reply_to_message_id").map(|id| (id, boolean(params, "allow_sending_without_reply"))));
    match reply {
        Some((id, _)) if s.messages.contains_key(&(chat, id)) => Ok(Some(id)),
        Some((_, true)) | None => Ok(None),
        Some(_) => Err("Bad Request: message to be replied not found"),
    }
}

fn bot_message_json(s: &State, m: &SentMessage) -> Value {
    let chat = s.chats.get(&m.chat_id).map(|c| c.json.clone()).unwrap_or(json!({"id": m.chat_id, "type": "private", "first_name": "?"}));
    let mut message = json!({"message_id": m.message_id, "date": now_unix(), "chat": chat, "from": s.bot_user_json(false)});
    match &m.kind {
        SentKind::Text => message["text"] = json!(m.text),
        SentKind::Document { file_name, len } => {
            message["document"] = json!({"file_id": format!("sent-{}", m.message_id), "file_unique_id": format!("s{}", m.message_id), "file_name": file_name, "file_size": len})
        }
        SentKind::Photo { len } => {
            message["photo"] = json!([{"file_id": format!("sent-{}", m.message_id), "file_unique_id": format!("s{}", m.message_id), "width": 800, "height": 600, "file_size": len}])
        }
        SentKind::Voice { len, duration } => {
            message["voice"] = json!({"file_id": format!("sent-{}", m.message_id), "file_unique_id": format!("s{}", m.message_id),
                "duration": duration.unwrap_or(0), "mime_type": "audio/ogg", "file_size": len})
        }
        SentKind::Audio { file_name, len } => {
            message["audio"] = json!({"file_id": format!("sent-{}", m.message_id), "file_unique_id": format!("s{}", m.message_id),
                "duration": 0, "file_name": file_name, "file_size": len})
        }
    }
    if !m.entities.is_empty() {
        message[if m.kind == SentKind::Text { "entities" } else { "caption_entities" }] = json!(m.entities);
    }
    if let Some(c) = &m.caption {
        message["caption"] = json!(c);
    }
    if let Some(t) = m.thread_id {
        message["message_thread_id"] = json!(t);
        message["is_topic_message"] = json!(true);
    }
    if let Some(r) = m.reply_to.and_then(|r| s.messages.get(&(m.chat_id, r))) {
        message["reply_to_message"] = r.clone();
    }
    if let Some(markup) = &m.reply_markup {
        message["reply_markup"] = markup.clone();
    }
    if !m.edits.is_empty() {
        message["edit_date"] = json!(now_unix());
    }
    message
}

/// Keep a message the bot just sent and answer with it.
fn store_sent(s: &mut State, sent: SentMessage) -> Response {
    let json = bot_message_json(s, &sent);
    s.messages.insert((sent.chat_id, sent.message_id), json.clone());
    s.sent_index.insert((sent.chat_id, sent.message_id), s.sent.len());
    s.sent.push(sent);
    ok(json)
}

/// A message's text parsed and checked like Telegram does; `too_long` is Telegram's wording for
/// the method (sends and edits word it differently).
fn parse_message_text(raw: &str, params: &Params, too_long: &str) -> Result<Parsed, Box<Response>> {
    let parsed = parse_text(raw, params).map_err(|e| Box::new(bad_request(&e)))?;
    if parsed.text.trim().is_empty() {
        return Err(Box::new(bad_request("Bad Request: message text is empty")));
    }
    if parsed.text.encode_utf16().count() > MAX_TEXT {
        return Err(Box::new(bad_request(too_long)));
    }
    Ok(parsed)
}

fn send_message(s: &mut State, params: &Params) -> Response {
    let (chat, thread) = match check_target(s, params) {
        Ok(t) => t,
        Err(e) => return bad_request(e),
    };
    let raw = string(params, "text").unwrap_or_default();
    let parsed = match parse_message_text(&raw, params, "Bad Request: message is too long") {
        Ok(p) => p,
        Err(response) => return *response,
    };
    let reply_to = match reply_target(s, chat, params) {
        Ok(r) => r,
        Err(e) => return bad_request(e),
    };
    let message_id = s.next_message_id(chat);
    let sent = SentMessage {
        at: Instant::now(),
        chat_id: chat,
        message_id,
        thread_id: thread,
        text: parsed.text,
        raw_text: raw,
        parse_mode: string(params, "parse_mode"),
        entities: parsed.entities,
        reply_to,
        reply_markup: json_param(params, "reply_markup"),
        edits: Vec::new(),
        deleted: false,
        kind: SentKind::Text,
        caption: None,
        link_preview_disabled: link_preview_disabled(params),
    };
    store_sent(s, sent)
}

fn edit_message(s: &mut State, params: &Params) -> Response {
    let (Some(chat), Some(id)) = (int(params, "chat_id"), int(params, "message_id")) else {
        return bad_request("Bad Request: message identifier is not specified");
    };
    let Some(index) = s.sent_index.get(&(chat, id)).copied().filter(|i| !s.sent[*i].deleted) else {
        return if s.messages.contains_key(&(chat, id)) {
            bad_request("Bad Request: message can't be edited")
        } else {
            bad_request("Bad Request: message to edit not found")
        };
    };
    let raw = string(params, "text").unwrap_or_default();
    let parsed = match parse_message_text(&raw, params, "Bad Request: MESSAGE_TOO_LONG") {
        Ok(p) => p,
        Err(response) => return *response,
    };
    let markup = json_param(params, "reply_markup");
    let current = &s.sent[index];
    if current.text == parsed.text && current.entities == parsed.entities && current.reply_markup == markup {
        return bad_request(
            "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
        );
    }
    let message = &mut s.sent[index];
    let previous = std::mem::replace(&mut message.text, parsed.text);
    message.edits.push(previous);
    message.entities = parsed.entities;
    message.raw_text = raw;
    message.link_preview_disabled = link_preview_disabled(params);
    message.parse_mode = string(params, "parse_mode");
    message.reply_markup = markup;
    let snapshot = message.clone();
    let json = bot_message_json(s, &snapshot);
    s.messages.insert((chat, id), json.clone());
    ok(json)
}

fn send_file(s: &mut State, method: &str, params: &Params, uploads: Vec<Upload>) -> Response {
    let (chat, thread) = match check_target(s, params) {
        Ok(t) => t,
        Err(e) => return bad_request(e),
    };
    let field = match method {
        "sendphoto" => "photo",
        "sendvoice" => "voice",
        "sendaudio" => "audio",
        _ => "document",
    };
    let Some(upload) =
        uploads.into_iter().find(|u| u.field == field || params.get(field).and_then(Value::as_str).is_some_and(|v| v.ends_with(&u.field)))
    else {
        return bad_request(&format!("Bad Request: there is no {field} in the request"));
    };
    let caption_raw = string(params, "caption");
    let caption = match caption_raw.as_deref().map(|c| parse_text(c, params)).transpose() {
        Ok(c) => c,
        Err(e) => return bad_request(&e),
    };
    if caption.as_ref().is_some_and(|c| c.text.encode_utf16().count() > MAX_CAPTION) {
        return bad_request("Bad Request: message caption is too long");
    }
    let reply_to = match reply_target(s, chat, params) {
        Ok(r) => r,
        Err(e) => return bad_request(e),
    };
    let message_id = s.next_message_id(chat);
    let len = upload.bytes.len();
    let kind = match method {
        "sendphoto" => SentKind::Photo { len },
        "sendvoice" => SentKind::Voice { len, duration: int(params, "duration").and_then(|d| u32::try_from(d).ok()) },
        "sendaudio" => SentKind::Audio { file_name: upload.file_name.clone(), len },
        _ => SentKind::Document { file_name: upload.file_name.clone(), len },
    };
    s.uploads.push(SentFile { chat_id: chat, message_id, method: method.to_string(), file_name: upload.file_name, bytes: upload.bytes });
    let sent = SentMessage {
        at: Instant::now(),
        chat_id: chat,
        message_id,
        thread_id: thread,
        text: caption.as_ref().map(|c| c.text.clone()).unwrap_or_default(),
        raw_text: caption_raw.clone().unwrap_or_default(),
        parse_mode: string(params, "parse_mode"),
        entities: caption.as_ref().map(|c| c.entities.clone()).unwrap_or_default(),
        reply_to,
        reply_markup: json_param(params, "reply_markup"),
        edits: Vec::new(),
        deleted: false,
        kind,
        caption: caption.map(|c| c.text),
        link_preview_disabled: false,
    };
    store_sent(s, sent)
}

/// getFile: "bots can download files of up to 20MB in size"; a larger one is refused with
/// Telegram's own words.
fn get_file(s: &State, params: &Params) -> Response {
    let id = string(params, "file_id").unwrap_or_default();
    match s.files.get(&id) {
        Some(file) if file.stated_size > MAX_DOWNLOAD_BYTES => bad_request("Bad Request: file is too big"),
        Some(file) => ok(json!({"file_id": id, "file_unique_id": file.unique_id, "file_size": file.stated_size, "file_path": file.path})),
        None => bad_request("Bad Request: invalid file_id"),
    }
}

/// A download streams the file in chunks, counting each chunk as it is sent: a client that stops
/// reading stops the count.
async fn download(AxumState(shared): AxumState<Arc<Shared>>, Path((bot, path)): Path<(String, String)>) -> Response {
    const CHUNK: usize = 16 * 1024;
    let found = shared.with(|s| {
        if bot.strip_prefix("bot") != Some(s.token.as_str()) {
            return Err(StatusCode::UNAUTHORIZED);
        }
        let bytes = s.files.values().find(|f| f.path == path).map(|f| f.bytes.clone()).ok_or(StatusCode::NOT_FOUND)?;
        s.downloads.push(path.clone());
        Ok(bytes)
    });
    shared.changed.notify_waiters();
    match found {
        Ok(bytes) => crate::media::counted_download(bytes, CHUNK, move |n| shared.with(|s| s.bytes_served += n)),
        Err(status) => status.into_response(),
    }
}
