//! The seven adapters as a measured gateway meets them: what each needs (a fake from
//! `hermes-fakes`, a real peer from `tests/peers/run.sh`, or a loopback port), the environment
//! and config.yaml lines that turn it on (the same variables users and the tests set), and the
//! sign that it is up.
//!
//! Up means: Telegram's first `getUpdates`, Discord's gateway session (IDENTIFY answered), Slack's
//! Socket Mode connection, the webhook and API server answering `/health`; Matrix (first `/sync`)
//! and email (IMAP login) are only visible from the gateway, so with either of them the gateway
//! also gets its admin listener and the run waits for `/readyz` (every adapter up), as the
//! all-platforms conformance test does.

use hermes_fakes::discord::FakeDiscord;
use hermes_fakes::slack::FakeSlack;
use hermes_fakes::telegram::FakeTelegram;
use std::net::TcpListener;
use std::time::{Duration, Instant};

const UP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one `/health` or `/readyz` request may take.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);
/// At least 16 characters and no placeholder: the API server refuses weaker keys.
const API_SERVER_KEY: &str = "weight-bench-api-key-5d1c7e93";
const WEBHOOK_SECRET: &str = "weight-bench-webhook-secret-0b62";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Platform {
    Telegram,
    Discord,
    Slack,
    Matrix,
    Email,
    Webhook,
    ApiServer,
}

impl Platform {
    pub(crate) const ALL: [Platform; 7] =
        [Platform::Telegram, Platform::Discord, Platform::Slack, Platform::Matrix, Platform::Email, Platform::Webhook, Platform::ApiServer];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Platform::Telegram => "Telegram",
            Platform::Discord => "Discord",
            Platform::Slack => "Slack",
            Platform::Matrix => "Matrix",
            Platform::Email => "email",
            Platform::Webhook => "webhook",
            Platform::ApiServer => "API server",
        }
    }

    /// Matrix and email need the real servers that `tests/peers/run.sh` starts.
    pub(crate) fn needs_real_peer(self) -> bool {
        matches!(self, Platform::Matrix | Platform::Email)
    }
}

/// The real servers `tests/peers/run.sh` started, from its HERMES_TEST_* variables.
pub(crate) struct RealPeers {
    /// Synapse's URL and its registration secret.
    pub synapse: Option<(String, String)>,
    /// Dovecot's IMAP port and Postfix's SMTP port.
    pub mail: Option<(String, String)>,
}

impl RealPeers {
    pub(crate) fn from_env() -> RealPeers {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        RealPeers {
            synapse: var("HERMES_TEST_SYNAPSE_URL").zip(var("HERMES_TEST_SYNAPSE_SECRET")),
            mail: var("HERMES_TEST_IMAP_PORT").zip(var("HERMES_TEST_SMTP_PORT")),
        }
    }

    pub(crate) fn has(&self, platform: Platform) -> bool {
        match platform {
            Platform::Matrix => self.synapse.is_some(),
            Platform::Email => self.mail.is_some(),
            _ => true,
        }
    }
}

/// Everything one measured gateway talks to, started; and what to tell it.
#[derive(Default)]
pub(crate) struct Setup {
    pub env: Vec<(String, String)>,
    pub config: String,
    telegram: Option<FakeTelegram>,
    discord: Option<FakeDiscord>,
    slack: Option<FakeSlack>,
    health_urls: Vec<String>,
    readyz_url: Option<String>,
}

/// When the adapters showed they were up, from the spawn.
pub(crate) struct Up {
    pub first_get_updates: Option<Duration>,
    pub all_up: Duration,
}

impl Setup {
    pub(crate) async fn start(platforms: &[Platform], peers: &RealPeers, llm_base_url: &str) -> Result<Setup, String> {
        let mut setup = Setup::default();
        setup.set("OPENAI_BASE_URL", llm_base_url);
        setup.set("OPENAI_API_KEY", "sk-weight-bench-0000000000");
        let mut platform_yaml = String::new();
        for &platform in platforms {
            platform_yaml.push_str(&setup.add(platform, peers).await?);
        }
        let mut config = if platform_yaml.is_empty() { String::new() } else { format!("platforms:\n{platform_yaml}") };
        if platforms.iter().any(|p| p.needs_real_peer()) {
            let port = free_port()?;
            config.push_str(&format!("gateway:\n  admin_port: {port}\n"));
            setup.readyz_url = Some(format!("http://127.0.0.1:{port}/readyz"));
        }
        setup.config = config;
        Ok(setup)
    }

    fn set(&mut self, key: &str, value: &str) {
        self.env.push((key.to_string(), value.to_string()));
    }

    /// Starts what `platform` talks to and sets its variables; its config.yaml lines.
    async fn add(&mut self, platform: Platform, peers: &RealPeers) -> Result<String, String> {
        match platform {
            Platform::Telegram => self.add_telegram().await,
            Platform::Discord => self.add_discord().await,
            Platform::Slack => self.add_slack().await,
            Platform::Matrix => self.add_matrix(peers).await,
            Platform::Email => self.add_email(peers),
            Platform::Webhook => self.add_webhook(),
            Platform::ApiServer => self.add_api_server(),
        }
    }

    async fn add_telegram(&mut self) -> Result<String, String> {
        let fake = FakeTelegram::start().await.map_err(|e| format!("fake Telegram: {e}"))?;
        self.set("TELEGRAM_BOT_TOKEN", &fake.token());
        self.set("TELEGRAM_API_BASE_URL", &fake.api_url());
        self.set("TELEGRAM_ALLOWED_USERS", "1001");
        self.telegram = Some(fake);
        Ok(String::new())
    }

    async fn add_discord(&mut self) -> Result<String, String> {
        let fake = FakeDiscord::start().await.map_err(|e| format!("fake Discord: {e}"))?;
        self.set("DISCORD_BOT_TOKEN", &fake.token());
        self.set("DISCORD_API_BASE_URL", &fake.api_url());
        self.set("DISCORD_ALLOWED_USERS", "3001");
        self.discord = Some(fake);
        Ok(String::new())
    }

    async fn add_slack(&mut self) -> Result<String, String> {
        let fake = FakeSlack::start().await.map_err(|e| format!("fake Slack: {e}"))?;
        self.set("SLACK_BOT_TOKEN", &fake.bot_token());
        self.set("SLACK_APP_TOKEN", &fake.app_token());
        self.set("SLACK_API_BASE_URL", &fake.api_url());
        self.set("SLACK_ALLOWED_USERS", "U0WEIGHT");
        self.slack = Some(fake);
        Ok(String::new())
    }

    /// A bot account of its own on the test Synapse (unique: the homeserver outlives this run).
    async fn add_matrix(&mut self, peers: &RealPeers) -> Result<String, String> {
        let (url, secret) = peers.synapse.as_ref().ok_or("Matrix needs HERMES_TEST_SYNAPSE_URL (tests/peers/run.sh)")?;
        let password = "weight-bench-password-0123456789";
        let bot = hermes_fakes::synapse::register(url, secret, &hermes_fakes::synapse::unique("weightbot"), password, false).await;
        let server = bot.user_id.split_once(':').map(|(_, server)| server).unwrap_or("localhost");
        self.set("MATRIX_HOMESERVER", url);
        self.set("MATRIX_USER_ID", &bot.user_id);
        self.set("MATRIX_PASSWORD", password);
        self.set("MATRIX_ALLOWED_USERS", &format!("@weight-alice:{server}"));
        Ok("  matrix:\n    enabled: true\n".to_string())
    }

    /// The mailbox `bot@example.test` that tests/peers/mail.sh creates at start.
    fn add_email(&mut self, peers: &RealPeers) -> Result<String, String> {
        let (imap_port, smtp_port) = peers.mail.clone().ok_or("email needs HERMES_TEST_IMAP_PORT (tests/peers/run.sh)")?;
        for (key, value) in [
            ("EMAIL_ADDRESS", "bot@example.test"),
            ("EMAIL_PASSWORD", "botpw"),
            ("EMAIL_IMAP_HOST", "127.0.0.1"),
            ("EMAIL_IMAP_PORT", imap_port.as_str()),
            ("EMAIL_SMTP_HOST", "127.0.0.1"),
            ("EMAIL_SMTP_PORT", smtp_port.as_str()),
            ("EMAIL_TLS", "none"),
            ("EMAIL_AUTHSERV_ID", "mx.example.test"),
            ("EMAIL_ALLOWED_USERS", "alice@example.test"),
        ] {
            self.set(key, value);
        }
        Ok(String::new())
    }

    fn add_webhook(&mut self) -> Result<String, String> {
        let port = free_port()?;
        self.set("WEBHOOK_ENABLED", "true");
        self.set("WEBHOOK_PORT", &port.to_string());
        self.set("WEBHOOK_SECRET", WEBHOOK_SECRET);
        self.health_urls.push(format!("http://127.0.0.1:{port}/health"));
        Ok(String::new())
    }

    fn add_api_server(&mut self) -> Result<String, String> {
        let port = free_port()?;
        self.set("API_SERVER_ENABLED", "true");
        self.set("API_SERVER_KEY", API_SERVER_KEY);
        self.set("API_SERVER_PORT", &port.to_string());
        self.health_urls.push(format!("http://127.0.0.1:{port}/health"));
        Ok(String::new())
    }

    /// Waits until every adapter has shown it is up; an error with the gateway's log otherwise.
    /// A wrapped gateway (callgrind) gets [`UP_TIMEOUT`] times its slowdown: Matrix's first login
    /// and key upload then take minutes.
    pub(crate) async fn wait_up(&self, gateway: &mut crate::gateway::Gateway) -> Result<Up, String> {
        let timeout = UP_TIMEOUT * gateway.slowdown();
        let deadline = Instant::now() + timeout;
        let http = reqwest::Client::builder().no_proxy().build().map_err(|e| format!("HTTP client: {e}"))?;
        let probe = Probe { http, timeout: HEALTH_TIMEOUT * gateway.slowdown() };
        let mut first_get_updates = None;
        loop {
            if let Some(fake) = &self.telegram
                && first_get_updates.is_none()
            {
                first_get_updates = fake.first_call_at("getUpdates").map(|at| at.saturating_duration_since(gateway.spawned));
            }
            if self.pending(&probe, first_get_updates.is_some()).await.is_none() {
                return Ok(Up { first_get_updates, all_up: gateway.spawned.elapsed() });
            }
            if let Some(exited) = gateway.exited() {
                return Err(exited);
            }
            if Instant::now() > deadline {
                let what = self.pending(&probe, first_get_updates.is_some()).await.unwrap_or("?");
                return Err(format!("{what} was not up within {timeout:?}:\n{}", gateway.log()));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The first adapter not up yet, if any.
    async fn pending(&self, probe: &Probe, telegram_polled: bool) -> Option<&'static str> {
        if self.telegram.is_some() && !telegram_polled {
            return Some("Telegram (first getUpdates)");
        }
        if self.discord.as_ref().is_some_and(|f| !f.connected()) {
            return Some("Discord (gateway session)");
        }
        if self.slack.as_ref().is_some_and(|f| !f.connected()) {
            return Some("Slack (Socket Mode)");
        }
        for url in &self.health_urls {
            if !probe.answers_ok(url).await {
                return Some("the webhook or API server (/health)");
            }
        }
        match &self.readyz_url {
            Some(url) if !probe.answers_ok(url).await => Some("Matrix or email (/readyz)"),
            _ => None,
        }
    }
}

/// Asks the gateway's HTTP listeners whether they are up.
struct Probe {
    http: reqwest::Client,
    timeout: Duration,
}

impl Probe {
    async fn answers_ok(&self, url: &str) -> bool {
        self.http.get(url).timeout(self.timeout).send().await.is_ok_and(|r| r.status().is_success())
    }
}

fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).map_err(|e| format!("no free loopback port: {e}"))
}
