//! An adapter registered from outside `src/`: this file is everything a new adapter crate would
//! write (a `PlatformAdapter`, its typed config block, its `Registration`), and the gateway runs
//! it in-process through `Registry::builtin().with(..)` with the model pointed at the fake LLM.
//!
//! The "loopback" platform: the test pushes inbound messages through a channel, and every
//! message the gateway sends is recorded for the test to read.

use crate::support::{LLM_KEY, eventually};
use async_trait::async_trait;
use hermes::config::{self, Env, Home};
use hermes::gateway::{self, ExitReason, RunOptions};
use hermes::registry::Registry;
use hermes_adapter::registration::{
    self, BuildContext, BuildError, EnvKind, EnvVar, ErasedConfig, PairingOffer, PlatformFacts, Registration,
};
use hermes_adapter::{
    AdapterConfig, AdapterContext, AdapterError, Capabilities, ChatType, InboundEvent, LengthUnit, MarkdownDialect, OutboundMessage,
    Platform, PlatformAdapter, SendError, SendReceipt, SessionSource, StreamStyle,
};
use hermes_fakes::{FakeLlm, Reply};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

// ---- what an adapter crate would write -------------------------------------------------------

/// The adapter's keys of `platforms.loopback` (the gateway keeps `enabled`, the allowlists, ...).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
struct LoopbackConfig {
    /// A name for this loopback, handed to the adapter's constructor.
    label: String,
}

impl AdapterConfig for LoopbackConfig {}

const ENV: &[EnvVar] = &[
    EnvVar { name: "LOOPBACK_ENABLED", key: "enabled", kind: EnvKind::Bool, example: "true", description: "switches the loopback on" },
    EnvVar { name: "LOOPBACK_LABEL", key: "label", kind: EnvKind::Text, example: "lab", description: "the loopback's name" },
];

const EXAMPLE: &str = "    enabled: false                     # switches the loopback on (LOOPBACK_ENABLED)
    allowed_users: []                  # user ids allowed to talk to the bot
    label: \"\"                          # the loopback's name (LOOPBACK_LABEL)
";

const LOOPBACK: Registration = Registration {
    platform: "loopback",
    summary: "In-process loopback chat, driven by a test.",
    env: ENV,
    example_yaml: EXAMPLE,
    allowlist_entry_problem: None,
    parse: registration::parse::<LoopbackConfig>,
    build,
    facts: PlatformFacts {
        people: true,
        home: None,
        pairing: PairingOffer::NotOffered { why: "the loopback is driven by a test" },
        buttons: false,
        reactions: false,
    },
};

/// The adapter the gateway built last; `build` is a plain `fn`, so this is how the test reaches
/// the instance the gateway runs.
static BUILT: Mutex<Option<Arc<Loopback>>> = Mutex::new(None);

fn build(config: &dyn ErasedConfig, _ctx: &BuildContext<'_>) -> Result<Arc<dyn PlatformAdapter>, BuildError> {
    let config: &LoopbackConfig = registration::downcast(config)?;
    if config.label.is_empty() {
        return Err(BuildError::new(Some("label"), "the loopback needs a label"));
    }
    let adapter = Arc::new(Loopback::new(config.label.clone()));
    *BUILT.lock().unwrap() = Some(adapter.clone());
    Ok(adapter)
}

struct Loopback {
    platform: Platform,
    capabilities: Capabilities,
    /// From `platforms.loopback.label`, through the constructor.
    label: String,
    inbound_tx: mpsc::UnboundedSender<InboundEvent>,
    inbound_rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<InboundEvent>>,
    next_id: AtomicUsize,
    /// What the gateway's sender policy said of each pushed message's sender: (user, allowed).
    policy: Mutex<Vec<(String, bool)>>,
    sent: Mutex<Vec<OutboundMessage>>,
}

impl Loopback {
    fn new(label: String) -> Self {
        let (inbound_tx, inbound_rx) = mpsc::unbounded_channel();
        let capabilities = Capabilities {
            max_message_len: 4096,
            length_unit: LengthUnit::Chars,
            dialect: MarkdownDialect::Plain,
            streaming: StreamStyle::None,
            supports_edit: false,
            supports_buttons: false,
            supports_typing: false,
            supports_threads: false,
            supports_async_delivery: true,
            splits_long_messages: true,
            supports_files: false,
            read_live: true,
            people_reply: true,
            voice_notes: false,
        };
        Self {
            platform: Platform::new("loopback"),
            capabilities,
            label,
            inbound_tx,
            inbound_rx: tokio::sync::Mutex::new(inbound_rx),
            next_id: AtomicUsize::new(0),
            policy: Mutex::new(Vec::new()),
            sent: Mutex::new(Vec::new()),
        }
    }

    /// A direct message from `user` in the chat `dm-<user>`.
    fn push(&self, user: &str, text: &str) {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let source = SessionSource::new(self.platform.clone(), format!("dm-{user}"), ChatType::Dm).with_user(user);
        let mut event = InboundEvent::text(format!("loopback:{}:{n}", self.label), source, text);
        event.message_id = Some(n.to_string());
        self.inbound_tx.send(event).expect("the loopback's receiver lives as long as the adapter");
    }

    fn sent(&self) -> Vec<OutboundMessage> {
        self.sent.lock().unwrap().clone()
    }
}

#[async_trait]
impl PlatformAdapter for Loopback {
    fn platform(&self) -> &Platform {
        &self.platform
    }

    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    async fn run(&self, ctx: AdapterContext) -> Result<(), AdapterError> {
        let mut inbound = self.inbound_rx.lock().await;
        ctx.health.mark_connected();
        loop {
            let event = tokio::select! {
                _ = ctx.shutdown.cancelled() => return Ok(()),
                event = inbound.recv() => match event {
                    Some(event) => event,
                    None => return Ok(()),
                },
            };
            let user = event.source.user_id.clone().unwrap_or_default();
            self.policy.lock().unwrap().push((user, ctx.sender_allowed(&event.source)));
            ctx.accept(event).await.map_err(|e| AdapterError::retryable("inbox", e.to_string()))?;
        }
    }

    async fn send(&self, msg: &OutboundMessage) -> Result<SendReceipt, SendError> {
        let mut sent = self.sent.lock().unwrap();
        sent.push(msg.clone());
        Ok(SendReceipt { message_id: Some(format!("out-{}", sent.len())) })
    }
}

// ---- the tests -------------------------------------------------------------------------------

const CONFIG: &str = "platforms:
  loopback:
    enabled: true
    label: from-config-yaml
    allowed_users: [\"alice-1\"]
";

#[test]
fn the_registered_block_is_typed_and_checked_with_its_key_paths() {
    let source = Path::new("config.yaml");
    let with_loopback = Registry::builtin().with(LOOPBACK);
    let env = Env::from_pairs(Vec::<(String, String)>::new());

    let loaded = config::load_str_with(CONFIG, source, &env, &with_loopback).expect("the loopback block loads");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let settings = loaded.config.platforms.settings::<LoopbackConfig>("loopback").expect("the block was parsed by the registration");
    assert_eq!(settings.label, "from-config-yaml");
    assert_eq!(loaded.config.allowed_users("loopback"), ["alice-1"], "the core keys stay the gateway's");

    // The registration's environment variable sets its key, over the file.
    let env_label = Env::from_pairs([("LOOPBACK_LABEL", "from-env")]);
    let loaded = config::load_str_with(CONFIG, source, &env_label, &with_loopback).unwrap();
    assert_eq!(loaded.config.platforms.settings::<LoopbackConfig>("loopback").unwrap().label, "from-env");

    // A key the config type does not know is reported with its full path.
    let typo = format!("{CONFIG}    lable: oops\n");
    let loaded = config::load_str_with(&typo, source, &env, &with_loopback).expect("an unknown key is a warning");
    assert!(
        loaded.warnings.iter().any(|w| w.contains("`platforms.loopback.lable`")),
        "the unknown key is reported with its path: {:?}",
        loaded.warnings
    );
    assert!(!loaded.warnings.iter().any(|w| w.contains("platforms.loopback.label")), "{:?}", loaded.warnings);

    // A bad value is an error at its path.
    let bad = CONFIG.replace("label: from-config-yaml", "label: [1, 2]");
    let error = config::load_str_with(&bad, source, &env, &with_loopback).expect_err("a list is not a label").to_string();
    assert!(error.contains("platforms.loopback.label"), "{error}");

    // Without the registration the same block is not the loopback's: its key is unknown.
    let loaded = config::load_str_with(CONFIG, source, &env, &Registry::builtin()).unwrap();
    assert!(loaded.warnings.iter().any(|w| w.contains("`platforms.loopback.label`")), "{:?}", loaded.warnings);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_adapter_registered_outside_src_carries_a_full_turn() {
    let llm = FakeLlm::start().await;
    llm.push(Reply::text("hello from the fake model"));
    let dir = tempfile::tempdir().expect("temp dir");
    let home = Home::at(dir.path());
    std::fs::write(home.config_file(), CONFIG).expect("write config.yaml");
    let env = Env::from_pairs([("OPENAI_BASE_URL", llm.base_url()), ("OPENAI_API_KEY", LLM_KEY.to_string())]);
    let registry = Registry::builtin().with(LOOPBACK);
    let loaded = config::load_with(&home, &env, &registry).expect("config loads through the registry");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);

    let shutdown = CancellationToken::new();
    let options = RunOptions { registry, shutdown: shutdown.clone(), ..RunOptions::default() };
    let mut gateway = tokio::spawn(gateway::run(home.clone(), loaded.config, options));

    // The gateway built the adapter from the block: the typed key reached its constructor.
    let built = eventually(Duration::from_secs(30), || BUILT.lock().unwrap().is_some() || gateway.is_finished()).await;
    if gateway.is_finished() {
        panic!("the gateway stopped at start-up: {:?}", (&mut gateway).await);
    }
    assert!(built, "the gateway built the loopback adapter");
    let adapter = BUILT.lock().unwrap().clone().expect("built");
    assert_eq!(adapter.label, "from-config-yaml");

    // A stranger first, then the allowed user: events are routed in order, so once Alice is
    // answered, Bob's message has been decided on.
    adapter.push("mallory-9", "let me in");
    adapter.push("alice-1", "hi from alice");
    assert!(
        eventually(Duration::from_secs(60), || !adapter.sent().is_empty()).await,
        "the answer reaches the loopback's send; model requests: {}",
        llm.request_count()
    );
    let sent = adapter.sent();
    assert_eq!(sent.len(), 1, "one answer, to Alice only: {sent:?}");
    assert_eq!(sent[0].text, "hello from the fake model");
    assert_eq!(sent[0].target.platform.as_str(), "loopback");
    assert_eq!(sent[0].target.chat_id, "dm-alice-1");
    assert!(sent[0].is_final);

    // The model saw Alice's message and nothing of Mallory's.
    assert_eq!(llm.request_count(), 1, "the stranger's message never reaches the model");
    let prompt = llm.requests()[0].last_user_text().unwrap_or_default();
    assert!(prompt.contains("hi from alice"), "{prompt}");
    assert!(!llm.requests()[0].messages().iter().any(|(_, text)| text.contains("let me in")));
    let policy = adapter.policy.lock().unwrap().clone();
    assert_eq!(
        policy,
        [("mallory-9".to_string(), false), ("alice-1".to_string(), true)],
        "the gateway's allowlist for the loopback is the block's allowed_users"
    );

    // A clean stop through the run options' token.
    shutdown.cancel();
    let stopped = tokio::time::timeout(Duration::from_secs(60), &mut gateway).await;
    let result = match stopped {
        Ok(joined) => joined.expect("the gateway task did not panic"),
        Err(_) => {
            gateway.abort();
            panic!("the gateway did not stop after its shutdown token was cancelled");
        }
    };
    assert_eq!(result.expect("the gateway ran without error"), ExitReason::Stopped);
    assert!(home.clean_shutdown_marker().exists(), "a clean stop leaves its marker");
    assert_eq!(adapter.sent().len(), 1, "nothing more was sent while stopping");
}
