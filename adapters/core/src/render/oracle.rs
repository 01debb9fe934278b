//! The round-trip oracle: given the model's Markdown and the messages a platform would receive,
//! decide whether they show exactly what the model wrote. It knows the dialects from the outside
//! (its own HTML reader, the Markdown parser's offsets), not from the renderer's documents, so a
//! bug in the chunker cannot hide behind itself. Used by the property tests and the fuzz target.
//!
//! What it demands, for every dialect:
//! - every message fits the limit in the platform's unit (visible text for HTML);
//! - with the ` (i/n)` counters removed, and each message's reopened frames (a code fence with
//!   its language, the HTML tags open at that point) and closing markup removed, the messages
//!   tile the rendering of the whole answer: nothing is added, and nothing is dropped but one
//!   space at a cut in running text or line ends at the end of a message;
//! - no message starts or ends inside a grapheme cluster, an escape or entity, an HTML tag, or
//!   a span that should stay whole (code spans, links, markdown emphasis);
//! - every message is well formed on its own: balanced HTML; Markdown whose text has the same
//!   formatting as in the whole answer; Slack mrkdwn read strictly by the oracle's own reader
//!   (only `&amp;`, `&lt;`, `&gt;`; a raw `<` only in a link, a raw `>` only ending one or
//!   quoting a line; every marker that is not literal closed on its line);
//! - every line of every code block the model wrote arrives whole and byte-identical, in order
//!   (on Telegram with tabs expanded, which Telegram would otherwise flatten to one space; on
//!   Slack with entities decoded and runs of backticks broken, which would end the block).

use crate::capabilities::{LengthUnit, MarkdownDialect};
use crate::chunk;
use crate::render::{document, render};
use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};
use std::collections::BTreeMap;
use std::ops::Range;
use unicode_segmentation::UnicodeSegmentation;

/// How much the oracle demands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strictness {
    /// Everything: also that spans stay whole when they fit a message and that Markdown keeps
    /// its formatting. What the chunker guarantees for anything a model writes.
    Full,
    /// Sizes, the round trip, cuts outside graphemes, escapes, entities and tags, well-formed
    /// HTML, whole code lines. What it guarantees for any input at all: in adversarial Markdown
    /// (runs of fifty underscores, emphasis delimiters CommonMark pairs across a whole
    /// paragraph) there may be no cut that keeps every span and every delimiter's pairing.
    Structure,
}

/// Render and split `markdown` for a platform, and check the result. Returns the messages.
pub fn check(markdown: &str, dialect: MarkdownDialect, max_len: usize, unit: LengthUnit) -> Result<Vec<String>, String> {
    check_with(markdown, dialect, max_len, unit, Strictness::Full)
}

/// [`check`] at a chosen strictness.
pub fn check_with(
    markdown: &str,
    dialect: MarkdownDialect,
    max_len: usize,
    unit: LengthUnit,
    strictness: Strictness,
) -> Result<Vec<String>, String> {
    let whole = render(markdown, dialect);
    let doc = document(markdown, dialect);
    if doc.to_text() != whole {
        return Err("the document the chunker splits is not the rendering".into());
    }
    let parts = chunk::split(&doc, max_len, unit);
    let mut model = Model::new(markdown, &whole, dialect)?;
    model.strictness = strictness;
    model.check_split(&parts, max_len, unit)?;
    Ok(parts)
}

/// Check `parts` as the messages for `markdown`, whose whole rendering is `whole`.
pub fn check_parts(
    markdown: &str,
    whole: &str,
    dialect: MarkdownDialect,
    max_len: usize,
    unit: LengthUnit,
    parts: &[String],
) -> Result<(), String> {
    Model::new(markdown, whole, dialect)?.check_split(parts, max_len, unit)
}

/// Check the final messages of an answer streamed with edit-in-place (no counters, parts of at
/// most `max_len`): they must show what the answer sent without streaming shows.
pub fn check_streamed(markdown: &str, dialect: MarkdownDialect, max_len: usize, unit: LengthUnit, parts: &[String]) -> Result<(), String> {
    let whole = render(markdown, dialect);
    let model = Model::new(markdown, &whole, dialect)?;
    model.fit(parts, max_len, unit)?;
    model.round_trips(parts, unit, max_len, max_len)
}

impl Model<'_> {
    fn check_split(&self, parts: &[String], max_len: usize, unit: LengthUnit) -> Result<(), String> {
        self.fit(parts, max_len, unit)?;
        if self.width(self.whole, unit)? <= max_len {
            return if parts == [self.whole] { Ok(()) } else { Err(format!("an answer that fits was split: {parts:#?}")) };
        }
        let bodies = strip_counters(parts)?;
        let reserve = if parts.len() > 1 { 4 + 2 * parts.len().to_string().len() } else { 0 };
        self.round_trips(&bodies, unit, max_len, max_len.saturating_sub(reserve))
    }

    fn fit(&self, parts: &[String], max_len: usize, unit: LengthUnit) -> Result<(), String> {
        for (i, part) in parts.iter().enumerate() {
            let width = self.width(part, unit)?;
            if width > max_len {
                return Err(format!("part {i} is {width} units, over the limit of {max_len}:\n{part}"));
            }
        }
        Ok(())
    }

    fn round_trips(&self, bodies: &[String], unit: LengthUnit, max_len: usize, budget: usize) -> Result<(), String> {
        let model = self;
        let placements = model.tiles(bodies, unit, max_len, budget)?;
        for (i, (part, placement)) in bodies.iter().zip(placements).enumerate() {
            model.well_formed(part, placement).map_err(|e| format!("part {i} is malformed: {e}\n{part}"))?;
        }
        model.code_lines_arrive(bodies, max_len)
    }
}

fn strip_counters(parts: &[String]) -> Result<Vec<String>, String> {
    let total = parts.len();
    if total == 1 {
        return Ok(parts.to_vec());
    }
    parts
        .iter()
        .enumerate()
        .map(|(i, part)| {
            let counter = format!("({}/{total})", i + 1);
            part.strip_suffix(&counter)
                .and_then(|rest| rest.strip_suffix(' ').or_else(|| rest.strip_suffix('\n')))
                .map(str::to_string)
                .ok_or_else(|| format!("part {i} does not end with its counter {counter}: {part:?}"))
        })
        .collect()
}

/// A tag or an entity of an HTML string, by byte range.
#[derive(Debug, Clone)]
enum HtmlToken {
    Open { name: String, range: Range<usize> },
    Close { name: String, range: Range<usize> },
    Entity { decoded: char, range: Range<usize> },
}

/// Read our HTML strictly: every `<` starts a tag, every `&` a known entity, tags nest.
fn html_tokens(html: &str) -> Result<Vec<HtmlToken>, String> {
    let mut tokens = Vec::new();
    let mut open: Vec<String> = Vec::new();
    let mut i = 0;
    while let Some(found) = html[i..].find(['<', '&', '>']) {
        let at = i + found;
        let rest = &html[at..];
        if rest.starts_with('>') {
            return Err(format!("a bare '>' at byte {at}"));
        }
        if rest.starts_with('&') {
            let end = rest.find(';').filter(|&n| n <= 10).ok_or_else(|| format!("a bare '&' at byte {at}"))?;
            let decoded = match &rest[1..end] {
                "amp" => '&',
                "lt" => '<',
                "gt" => '>',
                "quot" => '"',
                other => return Err(format!("unknown entity &{other}; at byte {at}")),
            };
            tokens.push(HtmlToken::Entity { decoded, range: at..at + end + 1 });
            i = at + end + 1;
            continue;
        }
        let end = rest.find('>').ok_or_else(|| format!("an unterminated tag at byte {at}"))?;
        let inner = &rest[1..end];
        let range = at..at + end + 1;
        if let Some(name) = inner.strip_prefix('/') {
            match open.pop() {
                Some(expected) if expected == name => tokens.push(HtmlToken::Close { name: name.to_string(), range }),
                other => return Err(format!("</{name}> at byte {at} closes {other:?}")),
            }
        } else {
            let name = inner.split_whitespace().next().unwrap_or_default().to_string();
            if !matches!(name.as_str(), "b" | "i" | "s" | "u" | "a" | "code" | "pre" | "blockquote") {
                return Err(format!("unexpected tag <{inner}> at byte {at}"));
            }
            open.push(name.clone());
            tokens.push(HtmlToken::Open { name, range });
        }
        i = at + end + 1;
    }
    match open.last() {
        Some(name) => Err(format!("<{name}> is never closed")),
        None => Ok(tokens),
    }
}

/// A frame of Slack mrkdwn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlackFrame {
    /// `*`, `_` or `~`.
    Style(char),
    /// `` `code` ``.
    CodeSpan,
    /// `<url|text>`.
    Link,
    /// A `` ``` `` block.
    Fence,
    /// A line starting `> ` (or a blank quoted line, `>`).
    Quote,
}

/// Markup, an entity or a literal marker of a Slack mrkdwn string, by byte range.
#[derive(Debug, Clone)]
enum SlackToken {
    Open {
        frame: SlackFrame,
        range: Range<usize>,
    },
    /// A quote's close is the empty range where its line ends.
    Close {
        frame: SlackFrame,
        range: Range<usize>,
    },
    Entity {
        decoded: char,
        range: Range<usize>,
    },
    /// Markup that is whole on its own: `<url>`, a literal marker between zero-width spaces.
    Atom {
        range: Range<usize>,
    },
}

const ZWSP: char = '\u{200B}';

/// Read Slack mrkdwn strictly, as Slack would and as our renderer must write it: `&` only in
/// `&amp;`, `&lt;`, `&gt;`; `<` only starting a link; `>` only ending one or, at the start of a
/// line, quoting it; a fence only on a line of its own; a `*`, `_`, `~` or `` ` `` is literal
/// between two letters or digits or between two zero-width spaces, and otherwise opens or closes
/// formatting, which must close on its own line, in order.
fn slack_tokens(text: &str) -> Result<Vec<SlackToken>, String> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut tokens = Vec::new();
    let mut stack: Vec<SlackFrame> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        let rest = &text[at..];
        let line_start = at == 0 || text[..at].ends_with('\n');
        let entity = |tokens: &mut Vec<SlackToken>| -> Result<usize, String> {
            let (name, decoded) = [("&amp;", '&'), ("&lt;", '<'), ("&gt;", '>')]
                .into_iter()
                .find(|(e, _)| rest.starts_with(e))
                .ok_or_else(|| format!("a bare '&' at byte {at}"))?;
            tokens.push(SlackToken::Entity { decoded, range: at..at + name.len() });
            Ok(name.len())
        };
        match stack.last() {
            Some(SlackFrame::Fence) => {
                if line_start && rest.starts_with("```") && (rest.len() == 3 || rest[3..].starts_with('\n')) {
                    tokens.push(SlackToken::Close { frame: SlackFrame::Fence, range: at..at + 3 });
                    stack.pop();
                    i += 3;
                } else if c == '&' {
                    i += entity(&mut tokens)?;
                } else if c == '<' || c == '>' {
                    return Err(format!("a raw {c:?} in code at byte {at}"));
                } else {
                    i += 1;
                }
                continue;
            }
            Some(SlackFrame::CodeSpan) => {
                match c {
                    '`' => {
                        tokens.push(SlackToken::Close { frame: SlackFrame::CodeSpan, range: at..at + 1 });
                        stack.pop();
                    }
                    '&' => {
                        i += entity(&mut tokens)?;
                        continue;
                    }
                    '\n' | '<' | '>' => return Err(format!("{c:?} in a code span at byte {at}")),
                    _ => {}
                }
                i += 1;
                continue;
            }
            _ => {}
        }
        match c {
            '\n' => {
                if stack.last() == Some(&SlackFrame::Quote) {
                    tokens.push(SlackToken::Close { frame: SlackFrame::Quote, range: at..at });
                    stack.pop();
                }
                if let Some(open) = stack.last() {
                    return Err(format!("{open:?} is open at the line end at byte {at}"));
                }
            }
            '&' => {
                i += entity(&mut tokens)?;
                continue;
            }
            '<' => {
                let end = rest[1..].find(['|', '>', '\n', '<']).map(|n| n + 1).filter(|&n| n > 1 && rest[n..].starts_with(['|', '>']));
                let Some(end) = end else { return Err(format!("a '<' that starts no link at byte {at}")) };
                if rest[end..].starts_with('>') {
                    tokens.push(SlackToken::Atom { range: at..at + end + 1 });
                } else {
                    if stack.contains(&SlackFrame::Link) {
                        return Err(format!("a link inside a link at byte {at}"));
                    }
                    tokens.push(SlackToken::Open { frame: SlackFrame::Link, range: at..at + end + 1 });
                    stack.push(SlackFrame::Link);
                }
                i += rest[..=end].chars().count();
                continue;
            }
            '>' if stack.last() == Some(&SlackFrame::Link) => {
                tokens.push(SlackToken::Close { frame: SlackFrame::Link, range: at..at + 1 });
                stack.pop();
            }
            '>' if line_start && stack.is_empty() => {
                let len = if rest.starts_with("> ") {
                    2
                } else if rest.len() == 1 || rest[1..].starts_with('\n') {
                    1
                } else {
                    return Err(format!("a quote marker without its space at byte {at}"));
                };
                tokens.push(SlackToken::Open { frame: SlackFrame::Quote, range: at..at + len });
                stack.push(SlackFrame::Quote);
                i += len;
                continue;
            }
            '>' => return Err(format!("a bare '>' at byte {at}")),
            '`' if line_start && stack.is_empty() && rest.starts_with("```\n") => {
                tokens.push(SlackToken::Open { frame: SlackFrame::Fence, range: at..at + 4 });
                stack.push(SlackFrame::Fence);
                i += 4;
                continue;
            }
            ZWSP if chars.get(i + 1).is_some_and(|(_, m)| "*_~`".contains(*m)) && chars.get(i + 2).is_some_and(|(_, z)| *z == ZWSP) => {
                let end = chars.get(i + 3).map_or(text.len(), |(b, _)| *b);
                tokens.push(SlackToken::Atom { range: at..end });
                i += 3;
                continue;
            }
            '*' | '_' | '~' | '`' => {
                // Slack's reading: a marker opens after a boundary and before a non-space, when a
                // marker of the same character later on the line can close it (after a
                // non-space, before a boundary); inside a word, or without a partner, it is a
                // literal character.
                let prev = |j: usize| if j > 0 { chars.get(j - 1).map(|&(_, p)| p) } else { None };
                let next = |j: usize| chars.get(j + 1).map(|&(_, n)| n);
                let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
                let closes = |j: usize| prev(j).is_some_and(|p| !p.is_whitespace()) && !word(next(j));
                let opens = !word(prev(i)) && next(i).is_some_and(|n| !n.is_whitespace());
                let frame = if c == '`' { SlackFrame::CodeSpan } else { SlackFrame::Style(c) };
                if c != '`' && stack.contains(&frame) && closes(i) {
                    if stack.last() != Some(&frame) {
                        return Err(format!("{c:?} at byte {at} closes across {:?}", stack.last()));
                    }
                    tokens.push(SlackToken::Close { frame, range: at..at + 1 });
                    stack.pop();
                } else if opens && !stack.contains(&frame) {
                    let line_end = chars[i + 1..].iter().position(|&(_, n)| n == '\n').map_or(chars.len(), |p| i + 1 + p);
                    if (i + 1..line_end).any(|j| chars[j].1 == c && closes(j)) {
                        tokens.push(SlackToken::Open { frame, range: at..at + 1 });
                        stack.push(frame);
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    if stack.last() == Some(&SlackFrame::Quote) {
        tokens.push(SlackToken::Close { frame: SlackFrame::Quote, range: text.len()..text.len() });
        stack.pop();
    }
    match stack.last() {
        Some(open) => Err(format!("{open:?} is never closed")),
        None => Ok(tokens),
    }
}

/// Links and code spans of a Slack answer.
fn slack_spans(tokens: &[SlackToken]) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut open: Vec<(SlackFrame, usize)> = Vec::new();
    for token in tokens {
        match token {
            SlackToken::Open { frame, range } => open.push((*frame, range.start)),
            SlackToken::Close { range, .. } => {
                if let Some((SlackFrame::Link | SlackFrame::CodeSpan, start)) = open.pop() {
                    spans.push(Span { range: start..range.end, open: String::new(), close: String::new(), as_text: false });
                }
            }
            SlackToken::Entity { .. } | SlackToken::Atom { .. } => {}
        }
    }
    spans
}

/// Code in Slack mrkdwn as our renderer must write it: a run of three or more backticks, which
/// would end the block, with a zero-width space after every second backtick.
fn slack_code(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut run = 0;
    for c in code.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        if run == 3 {
            out.push(ZWSP);
            run = 1;
        }
        out.push(c);
    }
    out
}

/// What the oracle knows about the whole answer.
struct Model<'a> {
    markdown: &'a str,
    whole: &'a str,
    dialect: MarkdownDialect,
    /// HTML: tags and entities of `whole`.
    html: Vec<HtmlToken>,
    /// Slack mrkdwn: markup and entities of `whole`.
    slack: Vec<SlackToken>,
    /// Markdown: fenced code blocks (content range, opening line, fence).
    fences: Vec<Fence>,
    /// Spans a cut must not fall inside (strictly between their ends) unless they are wider
    /// than a message.
    spans: Vec<Span>,
    /// Markdown: the formatting of each character of the whole answer.
    styles: BTreeMap<usize, Style>,
    strictness: Strictness,
    /// Byte offsets of `whole` that are not grapheme boundaries of what the user sees, with the
    /// width of the grapheme they are inside.
    inside_grapheme: BTreeMap<usize, usize>,
}

/// Where a message sits in the whole answer: from byte `start` on, `taken` bytes, after
/// `reopened` bytes of reopened markup.
#[derive(Debug, Clone, Copy)]
struct Placement {
    start: usize,
    reopened: usize,
    taken: usize,
}

/// Formatting a reader sees on a character of Markdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Style {
    strong: u8,
    emphasis: u8,
    strike: u8,
    link: u8,
    code_span: bool,
    fenced_code: bool,
    indented_code: bool,
}

/// The formatting of every character of `markdown` that the parser shows as text (where the
/// text is the source itself: escapes and entities are left out).
fn inline_styles(markdown: &str) -> BTreeMap<usize, Style> {
    let mut styles = BTreeMap::new();
    let mut style = Style::default();
    for (event, range) in Parser::new_ext(markdown, Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES).into_offset_iter() {
        let (text, code_span) = match &event {
            Event::Start(Tag::Strong) => {
                style.strong += 1;
                continue;
            }
            Event::End(TagEnd::Strong) => {
                style.strong = style.strong.saturating_sub(1);
                continue;
            }
            Event::Start(Tag::Emphasis) => {
                style.emphasis += 1;
                continue;
            }
            Event::End(TagEnd::Emphasis) => {
                style.emphasis = style.emphasis.saturating_sub(1);
                continue;
            }
            Event::Start(Tag::Strikethrough) => {
                style.strike += 1;
                continue;
            }
            Event::End(TagEnd::Strikethrough) => {
                style.strike = style.strike.saturating_sub(1);
                continue;
            }
            Event::Start(Tag::Link { .. } | Tag::Image { .. }) => {
                style.link += 1;
                continue;
            }
            Event::End(TagEnd::Link | TagEnd::Image) => {
                style.link = style.link.saturating_sub(1);
                continue;
            }
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(_))) => {
                style.fenced_code = true;
                continue;
            }
            Event::Start(Tag::CodeBlock(CodeBlockKind::Indented)) => {
                style.indented_code = true;
                continue;
            }
            Event::End(TagEnd::CodeBlock) => {
                style.fenced_code = false;
                style.indented_code = false;
                continue;
            }
            Event::Text(t) => (t.as_ref(), false),
            Event::Code(_) => {
                let span = &markdown[range.clone()];
                let ticks = span.len() - span.trim_start_matches('`').len();
                (&span[ticks..span.len() - ticks.min(span.len() - ticks)], true)
            }
            _ => continue,
        };
        let source = &markdown[range.clone()];
        let (base, text) = if code_span { (range.start + source.find(text).unwrap_or(0), text) } else { (range.start, text) };
        if !code_span && source != text {
            continue;
        }
        let mut shown = style;
        shown.code_span = code_span;
        for (i, c) in text.char_indices() {
            if !c.is_whitespace() {
                styles.insert(base + i, shown);
            }
        }
    }
    styles
}

/// Room a message needs besides a span for the span to fit it (counter, reopened markup).
const SPAN_SLACK: usize = 16;

/// A span that should stay whole, with its markup as written.
#[derive(Debug, Clone)]
struct Span {
    range: Range<usize>,
    open: String,
    close: String,
    /// Markup too long to repeat (a link with a long address): written once, as text.
    as_text: bool,
}

#[derive(Debug, Clone)]
struct Fence {
    /// Where a part starting inside must reopen the fence.
    inside: Range<usize>,
    /// The code lines.
    content: Range<usize>,
    /// The end of the block, after its closing fence.
    end: usize,
    opening: String,
    fence: String,
}

impl<'a> Model<'a> {
    fn new(markdown: &'a str, whole: &'a str, dialect: MarkdownDialect) -> Result<Self, String> {
        let html = if dialect == MarkdownDialect::TelegramHtml {
            html_tokens(whole).map_err(|e| format!("the whole answer: {e}"))?
        } else {
            Vec::new()
        };
        let slack = if dialect == MarkdownDialect::SlackMrkdwn {
            slack_tokens(whole).map_err(|e| format!("the whole answer: {e}"))?
        } else {
            Vec::new()
        };
        let (fences, spans) = match dialect {
            MarkdownDialect::Markdown => markdown_structure(markdown),
            MarkdownDialect::TelegramHtml => (Vec::new(), html_spans(&html)),
            MarkdownDialect::SlackMrkdwn => (Vec::new(), slack_spans(&slack)),
            MarkdownDialect::Plain => (Vec::new(), Vec::new()),
        };
        let styles = if dialect == MarkdownDialect::Markdown { inline_styles(whole) } else { BTreeMap::new() };
        let mut model = Model {
            markdown,
            whole,
            dialect,
            html,
            slack,
            fences,
            spans,
            styles,
            strictness: Strictness::Full,
            inside_grapheme: BTreeMap::new(),
        };
        model.inside_grapheme = model.grapheme_interiors();
        Ok(model)
    }

    /// Width of a message as the platform counts it.
    fn width(&self, text: &str, unit: LengthUnit) -> Result<usize, String> {
        match self.dialect {
            MarkdownDialect::TelegramHtml => Ok(unit.measure(&visible_html(text)?)),
            _ => Ok(unit.measure(text)),
        }
    }

    /// Width of markup as the platform counts it: as typed, except HTML tags, which count nothing.
    fn markup_width(&self, markup: &str, unit: LengthUnit) -> usize {
        if self.dialect == MarkdownDialect::TelegramHtml { 0 } else { unit.measure(markup) }
    }

    /// Offsets inside grapheme clusters (and, in markdown, inside escapes and entities).
    fn grapheme_interiors(&self) -> BTreeMap<usize, usize> {
        let mut interiors = BTreeMap::new();
        // Visible text with a map back to `whole`'s offsets.
        let mut visible = String::new();
        let mut origin = Vec::new();
        let marks = self.markup_ranges();
        let mut next_token = marks.iter().peekable();
        let mut i = 0;
        while i < self.whole.len() {
            while next_token.peek().is_some_and(|(range, _)| range.is_empty()) {
                next_token.next();
            }
            if let Some((range, decoded)) = next_token.peek() {
                let (range, decoded) = (range.clone(), *decoded);
                if range.start == i {
                    for inner in range.start + 1..range.end {
                        interiors.insert(inner, 1);
                    }
                    if let Some(c) = decoded {
                        visible.push(c);
                        origin.push(i);
                    }
                    i = range.end;
                    next_token.next();
                    continue;
                }
            }
            let c = self.whole[i..].chars().next().unwrap_or(' ');
            visible.push(c);
            origin.push(i);
            i += c.len_utf8();
        }
        origin.push(self.whole.len());
        let char_index: BTreeMap<usize, usize> = visible.char_indices().enumerate().map(|(n, (b, _))| (b, n)).collect();
        for (start, grapheme) in visible.grapheme_indices(true) {
            let first = char_index[&start];
            let count = grapheme.chars().count();
            for &inner in &origin[first + 1..first + count] {
                interiors.insert(inner, count);
            }
        }
        if self.dialect == MarkdownDialect::Markdown {
            for atom in chunk::atoms(self.whole, true) {
                for inner in atom.start + 1..atom.end {
                    interiors.entry(inner).or_insert(atom.len());
                }
            }
        }
        interiors
    }

    /// The markup and entities of the whole answer (HTML or Slack), by byte range, with the
    /// character an entity stands for.
    fn markup_ranges(&self) -> Vec<(Range<usize>, Option<char>)> {
        let html = self.html.iter().map(|token| match token {
            HtmlToken::Open { range, .. } | HtmlToken::Close { range, .. } => (range.clone(), None),
            HtmlToken::Entity { range, decoded } => (range.clone(), Some(*decoded)),
        });
        let slack = self.slack.iter().map(|token| match token {
            SlackToken::Open { range, .. } | SlackToken::Close { range, .. } | SlackToken::Atom { range } => (range.clone(), None),
            SlackToken::Entity { range, decoded } => (range.clone(), Some(*decoded)),
        });
        html.chain(slack).collect()
    }

    /// The Slack frames open at `at`, outermost first, with the markup that opened them.
    fn slack_stack(&self, at: usize) -> Vec<(SlackFrame, Range<usize>)> {
        let mut stack = Vec::new();
        for token in &self.slack {
            match token {
                SlackToken::Open { frame, range } if range.end <= at => stack.push((*frame, range.clone())),
                SlackToken::Close { range, .. } if range.end <= at => {
                    stack.pop();
                }
                _ => {}
            }
        }
        stack
    }

    /// The markup a message starting at `at` must open with, and the one a message ending there
    /// must close with.
    fn frames_at(&self, at: usize) -> (String, String) {
        match self.dialect {
            MarkdownDialect::SlackMrkdwn => {
                let stack = self.slack_stack(at);
                if stack.iter().any(|(frame, _)| *frame == SlackFrame::Fence) {
                    let line_start = if self.whole[..at].ends_with('\n') { "" } else { "\n" };
                    return ("```\n".to_string(), format!("{line_start}```"));
                }
                let reopen = stack.iter().map(|(_, range)| &self.whole[range.clone()]).collect();
                let close = stack
                    .iter()
                    .rev()
                    .map(|(frame, _)| match frame {
                        SlackFrame::Style(c) => c.to_string(),
                        SlackFrame::CodeSpan => "`".to_string(),
                        SlackFrame::Link => ">".to_string(),
                        SlackFrame::Quote | SlackFrame::Fence => String::new(),
                    })
                    .collect();
                (reopen, close)
            }
            MarkdownDialect::TelegramHtml => {
                let mut open: Vec<(&str, &str)> = Vec::new();
                for token in &self.html {
                    match token {
                        HtmlToken::Open { name, range } if range.end <= at => open.push((name, &self.whole[range.clone()])),
                        HtmlToken::Close { range, .. } if range.end <= at => {
                            open.pop();
                        }
                        _ => {}
                    }
                }
                let reopen = open.iter().map(|(_, tag)| *tag).collect();
                let close = open.iter().rev().map(|(name, _)| format!("</{name}>")).collect();
                (reopen, close)
            }
            MarkdownDialect::Markdown => {
                if let Some(fence) = self.fence_at(at) {
                    let line_start = if self.whole[..at].ends_with('\n') { "" } else { "\n" };
                    return (fence.opening.clone(), format!("{line_start}{}", fence.fence));
                }
                let inside: Vec<&Span> = self.spans.iter().filter(|s| s.range.start < at && at < s.range.end).collect();
                (inside.iter().map(|s| s.open.as_str()).collect(), inside.iter().rev().map(|s| s.close.as_str()).collect())
            }
            MarkdownDialect::Plain => (String::new(), String::new()),
        }
    }

    fn fence_at(&self, at: usize) -> Option<&Fence> {
        self.fences.iter().find(|f| f.inside.start <= at && at < f.inside.end)
    }

    /// Inside code, where whitespace is content.
    fn in_code(&self, at: usize) -> bool {
        match self.dialect {
            MarkdownDialect::TelegramHtml => self.frames_at(at).0.contains("<pre>") || self.frames_at(at).0.contains("<code>"),
            MarkdownDialect::Markdown => self.fence_at(at).is_some(),
            MarkdownDialect::SlackMrkdwn => {
                self.slack_stack(at).iter().any(|(frame, _)| matches!(frame, SlackFrame::Fence | SlackFrame::CodeSpan))
            }
            MarkdownDialect::Plain => false,
        }
    }

    /// The messages, counters removed, put back together must give the whole answer.
    fn tiles(&self, bodies: &[String], unit: LengthUnit, max_len: usize, budget: usize) -> Result<Vec<Placement>, String> {
        let mut at = 0;
        let mut placements = Vec::new();
        for (i, body) in bodies.iter().enumerate() {
            let last = i + 1 == bodies.len();
            let starts = if i == 0 { vec![0] } else { self.resumptions(at) };
            let found = starts.iter().find_map(|&start| {
                let (reopen, close) = self.frames_at(start);
                if let Some(taken) = body.strip_prefix(&reopen).and_then(|rest| self.body_length(start, rest, true)) {
                    return Some(Placement { start, reopened: reopen.len(), taken });
                }
                // Frames too costly to repeat in a part of this size may be left out of it, as
                // may frames that would not fit around what the part shows.
                let cost = self.markup_width(&reopen, unit) + self.markup_width(&close, unit) + 1;
                let taken = self.body_length(start, body, false)?;
                let closing = self.markup_width(&self.frames_at(start + taken).1, unit);
                let crowded = cost + closing + self.width(body, unit).ok()? > budget;
                (cost * 4 > budget * 3 || crowded).then_some(Placement { start, reopened: 0, taken })
            });
            let Some(placement @ Placement { start, taken, .. }) = found else {
                let (reopen, _) = self.frames_at(at);
                return Err(format!(
                    "part {i} is not the answer's text from byte {at} (reopening {reopen:?}) plus its closing markup:\n{body}\n--- the answer from there ---\n{}",
                    &self.whole[at..]
                ));
            };
            self.legal_cut(start, unit, max_len).map_err(|e| format!("part {i} starts {e}"))?;
            placements.push(placement);
            at = start + taken;
            if !last {
                self.legal_cut(at, unit, max_len).map_err(|e| format!("part {i} ends {e}"))?;
            }
        }
        // Only whitespace may be left, and the markup the last message closed itself.
        let left = &self.whole[at..];
        let visible = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
        let closes_itself = |left: &str| match self.fence_at(at) {
            // A closing fence may be longer than the one that opened the block.
            Some(fence) => {
                left.trim().lines().count() == 1
                    && is_closing_fence(left.trim(), fence.fence.chars().next().unwrap_or('`'), fence.fence.len())
            }
            None => visible(left) == visible(&self.frames_at(at).1),
        };
        if !visible(left).is_empty() && !closes_itself(left) {
            return Err(format!("the end of the answer never arrived: {left:?}"));
        }
        Ok(placements)
    }

    /// How many bytes of the answer `rest` (a message without its reopened frames) shows.
    fn body_length(&self, at: usize, rest: &str, closed: bool) -> Option<usize> {
        let remaining = &self.whole[at..];
        let common = remaining.bytes().zip(rest.bytes()).take_while(|(a, b)| a == b).count();
        // Where a message ends inside markup it closes it (also the last one, when it leaves out
        // whitespace the answer ends with); at the very end the answer's own markup is all.
        let close_at = |end: usize| if closed && end < self.whole.len() { self.frames_at(end).1 } else { String::new() };
        (common.saturating_sub(512)..=common).rev().filter(|&m| remaining.is_char_boundary(m) && rest.is_char_boundary(m)).find(|&m| {
            // The line end a message ends with may have been trimmed for its counter, after the
            // markup closed there.
            let line_end = ["\r\n", "\n"].iter().find(|end| remaining[m..].starts_with(**end)).map_or(0, |end| end.len());
            rest[m..] == close_at(at + m) || line_end > 0 && rest[m..] == close_at(at + m + line_end)
        })
    }

    /// Where the next message may resume after one ended at `at`: right there, or (outside
    /// code) after the spaces dropped at the cut or line ends the break between messages shows;
    /// then past markup the previous message already closed.
    fn resumptions(&self, at: usize) -> Vec<usize> {
        let mut starts = self.skips(at);
        // A message that ended right before a closing fence wrote its own; the original is
        // left out.
        let after_fences: Vec<usize> = starts
            .iter()
            .filter_map(|&s| self.fences.iter().find(|f| f.content.end == s && f.end > s))
            .flat_map(|f| self.skips(f.end))
            .collect();
        starts.extend(after_fences);
        let mut all = Vec::new();
        for start in starts {
            all.push(start);
            let mut next = start;
            let closing_at = |next: usize| {
                let html = self.html.iter().find_map(|t| match t {
                    HtmlToken::Close { range, .. } if range.start == next => Some(range.end),
                    _ => None,
                });
                html.or_else(|| {
                    self.slack.iter().find_map(|t| match t {
                        SlackToken::Close { range, .. } if range.start == next && range.end > next => Some(range.end),
                        _ => None,
                    })
                })
            };
            while let Some(end) = closing_at(next) {
                next = end;
                all.push(next);
            }
        }
        all
    }

    /// `at`, and the places after whitespace a cut there may drop: outside code any blank run,
    /// in code the one line end a message ends with.
    fn skips(&self, at: usize) -> Vec<usize> {
        let rest = &self.whole[at..];
        let mut starts = vec![at];
        if !self.in_code(at) {
            let blank = rest.len() - rest.trim_start_matches([' ', '\n', '\r']).len();
            starts.extend((1..=blank).map(|n| at + n));
        } else if let Some(line_end) = ["\r\n", "\n"].iter().find(|end| rest.starts_with(**end)) {
            starts.push(at + line_end.len());
        }
        starts
    }

    fn legal_cut(&self, at: usize, unit: LengthUnit, max_len: usize) -> Result<(), String> {
        if let Some(&width) = self.inside_grapheme.get(&at) {
            // Only a symbol wider than a message may be cut (between its characters).
            let wide = width * 2 > max_len || unit == LengthUnit::Utf16 && width * 4 > max_len;
            if !wide {
                return Err(format!("inside a grapheme, escape, entity or tag at byte {at}: {:?}", context(self.whole, at)));
            }
        }
        // A span may be cut only when it cannot fit a message of its own.
        let fits = |span: &Span| self.width(&self.whole[span.range.clone()], unit).unwrap_or(usize::MAX) + SPAN_SLACK <= max_len;
        if self.strictness == Strictness::Full
            && let Some(span) = self.spans.iter().find(|s| s.range.start < at && at < s.range.end && fits(s))
        {
            return Err(format!("inside a span that must stay whole at byte {at}: {:?}", &self.whole[span.range.clone()]));
        }
        Ok(())
    }

    /// A message renders on its own: HTML is balanced; in Markdown, every character of the
    /// answer it shows has the formatting it has in the whole answer.
    fn well_formed(&self, part: &str, placement: Placement) -> Result<(), String> {
        match self.dialect {
            MarkdownDialect::TelegramHtml => html_tokens(part).map(|_| ()),
            MarkdownDialect::SlackMrkdwn => slack_tokens(part).map(|_| ()),
            MarkdownDialect::Plain => Ok(()),
            MarkdownDialect::Markdown if self.strictness == Strictness::Structure => Ok(()),
            MarkdownDialect::Markdown => {
                let whole = &self.styles;
                let shown = placement.start..placement.start + placement.taken;
                for (offset, style) in inline_styles(part) {
                    let Some(at) = offset.checked_sub(placement.reopened).map(|o| o + placement.start).filter(|a| shown.contains(a)) else {
                        continue;
                    };
                    // Indented code is CommonMark's, not Discord's: no verdict on it either way.
                    if let Some(expected) = whole.get(&at)
                        && *expected != style
                        && !expected.indented_code
                        && !style.indented_code
                    {
                        return Err(format!(
                            "{:?} at byte {at} of the answer is formatted {style:?} here but {expected:?} in the whole answer",
                            context(self.whole, at)
                        ));
                    }
                }
                Ok(())
            }
        }
    }

    /// Every line of every code block the model wrote arrives whole, byte-identical, in order.
    fn code_lines_arrive(&self, bodies: &[String], max_len: usize) -> Result<(), String> {
        let expected: Vec<String> = model_code_lines(self.markdown, self.dialect);
        let mut received: Vec<String> = Vec::new();
        for body in bodies {
            // At structural strictness a line need only arrive whole: in adversarial Markdown a
            // code line cut in two may read as a fence in the next part.
            let shown = match (self.strictness, self.dialect) {
                (Strictness::Structure, MarkdownDialect::Markdown) => code_lines_shown(body, MarkdownDialect::Plain)?,
                _ => code_lines_shown(body, self.dialect)?,
            };
            received.extend(shown);
        }
        // A line longer than what a message holds besides its counter and fences cannot arrive
        // whole.
        let fences = self.fences.iter().map(|f| f.opening.chars().count() + f.fence.chars().count() + 1).max().unwrap_or(0);
        let room = max_len.saturating_sub(16 + fences) / 2;
        let mut from = 0;
        for line in expected {
            if line.chars().count() > room {
                continue;
            }
            match received[from..].iter().position(|r| *r == line) {
                Some(n) => from += n + 1,
                None => return Err(format!("the code line {line:?} did not arrive whole and in order")),
            }
        }
        Ok(())
    }
}

fn context(text: &str, at: usize) -> String {
    let start = (0..=at.saturating_sub(12)).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
    let end = (at + 12..=text.len()).find(|&i| text.is_char_boundary(i)).unwrap_or(text.len());
    text[start..end].to_string()
}

/// What a Telegram user sees of an HTML message.
fn visible_html(html: &str) -> Result<String, String> {
    let tokens = html_tokens(html)?;
    let mut out = String::new();
    let mut i = 0;
    for token in tokens {
        let (range, decoded) = match token {
            HtmlToken::Open { range, .. } | HtmlToken::Close { range, .. } => (range, None),
            HtmlToken::Entity { range, decoded } => (range, Some(decoded)),
        };
        out.push_str(&html[i..range.start]);
        out.extend(decoded);
        i = range.end;
    }
    out.push_str(&html[i..]);
    Ok(out)
}

/// Fenced code blocks and the spans that must stay whole, from the parser's offsets.
fn markdown_structure(markdown: &str) -> (Vec<Fence>, Vec<Span>) {
    let events: Vec<(Event<'_>, Range<usize>)> =
        Parser::new_ext(markdown, Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES).into_offset_iter().collect();
    let mut fences = Vec::new();
    let mut spans = Vec::new();
    let mut open_spans: Vec<(usize, usize)> = Vec::new();
    for (i, (event, range)) in events.iter().enumerate() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(_))) => {
                let block = &markdown[range.clone()];
                let line_end = block.find('\n').map_or(block.len(), |n| n + 1);
                let opening = block[..line_end].to_string();
                let trimmed = opening.trim_start();
                let fence_char = if trimmed.starts_with('~') { '~' } else { '`' };
                let fence: String = trimmed.chars().take_while(|&c| c == fence_char).collect();
                // The content ends where the closing fence's line starts (or at the block's end).
                let last_line = block.trim_end_matches('\n').rfind('\n').map_or(line_end, |n| n + 1);
                let closed = last_line >= line_end && is_closing_fence(&block[last_line..], fence_char, fence.len());
                let content_end = if closed { range.start + last_line } else { range.end };
                // A part reopens the fence with its language only; an opening line too long to
                // hold whole counts as the block's first line.
                let language = trimmed[fence.len()..]
                    .split_whitespace()
                    .next()
                    .filter(|l| l.chars().count() <= crate::render::markdown::MAX_LANGUAGE_CHARS)
                    .unwrap_or("");
                let long = opening.chars().count() > crate::render::markdown::MAX_MARKUP_CHARS;
                let content_start = if long { range.start + 1 } else { range.start + line_end };
                let content = range.start + line_end..content_end.max(range.start + line_end);
                let fence: String = std::iter::repeat_n(fence_char, fence.chars().count().max(3)).collect();
                fences.push(Fence {
                    inside: content_start..content_end.max(content_start),
                    content,
                    end: range.end,
                    opening: crate::render::markdown::reopened_fence(&fence, language),
                    fence,
                });
            }
            Event::Start(Tag::Emphasis | Tag::Strong | Tag::Strikethrough | Tag::Link { .. } | Tag::Image { .. }) => {
                let open_end = events.get(i + 1).map_or(range.end, |(_, next)| next.start);
                open_spans.push((i, open_end));
            }
            Event::End(TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough | TagEnd::Link | TagEnd::Image) => {
                if let Some((start, open_end)) = open_spans.pop() {
                    let close_start = if i > start + 1 { events[i - 1].1.end } else { open_end };
                    // Spans nested too deep, and links with an address too long to repeat, are
                    // not reopened.
                    let close = &markdown[close_start.max(open_end)..range.end];
                    let as_text = close.chars().count() > crate::render::markdown::MAX_MARKUP_CHARS;
                    let repeated = open_spans.len() < crate::render::markdown::MAX_INLINE_DEPTH && !as_text;
                    spans.push(Span {
                        range: range.clone(),
                        open: if repeated { markdown[range.start..open_end].to_string() } else { String::new() },
                        close: if repeated { close.to_string() } else { String::new() },
                        as_text,
                    });
                }
            }
            Event::Code(_) => {
                let span = &markdown[range.clone()];
                let ticks = span.len() - span.trim_start_matches('`').len();
                let closing = (span.len() - span.trim_end_matches('`').len()).min(span.len() - ticks);
                let (open, close) = if ticks > crate::render::markdown::MAX_CODE_TICKS {
                    (String::new(), String::new())
                } else {
                    (span[..ticks].to_string(), span[span.len() - closing..].to_string())
                };
                spans.push(Span { range: range.clone(), open, close, as_text: false });
            }
            _ => {}
        }
    }
    spans.sort_by_key(|s| (s.range.start, std::cmp::Reverse(s.range.end)));
    // What a link written as text holds is text too: its spans are not reopened.
    let text_ranges: Vec<Range<usize>> = spans.iter().filter(|s| s.as_text).map(|s| s.range.clone()).collect();
    for span in &mut spans {
        if text_ranges.iter().any(|r| r.start <= span.range.start && span.range.end <= r.end && *r != span.range) {
            span.open.clear();
            span.close.clear();
        }
    }
    (fences, spans)
}

/// CommonMark's closing fence: up to three spaces, at least as many fence characters as the
/// opening one, then only spaces.
fn is_closing_fence(line: &str, fence_char: char, len: usize) -> bool {
    let line = line.trim_end_matches(['\n', '\r']);
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = &line[indent..];
    let run = rest.len() - rest.trim_start_matches(fence_char).len();
    indent <= 3 && run >= len && rest[run..].trim_matches([' ', '\t']).is_empty()
}

/// Links and code spans (outside preformatted blocks) of an HTML answer.
fn html_spans(tokens: &[HtmlToken]) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut open: Vec<(&str, Range<usize>, bool)> = Vec::new();
    for token in tokens {
        match token {
            HtmlToken::Open { name, range } => {
                let in_pre = open.iter().any(|(n, _, _)| *n == "pre");
                open.push((name, range.clone(), !in_pre && (name == "a" || name == "code")));
            }
            HtmlToken::Close { range, .. } => {
                if let Some((_, start, true)) = open.pop() {
                    spans.push(Span { range: start.start..range.end, open: String::new(), close: String::new(), as_text: false });
                }
            }
            HtmlToken::Entity { .. } => {}
        }
    }
    spans
}

/// The code lines the model wrote, as the dialect must show them.
fn model_code_lines(markdown: &str, dialect: MarkdownDialect) -> Vec<String> {
    if dialect == MarkdownDialect::Markdown {
        return markdown_structure(markdown).0.iter().flat_map(|f| source_lines(&markdown[f.content.clone()])).collect();
    }
    let mut lines = Vec::new();
    let mut code = None::<String>;
    // Read as the dialect's renderer reads it (plain text knows no tables).
    let options = if dialect == MarkdownDialect::Plain { Options::empty() } else { Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES };
    for event in Parser::new_ext(markdown, options) {
        match event {
            Event::Start(Tag::CodeBlock(_)) => code = Some(String::new()),
            Event::Text(t) => {
                if let Some(c) = code.as_mut() {
                    c.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                let block = code.take().unwrap_or_default();
                let block = match dialect {
                    MarkdownDialect::TelegramHtml => expand_tabs(&block),
                    MarkdownDialect::SlackMrkdwn => slack_code(&block),
                    _ => block,
                };
                lines.extend(source_lines(&block));
            }
            _ => {}
        }
    }
    lines
}

fn source_lines(block: &str) -> Vec<String> {
    block.split('\n').map(|l| l.trim_end_matches('\r').to_string()).filter(|l| !l.trim().is_empty()).collect()
}

fn expand_tabs(text: &str) -> String {
    let mut out = String::new();
    let mut column = 0;
    for c in text.chars() {
        match c {
            '\t' => {
                let n = 4 - column % 4;
                out.push_str(&" ".repeat(n));
                column += n;
            }
            '\n' => {
                out.push(c);
                column = 0;
            }
            c => {
                out.push(c);
                column += 1;
            }
        }
    }
    out
}

/// The lines a message shows as code.
fn code_lines_shown(body: &str, dialect: MarkdownDialect) -> Result<Vec<String>, String> {
    match dialect {
        MarkdownDialect::Markdown => Ok(markdown_structure(body).0.iter().flat_map(|f| source_lines(&body[f.content.clone()])).collect()),
        MarkdownDialect::Plain => Ok(source_lines(body)),
        MarkdownDialect::SlackMrkdwn => {
            let mut lines = Vec::new();
            let mut code: Option<String> = None;
            let mut i = 0;
            for token in slack_tokens(body)? {
                let (range, decoded) = match &token {
                    SlackToken::Open { range, .. } | SlackToken::Close { range, .. } | SlackToken::Atom { range } => (range.clone(), None),
                    SlackToken::Entity { range, decoded } => (range.clone(), Some(*decoded)),
                };
                if let Some(code) = code.as_mut() {
                    code.push_str(&body[i..range.start]);
                    code.extend(decoded);
                }
                match token {
                    SlackToken::Open { frame: SlackFrame::Fence, .. } => code = Some(String::new()),
                    SlackToken::Close { frame: SlackFrame::Fence, .. } => lines.extend(source_lines(&code.take().unwrap_or_default())),
                    _ => {}
                }
                i = range.end;
            }
            Ok(lines)
        }
        MarkdownDialect::TelegramHtml => {
            let mut lines = Vec::new();
            let mut depth = 0usize;
            let mut code = String::new();
            let mut i = 0;
            for token in html_tokens(body)? {
                let (range, decoded) = match &token {
                    HtmlToken::Open { range, .. } | HtmlToken::Close { range, .. } => (range.clone(), None),
                    HtmlToken::Entity { range, decoded } => (range.clone(), Some(*decoded)),
                };
                if depth > 0 {
                    code.push_str(&body[i..range.start]);
                    code.extend(decoded);
                }
                match token {
                    HtmlToken::Open { name, .. } if name == "pre" => depth += 1,
                    HtmlToken::Close { name, .. } if name == "pre" => {
                        depth -= 1;
                        lines.extend(source_lines(&std::mem::take(&mut code)));
                    }
                    _ => {}
                }
                i = range.end;
            }
            Ok(lines)
        }
    }
}
