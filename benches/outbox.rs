//! Outbox benchmark: what the durable delivery record costs a reply.
//!
//! Every part an answer is made of is queued in `state.db` and each attempt's start and end are
//! written before anything else happens, so a crash or an outage never loses or doubles it. This
//! measures that cost against an adapter that answers at once (the platform's own latency, tens
//! to hundreds of milliseconds, comes on top of both):
//!
//! - `direct`: `adapter.send` alone, no record (what a gateway without an outbox would do);
//! - `courier`: one part through the courier (queue, lane head, attempt start, attempt end);
//! - `courier, 20 chats at once`: the same from 20 concurrent callers (the writer batches).
//!
//! Run with `cargo bench --bench outbox`. It prints p50/p99 per reply; it asserts nothing.

#[path = "support.rs"]
#[allow(dead_code)] // the process and verdict helpers are for the full-process benches
mod support;

use hermes::gateway::delivery::courier::{Courier, RetryPolicy, lane_of};
use hermes::store::{NewOutboxRow, SqliteStore, Store};
use hermes_adapter::{
    AdapterContext, AdapterError, Capabilities, ChatTarget, OutboundMessage, Platform, PlatformAdapter, SendError, SendReceipt,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{ms, percentile};

const REPLIES: usize = 2000;
/// How long a caller waits for the first outcome (the instant platform answers well within it).
const WAIT: Duration = Duration::from_secs(10);
const CONCURRENT_CHATS: usize = 20;

/// A platform that takes every message at once.
struct Instant0 {
    platform: Platform,
    caps: Capabilities,
}

#[async_trait::async_trait]
impl PlatformAdapter for Instant0 {
    fn platform(&self) -> &Platform {
        &self.platform
    }
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }
    async fn run(&self, _ctx: AdapterContext) -> Result<(), AdapterError> {
        Ok(())
    }
    async fn send(&self, _msg: &OutboundMessage) -> Result<SendReceipt, SendError> {
        Ok(SendReceipt { message_id: Some("1".into()) })
    }
}

fn part(chat: usize, n: usize) -> (OutboundMessage, NewOutboxRow) {
    let target = ChatTarget { platform: Platform::new("chat"), chat_id: format!("c{chat}"), thread_id: None };
    let key = format!("bench-{chat}-{n}:0");
    let message = OutboundMessage {
        target: target.clone(),
        text: "An answer of a typical length, a couple of sentences long, as a chat reply would be.".into(),
        reply_to: Some("42".into()),
        idempotency_key: key.clone(),
        is_final: true,
        usage: None,
        finish_reason: Some("stop".into()),
        buttons: Vec::new(),
        file: None,
    };
    let row = NewOutboxRow {
        key,
        lane: lane_of("chat", &target.chat_id),
        platform: "chat".into(),
        target: serde_json::to_string(&target).unwrap_or_default(),
        body: message.text.clone(),
        message: serde_json::to_string(&message).unwrap_or_default(),
        deadline_ms: chrono::Utc::now().timestamp_millis() + 86_400_000,
        notify_on_death: true,
        lead: true,
    };
    (message, row)
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{name:<28} p50 {:>7.3} ms   p99 {:>7.3} ms   ({} replies)",
        ms(percentile(&samples, 0.5)),
        ms(percentile(&samples, 0.99)),
        samples.len()
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime");
    runtime.block_on(run());
}

async fn run() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store: Store = Arc::new(SqliteStore::open(&dir.path().join("state.db")).await.expect("store"));
    let caps = Capabilities { supports_async_delivery: true, ..Capabilities::http() };
    let adapter: Arc<dyn PlatformAdapter> = Arc::new(Instant0 { platform: Platform::new("chat"), caps });
    let courier = Arc::new(Courier::new(HashMap::from([("chat".to_string(), adapter.clone())]), store, None, RetryPolicy::default()));

    let mut direct = Vec::with_capacity(REPLIES);
    for n in 0..REPLIES {
        let (message, _) = part(0, n);
        let started = Instant::now();
        let _ = adapter.send(&message).await;
        direct.push(started.elapsed());
    }
    report("direct (no record)", direct);

    let mut queued = Vec::with_capacity(REPLIES);
    for n in 0..REPLIES {
        let (_, row) = part(0, n);
        let started = Instant::now();
        courier.dispatch(vec![row], WAIT).await;
        queued.push(started.elapsed());
    }
    report("courier", queued);

    let mut tasks = Vec::new();
    for chat in 1..=CONCURRENT_CHATS {
        let courier = courier.clone();
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            for n in 0..REPLIES / CONCURRENT_CHATS {
                let (_, row) = part(chat, n);
                let started = Instant::now();
                courier.dispatch(vec![row], WAIT).await;
                samples.push(started.elapsed());
            }
            samples
        }));
    }
    let started = Instant::now();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap_or_default());
    }
    let wall = started.elapsed();
    report(&format!("courier, {CONCURRENT_CHATS} chats at once"), all);
    println!("throughput with {CONCURRENT_CHATS} chats: {:.0} replies/s", REPLIES as f64 / wall.as_secs_f64());
}
