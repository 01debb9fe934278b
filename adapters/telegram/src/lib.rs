//! Telegram adapter (teloxide): long polling acknowledged only after the inbox accepted, HTML rendering, UTF-16 chunking, edits, typing, buttons, files.
