//! How Slack's client displays a message's mrkdwn `text`: the visible text and the styles of its
//! formatted spans. Small on purpose — enough to tell "rendered as bold" from "shows literal
//! asterisks", not a full Slack renderer.
//!
//! * `*bold*`, `_italic_`, `~strike~` apply only at word boundaries: the opening marker follows the
//!   start, a space or punctuation and is followed by a non-space; the closing one is preceded by a
//!   non-space and followed by the end, a space or punctuation; neither spans a line break. So
//!   `a_b*c` and `snake_case_name` stay literal.
//! * `` `code` `` and ```` ```pre``` ```` show their contents verbatim (no formatting inside).
//! * `<url|text>` shows `text` ("text_link"), `<url>` shows the url ("url"), `<@U…>` shows
//!   `@name`, `<#C…|name>` shows `#name`, `<!here>` shows `@here`.
//! * The three entities Slack escapes (`&amp;`, `&lt;`, `&gt;`) are decoded.

/// The displayed text and one style per formatted span, in order of appearance.
pub(crate) fn render(text: &str, user_name: &dyn Fn(&str) -> Option<String>) -> (String, Vec<String>) {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Rendered { shown: String::new(), styles: Vec::new(), raw: String::new() };
    inline(&chars, &mut out, user_name);
    out.flush();
    (out.shown, out.styles)
}

/// The text as Slack shows a message posted with `mrkdwn: false`: verbatim, entities decoded.
pub(crate) fn plain(text: &str) -> String {
    decode_entities(text)
}

struct Rendered {
    shown: String,
    styles: Vec<String>,
    /// Plain text not yet decoded: kept whole so an entity split over characters still decodes.
    raw: String,
}

impl Rendered {
    fn flush(&mut self) {
        let raw = std::mem::take(&mut self.raw);
        self.shown.push_str(&decode_entities(&raw));
    }

    /// Plain characters (decoded together with their neighbours).
    fn plain(&mut self, chars: &[char]) {
        self.raw.extend(chars);
    }

    /// A span decoded on its own (code, link labels, names).
    fn span(&mut self, text: &str) {
        self.flush();
        self.shown.push_str(&decode_entities(text));
    }

    fn style(&mut self, style: &str) {
        self.styles.push(style.to_string());
    }
}

const MARKERS: [(char, &str); 3] = [('*', "bold"), ('_', "italic"), ('~', "strike")];

fn inline(chars: &[char], out: &mut Rendered, user_name: &dyn Fn(&str) -> Option<String>) {
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '`' && chars[i..].starts_with(&['`', '`', '`']) {
            if let Some(end) = find_seq(chars, i + 3, &['`', '`', '`']) {
                out.style("pre");
                out.span(&chars[i + 3..end].iter().collect::<String>());
                i = end + 3;
                continue;
            }
        } else if c == '`' {
            if let Some(end) = (i + 1..chars.len()).take_while(|j| chars[*j] != '\n').find(|j| chars[*j] == '`')
                && end > i + 1
            {
                out.style("code");
                out.span(&chars[i + 1..end].iter().collect::<String>());
                i = end + 1;
                continue;
            }
        } else if c == '<' {
            if let Some(end) = (i + 1..chars.len()).find(|j| chars[*j] == '>') {
                let inside: String = chars[i + 1..end].iter().collect();
                angle(&inside, out, user_name);
                i = end + 1;
                continue;
            }
        } else if let Some((_, style)) = MARKERS.iter().find(|(m, _)| *m == c)
            && let Some(end) = closing(chars, i)
        {
            out.style(style);
            inline(&chars[i + 1..end], out, user_name);
            i = end + 1;
            continue;
        }
        out.plain(&chars[i..i + 1]);
        i += 1;
    }
}

/// Where the marker opening at `start` closes, if it is a valid formatting pair.
fn closing(chars: &[char], start: usize) -> Option<usize> {
    let marker = chars[start];
    let boundary = |c: char| !c.is_alphanumeric();
    if start > 0 && !boundary(chars[start - 1]) {
        return None;
    }
    let first = *chars.get(start + 1)?;
    if first.is_whitespace() || first == marker {
        return None;
    }
    for end in start + 2..chars.len() {
        match chars[end] {
            '\n' => return None,
            c if c == marker => {
                let after_ok = chars.get(end + 1).is_none_or(|c| boundary(*c));
                if !chars[end - 1].is_whitespace() && after_ok {
                    return Some(end);
                }
            }
            _ => {}
        }
    }
    None
}

fn find_seq(chars: &[char], from: usize, seq: &[char]) -> Option<usize> {
    (from..chars.len()).find(|i| chars[*i..].starts_with(seq))
}

/// The contents of `<…>`: a link, a user or channel mention, or a special mention.
fn angle(inside: &str, out: &mut Rendered, user_name: &dyn Fn(&str) -> Option<String>) {
    let (target, label) = match inside.split_once('|') {
        Some((target, label)) => (target, Some(label)),
        None => (inside, None),
    };
    if let Some(user) = target.strip_prefix('@') {
        let name = label.map(str::to_string).or_else(|| user_name(user)).unwrap_or_else(|| user.to_string());
        out.span(&format!("@{name}"));
    } else if let Some(channel) = target.strip_prefix('#') {
        out.span(&format!("#{}", label.unwrap_or(channel)));
    } else if let Some(special) = target.strip_prefix('!') {
        // `<!here>`, `<!channel>`, `<!subteam^ID|@team>`: the label if any, else the keyword.
        let keyword = special.split('^').next().unwrap_or(special);
        out.span(&label.map(str::to_string).unwrap_or_else(|| format!("@{keyword}")));
    } else if let Some(label) = label {
        out.style("text_link");
        out.span(label);
    } else {
        out.style("url");
        out.span(target);
    }
}

/// `&lt;` `&gt;` `&amp;` back to characters, in one left-to-right pass (so `&amp;lt;` is `&lt;`).
fn decode_entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let (decoded, len) = if tail.starts_with("&lt;") {
            ('<', 4)
        } else if tail.starts_with("&gt;") {
            ('>', 4)
        } else if tail.starts_with("&amp;") {
            ('&', 5)
        } else {
            ('&', 1)
        };
        out.push(decoded);
        rest = &tail[len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(text: &str) -> (String, Vec<String>) {
        render(text, &|id| (id == "U0100").then(|| "alice".to_string()))
    }

    #[test]
    fn bold_italic_strike_at_word_boundaries() {
        assert_eq!(show("a *b* _c_ ~d~"), ("a b c d".to_string(), vec!["bold".into(), "italic".into(), "strike".into()]));
        assert_eq!(show("(*x*)."), ("(x).".to_string(), vec!["bold".into()]));
        assert_eq!(show("*_both_*"), ("both".to_string(), vec!["bold".into(), "italic".into()]));
    }

    #[test]
    fn markers_inside_words_or_next_to_spaces_stay_literal() {
        for text in ["a_b*c", "snake_case_name", "2*3*4", "* not bold *", "*unclosed", "**"] {
            assert_eq!(show(text), (text.to_string(), vec![]), "{text}");
        }
        assert_eq!(show("*across\nlines*").1, Vec::<String>::new());
        // Markdown's double asterisks are not Slack bold: an asterisk pair stays visible.
        assert_eq!(show("**x**").0, "*x*");
    }

    #[test]
    fn code_is_verbatim() {
        assert_eq!(show("run `a *b* c` now"), ("run a *b* c now".to_string(), vec!["code".into()]));
        assert_eq!(show("```\nfn _x_() {}\n```"), ("\nfn _x_() {}\n".to_string(), vec!["pre".into()]));
        assert_eq!(show("`&lt;tag&gt;`").0, "<tag>");
    }

    #[test]
    fn links_mentions_and_entities() {
        assert_eq!(show("see <https://x.io/a?b=1&amp;c=2|the docs>"), ("see the docs".to_string(), vec!["text_link".into()]));
        assert_eq!(show("<https://x.io>"), ("https://x.io".to_string(), vec!["url".into()]));
        assert_eq!(show("hi <@U0100> and <@U0999>").0, "hi @alice and @U0999");
        assert_eq!(show("<#C123|general> <!here>").0, "#general @here");
        assert_eq!(show("a &lt;b&gt; &amp;amp; c").0, "a <b> &amp; c");
        assert_eq!(show("AT&T").0, "AT&T");
        assert_eq!(show("x &amp; *y &lt; z*").0, "x & y < z");
    }
}
