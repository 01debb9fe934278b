//! [`plan`] without I/O: which parts a reply becomes, under which keys, and which part carries
//! the reply-to, the buttons and the finish.

use super::*;
use crate::gateway::delivery::reply::Finish;
use hermes_adapter::{Button, ChatTarget, LengthUnit, MarkdownDialect, Platform, StreamStyle, Usage};
use std::path::PathBuf;

fn caps(max_message_len: usize, supports_buttons: bool) -> Capabilities {
    Capabilities {
        max_message_len,
        length_unit: LengthUnit::Chars,
        dialect: MarkdownDialect::Markdown,
        streaming: StreamStyle::None,
        supports_edit: false,
        supports_buttons,
        supports_typing: false,
        supports_threads: false,
        supports_async_delivery: true,
        splits_long_messages: true,
        supports_files: true,
        read_live: true,
        people_reply: true,
        voice_notes: false,
    }
}

fn target() -> ChatTarget {
    ChatTarget { platform: Platform::new("chat"), chat_id: "c1".into(), thread_id: None }
}

fn key() -> ReplyKey {
    ReplyKey::Answer("ev1".into())
}

fn yes_no() -> Vec<Vec<Button>> {
    vec![vec![Button { label: "Yes".into(), data: "y".into() }, Button { label: "No".into(), data: "n".into() }]]
}

fn file(name: &str) -> OutboundFile {
    OutboundFile::new(PathBuf::from(format!("/tmp/{name}")), true)
}

/// One row per part: (key, text, reply_to, buttons?, is_final, has file).
type Row = (String, String, Option<String>, bool, bool, bool);

fn rows(messages: &[OutboundMessage]) -> Vec<Row> {
    messages
        .iter()
        .map(|m| (m.idempotency_key.clone(), m.text.clone(), m.reply_to.clone(), !m.buttons.is_empty(), m.is_final, m.file.is_some()))
        .collect()
}

fn row(key: &str, text: &str, reply_to: Option<&str>, buttons: bool, is_final: bool, file: bool) -> Row {
    (key.into(), text.into(), reply_to.map(str::to_string), buttons, is_final, file)
}

#[test]
fn a_short_text_is_one_part_under_the_first_part_key() {
    let reply = Reply::markdown(target(), "Hello there").replying_to(Some("m7")).finishing(Some(Finish::stop()));
    let planned = plan(&reply, &caps(4096, true), &key());
    assert_eq!(rows(&planned), vec![row("ev1:answer:0", "Hello there", Some("m7"), false, true, false)]);
    assert_eq!(planned[0].finish_reason.as_deref(), Some("stop"));
    assert_eq!(planned[0].usage, Some(Usage::default()));
    assert_eq!(planned[0].target, target());
}

#[test]
fn a_text_over_the_limit_is_split_and_every_text_part_replies() {
    let words = "word ".repeat(30);
    let reply = Reply::markdown(target(), words.trim_end()).replying_to(Some("m7")).finishing(Some(Finish::stop()));
    let planned = plan(&reply, &caps(60, false), &key());
    let keys: Vec<&str> = planned.iter().map(|p| p.idempotency_key.as_str()).collect();
    assert_eq!(keys, ["ev1:answer:0", "ev1:answer:1", "ev1:answer:2"]);
    for (i, part) in planned.iter().enumerate() {
        assert_eq!(part.reply_to.as_deref(), Some("m7"));
        assert!(part.text.chars().count() <= 60, "{:?}", part.text);
        assert!(part.text.ends_with(&format!("({}/3)", i + 1)), "{:?}", part.text);
        assert_eq!(part.is_final, i == 2);
    }
    assert_eq!(planned.iter().map(|p| p.text.as_str()).collect::<Vec<_>>(), render_for(&caps(60, false), words.trim_end()));
}

#[test]
fn files_follow_the_text_without_reply_to_and_the_last_part_carries_the_rest() {
    let mut reply = Reply::markdown(target(), "Here you go").replying_to(Some("m7")).with_buttons(yes_no());
    reply.files = vec![file("a.pdf"), file("b.pdf")];
    let reply = reply.finishing(Some(Finish::stop()));
    assert_eq!(
        rows(&plan(&reply, &caps(4096, true), &key())),
        vec![
            row("ev1:answer:0", "Here you go", Some("m7"), false, false, false),
            row("ev1:answer:file:0", "", None, false, false, true),
            row("ev1:answer:file:1", "", None, true, true, true),
        ]
    );
}

#[test]
fn files_without_words_send_no_empty_text() {
    let mut reply = Reply::markdown(target(), "  \n");
    reply.files = vec![file("a.png")];
    assert_eq!(rows(&plan(&reply, &caps(4096, true), &key())), vec![row("ev1:answer:file:0", "", None, false, false, true)]);
}

#[test]
fn buttons_go_under_the_last_part_only_where_the_platform_has_buttons() {
    let words = "word ".repeat(30);
    let reply = Reply::markdown(target(), words.trim_end()).with_buttons(yes_no());
    let with = plan(&reply, &caps(60, true), &key());
    let buttons: Vec<bool> = with.iter().map(|m| !m.buttons.is_empty()).collect();
    assert_eq!(buttons.last(), Some(&true));
    assert!(buttons[..buttons.len() - 1].iter().all(|b| !b));
    assert_eq!(with.last().map(|m| m.buttons.clone()), Some(yes_no()));
    assert!(plan(&reply, &caps(60, false), &key()).iter().all(|m| m.buttons.is_empty()));
}

#[test]
fn a_rendered_body_is_sent_as_it_is() {
    let reply = Reply::rendered(target(), "*already* MEDIA:/tmp/x.png").replying_to(Some("m7"));
    let stream = ReplyKey::Stream { event_id: "ev1".into(), n: 2 };
    assert_eq!(
        rows(&plan(&reply, &caps(4096, true), &stream)),
        vec![row("ev1:answer:stream2:0", "*already* MEDIA:/tmp/x.png", Some("m7"), false, false, false)]
    );
}

#[test]
fn an_empty_body_is_one_empty_part() {
    // A request/response client still gets its (empty) answer, so its request finishes.
    let reply = Reply::markdown(target(), "").finishing(Some(Finish::stop()));
    assert_eq!(rows(&plan(&reply, &caps(4096, false), &key())), vec![row("ev1:answer:0", "", None, false, true, false)]);
}

#[test]
fn a_platform_that_does_not_split_gets_one_part() {
    let words = "word ".repeat(30);
    let caps = Capabilities { splits_long_messages: false, ..caps(60, false) };
    let planned = plan(&Reply::markdown(target(), words.trim_end()), &caps, &key());
    assert_eq!(rows(&planned), vec![row("ev1:answer:0", words.trim_end(), None, false, false, false)]);
}
