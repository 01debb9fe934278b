//! `/background <prompt>` (`/bg`, `/btw`): run a prompt in its own one-shot session while the
//! conversation goes on; the answer is posted to this chat when it is ready.

use super::{CommandContext, CommandOutcome, CommandSpec, SlashCommand};
use crate::agent::SteeringInbox;
use crate::gateway::turn::{self, TurnHandles, TurnMode};
use async_trait::async_trait;
use hermes_adapter::{ChatTarget, InboundEvent};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

pub(super) struct Background;

static SPEC: CommandSpec = CommandSpec {
    name: "background",
    aliases: &["bg", "btw"],
    args_hint: "<prompt>",
    description: "Run a prompt in the background; the answer is posted here when done",
    runs_mid_turn: true,
};

#[async_trait]
impl SlashCommand for Background {
    fn spec(&self) -> &'static CommandSpec {
        &SPEC
    }
    async fn run(&self, ctx: &mut CommandContext<'_>, args: &str) -> CommandOutcome {
        background(&ctx.handles.turns, ctx.event, ctx.session_key, args)
    }
}

fn background(turns: &TurnHandles, event: &InboundEvent, session_key: &str, args: &str) -> CommandOutcome {
    let prompt = args.trim();
    if prompt.is_empty() {
        return CommandOutcome::Reply("Usage: /background <prompt>".into());
    }
    let turns = turns.clone();
    let platform = event.source.platform.clone();
    if !turns.deliverer.reaches_later(platform.as_str()) {
        return CommandOutcome::Reply("Background tasks need a chat that can receive messages later; this one cannot.".into());
    }
    let Some(slot) = turns.limits.background.try_take(session_key) else {
        return CommandOutcome::Reply(format!(
            "⏳ {} background tasks are already running here; wait for one to finish.",
            crate::gateway::turn::background_slots::PER_SESSION
        ));
    };
    let task_id = format!("bg_{}_{}", chrono::Utc::now().format("%H%M%S"), &uuid::Uuid::new_v4().simple().to_string()[..6]);
    let mut event = event.clone();
    event.event_id = format!("{}:{task_id}", event.event_id);
    event.text = prompt.to_string();
    event.one_shot = true;
    // The answer goes to the chat, not as a reply to the command message.
    event.reply_target = Some(ChatTarget { platform, chat_id: event.source.chat_id.clone(), thread_id: event.source.thread_id.clone() });
    let key = format!("{session_key}:{task_id}");
    let mode = TurnMode { answer_prefix: Some(format!("🔄 Background task `{task_id}` finished:\n\n")) };
    let cancel = turns.limits.abort.child_token();
    tokio::spawn(async move {
        turn::run(turns, key, event, cancel, Arc::new(AtomicBool::new(false)), SteeringInbox::default(), mode).await;
        drop(slot);
    });
    let preview: String = prompt.chars().take(60).collect();
    CommandOutcome::Reply(format!(
        "🔄 Background task started: \"{preview}\"\nTask ID: {task_id}\nYou can keep chatting — results will appear when done."
    ))
}
