//! The agent's Markdown rendered to Slack's mrkdwn (`chat.postMessage` with `mrkdwn: true`) from
//! a parsed AST, so every character Slack treats specially is escaped or neutralised by
//! construction.
//!
//! What becomes what:
//! - `**bold**` → `*bold*`, `*italic*` → `_italic_`, `~~strike~~` → `~strike~`, `` `code` `` →
//!   `` `code` ``; a style nested in the same style (bold in a heading) keeps one pair of markers.
//! - Code blocks → `` ``` `` blocks on lines of their own, without the language (Slack shows
//!   none); the content is verbatim (indentation, tabs, blank lines), except that `&`, `<`, `>`
//!   are entities (Slack decodes them everywhere, and a raw `<` is a link or a mention even in
//!   code) and a run of three or more backticks, which would end the block, has a zero-width
//!   space (U+200B) after every second backtick. In a code span, which cannot hold a backtick at
//!   all, a backtick is shown as `ˋ` (U+02CB).
//! - `[text](url)` → `<url|text>`, `<url>` → `<url>`, `![alt](url)` → `<url|alt>`. Slack has no
//!   escape for `|` in link text (it would end the address), so a `|` there is shown as `｜`
//!   (U+FF5C, a full-width vertical line); `>` is `&gt;` as everywhere. In the address, `|`, `<`,
//!   `>` and whitespace are percent-encoded, and `&` is `&amp;`.
//! - Headings → `*heading*` on a line of their own; quotes → lines starting `> `; lists → `• ` and
//!   `1. ` with four spaces per level, tasks `☐`/`☑`; rules → `───`; tables → a code block of
//!   `| cell | cell |` rows (as Telegram shows them, in `<pre>`); HTML → its text, escaped.
//! - `&`, `<`, `>` are entities everywhere, so `<!channel>` or `<@U123>` in the model's text
//!   arrives as `&lt;!channel&gt;`: shown, never a ping. The model's output is untrusted.
//!
//! Slack reads `*`, `_`, `~` and `` ` `` as formatting only at word boundaries: an opening marker
//! after whitespace or punctuation, a closing one before them, never inside a word. So:
//! - A literal marker (an escaped `\*` in the Markdown, a lone `~`) between two letters or digits
//!   (`a_b*c`, `snake_case`) is left as it is: Slack never reads it as formatting. So is one that
//!   cannot pair with another of its character on its line (`cd ~/src`, `rm -rf ~`): zero-width
//!   spaces there would break what users copy out of the message. One that could
//!   (`\*not bold\*`) gets a
//!   zero-width space on each side (`\u{200B}*\u{200B}`). Slack reads U+200B either as
//!   whitespace (then a marker between two of them neither opens nor closes, as with spaces) or
//!   as a letter (then it is inside a word); either way it is literal.
//!   A literal `>` at the start of a line, which Slack could read as a quote (Slack sends quotes
//!   as `&gt; `), gets a zero-width space before it.
//! - Formatting whose opening marker follows a letter or digit, or whose closing marker is
//!   followed by one (`foo**bar**baz`), or that touches a zero-width space the model wrote,
//!   loses its markers: Slack would not show it, and would show the markers instead.
//!
//! Slack formatting does not span lines, so every line is written whole: a part of the document
//! that ends a line closes the styles and the quote open on it, and the next line reopens them.
//! The [`Doc`] does the same at message boundaries, so each message renders on its own.

use super::doc::{Doc, DocBuilder, Escape, Frame, FrameKind, Piece, TextKind};
use pulldown_cmark::{Event, HeadingLevel, LinkType, Options, Parser, Tag, TagEnd};

/// What keeps a literal marker from being read as formatting (see the module documentation).
pub const ZWSP: char = '\u{200B}';

/// What a `|` in link text is shown as: Slack has no escape for it.
pub const LINK_TEXT_PIPE: char = '\u{FF5C}';

/// What a backtick in a code span is shown as: a code span cannot hold one.
pub const CODE_SPAN_BACKTICK: char = '\u{02CB}';

/// The characters Slack may read as formatting.
pub const MARKERS: [char; 4] = ['*', '_', '~', '`'];

/// Markdown to Slack mrkdwn.
pub fn to_slack_mrkdwn(markdown: &str) -> String {
    document(markdown).to_text()
}

/// Markdown to Slack mrkdwn, as a [`Doc`] the chunker can split.
pub fn document(markdown: &str) -> Doc {
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS;
    let events: Vec<Event<'_>> = Parser::new_ext(markdown, options).collect();
    let mut w = Writer {
        out: DocBuilder::new(Escape::Slack, true, false),
        quote: 0,
        lists: Vec::new(),
        styles: Vec::new(),
        line_open: false,
        line_quoted: false,
        newlines: 0,
        links: Vec::new(),
        code: None,
    };
    for (i, event) in events.iter().enumerate() {
        w.event(event, events.get(i + 1));
    }
    if w.line_open {
        w.end_line();
    }
    let mut doc = w.out.finish_trimmed();
    neutralise(&mut doc);
    doc
}

/// An inline style (or a heading) open in the Markdown.
struct Style {
    marker: &'static str,
    kind: FrameKind,
    /// Its markers are written (not when the same style is already open around it).
    shown: bool,
}

/// A link or image open in the Markdown.
enum Link {
    /// Written as a `<url|…>` frame.
    Frame,
    /// An autolink, written whole as `<url>` at its start; its text is skipped.
    Auto,
    /// Inside another link, or without an address: its text only.
    TextOnly,
    /// In a table (preformatted): its text, then ` (url)`.
    InTable(String),
}

/// A code block or table being collected.
struct Code {
    text: String,
    table: bool,
}

struct Writer {
    out: DocBuilder,
    /// Quotes open.
    quote: usize,
    lists: Vec<Option<u64>>,
    styles: Vec<Style>,
    /// The current line's frames (its quote marker and styles) are open.
    line_open: bool,
    /// The current line was opened with a quote marker.
    line_quoted: bool,
    /// Line ends owed before what comes next (written when it comes, so none trail a block).
    newlines: usize,
    links: Vec<Link>,
    code: Option<Code>,
}

impl Writer {
    fn event(&mut self, event: &Event<'_>, next: Option<&Event<'_>>) {
        match event {
            Event::Text(text) => self.text(text),
            Event::Code(code) => {
                if let Some(buffer) = self.code.as_mut() {
                    buffer.text.push_str(code);
                    return;
                }
                self.begin_line();
                self.out.open(Frame::symmetric(FrameKind::Inline { splittable: false }, "`", "`"));
                self.out.text(&code.replace('`', &CODE_SPAN_BACKTICK.to_string()), TextKind::Code);
                self.out.close();
            }
            Event::SoftBreak | Event::HardBreak => self.newline(),
            Event::Rule => {
                self.need(if self.lists.is_empty() { 2 } else { 1 });
                self.begin_line();
                self.out.text("───", TextKind::Markup);
                self.block_end();
            }
            Event::Html(html) | Event::InlineHtml(html) => self.text(html),
            Event::TaskListMarker(done) => {
                self.begin_line();
                self.out.text(if *done { "☑ " } else { "☐ " }, TextKind::Markup);
            }
            Event::FootnoteReference(name) => self.text(&format!("[{name}]")),
            Event::InlineMath(math) | Event::DisplayMath(math) => self.text(math),
            Event::Start(tag) => self.open(tag, next),
            Event::End(tag) => self.close(*tag),
        }
    }

    /// Text of the answer: collected in code, split at line ends elsewhere.
    fn text(&mut self, text: &str) {
        if let Some(buffer) = self.code.as_mut() {
            buffer.text.push_str(text);
            return;
        }
        if matches!(self.links.last(), Some(Link::Auto)) {
            return;
        }
        let in_link = !self.links.is_empty();
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 {
                self.newline();
            }
            if line.is_empty() {
                continue;
            }
            self.begin_line();
            if in_link {
                self.out.text(&line.replace('|', &LINK_TEXT_PIPE.to_string()), TextKind::Prose);
            } else {
                self.out.text(line, TextKind::Prose);
            }
        }
    }

    /// A line end in running text (a space inside a link or a table, which hold one line).
    fn newline(&mut self) {
        if let Some(buffer) = self.code.as_mut() {
            buffer.text.push(' ');
        } else if !self.links.is_empty() {
            self.begin_line();
            self.out.text(" ", TextKind::Prose);
        } else if self.line_open {
            self.end_line();
        } else {
            self.newlines += 1;
        }
    }

    /// Close the current line's frames; the line end itself is owed.
    fn end_line(&mut self) {
        if self.line_open {
            for _ in self.styles.iter().filter(|s| s.shown) {
                self.out.close();
            }
            if self.line_quoted {
                self.out.close();
            }
            self.line_open = false;
            self.line_quoted = false;
        }
        self.newlines += 1;
    }

    /// At least `n` line ends before what comes next (the current line ends).
    fn need(&mut self, n: usize) {
        if self.line_open {
            self.end_line();
        }
        self.newlines = self.newlines.max(n);
    }

    fn block_end(&mut self) {
        self.need(if self.lists.is_empty() { 2 } else { 1 });
    }

    /// Write the line ends owed (blank lines inside a quote are quoted); none at the start.
    fn flush_newlines(&mut self) {
        let owed = std::mem::take(&mut self.newlines);
        if self.out.is_empty() {
            return;
        }
        for i in 0..owed {
            if i > 0 && self.quote > 0 {
                self.out.open(Frame::symmetric(FrameKind::Block, ">", ""));
                self.out.close();
            }
            self.out.text("\n", TextKind::Prose);
        }
    }

    /// Open the current line: the owed line ends, then its quote marker and styles.
    fn begin_line(&mut self) {
        if self.line_open {
            return;
        }
        self.flush_newlines();
        if self.quote > 0 {
            self.out.open(Frame::symmetric(FrameKind::Block, "> ", ""));
            self.line_quoted = true;
        }
        for style in self.styles.iter().filter(|s| s.shown) {
            self.out.open(Frame::symmetric(style.kind, style.marker, style.marker));
        }
        self.line_open = true;
    }

    fn push_style(&mut self, marker: &'static str, kind: FrameKind, shown: bool) {
        if self.code.is_some() {
            return;
        }
        self.begin_line();
        let shown = shown && !self.styles.iter().any(|s| s.shown && s.marker == marker);
        if shown {
            self.out.open(Frame::symmetric(kind, marker, marker));
        }
        self.styles.push(Style { marker, kind, shown });
    }

    fn pop_style(&mut self) {
        if self.code.is_some() {
            return;
        }
        if let Some(style) = self.styles.pop()
            && style.shown
            && self.line_open
        {
            self.out.close();
        }
    }

    /// A code block or table starts: on a line of its own, outside any quote (Slack's code
    /// blocks cannot be quoted line by line).
    fn start_code(&mut self, table: bool) {
        self.need(usize::from(!self.out.is_empty()));
        self.flush_newlines();
        self.code = Some(Code { text: String::new(), table });
    }

    fn end_code(&mut self) {
        let Some(Code { mut text, table }) = self.code.take() else { return };
        if table {
            text.truncate(text.trim_end_matches('\n').len());
        } else if text.ends_with('\n') {
            text.pop();
        }
        let text = break_fences(&text);
        self.out.open(Frame {
            kind: FrameKind::Code,
            open: "```\n".into(),
            reopen: "```\n".into(),
            close: "```".into(),
            close_on_own_line: true,
        });
        self.out.text(&text, TextKind::Code);
        self.out.close_with(if text.is_empty() { "```".into() } else { "\n```".into() });
        self.block_end();
    }

    fn open(&mut self, tag: &Tag<'_>, next: Option<&Event<'_>>) {
        match tag {
            Tag::Paragraph | Tag::HtmlBlock => {}
            Tag::Heading { .. } => {
                let empty = matches!(next, Some(Event::End(TagEnd::Heading(_))));
                self.push_style("*", FrameKind::Lines, !empty);
            }
            Tag::BlockQuote(_) => {
                self.need(0);
                self.quote += 1;
            }
            Tag::CodeBlock(_) => self.start_code(false),
            Tag::Table(_) => self.start_code(true),
            Tag::TableCell => {
                if let Some(buffer) = self.code.as_mut() {
                    buffer.text.push_str("| ");
                }
            }
            Tag::List(start) => {
                if !self.lists.is_empty() {
                    self.need(1);
                }
                self.lists.push(*start);
            }
            Tag::Item => {
                self.need(1);
                self.begin_line();
                let depth = self.lists.len().saturating_sub(1);
                let bullet = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let bullet = format!("{n}. ");
                        *n += 1;
                        bullet
                    }
                    _ => "• ".to_string(),
                };
                self.out.text(&format!("{}{bullet}", "    ".repeat(depth)), TextKind::Markup);
            }
            Tag::Emphasis => self.push_style("_", FrameKind::Inline { splittable: true }, true),
            Tag::Strong => self.push_style("*", FrameKind::Inline { splittable: true }, true),
            Tag::Strikethrough => self.push_style("~", FrameKind::Inline { splittable: true }, true),
            Tag::Link { link_type, dest_url, .. } => self.open_link(*link_type, dest_url, next),
            Tag::Image { dest_url, .. } => self.open_link(LinkType::Inline, dest_url, next),
            _ => {}
        }
    }

    fn open_link(&mut self, link_type: LinkType, url: &str, next: Option<&Event<'_>>) {
        if self.code.is_some() {
            self.links.push(Link::InTable(url.to_string()));
            return;
        }
        if !self.links.is_empty() || url.trim().is_empty() {
            self.links.push(Link::TextOnly);
            return;
        }
        self.begin_line();
        let empty = matches!(next, Some(Event::End(TagEnd::Link | TagEnd::Image)));
        if matches!(link_type, LinkType::Autolink | LinkType::Email) || empty {
            let url = if link_type == LinkType::Email { format!("mailto:{url}") } else { url.to_string() };
            let whole = format!("<{}>", link_address(&url));
            self.out.open(Frame {
                kind: FrameKind::Inline { splittable: false },
                open: whole,
                reopen: String::new(),
                close: String::new(),
                close_on_own_line: false,
            });
            self.out.close();
            self.links.push(Link::Auto);
            return;
        }
        self.out.open(Frame::symmetric(FrameKind::Inline { splittable: false }, format!("<{}|", link_address(url)), ">"));
        self.links.push(Link::Frame);
    }

    fn close(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph | TagEnd::HtmlBlock => self.block_end(),
            TagEnd::Heading(level) => {
                self.pop_style();
                self.need(if level == HeadingLevel::H1 && self.lists.is_empty() { 2 } else { 1 });
            }
            TagEnd::BlockQuote(_) => {
                self.need(1);
                self.quote = self.quote.saturating_sub(1);
                self.block_end();
            }
            TagEnd::CodeBlock | TagEnd::Table => self.end_code(),
            TagEnd::TableHead | TagEnd::TableRow => {
                if let Some(buffer) = self.code.as_mut() {
                    buffer.text.push_str("|\n");
                }
            }
            TagEnd::TableCell => {
                if let Some(buffer) = self.code.as_mut() {
                    buffer.text.push(' ');
                }
            }
            TagEnd::List(_) => {
                self.lists.pop();
                if self.lists.is_empty() { self.block_end() } else { self.need(1) }
            }
            TagEnd::Item => self.need(1),
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => self.pop_style(),
            TagEnd::Link | TagEnd::Image => match self.links.pop() {
                Some(Link::Frame) => self.out.close(),
                Some(Link::InTable(url)) => {
                    if let Some(buffer) = self.code.as_mut()
                        && !buffer.text.ends_with(url.as_str())
                    {
                        buffer.text.push_str(&format!(" ({url})"));
                    }
                }
                Some(Link::Auto | Link::TextOnly) | None => {}
            },
            _ => {}
        }
    }
}

/// `url` as the address of a Slack link: `|`, `<`, `>` and whitespace percent-encoded (they
/// would end the address or the link), `&` as `&amp;`.
pub fn link_address(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    for c in url.chars() {
        match c {
            '|' | '<' | '>' => out.push_str(&format!("%{:02X}", c as u32)),
            c if c.is_whitespace() => {
                for byte in c.encode_utf8(&mut [0; 4]).bytes() {
                    out.push_str(&format!("%{byte:02X}"));
                }
            }
            '&' => out.push_str("&amp;"),
            c => out.push(c),
        }
    }
    out
}

/// Code with every run of three or more backticks broken by a zero-width space after every
/// second backtick, so that no run closes the block.
pub fn break_fences(code: &str) -> String {
    if !code.contains("```") {
        return code.to_string();
    }
    let mut out = String::with_capacity(code.len() + 8);
    let mut run = 0;
    for c in code.chars() {
        if c == '`' {
            if run == 2 {
                out.push(ZWSP);
                run = 0;
            }
            run += 1;
        } else {
            run = 0;
        }
        out.push(c);
    }
    out
}

/// The markup a piece writes.
fn written(piece: &Piece) -> &str {
    match piece {
        Piece::Text { text, .. } => text,
        Piece::Open(frame) => &frame.open,
        Piece::Close(markup) => markup,
    }
}

/// The last character written before piece `i`.
fn char_before(pieces: &[Piece], i: usize) -> Option<char> {
    pieces[..i].iter().rev().find_map(|p| written(p).chars().next_back())
}

/// The first character written after piece `i`.
fn char_after(pieces: &[Piece], i: usize) -> Option<char> {
    pieces.get(i + 1..)?.iter().find_map(|p| written(p).chars().next())
}

fn is_style_marker(frame: &Frame) -> bool {
    matches!(frame.kind, FrameKind::Inline { .. } | FrameKind::Lines) && frame.open.len() == 1 && frame.open.starts_with(MARKERS)
}

/// Apply the word-boundary rules of the module documentation to a rendered document: drop the
/// markers of formatting Slack would not show, and neutralise literal markers.
fn neutralise(doc: &mut Doc) {
    drop_unshowable_styles(&mut doc.pieces);
    // The written text, to see each literal marker's whole line (its partner may be in another
    // piece: a style's marker, or a literal inside it).
    let written_all: String = doc.pieces.iter().map(written).collect();
    let mut offset = 0;
    let mut pieces = Vec::with_capacity(doc.pieces.len());
    // Each open frame: whether it is code, whether it is a link.
    let mut frames: Vec<(bool, bool)> = Vec::new();
    let mut prev: Option<char> = None;
    for (i, piece) in doc.pieces.iter().enumerate() {
        let start = offset;
        offset += written(piece).len();
        match piece {
            Piece::Open(frame) => frames.push((frame.kind == FrameKind::Code, frame.open.starts_with('<'))),
            Piece::Close(_) => {
                frames.pop();
            }
            Piece::Text { text, kind: TextKind::Prose } if !frames.iter().any(|f| f.0) && text.contains(['*', '_', '~', '`', '>']) => {
                let in_link = frames.iter().any(|f| f.1);
                let line = Line { text: &written_all, offset: start };
                split_literals(text, prev, char_after(&doc.pieces, i), in_link, &line, &mut pieces);
                prev = text.chars().next_back().or(prev);
                continue;
            }
            Piece::Text { .. } => {}
        }
        prev = written(piece).chars().next_back().or(prev);
        pieces.push(piece.clone());
    }
    doc.pieces = pieces;
}

/// The written document a text piece sits in, and where the piece starts in it.
struct Line<'a> {
    text: &'a str,
    offset: usize,
}

impl Line<'_> {
    /// Whether the marker `c` at byte `at` (of the document) can pair with another `c` on its line:
    /// it could open and a later one could close, or it could close and an earlier one could
    /// open (see the module documentation).
    fn pairs(&self, c: char, at: usize) -> bool {
        // The line of byte `at`: a piece of text may span several.
        let start = self.text[..at].rfind('\n').map_or(0, |n| n + 1);
        let end = self.text[at..].find('\n').map_or(self.text.len(), |n| at + n);
        let at = at - start;
        let chars: Vec<(usize, char)> = self.text[start..end].char_indices().collect();
        let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
        let role = |i: usize| {
            let prev = if i > 0 { Some(chars[i - 1].1) } else { None };
            let next = chars.get(i + 1).map(|&(_, n)| n);
            let opens = !word(prev) && next.is_some_and(|n| !n.is_whitespace());
            let closes = prev.is_some_and(|p| !p.is_whitespace()) && !word(next);
            (opens, closes)
        };
        let Some(me) = chars.iter().position(|&(b, _)| b == at) else { return false };
        let (opens, closes) = role(me);
        chars.iter().enumerate().filter(|&(i, &(_, d))| d == c && i != me).any(|(i, _)| {
            let (other_opens, other_closes) = role(i);
            (i > me && opens && other_closes) || (i < me && closes && other_opens)
        })
    }
}

/// Drop the markers of styles and code spans whose opening marker follows a letter or digit, or
/// whose closing marker is followed by one, or that touch a zero-width space; a code span that
/// loses its markers becomes running text. Repeated until nothing changes, since a marker
/// dropped brings its neighbours together.
fn drop_unshowable_styles(pieces: &mut [Piece]) {
    let mut changed = true;
    while changed {
        changed = false;
        let mut open: Vec<usize> = Vec::new();
        for i in 0..pieces.len() {
            match &pieces[i] {
                Piece::Open(_) => open.push(i),
                Piece::Close(_) => {
                    let Some(start) = open.pop() else { continue };
                    let Piece::Open(frame) = &pieces[start] else { continue };
                    if !is_style_marker(frame) {
                        continue;
                    }
                    let outer = [char_before(pieces, start), char_after(pieces, i)];
                    let inner = [char_after(pieces, start), char_before(pieces, i)];
                    let word = outer.iter().any(|c| c.is_some_and(char::is_alphanumeric));
                    let zwsp = outer.iter().chain(&inner).any(|c| *c == Some(ZWSP));
                    if word || zwsp {
                        let code = frame.open == "`";
                        pieces[start] = Piece::Open(Frame::bare(frame.kind));
                        pieces[i] = Piece::Close(String::new());
                        if code {
                            for piece in &mut pieces[start + 1..i] {
                                if let Piece::Text { kind, .. } = piece {
                                    *kind = TextKind::Prose;
                                }
                            }
                        }
                        changed = true;
                    }
                }
                Piece::Text { .. } => {}
            }
        }
    }
}

/// `text` (running text between `before` and `after`) with its literal markers neutralised, as
/// pieces: a marker that needs a zero-width space, and a marker inside a word with its
/// neighbours, become markup of their own inside a frame a cut avoids (a message that ended or
/// started next to the marker could read it as formatting). A `>` in link text is never at the
/// start of a line.
fn split_literals(text: &str, before: Option<char>, after: Option<char>, in_link: bool, line: &Line<'_>, out: &mut Vec<Piece>) {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let alnum = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    // Where the text not yet written starts.
    let mut written_to = 0;
    for (i, &(at, c)) in chars.iter().enumerate() {
        if at < written_to {
            continue;
        }
        let prev = if i > 0 { Some(chars[i - 1].1) } else { before };
        let next = chars.get(i + 1).map(|&(_, c)| c).or(after);
        let end = at + c.len_utf8();
        // Slack pairs a marker that could open (after a boundary, before a non-space) or close
        // (after a non-space, before a boundary) with another of its character on the line. One
        // that cannot, or has no other on its line (`rm -rf ~`, `cd ~/src`), stays as typed:
        // zero-width spaces there would break what users copy out of the message.
        let (from, to, markup) = if MARKERS.contains(&c) && alnum(prev) && alnum(next) {
            // Inside a word: kept as it is, with its neighbours in this text.
            let from = if i > 0 { chars[i - 1].0.max(written_to) } else { at };
            let to = chars.get(i + 1).map_or(end, |&(b, n)| b + n.len_utf8());
            (from, to, text[from..to].to_string())
        } else if MARKERS.contains(&c) && line.pairs(c, line.offset + at) {
            (at, end, format!("{ZWSP}{c}{ZWSP}"))
        } else if MARKERS.contains(&c) {
            // As typed, in a frame of its own, so a cut never brings it next to text it could
            // pair with.
            (at, end, c.to_string())
        } else if c == '>' && !in_link && prev.is_none_or(|p| p == '\n') {
            (at, end, format!("{ZWSP}>"))
        } else {
            continue;
        };
        push_text(out, &text[written_to..from], TextKind::Prose);
        out.push(Piece::Open(Frame::bare(FrameKind::Inline { splittable: false })));
        push_text(out, &markup, TextKind::Markup);
        out.push(Piece::Close(String::new()));
        written_to = to;
    }
    push_text(out, &text[written_to..], TextKind::Prose);
}

fn push_text(out: &mut Vec<Piece>, text: &str, kind: TextKind) {
    if !text.is_empty() {
        out.push(Piece::Text { text: text.to_string(), kind });
    }
}

/// Slack mrkdwn back to the words it shows, for when Slack refuses the markup: markers and
/// zero-width spaces dropped, `<url|text>` as `text (url)`, `<url>` as the address, code fences
/// and quote markers removed, entities decoded.
pub fn mrkdwn_to_plain(mrkdwn: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut in_fence = false;
    for line in mrkdwn.split('\n') {
        if line.starts_with("```") && line[3..].trim().is_empty() {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            lines.push(decode_entities(&line.replace(ZWSP, "")));
            continue;
        }
        let line = line.strip_prefix("> ").or_else(|| if line == ">" { Some("") } else { None }).unwrap_or(line);
        lines.push(inline_to_plain(line));
    }
    lines.join("\n")
}

/// One line of mrkdwn outside code, as plain words.
fn inline_to_plain(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let rest = &chars[i..];
        if c == '<'
            && let Some(len) = rest.iter().position(|&c| c == '>')
        {
            let inner: String = rest[1..len].iter().collect();
            match inner.split_once('|') {
                Some((url, text)) => {
                    let url = decode_entities(url);
                    let text = inline_to_plain(text);
                    if text.is_empty() || text == url {
                        out.push_str(&url);
                    } else {
                        out.push_str(&format!("{text} ({url})"));
                    }
                }
                None => out.push_str(&decode_entities(&inner)),
            }
            i += len + 1;
            continue;
        }
        if c == '&'
            && let Some((decoded, len)) = [("&amp;", '&'), ("&lt;", '<'), ("&gt;", '>')]
                .iter()
                .find(|(entity, _)| rest.iter().take(entity.len()).copied().eq(entity.chars()))
                .map(|(entity, decoded)| (*decoded, entity.len()))
        {
            out.push(decoded);
            i += len;
            continue;
        }
        if MARKERS.contains(&c) {
            let prev = i.checked_sub(1).map(|p| chars[p]);
            let next = chars.get(i + 1).copied();
            let literal = prev == Some(ZWSP) && next == Some(ZWSP)
                || prev.is_some_and(char::is_alphanumeric) && next.is_some_and(char::is_alphanumeric);
            if literal {
                out.push(c);
            }
        } else if c != ZWSP {
            out.push(c);
        }
        i += 1;
    }
    out
}

/// `&amp;`, `&lt;` and `&gt;` decoded (the only entities Slack mrkdwn has).
pub fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let entity = [("&amp;", '&'), ("&lt;", '<'), ("&gt;", '>')].into_iter().find(|(e, _)| rest.starts_with(e));
        match entity {
            Some((e, c)) => {
                out.push(c);
                rest = &rest[e.len()..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::{LengthUnit, MarkdownDialect};
    use crate::chunk;

    fn slack(markdown: &str) -> String {
        to_slack_mrkdwn(markdown)
    }

    fn chunks(text: &str, max: usize) -> Vec<String> {
        chunk::split(&crate::render::document(text, MarkdownDialect::SlackMrkdwn), max, LengthUnit::Chars)
    }

    #[test]
    fn emphasis_strike_and_code_spans() {
        assert_eq!(slack("**bold** and __bold__"), "*bold* and *bold*");
        assert_eq!(slack("*italic* and _italic_"), "_italic_ and _italic_");
        assert_eq!(slack("~~gone~~"), "~gone~");
        assert_eq!(slack("`code`"), "`code`");
        assert_eq!(slack("***both***"), "_*both*_");
        assert_eq!(slack("**bold *and italic* here**"), "*bold _and italic_ here*");
    }

    #[test]
    fn code_spans_keep_their_text_but_escape_entities() {
        assert_eq!(slack("`a < b && c > d`"), "`a &lt; b &amp;&amp; c &gt; d`");
        assert_eq!(slack("`<!channel> *x* _y_`"), "`&lt;!channel&gt; *x* _y_`");
        assert_eq!(slack("`` a`b ``"), "`a\u{02CB}b`");
    }

    #[test]
    fn code_blocks_drop_the_language_and_keep_their_content() {
        let md = "Before\n\n```python\ndef f(a, b):\n    if a < b & 1:\n\t\treturn \"x\"\n\n        pass\n```\nAfter";
        assert_eq!(slack(md), "Before\n\n```\ndef f(a, b):\n    if a &lt; b &amp; 1:\n\t\treturn \"x\"\n\n        pass\n```\n\nAfter");
        assert_eq!(slack("    indented\n      more"), "```\nindented\n  more\n```");
        // Markers in code are content.
        assert_eq!(slack("```\n*a* _b_ ~c~\n```"), "```\n*a* _b_ ~c~\n```");
    }

    #[test]
    fn a_fence_inside_code_cannot_close_the_block() {
        assert_eq!(slack("````\n```\nx ````\n````"), "```\n``\u{200B}`\nx ``\u{200B}``\n```");
    }

    #[test]
    fn links_images_and_autolinks() {
        assert_eq!(slack("[site](https://x.test/?a=1&b=2)"), "<https://x.test/?a=1&amp;b=2|site>");
        assert_eq!(slack("<https://x.test/a>"), "<https://x.test/a>");
        assert_eq!(slack("<me@x.test>"), "<mailto:me@x.test>");
        assert_eq!(slack("![a cat](https://x.test/cat.png)"), "<https://x.test/cat.png|a cat>");
        assert_eq!(slack("[**bold** link](https://x.test)"), "<https://x.test|*bold* link>");
        assert_eq!(slack("[](https://x.test)"), "<https://x.test>");
    }

    #[test]
    fn link_text_with_pipes_and_brackets_stays_one_link() {
        assert_eq!(slack("[a | b > c < d](https://x.test)"), "<https://x.test|a \u{FF5C} b &gt; c &lt; d>");
        assert_eq!(slack("[x](<https://x.test/a b|c>)"), "<https://x.test/a%20b%7Cc|x>");
        assert_eq!(link_address("https://x.test/<a>|\tb"), "https://x.test/%3Ca%3E%7C%09b");
    }

    #[test]
    fn headings_quotes_rules_and_lists() {
        assert_eq!(slack("# Plan\n\ntext\n\n## Next step\nmore"), "*Plan*\n\ntext\n\n*Next step*\nmore");
        assert_eq!(slack("# A **bold** title"), "*A bold title*");
        assert_eq!(slack("> quoted *text*\n> on two lines\n\nafter"), "> quoted _text_\n> on two lines\n\nafter");
        assert_eq!(slack("> one\n>\n> two"), "> one\n>\n> two");
        assert_eq!(slack("a\n\n---\n\nb"), "a\n\n───\n\nb");
        assert_eq!(
            slack("- one\n- two\n    - nested\n        - deeper\n- three\n\n1. first\n2. second"),
            "• one\n• two\n    • nested\n        • deeper\n• three\n\n1. first\n2. second"
        );
        assert_eq!(slack("- [ ] todo\n- [x] done"), "• ☐ todo\n• ☑ done");
    }

    #[test]
    fn styles_do_not_span_lines() {
        assert_eq!(slack("**one\ntwo**"), "*one*\n*two*");
        assert_eq!(slack("> **one\n> two**"), "> *one*\n> *two*");
    }

    #[test]
    fn tables_are_preformatted_rows() {
        assert_eq!(slack("| a | b |\n|---|---|\n| 1 | **2** |"), "```\n| a | b |\n| 1 | 2 |\n```");
    }

    #[test]
    fn html_is_shown_as_text() {
        assert_eq!(slack("a <script>x</script> b"), "a &lt;script&gt;x&lt;/script&gt; b");
        assert_eq!(slack("<div>\nhi\n</div>"), "&lt;div&gt;\nhi\n&lt;/div&gt;");
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(slack("5 < 6 & 7 > 3"), "5 &lt; 6 &amp; 7 &gt; 3");
        assert_eq!(slack("a&b<c>d"), "a&amp;b&lt;c&gt;d");
    }

    /// The model's output is untrusted: whatever it writes, nobody is pinged.
    #[test]
    fn mentions_in_the_models_text_never_ping() {
        assert_eq!(slack("Hey <!channel> and <!here>, ask <@U123>"), "Hey &lt;!channel&gt; and &lt;!here&gt;, ask &lt;@U123&gt;");
        assert_eq!(slack("<!everyone>"), "&lt;!everyone&gt;");
        assert_eq!(slack("[<!channel>](https://x.test)"), "<https://x.test|&lt;!channel&gt;>");
        assert_eq!(slack("`<@U123>`"), "`&lt;@U123&gt;`");
        let rendered = slack("**<!channel>** <#C1|general> <!subteam^S1>");
        assert!(!rendered.contains("<!") && !rendered.contains("<@") && !rendered.contains("<#"), "{rendered}");
    }

    #[test]
    fn literal_markers_at_word_boundaries_are_neutralised() {
        assert_eq!(slack(r"\*not bold\*"), "\u{200B}*\u{200B}not bold\u{200B}*\u{200B}");
        assert_eq!(
            slack(r"\_not italic\_ and \~not struck\~"),
            "\u{200B}_\u{200B}not italic\u{200B}_\u{200B} and \u{200B}~\u{200B}not struck\u{200B}~\u{200B}"
        );
        assert_eq!(slack(r"\`not code\`"), "\u{200B}`\u{200B}not code\u{200B}`\u{200B}");
        assert_eq!(slack(r"\*\*"), "\u{200B}*\u{200B}\u{200B}*\u{200B}");
        // Inside a word Slack never formats: unchanged.
        assert_eq!(slack("a_b*c"), "a_b*c");
        assert_eq!(slack("snake_case_name and 2*3"), "snake_case_name and 2*3");
        // A `>` that could start a quote.
        assert_eq!(slack(r"\> not a quote"), "\u{200B}&gt; not a quote");
        // Markers that cannot pair, and `>` inside a line, stay as typed: users copy these.
        assert_eq!(slack("run rm -rf ~ then cd ~/src and echo hi > out.txt"), "run rm -rf ~ then cd ~/src and echo hi &gt; out.txt");
        assert_eq!(slack(r"a lone \* star"), "a lone * star");
    }

    #[test]
    fn formatting_slack_cannot_show_mid_word_loses_its_markers() {
        assert_eq!(slack("foo**bar**baz"), "foobarbaz");
        assert_eq!(slack("**bar**baz and **ok**"), "barbaz and *ok*");
        assert_eq!(slack("x`y`z"), "xyz");
    }

    #[test]
    fn plain_fallback() {
        let md = "**a < b** & `c>d` [x|y](http://y?a&b) <https://z.test> \\*lit\\* a_b\n\n```\nlet x = 1 < 2;\n```\n\n> q";
        assert_eq!(mrkdwn_to_plain(&slack(md)), "a < b & c>d x\u{FF5C}y (http://y?a&b) https://z.test *lit* a_b\n\nlet x = 1 < 2;\n\nq");
    }

    #[test]
    fn a_long_code_block_splits_into_fenced_parts_with_every_line_intact() {
        let mut answer = String::from("Here is the script:\n\n```python\ndef main():\n");
        for i in 0..40 {
            answer.push_str(&format!("    line = {i} < 2 & 3\n        nested = line\n\tx\t= {i}\n\n"));
        }
        answer.push_str("```\nDone.");
        let code: Vec<String> =
            answer.lines().skip(3).take_while(|l| *l != "```").map(|l| l.replace('&', "&amp;").replace('<', "&lt;")).collect();
        let parts = chunks(&answer, 200);
        assert!(parts.len() >= 10, "{}", parts.len());
        let mut received = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            assert!(part.chars().count() <= 200, "part {i} too long");
            let body = part.strip_suffix(&format!("({}/{})", i + 1, parts.len())).unwrap();
            let body = body.strip_suffix(['\n', ' ']).unwrap();
            let mut lines: Vec<&str> = body.lines().collect();
            if i > 0 {
                assert_eq!(lines.remove(0), "```", "part {i} reopens the fence: {part}");
            }
            if i + 1 < parts.len() {
                assert_eq!(lines.pop(), Some("```"), "part {i} closes the fence: {part}");
            } else {
                assert_eq!(lines.pop(), Some("Done."));
                lines.pop();
                assert_eq!(lines.pop(), Some("```"));
            }
            if i == 0 {
                assert_eq!(lines.drain(..3).collect::<Vec<_>>(), ["Here is the script:", "", "```"]);
            }
            received.extend(lines.into_iter().map(str::to_string));
        }
        let received: Vec<&String> = received.iter().filter(|l| !l.is_empty()).collect();
        let expected: Vec<&String> = code.iter().filter(|l| !l.is_empty()).collect();
        assert_eq!(received, expected, "every code line arrives byte-identical and in order");
    }

    #[test]
    fn parts_close_and_reopen_styles_and_quotes() {
        let text = format!("> **{}**", "bold words here ".repeat(40).trim_end());
        let parts = chunks(&text, 200);
        assert!(parts.len() > 2);
        for part in &parts {
            let body = part.rsplit_once(' ').unwrap().0;
            assert!(body.starts_with("> *") && body.ends_with('*'), "{part}");
        }
    }

    #[test]
    fn escapes_count_toward_the_limit() {
        let parts = chunks(&"& ".repeat(100), 100);
        assert!(parts.iter().all(|p| p.chars().count() <= 100), "{parts:?}");
    }

    #[test]
    fn tricky_answers_pass_the_oracle_at_every_limit() {
        use crate::render::oracle;
        let samples = [
            "> **bold quote that is rather long and goes on** and _more_ words here\n> second *line* of the quote\n>\n> after a blank",
            r"\*lit\* a_b*c \_x\_ \~ \` ~~strike **bold** end~~ foo**bar**baz > not a quote",
            "- item with [a link | pipe > gt](https://example.com/a b?q=1&r=2) and `code < x`\n    - nested **bold item text**\n- [ ] task",
            "# Heading with *em* and `code`\n\n| a | b |\n|---|---|\n| **x** | [l](u) |\n\n```rust\nfn main() {\n\tlet a = \"```\";\n}\n```",
            "<!channel> <@U123> & <https://example.com/x> ![img](https://example.com/i.png) <div>html</div>",
        ];
        for md in samples {
            for limit in (24..200).step_by(11) {
                if let Err(e) = oracle::check(md, MarkdownDialect::SlackMrkdwn, limit, LengthUnit::Chars) {
                    panic!("{md:?} at limit {limit}: {e}");
                }
            }
        }
    }

    #[test]
    fn the_oracle_rejects_broken_parts() {
        use crate::render::oracle;
        let md = "Hello **world** and more words";
        let whole = slack(md);
        let check = |parts: &[&str]| {
            let parts: Vec<String> = parts.iter().map(|p| p.to_string()).collect();
            oracle::check_streamed(md, MarkdownDialect::SlackMrkdwn, 39_000, LengthUnit::Chars, &parts)
        };
        assert!(check(&[&whole]).is_ok());
        assert!(check(&["Hello *world", "world* and more words"]).is_err(), "an unclosed style");
        assert!(check(&["Hello *world* and <!channel> more words"]).is_err(), "a raw mention");
        assert!(check(&["Hello *world* and", "more words"]).is_ok());
        assert!(check(&["Hello *world* and"]).is_err(), "words lost");
    }
}
