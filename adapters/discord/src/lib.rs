//! Discord adapter (serenity): gateway with RESUME, mention gating, threads, 2000-char chunks, edits, typing, buttons.
