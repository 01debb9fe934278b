//! The walk behind [`super::split_parts`]: from where a part starts, go forward atom by atom
//! until the part is full, remembering the last place of each kind where it could end; then
//! end it at the best of them and write it out with its frames closed.

use super::Part;
use super::atoms::atoms;
use crate::capabilities::LengthUnit;
use crate::render::{Doc, FrameKind, Piece, TextKind};

/// A point in a document: before byte `byte` of piece `piece` (0 for markup pieces).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Pos {
    piece: usize,
    byte: usize,
}

/// Kinds of places a part can end, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// After a blank line.
    Paragraph = 0,
    /// After a line end.
    Line,
    /// At a space in running text (the space is dropped).
    Space,
    /// Right after a code block's opening line: the part ends with an empty block, which is
    /// better than a code line cut in two.
    Opened,
    /// Between two graphemes of a word or a code line.
    Grapheme,
    /// Between two graphemes of markup or of a line that should stay whole.
    Hard,
}

const CLASSES: usize = 6;
/// How good a place is beyond its kind: 0 outside spans that should stay whole (links, code
/// spans, markdown emphasis), 1 inside one, 2 deeper, 3 where ending a part would change what
/// the text means (see [`Splitter::changes_meaning`]). Places are taken from the best level that
/// has one, so a span is cut only when it alone is longer than a part.
const LEVELS: usize = 4;

/// A place a part can end.
#[derive(Debug, Clone, Copy)]
struct Cut {
    pos: Pos,
    /// Width of the part up to here, reopened frames included.
    used: usize,
    /// The cut is at a space, which neither part shows.
    skip_space: bool,
    ends_in_block: bool,
}

/// The frames open at a point, and what the cut rules need to know about them.
#[derive(Debug, Clone, Default)]
struct Stack {
    /// Indices of their `Open` pieces, outermost first.
    frames: Vec<usize>,
    close_width: usize,
    own_line: usize,
    code: usize,
    lines: usize,
    whole: usize,
}

pub(super) fn doc_width(doc: &Doc, unit: LengthUnit) -> usize {
    doc.pieces
        .iter()
        .map(|piece| match piece {
            Piece::Text { text, .. } => text_width(doc, unit, text),
            Piece::Open(frame) if doc.markup_counts => unit.measure(&frame.open),
            Piece::Close(markup) if doc.markup_counts => unit.measure(markup),
            _ => 0,
        })
        .sum()
}

/// Width of visible `text` as the platform counts it: as written out (escaped) where the platform
/// counts the message as sent, as shown otherwise.
fn text_width(doc: &Doc, unit: LengthUnit, text: &str) -> usize {
    if doc.markup_counts { unit.measure(&doc.escape.apply(text)) } else { unit.measure(text) }
}

pub(super) struct Splitter<'d> {
    doc: &'d Doc,
    unit: LengthUnit,
    budget: usize,
    /// Visible bytes before each piece (one more entry: the total).
    visible_before: Vec<usize>,
}

impl<'d> Splitter<'d> {
    pub(super) fn new(doc: &'d Doc, unit: LengthUnit, budget: usize) -> Self {
        let mut visible_before = Vec::with_capacity(doc.pieces.len() + 1);
        let mut total = 0;
        for piece in &doc.pieces {
            visible_before.push(total);
            if let Piece::Text { text, .. } = piece {
                total += text.len();
            }
        }
        visible_before.push(total);
        Self { doc, unit, budget, visible_before }
    }

    pub(super) fn split_from(&self, from: usize) -> Vec<Part> {
        let (mut pos, mut stack) = self.locate(from);
        let mut parts = Vec::new();
        while self.has_content_from(pos) {
            let (part, next, next_stack) = self.next_part(pos, &stack);
            parts.push(part);
            pos = next;
            stack = next_stack;
        }
        parts
    }

    /// Whether anything but closing markup and whitespace is left from `pos` on (text, or a
    /// frame that opens, like an empty code block at the end).
    fn has_content_from(&self, pos: Pos) -> bool {
        let Some(rest) = self.doc.pieces.get(pos.piece..) else { return false };
        rest.iter().enumerate().any(|(i, piece)| match piece {
            // Whitespace the answer ends with shows nothing: no message of its own.
            Piece::Text { text, .. } => !text[if i == 0 { pos.byte.min(text.len()) } else { 0 }..].trim().is_empty(),
            Piece::Open(frame) => !frame.open.is_empty(),
            Piece::Close(_) => false,
        })
    }

    fn visible_total(&self) -> usize {
        self.visible_before.last().copied().unwrap_or(0)
    }

    fn visible_at(&self, pos: Pos) -> usize {
        match self.doc.pieces.get(pos.piece) {
            Some(Piece::Text { .. }) => self.visible_before[pos.piece] + pos.byte,
            Some(_) => self.visible_before[pos.piece],
            None => self.visible_total(),
        }
    }

    fn markup_width(&self, markup: &str) -> usize {
        if self.doc.markup_counts { self.unit.measure(markup) } else { 0 }
    }

    fn push(&self, stack: &mut Stack, index: usize) {
        let Some(Piece::Open(frame)) = self.doc.pieces.get(index) else { return };
        stack.frames.push(index);
        stack.close_width += self.markup_width(&frame.close);
        stack.own_line += usize::from(frame.close_on_own_line);
        match frame.kind {
            FrameKind::Code => stack.code += 1,
            FrameKind::Lines => stack.lines += 1,
            FrameKind::Inline { splittable: false } => stack.whole += 1,
            FrameKind::Block | FrameKind::Inline { splittable: true } => {}
        }
    }

    fn pop(&self, stack: &mut Stack) {
        let Some(index) = stack.frames.pop() else { return };
        let Some(Piece::Open(frame)) = self.doc.pieces.get(index) else { return };
        stack.close_width -= self.markup_width(&frame.close);
        stack.own_line -= usize::from(frame.close_on_own_line);
        match frame.kind {
            FrameKind::Code => stack.code -= 1,
            FrameKind::Lines => stack.lines -= 1,
            FrameKind::Inline { splittable: false } => stack.whole -= 1,
            FrameKind::Block | FrameKind::Inline { splittable: true } => {}
        }
    }

    /// The point at visible byte `from`, and the frames open there. Frames that close right
    /// there were closed by whatever showed the text before.
    fn locate(&self, from: usize) -> (Pos, Stack) {
        let mut stack = Stack::default();
        let mut pos = Pos { piece: 0, byte: 0 };
        for (i, piece) in self.doc.pieces.iter().enumerate() {
            match piece {
                Piece::Text { text, .. } if self.visible_before[i] + text.len() > from => {
                    pos = Pos { piece: i, byte: from.saturating_sub(self.visible_before[i]) };
                    break;
                }
                Piece::Open(_) if self.visible_before[i] >= from => {
                    pos = Pos { piece: i, byte: 0 };
                    break;
                }
                Piece::Open(_) => self.push(&mut stack, i),
                Piece::Close(_) => self.pop(&mut stack),
                Piece::Text { .. } => {}
            }
            pos = Pos { piece: i + 1, byte: 0 };
        }
        (pos, stack)
    }

    /// Past dropped spaces, line ends that would start the next part outside code (the break
    /// between two messages shows them), and frames that close right there.
    fn skip_after_cut(&self, mut pos: Pos, stack: &mut Stack, skip_space: bool) -> Pos {
        if skip_space && let Some(Piece::Text { text, .. }) = self.doc.pieces.get(pos.piece) {
            // The whole run of spaces: the break between the messages stands for it (all but a
            // last one that a combining mark or joiner after it belongs to).
            let rest = &text[pos.byte..];
            let mut run = rest.len() - rest.trim_start_matches(' ').len();
            if run > 1 && joins(Some(' '), &self.written_from(Pos { piece: pos.piece, byte: pos.byte + run })) {
                run -= 1;
            }
            pos.byte += run;
        }
        loop {
            match self.doc.pieces.get(pos.piece) {
                Some(Piece::Text { text, .. }) if pos.byte >= text.len() => pos = Pos { piece: pos.piece + 1, byte: 0 },
                Some(Piece::Text { text, kind }) if *kind != TextKind::Code && stack.code == 0 => {
                    let rest = &text[pos.byte..];
                    let newlines = rest.len() - rest.trim_start_matches(['\r', '\n']).len();
                    if newlines == 0 {
                        return pos;
                    }
                    pos.byte += newlines;
                }
                Some(Piece::Close(_)) => {
                    self.pop(stack);
                    pos = Pos { piece: pos.piece + 1, byte: 0 };
                }
                _ => return pos,
            }
        }
    }

    fn next_part(&self, start: Pos, stack: &Stack) -> (Part, Pos, Stack) {
        let reopen: String = stack.frames.iter().filter_map(|&i| self.frame(i).map(|f| f.reopen.as_str())).collect();
        // Frames whose markup would leave a part less than a quarter of its room are left out
        // of it (only tiny limits or absurd markup get here).
        let frame_cost = self.markup_width(&reopen) + stack.close_width + stack.own_line;
        let write_frames = frame_cost * 4 <= self.budget * 3;
        let (cut, text, mut end_stack) = match self.write_part(start, stack, &reopen, write_frames) {
            // Markup so wide that not even one symbol fits with its frames closed and reopened
            // (a fence line nearly as wide as a part): this part goes without them.
            (_, text, _) if write_frames && self.doc.markup_counts && self.unit.measure(&text) > self.budget => {
                self.write_part(start, stack, &reopen, false)
            }
            written => written,
        };
        let visible = self.visible_at(start)..self.visible_at(cut.pos);
        let next = self.skip_after_cut(cut.pos, &mut end_stack, cut.skip_space);
        (Part { text, visible, ends_in_block: cut.ends_in_block }, next, end_stack)
    }

    /// Find where the part from `start` ends and write it out.
    fn write_part(&self, start: Pos, stack: &Stack, reopen: &str, write_frames: bool) -> (Cut, String, Stack) {
        let cut = self.find_cut(start, stack, if write_frames { reopen } else { "" }, write_frames);
        let mut text = if write_frames { reopen.to_string() } else { String::new() };
        let mut end_stack = stack.clone();
        self.write(&mut text, start, cut.pos, &mut end_stack);
        if write_frames && cut.pos.piece < self.doc.pieces.len() {
            for &i in end_stack.frames.iter().rev() {
                if let Some(frame) = self.frame(i) {
                    if frame.close_on_own_line && !text.ends_with('\n') {
                        text.push('\n');
                    }
                    text.push_str(&frame.close);
                }
            }
        }
        (cut, text, end_stack)
    }

    fn frame(&self, index: usize) -> Option<&crate::render::Frame> {
        match self.doc.pieces.get(index) {
            Some(Piece::Open(frame)) => Some(frame),
            _ => None,
        }
    }

    /// Write the document from `from` to `to`, keeping `stack` up to date.
    fn write(&self, out: &mut String, from: Pos, to: Pos, stack: &mut Stack) {
        for index in from.piece..=to.piece.min(self.doc.pieces.len().saturating_sub(1)) {
            if index == to.piece && to.byte == 0 && !matches!(self.doc.pieces.get(index), Some(Piece::Text { .. })) {
                break;
            }
            match &self.doc.pieces[index] {
                Piece::Text { text, .. } => {
                    let start = if index == from.piece { from.byte } else { 0 };
                    let end = if index == to.piece { to.byte } else { text.len() };
                    out.push_str(&self.doc.escape.apply(&text[start..end.max(start)]));
                }
                Piece::Open(frame) => {
                    out.push_str(&frame.open);
                    self.push(stack, index);
                }
                Piece::Close(markup) => {
                    out.push_str(markup);
                    self.pop(stack);
                }
            }
        }
    }

    /// Whether in Markdown a cut at `pos` (after `previous`, with the frames of `stack` closed
    /// and reopened) would change what the text means: the next part would open with block
    /// syntax (a list bullet, a heading, a fence…) the text did not start a line with (a cut at a
    /// line end changes nothing unless markup is reopened in front of the line), or an emphasis
    /// marker closed or reopened next to whitespace would no longer count as one.
    fn changes_meaning(&self, pos: Pos, stack: &Stack, class: Class, previous: Option<char>) -> bool {
        if !self.doc.raw_markdown {
            return false;
        }
        // Inside code nothing is read as markup, and the reopened fence is meant to be a block;
        // only a line cut in two whose rest looks like the closing fence would end the code.
        let line_start = matches!(class, Class::Line | Class::Paragraph | Class::Opened);
        // Most places are followed by a letter and reopen nothing: settle those without
        // writing anything out.
        let next = self.first_char_from(pos);
        let suspicious = |c: Option<char>| {
            c.is_some_and(|c| matches!(c, ' ' | '\t' | '>' | '#' | '-' | '+' | '*' | '_' | '=' | '`' | '~' | '<' | '0'..='9'))
        };
        if stack.code > 0 {
            let closing =
                stack.frames.iter().rev().filter_map(|&i| self.frame(i)).find(|f| f.kind == FrameKind::Code).map(|f| f.close.as_str());
            return !line_start
                && closing.is_some_and(|fence| {
                    next.is_some_and(|c| fence.starts_with(c) || c == ' ') && closes_fence(&self.written_from(pos), fence)
                });
        }
        if stack.whole > 0 && (previous.is_none_or(char::is_whitespace) || next.is_none_or(char::is_whitespace)) {
            return true;
        }
        if self.markers_merge(stack, previous, next) {
            return true;
        }
        let reopens_nothing = stack.frames.iter().all(|&i| self.frame(i).is_none_or(|f| f.reopen.is_empty()));
        if reopens_nothing && (line_start || !suspicious(next)) {
            return false;
        }
        let reopen: String = stack.frames.iter().filter_map(|&i| self.frame(i).map(|f| f.reopen.as_str())).collect();
        let start = reopen + &self.written_from(pos);
        suspicious(start.chars().next()) && starts_block(&start)
    }

    /// Whether the inline markers a cut closes after `previous` (innermost first) or reopens
    /// before `next` (outermost first) merge with a run of their own character next to them:
    /// `~~~` followed by the closing `~~` is one run of five, which closes nothing, and the rest
    /// of the part would be struck through. The run may be another marker: a strike nested in a
    /// strike and closed right before the cut (`~~a ~~b~~` + `~~`), or the two closed or reopened
    /// together.
    fn markers_merge(&self, stack: &Stack, previous: Option<char>, next: Option<char>) -> bool {
        let merges = |markup: &str, c: Option<char>| c.is_some_and(|c| !c.is_whitespace() && markup.contains(c));
        let innermost_first = stack.frames.iter().rev().filter_map(|&i| self.frame(i));
        let (mut before, mut after) = (previous, next);
        for frame in innermost_first.filter(|f| matches!(f.kind, FrameKind::Inline { .. })) {
            if merges(&frame.close, before) || merges(&frame.reopen, after) {
                return true;
            }
            before = frame.close.chars().next_back().or(before);
            after = frame.reopen.chars().next().or(after);
        }
        false
    }

    /// The character a cut right after `markup` follows, given the one before it. In Markdown
    /// the markup is text the reader sees (a closing `~~` and the one a cut writes after it are
    /// one run); elsewhere it is not, and the text on either side of it can still be one
    /// grapheme.
    fn last_shown(&self, markup: &str, previous: Option<char>) -> Option<char> {
        if self.doc.raw_markdown { markup.chars().next_back().or(previous) } else { previous }
    }

    /// The first character written from `pos` on.
    fn first_char_from(&self, pos: Pos) -> Option<char> {
        (pos.piece..self.doc.pieces.len()).find_map(|index| self.written_at(index, pos).chars().next())
    }

    /// What piece `index` writes, from `pos` on when `pos` is inside it.
    fn written_at(&self, index: usize, pos: Pos) -> &str {
        match self.doc.pieces.get(index) {
            Some(Piece::Text { text, .. }) => text.get(if index == pos.piece { pos.byte } else { 0 }..).unwrap_or_default(),
            Some(Piece::Open(frame)) => &frame.open,
            Some(Piece::Close(markup)) => markup,
            None => "",
        }
    }

    /// A few bytes of what is written from `pos` on (enough to see how a line would start).
    fn written_from(&self, pos: Pos) -> String {
        const ENOUGH: usize = 16;
        let mut out = String::new();
        for index in pos.piece..self.doc.pieces.len() {
            for c in self.written_at(index, pos).chars() {
                if out.len() >= ENOUGH {
                    return out;
                }
                out.push(c);
            }
        }
        out
    }

    /// Where the part that starts at `start` ends.
    fn find_cut(&self, start: Pos, stack: &Stack, reopen: &str, write_frames: bool) -> Cut {
        let mut walk = Walk {
            budget: self.budget,
            used: self.markup_width(reopen),
            stack: stack.clone(),
            best: [[None; CLASSES]; LEVELS],
            pending: None,
            last_newline: reopen.is_empty() || reopen.ends_with('\n'),
            last_in_block: false,
            write_frames,
        };
        let mut previous_newline = false;
        let mut previous_char: Option<char> = None;
        // The last symbol was a lone markdown backslash (what it escapes starts the next piece).
        let mut escapes = false;
        let mut progressed = false;
        let pieces = &self.doc.pieces;
        let mut index = start.piece;
        let mut overflow = false;
        'walk: while index < pieces.len() {
            match &pieces[index] {
                Piece::Open(frame) => {
                    let pos = Pos { piece: index, byte: 0 };
                    let alters = walk.pending.is_some_and(|class| self.changes_meaning(pos, &walk.stack, class, previous_char));
                    walk.flush(pos, alters);
                    walk.used += self.markup_width(&frame.open);
                    self.push(&mut walk.stack, index);
                    previous_char = self.last_shown(&frame.open, previous_char);
                    if !frame.open.is_empty() {
                        walk.last_newline = frame.open.ends_with('\n');
                    }
                    if frame.kind == FrameKind::Code && frame.open.ends_with('\n') {
                        walk.pending = Some(Class::Opened);
                    }
                }
                Piece::Close(markup) => {
                    walk.used += self.markup_width(markup);
                    self.pop(&mut walk.stack);
                    previous_char = self.last_shown(markup, previous_char);
                    if !markup.is_empty() {
                        walk.last_newline = markup.ends_with('\n');
                    }
                }
                Piece::Text { text, kind } => {
                    let offset = if index == start.piece { start.byte } else { 0 };
                    for atom in atoms(&text[offset..], self.doc.raw_markdown) {
                        let symbol = &text[offset + atom.start..offset + atom.end];
                        let pos = Pos { piece: index, byte: offset + atom.start };
                        // Two pieces of text can still hold one symbol between them (CR and LF, a
                        // letter and its combining mark, a markdown backslash and what it escapes).
                        if atom.start == 0
                            && (joins(previous_char, symbol) || escapes && symbol.starts_with(|c: char| c.is_ascii_punctuation()))
                        {
                            walk.pending = None;
                        }
                        let alters = walk.pending.is_some_and(|class| self.changes_meaning(pos, &walk.stack, class, previous_char));
                        walk.flush(pos, alters);
                        let code = walk.stack.code > 0 || *kind == TextKind::Code;
                        if progressed
                            && symbol == " "
                            && *kind == TextKind::Prose
                            && !code
                            && walk.stack.lines == 0
                            && !joins(Some(' '), &self.written_from(Pos { piece: index, byte: pos.byte + 1 }))
                        {
                            let after = Pos { piece: index, byte: pos.byte + 1 };
                            let alters = self.changes_meaning(after, &walk.stack, Class::Space, previous_char);
                            walk.record(Class::Space, pos, true, alters);
                        }
                        walk.used += text_width(self.doc, self.unit, symbol);
                        if walk.used > self.budget {
                            overflow = true;
                            break 'walk;
                        }
                        progressed = true;
                        let newline = symbol.ends_with('\n');
                        walk.pending = Some(if newline && previous_newline && !code {
                            Class::Paragraph
                        } else if newline {
                            Class::Line
                        } else if *kind == TextKind::Markup || walk.stack.lines > 0 {
                            Class::Hard
                        } else {
                            Class::Grapheme
                        });
                        previous_newline = newline;
                        previous_char = symbol.chars().next_back();
                        // A lone backslash escapes what follows, unless it is itself escaped.
                        escapes = self.doc.raw_markdown && symbol == "\\" && !(atom.start == 0 && escapes);
                        walk.last_newline = newline;
                        if !symbol.trim().is_empty() {
                            walk.last_in_block = code || walk.stack.lines > 0;
                        }
                    }
                }
            }
            if walk.used > self.budget {
                overflow = true;
                break;
            }
            index += 1;
        }
        if !overflow {
            // The rest fits. Frames still open here were left open by the model: nothing to close.
            let ends_in_block = walk.last_in_block || walk.stack.code > 0 || walk.stack.lines > 0;
            return Cut { pos: Pos { piece: pieces.len(), byte: 0 }, used: walk.used, skip_space: false, ends_in_block };
        }
        walk.choose().unwrap_or_else(|| self.split_first_atom(start, stack, reopen, write_frames))
    }

    /// No cut fits: a single symbol is wider than a part. Take as many of its characters as fit
    /// (at least one, so the split always moves on).
    fn split_first_atom(&self, start: Pos, stack: &Stack, reopen: &str, write_frames: bool) -> Cut {
        let mut stack = stack.clone();
        let mut used = self.markup_width(reopen);
        let mut index = start.piece;
        while let Some(piece) = self.doc.pieces.get(index) {
            match piece {
                Piece::Open(frame) => {
                    used += self.markup_width(&frame.open);
                    self.push(&mut stack, index);
                }
                Piece::Close(markup) => {
                    used += self.markup_width(markup);
                    self.pop(&mut stack);
                }
                Piece::Text { text, .. } => {
                    let offset = if index == start.piece { start.byte } else { 0 };
                    let closing = if write_frames { stack.close_width + usize::from(stack.own_line > 0) } else { 0 };
                    let mut byte = offset;
                    for (i, c) in text[offset..].char_indices() {
                        let after = used + text_width(self.doc, self.unit, c.encode_utf8(&mut [0; 4]));
                        if byte > offset && after + closing > self.budget {
                            break;
                        }
                        used = after;
                        byte = offset + i + c.len_utf8();
                    }
                    if byte > offset {
                        let ends_in_block = stack.code > 0 || stack.lines > 0;
                        return Cut { pos: Pos { piece: index, byte }, used, skip_space: false, ends_in_block };
                    }
                }
            }
            index += 1;
        }
        Cut { pos: Pos { piece: self.doc.pieces.len(), byte: 0 }, used, skip_space: false, ends_in_block: false }
    }
}

/// Whether Markdown starting a line with `text` would read as the start of a block (a heading,
/// quote, list item, code fence, rule, HTML block or indented code), so that a cut moving it to
/// the start of a message would change what it means.
fn starts_block(text: &str) -> bool {
    let Some(first) = text.chars().next() else { return false };
    let marker_then_space = |marker_len: usize| text[marker_len..].chars().next().is_none_or(char::is_whitespace);
    match first {
        '>' => true,
        // Up to three spaces of indentation change nothing; four make code.
        ' ' | '\t' => {
            let indent = text.len() - text.trim_start_matches(' ').len();
            indent >= 4 || text[indent..].starts_with('\t') || indent > 0 && starts_block(&text[indent..])
        }
        '#' => {
            let hashes = text.len() - text.trim_start_matches('#').len();
            hashes <= 6 && marker_then_space(hashes)
        }
        '-' | '+' | '*' | '_' | '=' => marker_then_space(1) || text.starts_with(&first.to_string().repeat(3)),
        '`' | '~' => text.starts_with(&first.to_string().repeat(3)),
        '<' => starts_html_block(&text[1..]),
        '0'..='9' => {
            let digits = text.len() - text.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            digits <= 9 && text[digits..].starts_with(['.', ')']) && marker_then_space(digits + 1)
        }
        _ => false,
    }
}

/// Whether a line starting with `text` would close a code block opened with `fence`: at least as
/// many of its characters, then nothing but spaces.
fn closes_fence(text: &str, fence: &str) -> bool {
    let Some(fence_char) = fence.chars().next() else { return false };
    let line = text.split('\n').next().unwrap_or_default().trim_start_matches(' ');
    let run = line.len() - line.trim_start_matches(fence_char).len();
    run >= fence.len() && line[run..].trim_matches([' ', '\t', '\r']).is_empty()
}

/// After a `<` at the start of a line: the start of a CommonMark HTML block (a comment,
/// declaration or processing instruction, or a block-level tag); autolinks and inline tags are
/// not.
fn starts_html_block(after_lt: &str) -> bool {
    const BLOCK_TAGS: &[&str] = &[
        "address",
        "article",
        "aside",
        "base",
        "basefont",
        "blockquote",
        "body",
        "caption",
        "center",
        "col",
        "colgroup",
        "dd",
        "details",
        "dialog",
        "dir",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "frame",
        "frameset",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "head",
        "header",
        "hr",
        "html",
        "iframe",
        "legend",
        "li",
        "link",
        "main",
        "menu",
        "menuitem",
        "nav",
        "noframes",
        "ol",
        "optgroup",
        "option",
        "p",
        "param",
        "pre",
        "script",
        "search",
        "section",
        "style",
        "summary",
        "table",
        "tbody",
        "td",
        "textarea",
        "tfoot",
        "th",
        "thead",
        "title",
        "tr",
        "track",
        "ul",
    ];
    if after_lt.starts_with(['!', '?']) {
        return true;
    }
    let name = after_lt.strip_prefix('/').unwrap_or(after_lt);
    let len = name.len() - name.trim_start_matches(|c: char| c.is_ascii_alphanumeric()).len();
    let ends_name = name[len..].is_empty() || name[len..].starts_with([' ', '\t', '>', '/', '\n', '\r']);
    ends_name && BLOCK_TAGS.iter().any(|tag| tag.eq_ignore_ascii_case(&name[..len]))
}

/// Whether `symbol` continues the grapheme that `previous` ends.
fn joins(previous: Option<char>, symbol: &str) -> bool {
    let (Some(previous), Some(next)) = (previous, symbol.chars().next()) else { return false };
    let mut pair = String::with_capacity(8);
    pair.push(previous);
    pair.push(next);
    unicode_segmentation::UnicodeSegmentation::graphemes(pair.as_str(), true).nth(1).is_none()
}

/// The state of one part's walk.
struct Walk {
    budget: usize,
    used: usize,
    stack: Stack,
    best: [[Option<Cut>; CLASSES]; LEVELS],
    /// The kind of place right after the last symbol, recorded once the walk knows what follows
    /// (frames that close there belong to the part that ends there).
    pending: Option<Class>,
    last_newline: bool,
    last_in_block: bool,
    write_frames: bool,
}

impl Walk {
    /// Record the place after the last symbol; `alters`: ending a part there would change what
    /// the text means.
    fn flush(&mut self, pos: Pos, alters: bool) {
        if let Some(class) = self.pending.take() {
            self.record(class, pos, false, alters);
        }
    }

    fn record(&mut self, class: Class, pos: Pos, skip_space: bool, alters: bool) {
        let closing = if self.write_frames {
            self.stack.close_width + usize::from(self.stack.own_line > 0 && (skip_space || !self.last_newline))
        } else {
            0
        };
        if self.used + closing <= self.budget {
            let ends_in_block = self.last_in_block || self.stack.code > 0 || self.stack.lines > 0;
            let level = if alters { LEVELS - 1 } else { self.stack.whole.min(LEVELS - 2) };
            self.best[level][class as usize] = Some(Cut { pos, used: self.used, skip_space, ends_in_block });
        }
    }

    fn choose(&self) -> Option<Cut> {
        self.best.iter().find_map(|level| self.choose_in(level))
    }

    fn choose_in(&self, best: &[Option<Cut>; CLASSES]) -> Option<Cut> {
        let best = |class: Class| best[class as usize];
        let later = |a: Option<Cut>, b: Option<Cut>| match (a, b) {
            (Some(x), Some(y)) => Some(if y.pos > x.pos { y } else { x }),
            (x, y) => x.or(y),
        };
        let line = later(best(Class::Paragraph), best(Class::Line));
        if let Some(cut) = line.filter(|c| c.used >= self.budget / 2) {
            return Some(cut);
        }
        later(best(Class::Space), line).or(best(Class::Opened)).or(best(Class::Grapheme)).or(best(Class::Hard))
    }
}
