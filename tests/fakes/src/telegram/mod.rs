//! Fake Telegram Bot API.
