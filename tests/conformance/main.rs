//! The chat-adapter conformance suite: one set of behaviours every chat platform must show,
//! run against each adapter through the real `hermes` binary, its real client crate (teloxide,
//! serenity, slack-morphism) and a protocol-faithful fake of the platform on loopback.
//!
//! * [`peer`]: what a platform's fake must let the suite do ([`peer::ChatPeer`]).
//! * [`suite`]: the behaviours, generic over the peer.
//! * [`telegram`], [`discord`], [`slack`]: the peers over fakes; [`matrix_peer`]: a real Synapse
//!   behind a fault proxy.
//! * [`faults`]: heavier fault scenarios (throttling storms, kill -9 mid-burst, both platforms in one process).
//! * [`cron`]: scheduled jobs added from chat, delivered to their topic or home channels, and
//!   racing tick processes that never run an occurrence twice.
//! * [`approvals`]: dangerous commands approved, denied, timed out and refused from chat.
//! * [`identity`]: who gets in — display-name spoofs denied, strangers' attachments never fetched.
//! * [`slack_scenarios`]: Slack's socket refreshes, dead sockets, lost acks and answers, threads,
//!   `!` and slash commands, and the three chat platforms in one process.
//! * [`matrix`], [`email`]: Matrix (real Synapse) and email (real Dovecot and Postfix) scenarios:
//!   invites, encrypted rooms, reactions, threads; forged senders, machines, threading, restarts.
//! * [`email_tls`]: email over implicit TLS and STARTTLS with certificate checks, and a silent
//!   IMAP connection noticed and replaced.
//! * [`all_platforms`]: every adapter of the build in one process.
//! * [`pairing`]: strangers get in by a code the owner approves (no allowlist), or not at all.
//! * [`mcp_serve`]: hermes as an MCP server, driven by the official Python SDK over stdio and HTTP.
//! * [`metrics`]: `/metrics` through `promtool` and a conversation, `/readyz` while polls hang.

// A test crate: its helpers run only under tests, where a panic is how a test fails
// (clippy.toml's allow-unwrap-in-tests covers `#[test]` functions, not the helpers they call).
#![allow(clippy::unwrap_used)]
// matrix-sdk's futures nest deeper than the default limit when a test spawns a client's sync.
#![recursion_limit = "256"]

mod admin;
mod all_platforms;
mod approvals;
mod cron;
mod discord;
mod email;
mod email_peer;
mod email_tls;
mod faults;
mod identity;
mod matrix;
mod matrix_peer;
mod mcp_approvals;
mod mcp_serve;
mod media;
mod metrics;
mod outages;
mod outages_peers;
mod pacing;
mod pairing;
mod peer;
#[cfg(feature = "postgres")]
mod replica_api;
#[cfg(feature = "postgres")]
mod replica_cron;
#[cfg(feature = "postgres")]
mod replica_failover;
#[cfg(feature = "postgres")]
mod replica_ingress;
#[cfg(feature = "postgres")]
mod replica_telegram_webhook;
#[cfg(feature = "postgres")]
mod replicas;
mod slack;
mod slack_scenarios;
mod suite;
#[path = "../e2e/support.rs"]
#[allow(dead_code)]
mod support;
mod telegram;

/// One `#[tokio::test]` per behaviour for a peer type.
macro_rules! conformance {
    ($module:ident, $peer:ty) => {
        mod $module {
            use super::suite;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn dm_round_trip() {
                suite::dm_round_trip::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn group_gating() {
                suite::group_gating::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn thread_routing() {
                suite::thread_routing::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn long_answer_chunking() {
                suite::long_answer_chunking::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn code_arrives_intact() {
                suite::code_arrives_intact::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn streamed_answer_matches_sent() {
                suite::streamed_answer_matches_sent::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn replied_to_text_is_fenced_as_data() {
                suite::replied_to_text_is_fenced_as_data::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn links_are_not_unfurled() {
                suite::links_are_not_unfurled::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn formatting() {
                suite::formatting::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn edit_streaming() {
                suite::edit_streaming::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn rate_limit_recovery() {
                suite::rate_limit_recovery::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn redelivery_answered_once() {
                suite::redelivery_answered_once::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn reconnect_mid_conversation() {
                suite::reconnect_mid_conversation::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn files_are_attached() {
                suite::files_are_attached::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn junk_is_ignored() {
                suite::junk_is_ignored::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn home_channel_outlives_a_restart() {
                suite::home_channel_outlives_a_restart::<$peer>().await;
            }
        }
    };
}

conformance!(telegram_conformance, crate::telegram::TelegramPeer);
conformance!(discord_conformance, crate::discord::DiscordPeer);
conformance!(slack_conformance, crate::slack::SlackPeer);
conformance!(matrix_conformance, crate::matrix_peer::MatrixPeer);

/// Pairing, on every platform whose registration offers it (email's does not: a From address is
/// forgeable, and answering strangers mails whoever they named).
mod pairing_conformance {
    use super::suite;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn telegram() {
        suite::a_stranger_pairs::<crate::telegram::TelegramPeer>().await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn discord() {
        suite::a_stranger_pairs::<crate::discord::DiscordPeer>().await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn slack() {
        suite::a_stranger_pairs::<crate::slack::SlackPeer>().await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn matrix() {
        suite::a_stranger_pairs::<crate::matrix_peer::MatrixPeer>().await;
    }
}

/// A connection only one replica may hold, taken over when its holder dies (issue 38), on each
/// platform with one; Telegram's is `replicas`' 300-message test.
#[cfg(feature = "postgres")]
mod replica_failover_conformance {
    use super::replica_failover::holder_killed_the_standby_answers_everything_once as failover;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn discord() {
        failover::<crate::discord::DiscordPeer>().await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn slack() {
        failover::<crate::slack::SlackPeer>().await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn matrix() {
        failover::<crate::matrix_peer::MatrixPeer>().await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn email() {
        failover::<crate::email_peer::EmailPeer>().await;
    }
}

/// The suite's behaviours a mailbox can show. Email has no groups, threads, edits, typing or
/// rate-limit answers to provoke, no link previews and no markup (plain text: the renderer's
/// round trip is in hermes-adapter's property tests); those behaviours are email's own scenarios
/// in [`email`] instead.
mod email_conformance {
    use super::suite;
    type P = crate::email_peer::EmailPeer;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn long_answer_chunking() {
        suite::long_answer_chunking::<P>().await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn code_arrives_intact() {
        suite::code_arrives_intact::<P>().await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn replied_to_text_is_fenced_as_data() {
        suite::replied_to_text_is_fenced_as_data::<P>().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dm_round_trip() {
        suite::dm_round_trip::<P>().await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn home_channel_outlives_a_restart() {
        suite::home_channel_outlives_a_restart::<P>().await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redelivery_answered_once() {
        suite::redelivery_answered_once::<P>().await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reconnect_mid_conversation() {
        suite::reconnect_mid_conversation::<P>().await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn junk_is_ignored() {
        suite::junk_is_ignored::<P>().await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn files_are_attached() {
        suite::files_are_attached::<P>().await;
    }
}

/// The HTML a Matrix client renders (`formatted_body`) says what the message's own Markdown
/// `body` says, in every part of a long answer: an HTML parser reads each part's HTML and finds
/// the Markdown's structure, its code exactly and its words (`matrix_oracle` compares with the
/// Markdown, never with our renderer's output); the model's HTML and script links stay inert.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matrix_formatted_body_is_the_markdown_rendered() {
    use crate::peer::ChatPeer;
    let run = suite::launch::<matrix_peer::MatrixPeer>("").await;
    let code = "print(\"<hi>\")  # a & b\n\tif x < y: pass";
    let steps = "- a step with <b>raw html</b> and [a link](javascript:alert(1))\n".repeat(120);
    run.llm.push(hermes_fakes::Reply::text(format!("**Plan** with `x < y`:\n\n```python\n{code}\n```\n\n{steps}")));
    let chat = run.peer.dm(2, "plan it").await;
    run.wait(&chat, "every part", |p| {
        p.last().is_some_and(|m| m.text.trim_end().ends_with(&format!("({n}/{n})", n = p.len())) && p.len() > 1)
    })
    .await;
    let shown = run.peer.shown_in(&chat.chat_id);
    assert!(shown[0].body.contains(code), "the code block arrives whole in the first part: {:?}", shown[0].body);
    for shown in &shown {
        let html = shown.formatted.clone().unwrap_or_else(|| panic!("no formatted_body: {shown:?}"));
        if let Err(e) = hermes_adapter::render::matrix_oracle::check(&shown.body, &html) {
            panic!("the HTML does not say what the Markdown says: {e}\n{shown:?}");
        }
        assert!(
            !html.contains("<b>raw") && !html.to_ascii_lowercase().contains("javascript:"),
            "the model's HTML and script links are inert: {html}"
        );
    }
}

/// Voice notes and pictures (issue 37) on every chat platform.
macro_rules! media_conformance {
    ($module:ident, $peer:ty) => {
        mod $module {
            use super::media;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_voice_note_is_heard() {
                media::a_voice_note_is_heard::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn an_audio_file_is_heard() {
                media::an_audio_file_is_heard::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_failed_transcription_is_told_and_the_message_kept() {
                media::a_failed_transcription_is_told_and_the_message_kept::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_voice_note_too_long_is_refused() {
                media::a_voice_note_too_long_is_refused::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_photo_is_seen() {
                media::a_photo_is_seen::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_blind_model_asks_vision_analyze() {
                media::a_blind_model_asks_vision_analyze::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn voice_only_answers_aloud() {
                media::voice_only_answers_aloud::<$peer>().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_strangers_voice_note_is_never_heard() {
                media::a_strangers_voice_note_is_never_heard::<$peer>().await;
            }
        }
    };
}

media_conformance!(telegram_media, crate::telegram::TelegramPeer);
media_conformance!(discord_media, crate::discord::DiscordPeer);
media_conformance!(slack_media, crate::slack::SlackPeer);
media_conformance!(matrix_media, crate::matrix_peer::MatrixPeer);
media_conformance!(email_media, crate::email_peer::EmailPeer);

/// Refusing a huge picture unfetched needs a platform that declares sizes before the download
/// (a mail arrives whole, and Postfix refuses a 50 MB one before it does).
mod media_limits {
    use super::media;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn telegram() {
        media::a_huge_image_is_refused_unfetched::<crate::telegram::TelegramPeer>().await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn discord() {
        media::a_huge_image_is_refused_unfetched::<crate::discord::DiscordPeer>().await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn slack() {
        media::a_huge_image_is_refused_unfetched::<crate::slack::SlackPeer>().await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn matrix() {
        media::a_huge_image_is_refused_unfetched::<crate::matrix_peer::MatrixPeer>().await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn telegram_through_the_local_engine() {
        media::a_voice_note_is_heard_by_the_local_engine::<crate::telegram::TelegramPeer>().await;
    }
}
