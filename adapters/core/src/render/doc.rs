//! A rendered answer as the chunker sees it: runs of visible text, and the frames (markup that
//! opens, like `<pre>` or a code fence, and closes) around them. Each dialect's renderer builds
//! one; [`Doc::to_text`] writes it out, and [`crate::chunk`] splits it without breaking a frame:
//! a part that ends inside one closes it, the next part reopens it.

use std::borrow::Cow;

/// What a cut may do inside a run of text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextKind {
    /// Running text: cut at a line end, else at a space (which is dropped), else between
    /// graphemes.
    Prose,
    /// Preformatted: every character is content, so nothing is dropped; cut at a line end, else
    /// between graphemes.
    Code,
    /// Markup written as text (list bullets, quote markers, table pipes, line-break escapes):
    /// cut only after a newline.
    Markup,
}

/// How the text inside a frame may be cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// A block (a quote): cut as its text allows.
    Block,
    /// Preformatted code: whitespace is content.
    Code,
    /// A block whose lines must stay whole (a table, a heading): cut only at line ends.
    Lines,
    /// Inline formatting. `splittable: false` (links, code spans, markdown emphasis whose
    /// markers must meet their partner) is cut only when the span alone is longer than a part.
    Inline {
        /// Whether a part may end inside the span (bold, italic in HTML) or only when nothing
        /// else fits (links, code spans, markdown emphasis).
        splittable: bool,
    },
}

/// Markup around some text, and how a part that ends inside it closes and reopens it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// How the text inside may be cut.
    pub kind: FrameKind,
    /// The opening markup as written where the frame starts.
    pub open: String,
    /// The markup that starts a later part inside this frame (a code fence with its language,
    /// the same HTML tag).
    pub reopen: String,
    /// The markup that ends a part inside this frame.
    pub close: String,
    /// `close` must start on a line of its own (a markdown code fence).
    pub close_on_own_line: bool,
}

impl Frame {
    /// A frame whose markup is the same at every part: HTML tags, markdown emphasis markers.
    pub fn symmetric(kind: FrameKind, open: impl Into<String>, close: impl Into<String>) -> Self {
        let open = open.into();
        Self { kind, reopen: open.clone(), open, close: close.into(), close_on_own_line: false }
    }

    /// A frame with no markup at all (plain text keeps its code blocks' cut rules this way).
    pub fn bare(kind: FrameKind) -> Self {
        Self::symmetric(kind, "", "")
    }
}

/// One element of a [`Doc`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Visible text, before the dialect's escaping.
    Text {
        /// The text, unescaped.
        text: String,
        /// Where a cut may fall inside it.
        kind: TextKind,
    },
    /// Starts a frame; everything up to the matching [`Piece::Close`] is inside it.
    Open(Frame),
    /// Ends the innermost open frame, with its markup as written.
    Close(String),
}

/// How a dialect writes text out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escape {
    /// As is (markdown, plain text).
    None,
    /// `&`, `<`, `>` and `"` as HTML entities.
    Html,
    /// `&`, `<` and `>` as entities, the only three Slack decodes (Slack mrkdwn, where a raw `<`
    /// would start a link or a mention).
    Slack,
}

impl Escape {
    /// `text` as the dialect writes it; borrowed when nothing needs escaping.
    pub fn apply<'a>(self, text: &'a str) -> Cow<'a, str> {
        match self {
            Escape::None => Cow::Borrowed(text),
            Escape::Html if !text.contains(['&', '<', '>', '"']) => Cow::Borrowed(text),
            Escape::Slack if !text.contains(['&', '<', '>']) => Cow::Borrowed(text),
            // Slack decodes only these three entities; HTML attributes also need `"`.
            Escape::Html | Escape::Slack => {
                let mut out = String::with_capacity(text.len() + 16);
                for c in text.chars() {
                    match c {
                        '&' => out.push_str("&amp;"),
                        '<' => out.push_str("&lt;"),
                        '>' => out.push_str("&gt;"),
                        '"' if self == Escape::Html => out.push_str("&quot;"),
                        c => out.push(c),
                    }
                }
                Cow::Owned(out)
            }
        }
    }
}

/// A rendered answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doc {
    /// The text runs and frames, in order.
    pub pieces: Vec<Piece>,
    /// How text runs are written out.
    pub escape: Escape,
    /// The platform counts the message as sent toward its length limit, markup and escapes
    /// included (markdown, Slack mrkdwn, whose `&amp;` is five characters); HTML tags and
    /// entities do not count (Telegram counts the text after parsing).
    pub markup_counts: bool,
    /// Text is raw markdown, where a backslash escape or an entity reference is one symbol that
    /// a cut must not split.
    pub raw_markdown: bool,
}

impl Doc {
    /// The whole answer written out.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text { text, .. } => out.push_str(&self.escape.apply(text)),
                Piece::Open(frame) => out.push_str(&frame.open),
                Piece::Close(markup) => out.push_str(markup),
            }
        }
        out
    }

    /// The visible text: every text run, without markup.
    pub fn visible_text(&self) -> String {
        self.pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// Builds a [`Doc`] the way a renderer writes a string: push text, open and close frames.
#[derive(Debug)]
pub struct DocBuilder {
    doc: Doc,
    /// Indices of the open frames' `Open` pieces, innermost last.
    open: Vec<usize>,
}

impl DocBuilder {
    /// An empty document; the arguments become the [`Doc`]'s fields of the same names.
    pub fn new(escape: Escape, markup_counts: bool, raw_markdown: bool) -> Self {
        Self { doc: Doc { pieces: Vec::new(), escape, markup_counts, raw_markdown }, open: Vec::new() }
    }

    /// Append visible text, merged into the last run when that run is of the same kind.
    pub fn text(&mut self, text: &str, kind: TextKind) {
        if text.is_empty() {
            return;
        }
        if let Some(Piece::Text { text: last, kind: last_kind }) = self.doc.pieces.last_mut()
            && *last_kind == kind
        {
            last.push_str(text);
            return;
        }
        self.doc.pieces.push(Piece::Text { text: text.to_string(), kind });
    }

    /// Start a frame; it stays open until [`Self::close`] or [`Self::close_with`].
    pub fn open(&mut self, frame: Frame) {
        self.open.push(self.doc.pieces.len());
        self.doc.pieces.push(Piece::Open(frame));
    }

    /// Close the innermost frame with its usual closing markup.
    pub fn close(&mut self) {
        let markup = self.innermost().map(|f| f.close.clone()).unwrap_or_default();
        self.close_with(markup);
    }

    /// Close the innermost frame with the markup written here (a markdown closing fence as the
    /// model typed it, or none when the model left it open).
    pub fn close_with(&mut self, markup: String) {
        if self.open.pop().is_some() {
            self.doc.pieces.push(Piece::Close(markup));
        }
    }

    /// The frame the next text would be inside, if any.
    pub fn innermost(&self) -> Option<&Frame> {
        match self.open.last().and_then(|&i| self.doc.pieces.get(i)) {
            Some(Piece::Open(frame)) => Some(frame),
            _ => None,
        }
    }

    /// Whether the output so far ends with `c` (markup included, as a string would).
    pub fn ends_with(&self, c: char) -> bool {
        let written = self.doc.pieces.iter().rev().map(|piece| match piece {
            Piece::Text { text, .. } => text.as_str(),
            Piece::Open(frame) => frame.open.as_str(),
            Piece::Close(markup) => markup.as_str(),
        });
        written.into_iter().find(|s| !s.is_empty()).is_some_and(|s| s.ends_with(c))
    }

    /// Drop newlines the output ends with beyond the first `max`.
    pub fn keep_trailing_newlines(&mut self, max: usize) {
        let mut trailing = 0;
        for piece in self.doc.pieces.iter().rev() {
            let Piece::Text { text, .. } = piece else { break };
            let newlines = text.len() - text.trim_end_matches('\n').len();
            trailing += newlines;
            if newlines < text.len() {
                break;
            }
        }
        if trailing > max {
            self.trim_trailing_newlines();
            self.text(&"\n".repeat(max), TextKind::Prose);
        }
    }

    /// Nothing has been written yet (no text and no frames).
    pub fn is_empty(&self) -> bool {
        self.doc.pieces.is_empty()
    }

    /// Drop the newlines the output ends with (only text the output ends with, as a string's
    /// trim would).
    pub fn trim_trailing_newlines(&mut self) {
        self.trim_end_matching(|c| c == '\n');
    }

    fn trim_end_matching(&mut self, matches: impl Fn(char) -> bool) {
        while let Some(Piece::Text { text, .. }) = self.doc.pieces.last_mut() {
            let kept = text.trim_end_matches(&matches).len();
            text.truncate(kept);
            if !text.is_empty() {
                return;
            }
            self.doc.pieces.pop();
        }
    }

    /// The document, with the whitespace it ends with and the newlines it starts with removed.
    pub fn finish_trimmed(mut self) -> Doc {
        self.trim_end_matching(char::is_whitespace);
        while let Some(Piece::Text { text, .. }) = self.doc.pieces.first_mut() {
            let start = text.len() - text.trim_start_matches('\n').len();
            text.drain(..start);
            if !text.is_empty() {
                break;
            }
            self.doc.pieces.remove(0);
        }
        self.doc
    }

    /// The document as written, untrimmed; frames still open stay open.
    pub fn finish(self) -> Doc {
        self.doc
    }
}
