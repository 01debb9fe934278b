//! `/voice [on|off|only|status]`: this session's answers also arrive as voice notes (`on`), or
//! only as voice notes with code still written (`only`), or written only (`off`). Stored with the
//! session's overrides, so it lasts until `/new` starts another session. Where the platform has
//! no voice notes the spoken answer arrives as an audio file; where it takes no files at all,
//! the command says so instead of promising what cannot happen.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::gateway::delivery::spoken::{OVERRIDE_KEY, VoiceMode};
use crate::store::Routes;
use async_trait::async_trait;
use hermes_adapter::{Capabilities, SessionSource};
use serde_json::json;

pub(super) struct VoiceCommand;

static SPEC: CommandSpec = CommandSpec {
    name: "voice",
    aliases: &[],
    args_hint: "[on|off|only|status]",
    description: "Answer with voice notes too (on), instead of text (only), or not (off)",
    runs_mid_turn: true,
};

#[async_trait]
impl SlashCommand for VoiceCommand {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, args: &str) -> CommandOutcome {
        let caps = ctx.handles.turns.deliverer.adapter(ctx.event.source.platform.as_str()).map(|a| a.capabilities().clone());
        let session = Session { routes: ctx.handles.routes.as_ref(), key: ctx.session_key, source: &ctx.event.source };
        CommandOutcome::Reply(voice(session, &ctx.handles.models.default_model().model, caps.as_ref(), args).await)
    }
}

/// The conversation the command is typed in.
struct Session<'a> {
    routes: &'a dyn Routes,
    key: &'a str,
    source: &'a SessionSource,
}

/// `model`: the model a session started by this command talks to.
async fn voice(session: Session<'_>, model: &str, caps: Option<&Capabilities>, args: &str) -> String {
    let Session { routes, key: session_key, source } = session;
    let route = match routes.route_get(session_key).await {
        Ok(route) => route,
        Err(e) => return format!("⚠️ The session store is unavailable: {e}"),
    };
    let current = route.as_ref().map(|r| VoiceMode::of(&r.overrides)).unwrap_or_default();
    let word = args.trim().to_ascii_lowercase();
    let wanted = match word.as_str() {
        "" | "status" => return status(current, caps),
        other => match VoiceMode::parse(other) {
            Some(mode) => mode,
            None => return format!("`/voice {other}` is not understood. Use `/voice on`, `/voice only`, `/voice off` or `/voice status`."),
        },
    };
    if wanted != VoiceMode::Off && !caps.is_some_and(|c| c.supports_files) {
        return "⚠️ This chat cannot receive files, so answers cannot be sent as voice notes here.".into();
    }
    // The first thing a user types may be `/voice on`: the session starts here then.
    let route = match route {
        Some(route) => route,
        None => match routes.route_get_or_create(session_key, source, model).await {
            Ok(route) => route,
            Err(e) => return format!("⚠️ The session store is unavailable: {e}"),
        },
    };
    let mut overrides = if route.overrides.is_object() { route.overrides.clone() } else { json!({}) };
    overrides[OVERRIDE_KEY] = json!(wanted.as_str());
    match routes.route_set_overrides(session_key, &overrides).await {
        Ok(_) => switched(wanted, caps),
        Err(e) => format!("⚠️ The session store is unavailable: {e}"),
    }
}

fn status(mode: VoiceMode, caps: Option<&Capabilities>) -> String {
    let what = match mode {
        VoiceMode::Off => "off: answers are written",
        VoiceMode::On => "on: answers are written and spoken",
        VoiceMode::Only => "only: answers are spoken (code is still written)",
    };
    format!("🔊 Voice replies are {what}.{}", form(caps))
}

fn switched(mode: VoiceMode, caps: Option<&Capabilities>) -> String {
    match mode {
        VoiceMode::Off => "🔇 Voice replies off: answers are written.".into(),
        VoiceMode::On => format!("🔊 Voice replies on: answers are written and spoken.{}", form(caps)),
        VoiceMode::Only => format!("🔊 Voice only: answers are spoken; code is still written.{}", form(caps)),
    }
}

/// How the spoken answer arrives on this platform.
fn form(caps: Option<&Capabilities>) -> &'static str {
    if caps.is_some_and(|c| c.voice_notes) { "" } else { " This platform has no voice notes: they arrive as audio files." }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteStore;
    use hermes_adapter::{ChatType, Platform};

    async fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("state.db")).await.unwrap();
        (dir, store)
    }

    fn source() -> SessionSource {
        SessionSource::new(Platform::new("telegram"), "1", ChatType::Dm).with_user("1")
    }

    async fn run(store: &SqliteStore, caps: Option<&Capabilities>, args: &str) -> String {
        let source = source();
        voice(Session { routes: store, key: "k", source: &source }, "m", caps, args).await
    }

    fn chat(voice_notes: bool) -> Capabilities {
        Capabilities { supports_files: true, voice_notes, ..Capabilities::http() }
    }

    #[tokio::test]
    async fn the_mode_is_stored_with_the_session_and_reported() {
        let (_dir, store) = store().await;
        let caps = chat(true);
        assert!(run(&store, Some(&caps), "only").await.starts_with("🔊 Voice only"), "the first message may be /voice");
        let route = store.route_get("k").await.unwrap().unwrap();
        assert_eq!(VoiceMode::of(&route.overrides), VoiceMode::Only);
        assert!(run(&store, Some(&caps), "").await.contains("only: answers are spoken"));
        assert!(run(&store, Some(&caps), "off").await.starts_with("🔇"));
        assert_eq!(VoiceMode::of(&store.route_get("k").await.unwrap().unwrap().overrides), VoiceMode::Off);
    }

    #[tokio::test]
    async fn a_platform_without_voice_notes_or_files_is_named() {
        let (_dir, store) = store().await;
        assert!(run(&store, Some(&chat(false)), "on").await.contains("arrive as audio files"));
        let http = Capabilities::http();
        assert!(run(&store, Some(&http), "on").await.contains("cannot receive files"));
        assert!(run(&store, Some(&http), "loud").await.contains("not understood"));
    }
}
