//! Messages written while the bot had no gateway session. A resumed session gets every missed
//! event replayed by Discord, but a new one (after INVALID_SESSION, or when the client was
//! rebuilt because its connection went quiet) starts from now: what users wrote in between is
//! never dispatched. So the adapter remembers the last message it saw in each recently active
//! channel, and after every READY reads those channels' history from that message on.
//!
//! The memory lives in the adapter: it outlasts client rebuilds, not a restart of the gateway
//! (what was written while the gateway was stopped is not fetched). With a store shared by
//! replicas it is also kept as a fenced cursor ([`CURSOR`]), written after each message reaches
//! the inbox, so the replica that takes the connection over reads back what the last holder's
//! channels missed (serenity cannot resume another process's session). A position is only ever
//! saved behind what the inbox holds, so reading back from it can repeat a message (the inbox
//! drops it) but never skip one. A DM channel no replica has seen cannot be read back: Discord
//! does not list a bot's DM channels.

use crate::adapter::DiscordAdapter;
use hermes_adapter::{AdapterContext, AdapterError, CursorWrite};
use serenity::all::{ChannelId, GuildId, Message, MessageId};
use serenity::http::MessagePagination;
use std::collections::HashMap;

/// Channels remembered at most (the least recently active are forgotten first).
const CHANNELS: usize = 200;
/// One page of history per channel; Discord's maximum.
const PAGE: u8 = 100;
/// The fenced cursor the memory is kept under when replicas share a store.
pub(crate) const CURSOR: &str = "discord_seen_channels";

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

    /// The memory as a cursor value: `channel:message[:guild]` per channel, comma-separated.
    /// [`CHANNELS`] channels of 20-digit ids fit the cursor limit (a test checks).
    pub(crate) fn encode(&self) -> String {
        let mut out = String::new();
        for (channel, seen) in self.snapshot() {
            if !out.is_empty() {
                out.push(',');
            }
            out.push_str(&format!("{channel}:{}", seen.last_message));
            if let Some(guild) = seen.guild {
                out.push_str(&format!(":{guild}"));
            }
        }
        out
    }

    /// Take in what [`Self::encode`] wrote (keeping the newer position where both know a
    /// channel); `Err` names the first malformed entry, and nothing is taken then.
    pub(crate) fn merge_encoded(&mut self, value: &str) -> Result<usize, String> {
        let mut entries = Vec::new();
        for entry in value.split(',').filter(|e| !e.is_empty()) {
            let numbers = entry.split(':').map(str::parse::<u64>).collect::<Result<Vec<u64>, _>>();
            let seen = match numbers.as_deref() {
                Ok([channel, message]) => (*channel, *message, None),
                Ok([channel, message, guild]) => (*channel, *message, Some(*guild)),
                _ => return Err(format!("`{entry}` is not channel:message[:guild]")),
            };
            entries.push(seen);
        }
        for (channel, message, guild) in &entries {
            self.record(*channel, *message, *guild);
        }
        Ok(entries.len())
    }

    /// Every remembered channel, least recently active first.
    pub(crate) fn snapshot(&self) -> Vec<(u64, Seen)> {
        let mut all: Vec<(u64, Seen)> = self.channels.iter().map(|(c, s)| (*c, *s)).collect();
        all.sort_by_key(|(_, s)| s.last_message);
        all
    }
}

/// With a store shared by replicas, take in what the connection's last holder had seen, before
/// the first READY reads history back. A stored value that cannot be read is reported and
/// skipped: only what was written in a gap is at stake, never what the inbox holds.
pub(crate) async fn restore(adapter: &DiscordAdapter, ctx: &AdapterContext) {
    if !ctx.cursors().is_shared() {
        return;
    }
    let stored = match ctx.cursors().load(CURSOR).await {
        Ok(Some(stored)) => stored,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(
                "could not read which Discord channels the last holder had seen ({e}); reading back only what this replica sees"
            );
            return;
        }
    };
    let merged = match adapter.seen.lock() {
        Ok(mut seen) => seen.merge_encoded(&stored),
        Err(_) => return,
    };
    match merged {
        Ok(channels) => tracing::debug!(channels, "took over the Discord channels the last holder had seen"),
        Err(e) => tracing::warn!("the stored Discord channel positions are unreadable ({e}); reading back only what this replica sees"),
    }
}

/// With a store shared by replicas, record the memory after a message reached the inbox.
/// Fenced: another replica holds the connection now, and this run must stop reading.
pub(crate) async fn persist(adapter: &DiscordAdapter, ctx: &AdapterContext) -> Result<(), AdapterError> {
    if !ctx.cursors().is_shared() {
        return Ok(());
    }
    let Ok(value) = adapter.seen.lock().map(|seen| seen.encode()) else {
        return Ok(());
    };
    match ctx.cursors().save(CURSOR, &value).await {
        Ok(CursorWrite::Saved) => Ok(()),
        Ok(CursorWrite::Fenced) => Err(AdapterError::fenced()),
        // The message is in the inbox; only a takeover's read-back starts further back.
        Err(e) => {
            tracing::warn!("could not record which Discord channels were seen ({e}); a takeover would read back from an older position");
            Ok(())
        }
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

    #[test]
    fn the_memory_survives_its_cursor_and_a_full_one_fits_the_cursor_limit() {
        let mut seen = SeenChannels::default();
        seen.record(1, 10, None);
        seen.record(2, 20, Some(7));
        let mut taken_over = SeenChannels::default();
        taken_over.record(2, 25, Some(7));
        assert_eq!(taken_over.merge_encoded(&seen.encode()), Ok(2));
        assert_eq!(
            taken_over.snapshot(),
            vec![(1, Seen { last_message: 10, guild: None }), (2, Seen { last_message: 25, guild: Some(7) })],
            "a newer position of its own is kept"
        );

        let mut full = SeenChannels::default();
        for n in 0..CHANNELS as u64 {
            full.record(u64::MAX - n, u64::MAX - n, Some(u64::MAX));
        }
        assert!(full.encode().len() <= hermes_adapter::cursors::MAX_CURSOR_VALUE_BYTES, "{} bytes", full.encode().len());
    }

    #[test]
    fn a_malformed_cursor_takes_nothing() {
        let mut seen = SeenChannels::default();
        for bad in ["1:2,x:3", "1", "1:2:3:4", "1:-2", "1:2,99999999999999999999999:1"] {
            assert!(seen.merge_encoded(bad).is_err(), "{bad}");
        }
        assert!(seen.snapshot().is_empty(), "nothing of a malformed value was taken");
        assert_eq!(seen.merge_encoded(""), Ok(0));
    }
}
