//! Telegram's two markups parsed the way the Bot API does, into the visible text and its
//! entities (offsets and lengths in UTF-16 code units), or the same "can't parse entities" error
//! Telegram gives: HTML and MarkdownV2 (legacy Markdown is parsed as MarkdownV2 without the
//! reserved-character rule).

use serde_json::{Value, json};

/// Parsed text: what the user sees and how it is formatted.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Parsed {
    pub text: String,
    pub entities: Vec<Value>,
}

fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// Telegram's error text for a markup it cannot parse.
fn cant_parse(reason: String) -> String {
    format!("Bad Request: can't parse entities: {reason}")
}

struct Open {
    tag: String,
    kind: &'static str,
    start: usize,
    extra: Option<(&'static str, String)>,
}

pub(super) fn parse_html(input: &str) -> Result<Parsed, String> {
    let mut text = String::with_capacity(input.len());
    let mut entities = Vec::new();
    let mut stack: Vec<Open> = Vec::new();
    let mut i = 0;
    while i < input.len() {
        let c = input[i..].chars().next().unwrap_or('\0');
        match c {
            '<' => {
                let Some(close) = input[i..].find('>') else {
                    return Err(cant_parse(format!("Can't find end of the tag starting at byte offset {i}")));
                };
                let inner = &input[i + 1..i + close];
                if let Some(name) = inner.strip_prefix('/') {
                    let name = name.trim().to_ascii_lowercase();
                    let Some(open) = stack.pop() else {
                        return Err(cant_parse(format!("Unexpected end tag at byte offset {i}")));
                    };
                    if open.tag != name {
                        return Err(cant_parse(format!("Can't find end tag corresponding to start tag \"{}\"", open.tag)));
                    }
                    let end = utf16_len(&text);
                    // `<pre><code class=…>` is one pre entity with a language.
                    let nested_code_in_pre = open.kind == "code" && stack.last().is_some_and(|o| o.kind == "pre");
                    if nested_code_in_pre {
                        if let (Some(pre), Some((_, lang))) = (stack.last_mut(), open.extra) {
                            pre.extra = Some(("language", lang));
                        }
                    } else if end > open.start {
                        let mut e = json!({"type": open.kind, "offset": open.start, "length": end - open.start});
                        if let Some((key, value)) = open.extra {
                            e[key] = Value::String(value);
                        }
                        entities.push(e);
                    }
                } else {
                    let (name, attrs) = inner.split_once(char::is_whitespace).unwrap_or((inner, ""));
                    let name = name.to_ascii_lowercase();
                    let attr = |key: &str| attribute(attrs, key);
                    let (kind, extra): (&'static str, Option<(&'static str, String)>) = match name.as_str() {
                        "b" | "strong" => ("bold", None),
                        "i" | "em" => ("italic", None),
                        "u" | "ins" => ("underline", None),
                        "s" | "strike" | "del" => ("strikethrough", None),
                        "tg-spoiler" => ("spoiler", None),
                        "span" if attr("class").as_deref() == Some("tg-spoiler") => ("spoiler", None),
                        "a" => match attr("href") {
                            Some(url) if !url.is_empty() => ("text_link", Some(("url", url))),
                            _ => return Err(cant_parse(format!("Can't find href in the a tag at byte offset {i}"))),
                        },
                        "code" => {
                            ("code", attr("class").and_then(|c| c.strip_prefix("language-").map(str::to_string)).map(|l| ("language", l)))
                        }
                        "pre" => ("pre", None),
                        "blockquote" if attrs.trim() == "expandable" => ("expandable_blockquote", None),
                        "blockquote" => ("blockquote", None),
                        "tg-emoji" => ("custom_emoji", attr("emoji-id").map(|id| ("custom_emoji_id", id))),
                        _ => return Err(cant_parse(format!("Unsupported start tag \"{name}\" at byte offset {i}"))),
                    };
                    stack.push(Open { tag: name, kind, start: utf16_len(&text), extra });
                }
                i += close + 1;
            }
            '&' => {
                let Some(semi) = input[i..].find(';').filter(|&n| n <= 10) else {
                    return Err(cant_parse(format!("Character '&' at byte offset {i} must be escaped as &amp;")));
                };
                let name = &input[i + 1..i + semi];
                let decoded = match name {
                    "lt" => Some('<'),
                    "gt" => Some('>'),
                    "amp" => Some('&'),
                    "quot" => Some('"'),
                    _ => name
                        .strip_prefix("#x")
                        .or_else(|| name.strip_prefix("#X"))
                        .and_then(|h| u32::from_str_radix(h, 16).ok())
                        .or_else(|| name.strip_prefix('#').and_then(|d| d.parse().ok()))
                        .and_then(char::from_u32),
                };
                match decoded {
                    Some(ch) => text.push(ch),
                    None => return Err(cant_parse(format!("Unsupported HTML entity \"&{name};\" at byte offset {i}"))),
                }
                i += semi + 1;
            }
            _ => {
                text.push(c);
                i += c.len_utf8();
            }
        }
    }
    if let Some(open) = stack.pop() {
        return Err(cant_parse(format!("Can't find end tag corresponding to start tag \"{}\"", open.tag)));
    }
    Ok(Parsed { text, entities })
}

fn attribute(attrs: &str, key: &str) -> Option<String> {
    let at = attrs.find(&format!("{key}="))?;
    let rest = &attrs[at + key.len() + 1..];
    let value = if let Some(r) = rest.strip_prefix('"') {
        &r[..r.find('"')?]
    } else if let Some(r) = rest.strip_prefix('\'') {
        &r[..r.find('\'')?]
    } else {
        rest.split_whitespace().next()?
    };
    Some(value.replace("&amp;", "&").replace("&quot;", "\"").replace("&lt;", "<").replace("&gt;", ">"))
}

const RESERVED: &str = "_*[]()~`>#+-=|{}.!";

/// MarkdownV2 (`strict`) or legacy Markdown.
pub(super) fn parse_markdown(input: &str, strict: bool) -> Result<Parsed, String> {
    let mut text = String::new();
    let mut entities = Vec::new();
    // Open markers: (marker, entity kind, start offset, byte position).
    let mut open: Vec<(&'static str, &'static str, usize, usize)> = Vec::new();
    let mut i = 0;
    while i < input.len() {
        let rest = &input[i..];
        let c = rest.chars().next().unwrap_or('\0');
        if c == '\\' && strict {
            let Some(next) = rest[1..].chars().next() else {
                return Err(cant_parse(format!("Character '\\' at byte offset {i} is not followed by a character")));
            };
            text.push(next);
            i += 1 + next.len_utf8();
            continue;
        }
        if rest.starts_with("```") {
            let body_start = i + 3;
            let Some(end) = input[body_start..].find("```") else {
                return Err(cant_parse(format!("Can't find end of Pre entity at byte offset {i}")));
            };
            let body = &input[body_start..body_start + end];
            let (lang, code) = match body.split_once('\n') {
                Some((first, code)) if !first.trim().is_empty() && !first.contains(' ') => (Some(first.trim()), code),
                Some((_, code)) => (None, code),
                None => (None, body),
            };
            let start = utf16_len(&text);
            text.push_str(code);
            let mut e = json!({"type": "pre", "offset": start, "length": utf16_len(code)});
            if let Some(l) = lang {
                e["language"] = Value::String(l.to_string());
            }
            entities.push(e);
            i = body_start + end + 3;
            continue;
        }
        if c == '`' {
            let Some(end) = rest[1..].find('`') else {
                return Err(cant_parse(format!("Can't find end of Code entity at byte offset {i}")));
            };
            let code = &rest[1..1 + end];
            let start = utf16_len(&text);
            text.push_str(code);
            entities.push(json!({"type": "code", "offset": start, "length": utf16_len(code)}));
            i += end + 2;
            continue;
        }
        if c == '[' {
            let close = rest.find("](").and_then(|t| rest[t..].find(')').map(|u| (t, t + u)));
            if let Some((t, u)) = close {
                let label = &rest[1..t];
                let url = &rest[t + 2..u];
                let start = utf16_len(&text);
                let inner = parse_markdown(label, strict)?;
                text.push_str(&inner.text);
                entities.push(json!({"type": "text_link", "offset": start, "length": utf16_len(&inner.text), "url": url}));
                i += u + 1;
                continue;
            }
            if strict {
                return Err(cant_parse(format!("Can't find end of TextUrl entity at byte offset {i}")));
            }
        }
        let marker: Option<(&'static str, &'static str)> = if rest.starts_with("||") && strict {
            Some(("||", "spoiler"))
        } else if rest.starts_with("__") && strict {
            Some(("__", "underline"))
        } else {
            match c {
                '*' => Some(("*", "bold")),
                '_' => Some(("_", "italic")),
                '~' if strict => Some(("~", "strikethrough")),
                _ => None,
            }
        };
        if let Some((m, kind)) = marker {
            if let Some(pos) = open.iter().rposition(|(om, ..)| *om == m) {
                let (_, kind, start, _) = open.remove(pos);
                let end = utf16_len(&text);
                if end > start {
                    entities.push(json!({"type": kind, "offset": start, "length": end - start}));
                }
            } else {
                open.push((m, kind, utf16_len(&text), i));
            }
            i += m.len();
            continue;
        }
        if strict && RESERVED.contains(c) {
            return Err(cant_parse(format!("Character '{c}' is reserved and must be escaped with the preceding '\\'")));
        }
        text.push(c);
        i += c.len_utf8();
    }
    if let Some((_, kind, _, at)) = open.first() {
        return Err(cant_parse(format!("Can't find end of {kind} entity at byte offset {at}")));
    }
    Ok(Parsed { text, entities })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_entities_and_offsets_in_utf16() {
        let p = parse_html("😀 <b>bold &amp; <i>both</i></b> <a href=\"https://x.test/?a=1&amp;b=2\">link</a>").unwrap();
        assert_eq!(p.text, "😀 bold & both link");
        assert_eq!(p.entities[0], json!({"type": "italic", "offset": 10, "length": 4}));
        assert_eq!(p.entities[1], json!({"type": "bold", "offset": 3, "length": 11}));
        assert_eq!(p.entities[2]["url"], "https://x.test/?a=1&b=2");
    }

    #[test]
    fn html_errors_read_like_telegram() {
        assert!(parse_html("<foo>x</foo>").unwrap_err().contains("Unsupported start tag \"foo\""));
        assert!(parse_html("<b>x").unwrap_err().contains("Can't find end tag corresponding to start tag \"b\""));
        assert!(parse_html("<b>x</i>").is_err());
        assert!(parse_html("a & b").is_err());
        assert!(parse_html("<pre><code class=\"language-rust\">fn</code></pre>").unwrap().entities[0]["language"] == "rust");
    }

    #[test]
    fn markdown_v2_requires_escapes() {
        assert!(parse_markdown("Hello.", true).unwrap_err().contains("Character '.' is reserved"));
        let p = parse_markdown("*bold* and \\. `co.de`", true).unwrap();
        assert_eq!(p.text, "bold and . co.de");
        assert!(parse_markdown("*open", true).unwrap_err().contains("Can't find end of bold entity"));
        assert_eq!(parse_markdown("Hello. *b*", false).unwrap().text, "Hello. b");
    }
}
