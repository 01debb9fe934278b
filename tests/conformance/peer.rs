//! What the suite needs from a platform's fake: inject what users do, read what the bot did, and
//! break things. Each platform implements [`ChatPeer`] over its fake's control API.

use crate::support::Setup;

/// Where a conversation happens (and where the bot's answers must appear).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chat {
    pub chat_id: String,
    pub thread_id: Option<String>,
}

/// A message the bot posted, as the user sees it now.
#[derive(Debug, Clone)]
pub(crate) struct Posted {
    pub id: String,
    /// The text as displayed (formatting markup parsed away where the platform parses it).
    pub text: String,
    /// The text as the bot sent it, markup included.
    pub raw: String,
    /// The platform was told not to unfurl links in it.
    pub previews_off: bool,
    pub edits: usize,
    /// Formatting the platform applied (e.g. `bold`, `code`, `pre`), for platforms that report it.
    pub styles: Vec<String>,
}

/// What a user sends as a file (issue 37): a voice note, an audio file or a picture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MediaKind {
    /// Recorded in the chat app (Telegram voice, Discord voice message, Matrix MSC3245 voice,
    /// Slack audio clip); on email, an `audio/ogg` attachment.
    Voice,
    /// A music or audio file sent as such.
    Audio,
    /// A photo (Telegram `photo`, an image attachment elsewhere).
    Photo,
}

/// A file a user sends, with what the platform declares about it before anyone downloads it.
#[derive(Debug, Clone)]
pub(crate) struct Media {
    pub kind: MediaKind,
    pub bytes: Vec<u8>,
    /// `audio/ogg`, `image/png`, ...
    pub mime: &'static str,
    pub file_name: String,
    /// The duration the platform reports; `None`: the platform reports none.
    pub declared_secs: Option<u32>,
    /// The size the platform reports, when a test makes it differ from `bytes.len()` (a lie or a
    /// huge file the fake never really holds); `None`: the real size.
    pub declared_bytes: Option<u64>,
}

#[allow(async_fn_in_trait)]
pub(crate) trait ChatPeer: Sized + Send + Sync + 'static {
    const PLATFORM: &'static str;
    /// The platform's message limit, in [`ChatPeer::measure`] units.
    const MAX_LEN: usize;
    /// Whether markdown is parsed by the platform into entities (Telegram) or shown as typed by
    /// the client (Discord renders it itself).
    const PARSES_FORMATTING: bool;
    /// The markup the gateway sends this platform, and how the platform counts length.
    const DIALECT: hermes_adapter::MarkdownDialect;
    const UNIT: hermes_adapter::LengthUnit;
    /// Whether the platform lets a bot show "typing…" (Slack does not, outside assistant
    /// threads).
    const SHOWS_TYPING: bool = true;
    /// Whether code blocks show a tab as spaces to the next 4-column stop (Telegram).
    const TABS_SHOWN_AS_SPACES: bool = false;
    /// How long the suite's long answers are, in characters: enough for several messages
    /// (email's 50,000-character mails need far more than a chat's).
    const LONG_ANSWER_CHARS: usize = 10_000;
    /// Whether the platform has group chats (email has only a sender's own conversation).
    const HAS_GROUPS: bool = true;
    /// How long a long streamed answer may take to finish: edits are paced per platform (Matrix
    /// edits a message at most once a second, so 10,000 characters streamed take longer).
    const STREAM_WAIT: std::time::Duration = std::time::Duration::from_secs(20);
    /// Whether the platform declares a file's size and a voice note's length before the bot
    /// downloads it, so a refusal costs no download (email delivers a mail whole).
    const DECLARES_MEDIA: bool = true;

    async fn start() -> Self;
    /// Environment and `platforms:` YAML (indented under `platforms:`) that point the gateway's
    /// adapter at this fake, allow users 1..=50 and require mentions in groups.
    fn configure(&self, setup: &mut Setup) -> String;
    fn measure(text: &str) -> usize;

    /// User `n` writes to the bot directly.
    async fn dm(&self, user: u32, text: &str) -> Chat;
    /// User `n` replies in `chat` (their DM) to the message with id `message_id`.
    async fn reply(&self, user: u32, chat: &Chat, message_id: &str, text: &str);
    /// User `n` writes in the shared group chat, mentioning the bot or not.
    async fn group(&self, user: u32, text: &str, mention: bool) -> Chat;
    /// User `n` writes in thread/topic `thread` (1 or 2) of the shared group.
    async fn thread(&self, user: u32, thread: u32, text: &str) -> Chat;

    fn posted(&self, chat: &Chat) -> Vec<Posted>;
    /// Names of the files the bot sent in the chat.
    fn files(&self, chat: &Chat) -> Vec<String>;
    /// Typing indicators shown in the chat so far.
    fn typing_seen(&self, chat: &Chat) -> usize;

    /// The platform delivers the last user message again (a lost acknowledgement, a replay).
    fn redeliver_last(&self);
    /// The next `n` sends/edits are refused with a rate limit.
    fn rate_limit_sends(&self, n: usize);
    /// The next `n` formatted sends are refused as malformed; false if the platform never does.
    fn reject_formatting(&self, n: usize) -> bool;
    /// Break the bot's connection to the platform (it must notice and reconnect).
    async fn interrupt_connection(&self);
    /// Deliver updates of kinds the bot does not know, and malformed ones.
    fn inject_junk(&self);

    /// User `n` sends `media` in their DM with the bot (as `dm` does for text), with `caption`
    /// as its text where the platform has captions.
    async fn dm_media(&self, user: u32, media: &Media, caption: &str) -> Chat;
    /// How many bytes of users' files the platform has served to the bot so far (the fake's
    /// download counter), so a test can show nothing was fetched past a limit.
    fn media_bytes_served(&self) -> u64;
    /// The voice notes the bot sent in `chat`, as the platform stored them (OGG/Opus bytes);
    /// where the platform has no voice notes, the audio files it sent.
    fn voice_sent(&self, chat: &Chat) -> Vec<Vec<u8>>;
}
