//! Files in an answer: the agent writes `MEDIA:<path>` on a line (optionally followed by
//! `[[as_document]]`, or `[[audio_as_voice]]` for an OGG/Opus file to play as a voice note) to
//! send a file it made. Tags inside code (fenced or inline) are text, not
//! files. Pure parsing; which paths may be sent is the gateway's decision.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

const TAG: &str = "MEDIA:";
const AS_DOCUMENT: &str = "[[as_document]]";
const AS_VOICE: &str = "[[audio_as_voice]]";

/// How a platform should present a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    /// Shown inline as a picture.
    Image,
    /// Offered as a download.
    Document,
    /// Spoken: an OGG/Opus voice note where the platform has them
    /// ([`crate::Capabilities::voice_notes`]), else an audio file.
    Voice,
}

/// A file to send with (or instead of) text; the path was checked by the gateway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutboundFile {
    /// Where the file is on this machine; the adapter reads and uploads it.
    pub path: PathBuf,
    /// The name the recipient sees (the path's last component).
    pub file_name: String,
    /// Whether it is shown as a picture, offered as a download or played as a voice note.
    pub kind: FileKind,
    /// A voice note's length in seconds (platforms show it before playing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_secs: Option<f64>,
}

impl OutboundFile {
    /// Images by extension, unless the agent asked for a document.
    pub fn new(path: PathBuf, as_document: bool) -> Self {
        let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "file".to_string());
        let extension = path.extension().map(|e| e.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
        let image = matches!(extension.as_str(), "png" | "jpg" | "jpeg" | "gif" | "webp");
        let kind = if image && !as_document { FileKind::Image } else { FileKind::Document };
        Self { path, file_name, kind, duration_secs: None }
    }

    /// A voice note (OGG/Opus) the gateway made, `duration_secs` long.
    pub fn voice(path: PathBuf, duration_secs: f64) -> Self {
        let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "voice.ogg".to_string());
        Self { path, file_name, kind: FileKind::Voice, duration_secs: Some(duration_secs) }
    }
}

/// A `MEDIA:` tag found in an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaTag {
    /// The path exactly as the agent wrote it, not yet checked.
    pub path: String,
    /// The agent added `[[as_document]]`: send it as a download even if it is an image.
    pub as_document: bool,
    /// `[[audio_as_voice]]`: play it as a voice note where the platform has them.
    pub as_voice: bool,
}

/// The tag as the agent writes it; extracting it again gives the same tag.
impl std::fmt::Display for MediaTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{TAG}{}", self.path)?;
        if self.as_document {
            write!(f, " {AS_DOCUMENT}")?;
        }
        if self.as_voice {
            write!(f, " {AS_VOICE}")?;
        }
        Ok(())
    }
}

/// The answer without its `MEDIA:` tags, and the tags in order. Lines that held only a tag are
/// removed; tags inside fenced code blocks or inline code stay as text.
pub fn extract_media_tags(markdown: &str) -> (String, Vec<MediaTag>) {
    if !markdown.contains(TAG) {
        return (markdown.to_string(), Vec::new());
    }
    let mut tags = Vec::new();
    let mut kept: Vec<String> = Vec::new();
    let mut fence: Option<&str> = None;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        if let Some(open) = fence {
            if trimmed.starts_with(open) {
                fence = None;
            }
            kept.push(line.to_string());
            continue;
        }
        if let Some(marker) = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m)) {
            fence = Some(marker);
            kept.push(line.to_string());
            continue;
        }
        let (rest, found) = take_tags(line);
        let had_tags = !found.is_empty();
        tags.extend(found);
        if !(had_tags && rest.trim().is_empty()) {
            kept.push(rest);
        }
    }
    (kept.join("\n").trim_end().to_string(), tags)
}

/// Tags on one line outside inline code; the line without them.
fn take_tags(line: &str) -> (String, Vec<MediaTag>) {
    let mut out = String::with_capacity(line.len());
    let mut tags = Vec::new();
    let mut in_code = false;
    let mut rest = line;
    while !rest.is_empty() {
        if rest.starts_with('`') {
            in_code = !in_code;
            out.push('`');
            rest = &rest[1..];
            continue;
        }
        if !in_code && rest.starts_with(TAG) {
            let after = &rest[TAG.len()..];
            let end = after.find(char::is_whitespace).unwrap_or(after.len());
            let path = after[..end].trim_matches(|c| c == '"' || c == '\'' || c == '`');
            let mut remainder = after[end..].trim_start();
            let as_document = remainder.starts_with(AS_DOCUMENT);
            if as_document {
                remainder = &remainder[AS_DOCUMENT.len()..];
            }
            let as_voice = !as_document && remainder.starts_with(AS_VOICE);
            if as_voice {
                remainder = &remainder[AS_VOICE.len()..];
            }
            if !path.is_empty() {
                tags.push(MediaTag { path: path.to_string(), as_document, as_voice });
                // The space before the tag stays; the one after it would double it.
                rest = remainder.trim_start();
                continue;
            }
        }
        let c = rest.chars().next().unwrap_or(' ');
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    (out.trim_end().to_string(), tags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_taken_out_and_lines_that_held_only_a_tag_disappear() {
        let (text, tags) =
            extract_media_tags("Here is the chart:\nMEDIA:/tmp/chart.png\nand the data MEDIA:/tmp/d.csv [[as_document]] too");
        assert_eq!(text, "Here is the chart:\nand the data too");
        assert_eq!(
            tags,
            vec![
                MediaTag { path: "/tmp/chart.png".into(), as_document: false, as_voice: false },
                MediaTag { path: "/tmp/d.csv".into(), as_document: true, as_voice: false }
            ]
        );
    }

    #[test]
    fn a_tag_written_out_reads_back_the_same() {
        let tag = MediaTag { path: "/tmp/d.csv".into(), as_document: true, as_voice: false };
        assert_eq!(extract_media_tags(&tag.to_string()), (String::new(), vec![tag]));
        let voice = MediaTag { path: "/cache/voice/a.ogg".into(), as_document: false, as_voice: true };
        assert_eq!(extract_media_tags(&format!("Here:\n{voice}")), ("Here:".to_string(), vec![voice]));
    }

    #[test]
    fn tags_in_code_are_text() {
        let answer = "Write `MEDIA:/x.png` to send a file:\n```\nMEDIA:/etc/passwd\n```";
        assert_eq!(extract_media_tags(answer), (answer.to_string(), vec![]));
    }

    #[test]
    fn images_are_told_from_documents_by_extension_or_request() {
        assert_eq!(OutboundFile::new("/a/b.PNG".into(), false).kind, FileKind::Image);
        assert_eq!(OutboundFile::new("/a/b.png".into(), true).kind, FileKind::Document);
        assert_eq!(OutboundFile::new("/a/report.pdf".into(), false).file_name, "report.pdf");
    }
}
