//! Stand-ins for what the gateway hands an adapter, for adapter tests that run an adapter on its
//! own: an inbox that records events and deduplicates on `event_id` like the durable one (and can
//! be made to fail), and a session directory for adapters that never use sessions.

use async_trait::async_trait;
use hermes_adapter::{
    AcceptError, AcceptOutcome, InboundEvent, InboundSink, SessionDirectory, SessionDirectoryError, SessionSource, StoredMessage,
};
use std::sync::Mutex;

#[derive(Default)]
pub struct RecordingInbox {
    events: Mutex<Vec<InboundEvent>>,
    /// When set, every accept fails like this (the inbox shutting down, or its disk full).
    failure: Mutex<Option<fn() -> AcceptError>>,
}

impl RecordingInbox {
    /// Everything accepted so far, in order.
    pub fn events(&self) -> Vec<InboundEvent> {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Make every accept fail (`Some`) or succeed again (`None`).
    pub fn fail_with(&self, failure: Option<fn() -> AcceptError>) {
        *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = failure;
    }
}

#[async_trait]
impl InboundSink for RecordingInbox {
    async fn accept(&self, event: InboundEvent) -> Result<AcceptOutcome, AcceptError> {
        if let Some(failure) = *self.failure.lock().unwrap_or_else(|e| e.into_inner()) {
            return Err(failure());
        }
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        if events.iter().any(|e| e.event_id == event.event_id) {
            return Ok(AcceptOutcome::Duplicate);
        }
        events.push(event);
        Ok(AcceptOutcome::Accepted)
    }
}

/// For adapters that never open sessions.
pub struct NoSessions;

#[async_trait]
impl SessionDirectory for NoSessions {
    async fn open(&self, _: &SessionSource) -> Result<String, SessionDirectoryError> {
        Err(SessionDirectoryError::Storage("not used".into()))
    }
    async fn history(&self, _: &SessionSource, _: usize) -> Result<Option<Vec<StoredMessage>>, SessionDirectoryError> {
        Ok(None)
    }
    async fn close(&self, _: &SessionSource) -> Result<bool, SessionDirectoryError> {
        Ok(false)
    }
}
