//! Markdown passed through as the model wrote it (Discord renders it itself), described as a
//! [`Doc`] so the chunker knows its structure: the source is partitioned, byte for byte, into
//! text and the markup of fenced code blocks and inline spans, from the parser's offsets.

use super::doc::{Doc, DocBuilder, Escape, Frame, FrameKind, TextKind};
use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};
use std::ops::Range;

/// Markup longer than this (a fence line with a long info string, a link with a long address)
/// is not repeated at every part: it is written once, as text. Below the smallest part any
/// platform has, so any one piece of markup fits a part.
pub const MAX_MARKUP_CHARS: usize = 48;

/// Inline spans nested deeper than this (`________a________` is four strong spans) keep their
/// markers as text.
pub const MAX_INLINE_DEPTH: usize = 3;

/// A code span opened with more backticks than this keeps its markers as text.
pub const MAX_CODE_TICKS: usize = 8;

/// A language name longer than this is not repeated when a fence is reopened.
pub const MAX_LANGUAGE_CHARS: usize = 24;

/// `markdown` as a document whose text is the source itself.
pub fn document(markdown: &str) -> Doc {
    let events: Vec<(Event<'_>, Range<usize>)> =
        Parser::new_ext(markdown, Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES).into_offset_iter().collect();
    let ends = matching_ends(&events);
    let mut w = Walker {
        src: markdown,
        out: DocBuilder::new(Escape::None, true, true),
        pos: 0,
        in_code: false,
        bare_code: false,
        inline_frames: Vec::new(),
    };
    let mut skip_through: Option<usize> = None;
    for (i, (event, range)) in events.iter().enumerate() {
        if let Some(last) = skip_through {
            if i <= last {
                continue;
            }
            skip_through = None;
        }
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(_))) => w.fenced_code(range),
            Event::Start(Tag::CodeBlock(CodeBlockKind::Indented)) => {
                w.gap_to(range.start);
                w.in_code = true;
                w.out.open(Frame::bare(FrameKind::Code));
                w.bare_code = true;
            }
            Event::End(TagEnd::CodeBlock) => w.end_code_block(range.end),
            Event::Start(Tag::Heading { .. } | Tag::Table(_)) => {
                w.gap_to(range.start);
                w.out.open(Frame::bare(FrameKind::Lines));
            }
            Event::End(TagEnd::Heading(_) | TagEnd::Table) => {
                w.gap_to(range.end);
                w.out.close_with(String::new());
            }
            Event::Start(Tag::Emphasis | Tag::Strong | Tag::Strikethrough | Tag::Link { .. } | Tag::Image { .. }) => {
                skip_through = w.inline_span(&events, &ends, i);
            }
            Event::End(TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough | TagEnd::Link | TagEnd::Image) => {
                if w.inline_frames.pop() == Some(false) {
                    w.gap_to(range.end);
                    w.out.close_with(String::new());
                } else {
                    w.close_at(range.end);
                }
            }
            Event::Code(_) => w.code_span(range),
            Event::Text(_) => {
                w.gap_to(range.start);
                let kind = if w.in_code { TextKind::Code } else { TextKind::Prose };
                w.emit(range.end, kind);
            }
            Event::SoftBreak
            | Event::HardBreak
            | Event::Html(_)
            | Event::InlineHtml(_)
            | Event::Rule
            | Event::TaskListMarker(_)
            | Event::FootnoteReference(_)
            | Event::InlineMath(_)
            | Event::DisplayMath(_) => {
                w.gap_to(range.start);
                w.emit(range.end, TextKind::Markup);
            }
            Event::Start(_) | Event::End(_) => {}
        }
    }
    w.gap_to(markdown.len());
    w.out.finish()
}

/// The frame of a fenced code block from its opening line (with its newline); `open` is the
/// markup written where it starts.
fn fence_frame(opening_line: &str, open: &str) -> Frame {
    let unindented = opening_line.trim_start_matches(' ');
    let fence_char = if unindented.starts_with('~') { '~' } else { '`' };
    let fence_len = unindented.len() - unindented.trim_start_matches(fence_char).len();
    // A part starts at the margin (indented four spaces there, a fence would be code itself),
    // with the fence and the language, which is all a renderer reads of the info string.
    let language = unindented[fence_len..].split_whitespace().next().filter(|l| l.chars().count() <= MAX_LANGUAGE_CHARS).unwrap_or("");
    // The block's own fence (at least three): a part's cut never leaves a line starting with
    // something that closes it (see the chunker's `changes_meaning`).
    let fence: String = std::iter::repeat_n(fence_char, fence_len.max(3)).collect();
    Frame { kind: FrameKind::Code, open: open.to_string(), reopen: reopened_fence(&fence, language), close: fence, close_on_own_line: true }
}

/// The line that reopens a fence in a later part. A language that starts with the fence's own
/// character (a tilde fence may have one) is set apart, or it would lengthen the fence.
pub fn reopened_fence(fence: &str, language: &str) -> String {
    let gap = if fence.chars().next().is_some_and(|c| language.starts_with(c)) { " " } else { "" };
    format!("{fence}{gap}{language}\n")
}

/// For each `Start` event, the index of its `End`.
fn matching_ends(events: &[(Event<'_>, Range<usize>)]) -> Vec<Option<usize>> {
    let mut ends = vec![None; events.len()];
    let mut open = Vec::new();
    for (i, (event, _)) in events.iter().enumerate() {
        match event {
            Event::Start(_) => open.push(i),
            Event::End(_) => {
                if let Some(start) = open.pop() {
                    ends[start] = Some(i);
                }
            }
            _ => {}
        }
    }
    ends
}

struct Walker<'a> {
    src: &'a str,
    out: DocBuilder,
    /// How far the source has been written.
    pos: usize,
    in_code: bool,
    /// The open code block has no markup of its own (indented, or a fence too long to repeat).
    bare_code: bool,
    /// The open inline spans: true where the frame carries the markers, false where they were
    /// written as text.
    inline_frames: Vec<bool>,
}

impl Walker<'_> {
    /// Source the parser gave no event for (indentation, list and quote markers, blank lines):
    /// markup written as text.
    fn gap_to(&mut self, to: usize) {
        if to > self.pos {
            self.emit(to, TextKind::Markup);
        }
    }

    fn emit(&mut self, to: usize, kind: TextKind) {
        if to > self.pos
            && let Some(text) = self.src.get(self.pos..to)
        {
            self.out.text(text, kind);
            self.pos = to;
        }
    }

    fn fenced_code(&mut self, range: &Range<usize>) {
        self.gap_to(range.start);
        self.in_code = true;
        let src = self.src;
        let line_end = src[range.start..range.end].find('\n').map_or(range.end, |n| range.start + n + 1);
        let opening = &src[range.start..line_end];
        if opening.chars().count() <= MAX_MARKUP_CHARS {
            self.out.open(fence_frame(opening, opening));
            self.pos = line_end;
        } else {
            // Too long to count as markup a part must hold whole: the line is the block's first
            // text, and parts reopen the fence with just its language.
            self.out.open(fence_frame(opening, ""));
            self.emit(line_end, TextKind::Markup);
        }
    }

    fn end_code_block(&mut self, end: usize) {
        self.in_code = false;
        if std::mem::take(&mut self.bare_code) {
            // A frame without markup: its closing fence, if any, is text like its opening.
            self.gap_to(end);
            self.out.close_with(String::new());
        } else {
            self.close_at(end);
        }
    }

    /// An emphasis, strong, strikethrough, link or image span starting at event `i`. Returns the
    /// index of its end event when the whole span was written as text (its contents' events are
    /// then skipped).
    fn inline_span(&mut self, events: &[(Event<'_>, Range<usize>)], ends: &[Option<usize>], i: usize) -> Option<usize> {
        let range = &events[i].1;
        self.gap_to(range.start);
        let open_end = events.get(i + 1).map_or(range.end, |(_, next)| next.start.max(range.start));
        let end = ends.get(i).copied().flatten().unwrap_or(i);
        let close_start = if end > i + 1 { events[end - 1].1.end.max(open_end) } else { open_end };
        let src = self.src;
        let open = &src[range.start..open_end];
        let close = &src[close_start.min(range.end)..range.end];
        if self.inline_frames.len() >= MAX_INLINE_DEPTH {
            // Deeper spans stay whole but their markers are written as text and never repeated:
            // reopening a dozen nested markers would fill a part.
            self.out.open(Frame::bare(FrameKind::Inline { splittable: false }));
            self.inline_frames.push(false);
            self.emit(open_end, TextKind::Markup);
            return None;
        }
        if close.chars().count() > MAX_MARKUP_CHARS {
            // A link whose address is too long to repeat: markup written as text, and what it
            // holds with it.
            self.gap_to(range.end);
            return Some(end);
        }
        let frame = Frame {
            kind: FrameKind::Inline { splittable: false },
            open: open.to_string(),
            reopen: open.to_string(),
            close: close.to_string(),
            close_on_own_line: false,
        };
        self.out.open(frame);
        self.inline_frames.push(true);
        self.pos = open_end;
        None
    }

    fn code_span(&mut self, range: &Range<usize>) {
        self.gap_to(range.start);
        let src = self.src;
        let span = &src[range.clone()];
        let opening = span.len() - span.trim_start_matches('`').len();
        let closing = (span.len() - span.trim_end_matches('`').len()).min(span.len() - opening);
        if opening > MAX_CODE_TICKS {
            // Markers too long to repeat: the span is written as it is, kept whole if it fits.
            self.out.open(Frame::bare(FrameKind::Inline { splittable: false }));
            self.emit(range.end, TextKind::Markup);
            self.out.close_with(String::new());
            return;
        }
        self.out.open(Frame::symmetric(FrameKind::Inline { splittable: false }, &span[..opening], &span[span.len() - closing..]));
        self.out.text(&span[opening..span.len() - closing], TextKind::Code);
        self.out.close();
        self.pos = range.end;
    }

    /// Close the innermost frame with the source up to `to` as its markup (a closing fence or
    /// marker as written, or nothing when the model left it open).
    fn close_at(&mut self, to: usize) {
        let markup = self.src.get(self.pos..to.max(self.pos)).unwrap_or_default().to_string();
        self.out.close_with(markup);
        self.pos = to.max(self.pos);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::doc::Piece;

    #[test]
    fn the_document_is_the_source_byte_for_byte() {
        let samples = [
            "a\n\n```py\nx = 1\n    y\n```\nafter **bold *em* x** `c``d` [l *i*](http://u \"t\") <http://a.b> \\* &amp;\n",
            "- a\n    - b\n\n    code\n\n> q\n> r\n\n| a | b |\n|---|---|\n| 1 | 2 |\n~~~\nunterminated",
            "- item\n\n  ```js\n  foo\n  ```\n# Head #\n\n***x*** [](u) ![i](p)\r\nline  \r\nnext\\\nend",
        ];
        for md in samples {
            assert_eq!(document(md).to_text(), md);
        }
    }

    #[test]
    fn fences_and_spans_become_frames() {
        let doc = document("x **b** y\n\n```rust {.x}\nlet a = 1;\n```\n");
        let frames: Vec<(String, String, String)> = doc
            .pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Open(f) => Some((f.open.clone(), f.reopen.clone(), f.close.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(frames, vec![("**".into(), "**".into(), "**".into()), ("```rust {.x}\n".into(), "```rust\n".into(), "```".into())]);
    }
}
