//! Keys and secrets a guesser would try first: too short, copied placeholders, too few
//! different characters. They are refused at start-up, before anything listens.
//!
//! A random key passes: 16 or more characters from a generator (`openssl rand -hex 32`) match
//! none of these rules except with negligible probability.

/// The fewest characters a key or secret may have.
pub const MIN_SECRET_CHARS: usize = 16;

/// The fewest different characters; `aaaa…` and `abab…` are guessed quickly whatever their length.
const MIN_DISTINCT_CHARS: usize = 6;

/// Fragments of the placeholders people copy from examples and forget to replace, compared with
/// the secret lower-cased and reduced to letters and digits (`Change_Me` → `changeme`).
const PLACEHOLDER_FRAGMENTS: [&str; 10] =
    ["changeme", "replaceme", "yourapikey", "yourkey", "yoursecret", "yourtoken", "placeholder", "insertyour", "putyour", "xxxx"];

/// Words that, with only digits and separators added (`password-2024…`, `sk-0000…`), make a
/// guessable secret.
const GUESSABLE_WORDS: [&str; 13] =
    ["", "secret", "password", "passwd", "apikey", "key", "token", "test", "admin", "example", "dummy", "sk", "hermes"];

/// Why a key or secret is refused. The text never contains the secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WeakSecret {
    #[error("it is {length} characters long; use at least {MIN_SECRET_CHARS}")]
    TooShort { length: usize },
    #[error("it is a placeholder ({0}), not a real secret")]
    Placeholder(&'static str),
    #[error("it is a common word with digits, which is guessed first")]
    CommonWord,
    #[error("it has fewer than {MIN_DISTINCT_CHARS} different characters")]
    TooFewDistinct,
}

/// Checks a key or secret as configured (surrounding spaces are ignored, as they are when it is
/// loaded). Case does not matter to any rule.
pub fn check_secret(secret: &str) -> Result<(), WeakSecret> {
    let secret = secret.trim();
    let length = secret.chars().count();
    if length < MIN_SECRET_CHARS {
        return Err(WeakSecret::TooShort { length });
    }
    if secret.contains("...") || secret.contains('…') {
        return Err(WeakSecret::Placeholder("it contains \"...\", as in `sk-...`"));
    }
    if secret.contains(['<', '>']) {
        return Err(WeakSecret::Placeholder("it contains <…>, as in `<your key>`"));
    }
    let alphanumeric: String = secret.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect();
    if let Some(fragment) = PLACEHOLDER_FRAGMENTS.iter().find(|f| alphanumeric.contains(**f)) {
        return Err(WeakSecret::Placeholder(placeholder_hint(fragment)));
    }
    if alphanumeric.starts_with("your") || alphanumeric.ends_with("here") {
        return Err(WeakSecret::Placeholder("it asks for your own value"));
    }
    let letters: String = alphanumeric.chars().filter(|c| !c.is_ascii_digit()).collect();
    if GUESSABLE_WORDS.contains(&letters.as_str()) {
        return Err(WeakSecret::CommonWord);
    }
    let mut distinct: Vec<char> = secret.chars().flat_map(char::to_lowercase).collect();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() < MIN_DISTINCT_CHARS {
        return Err(WeakSecret::TooFewDistinct);
    }
    Ok(())
}

fn placeholder_hint(fragment: &str) -> &'static str {
    match fragment {
        "changeme" => "it contains \"change me\"",
        "replaceme" => "it contains \"replace me\"",
        "yourapikey" | "yourkey" | "yoursecret" | "yourtoken" | "insertyour" | "putyour" => "it asks for your key",
        "placeholder" => "it contains \"placeholder\"",
        _ => "it contains \"xxxx\"",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_placeholders_people_copy_are_refused_whatever_the_case() {
        for secret in [
            "change-me",
            "CHANGEME",
            "secret",
            "password",
            "your-api-key",
            "sk-...",
            "test",
            "xxx",
            "change-me-please-now!",
            "Change_Me_To_Something_Long",
            "REPLACE-ME-WITH-A-LONG-RANDOM-STRING",
            "your-api-key-goes-here",
            "YOUR_API_KEY_HERE_1234",
            "sk-...................",
            "sk-proj-xxxxxxxxxxxxxxxx",
            "XXXXXXXXXXXXXXXXXXXX",
            "<your-api-key-here>",
            "insert-your-token-here",
            "your-webhook-signing-value",
            "paste-the-real-value-here",
            "placeholder-for-the-key",
            "password-1234567890",
            "Secret_2024_2025_2026",
            "sk-00000000000000000000",
            "1234567890123456",
            "test-test-test-test",
            "aaaaaaaaaaaaaaaaaaaaaaaa",
            "abababababababababab",
            "hermes-000000000000000",
        ] {
            assert!(check_secret(secret).is_err(), "{secret} should be refused");
        }
    }

    #[test]
    fn generated_and_long_chosen_secrets_pass() {
        for secret in [
            "3f9a1c0e7b24d6a85e1f0c3b9a7d2e64",
            "Zk3m9QpL2xV7nR4tW8yB",
            "e2e-api-key-0123456789",
            "deploy-route-hmac-k3y-42",
            "  9c1f4e2a7b3d8e6f5a0b  ",
            "correct horse battery staple",
        ] {
            assert_eq!(check_secret(secret), Ok(()), "{secret}");
        }
    }

    #[test]
    fn reasons_are_specific_and_never_contain_the_secret() {
        assert_eq!(check_secret("short-key"), Err(WeakSecret::TooShort { length: 9 }));
        assert_eq!(check_secret("ümlaut-key-123"), Err(WeakSecret::TooShort { length: 14 }), "counted in characters");
        let message = check_secret("change-me-please-now!").expect_err("placeholder").to_string();
        assert!(message.contains("change me") && !message.contains("please"), "{message}");
        assert_eq!(check_secret("password-1234567890"), Err(WeakSecret::CommonWord));
        assert_eq!(check_secret("abababababababababab"), Err(WeakSecret::TooFewDistinct));
        assert!(WeakSecret::TooShort { length: 9 }.to_string().contains("at least 16"));
    }
}
