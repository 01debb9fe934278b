//! Limited timelines. A sync carries at most [`crate::sync`]'s timeline limit of events per room;
//! when more arrived since the last sync, the room's timeline is `limited` and starts at
//! `prev_batch`. The events in between are fetched here with `/messages`, paging backward from
//! `prev_batch` to the token of the previous sync (the spec's `to`: "the token to stop returning
//! events at"; a sync `next_batch` is such a token), so a burst of any size up to
//! [`MAX_GAP_EVENTS`] is answered whole. Each missed event then goes the way of any timeline
//! event, and the inbox drops what it already has (it deduplicates on the event id).

use matrix_sdk::Room;
use matrix_sdk::deserialized_responses::TimelineEvent;
use matrix_sdk::room::MessagesOptions;

/// Events per `/messages` page.
const PAGE: u32 = 100;
/// Pages fetched for one gap at most: a gap of more than [`MAX_GAP_EVENTS`] events (a bot offline
/// for a long time in a very busy room) is answered from its newest [`MAX_GAP_EVENTS`], with a
/// warning; answering thousands of stale messages would flood the room.
const MAX_PAGES: usize = 10;
pub(crate) const MAX_GAP_EVENTS: usize = PAGE as usize * MAX_PAGES;

/// The events of `room` between the previous sync (`since`) and `prev_batch`, oldest first.
/// An error means the gap could not be read: the caller must not move its sync token past it.
pub(crate) async fn missed(room: &Room, prev_batch: Option<&str>, since: &str) -> Result<Vec<TimelineEvent>, matrix_sdk::Error> {
    let Some(mut from) = prev_batch.map(str::to_string) else {
        tracing::warn!(room = %room.room_id(), "a limited timeline without a prev_batch token: the events before it cannot be fetched");
        return Ok(Vec::new());
    };
    let mut missed: Vec<TimelineEvent> = Vec::new();
    for _ in 0..MAX_PAGES {
        let mut options = MessagesOptions::backward().from(from.as_str());
        options.to = Some(since.to_string());
        options.limit = PAGE.into();
        let page = room.messages(options).await?;
        let more = page.end.filter(|_| !page.chunk.is_empty());
        // Backward pages run newest first.
        missed.extend(page.chunk);
        match more {
            Some(end) => from = end,
            None => {
                missed.reverse();
                tracing::info!(room = %room.room_id(), events = missed.len(), "fetched the events a limited sync left out");
                return Ok(missed);
            }
        }
    }
    tracing::warn!(
        room = %room.room_id(),
        "more than {MAX_GAP_EVENTS} events arrived in one room while the bot was away; only the newest {MAX_GAP_EVENTS} are answered"
    );
    missed.reverse();
    Ok(missed)
}
