//! Messages written while the bot had no gateway session. A resumed session gets every missed
//! event replayed by Discord, but a new one (after INVALID_SESSION, or when the client was
//! rebuilt because its connection went quiet) starts from now: what users wrote in between is
//! never dispatched. So the adapter remembers the last message it saw in each recently active
//! channel, and after every READY reads those channels' history from that message on.
//!
//! The memory lives in the adapter: it outlasts client rebuilds, not a restart of the gateway
//! (what was written while the gateway was stopped is not fetched).

use crate::adapter::DiscordAdapter;
use serenity::all::{ChannelId, GuildId, Message, MessageId};
use serenity::http::MessagePagination;
use std::collections::HashMap;

/// Channels remembered at most (the least recently active are forgotten first).
const CHANNELS: usize = 200;
/// One page of history per channel; Discord's maximum.
const PAGE: u8 = 100;

/// The newest message seen in a channel, and the guild the channel belongs to (history messages
/// come without it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    pub last_message: u64,
    pub guild: Option<u64>,
}

#[derive(Debug, Default)]
pub(crate) struct SeenChannels {
    channels: HashMap<u64, Seen>,
}

impl SeenChannels {
    /// Remember `message` as the newest seen in its channel (an older one changes nothing).
    pub(crate) fn record(&mut self, channel: u64, message: u64, guild: Option<u64>) {
        let entry = self.channels.entry(channel).or_insert(Seen { last_message: message, guild });
        entry.last_message = entry.last_message.max(message);
        if self.channels.len() > CHANNELS
            && let Some(stalest) = self.channels.iter().min_by_key(|(_, s)| s.last_message).map(|(c, _)| *c)
        {
            self.channels.remove(&stalest);
        }
    }

    /// Every remembered channel, least recently active first.
    pub(crate) fn snapshot(&self) -> Vec<(u64, Seen)> {
        let mut all: Vec<(u64, Seen)> = self.channels.iter().map(|(c, s)| (*c, *s)).collect();
        all.sort_by_key(|(_, s)| s.last_message);
        all
    }
}

/// The messages of `channel` after the last one seen there, oldest first, with their guild set
/// again. `Err` says why the history could not be read.
pub(crate) async fn missed_in(adapter: &DiscordAdapter, channel: u64, seen: Seen) -> Result<Vec<Message>, String> {
    let (Some(channel_id), Some(after)) = (std::num::NonZeroU64::new(channel), std::num::NonZeroU64::new(seen.last_message)) else {
        return Ok(Vec::new());
    };
    let page = adapter
        .http
        .get_messages(ChannelId::from(channel_id), Some(MessagePagination::After(MessageId::from(after))), Some(PAGE))
        .await
        .map_err(|e| crate::errors::classify(e).to_string())?;
    if page.len() == usize::from(PAGE) {
        tracing::warn!(
            channel,
            "more than {PAGE} messages were written in a Discord channel while disconnected; answering the first {PAGE}"
        );
    }
    let mut messages = page;
    messages.sort_by_key(|m| m.id);
    for message in &mut messages {
        message.guild_id = seen.guild.and_then(std::num::NonZeroU64::new).map(GuildId::from);
    }
    Ok(messages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_message_per_channel_is_kept_and_the_stalest_channel_goes_first() {
        let mut seen = SeenChannels::default();
        seen.record(1, 10, None);
        seen.record(1, 5, None);
        seen.record(2, 20, Some(7));
        assert_eq!(seen.snapshot(), vec![(1, Seen { last_message: 10, guild: None }), (2, Seen { last_message: 20, guild: Some(7) })]);
        for channel in 100..100 + CHANNELS as u64 {
            seen.record(channel, 1000 + channel, None);
        }
        let kept = seen.snapshot();
        assert_eq!(kept.len(), CHANNELS);
        assert!(kept.iter().all(|(c, _)| *c != 1), "the least recently active channel was forgotten first");
    }
}
