use super::*;
use std::os::unix::fs::PermissionsExt;

const T0: f64 = 1_700_000_000.0;

fn store() -> (tempfile::TempDir, PairingStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = PairingStore::new(dir.path().join("platforms/pairing"));
    (dir, store)
}

fn issued(outcome: CodeRequest) -> String {
    match outcome {
        CodeRequest::Issued(code) => code,
        other => panic!("expected a code, got {other:?}"),
    }
}

/// Every file of the store, with its bytes.
fn files(store: &PairingStore) -> Vec<(PathBuf, Vec<u8>)> {
    std::fs::read_dir(store.dir()).unwrap().map(|e| e.unwrap().path()).map(|p| (p.clone(), std::fs::read(&p).unwrap())).collect()
}

#[test]
fn codes_are_eight_symbols_of_the_unambiguous_alphabet() {
    let codes: Vec<String> = (0..500).map(|_| random_code().unwrap()).collect();
    for code in &codes {
        assert_eq!(code.len(), CODE_LEN, "{code}");
        assert!(code.bytes().all(|b| ALPHABET.contains(&b)), "{code} has a symbol outside the alphabet");
        assert!(!code.contains(['0', 'O', '1', 'I']), "{code}");
    }
    let distinct: HashSet<&String> = codes.iter().collect();
    assert_eq!(distinct.len(), codes.len(), "500 random codes never repeat");
    // Every symbol turns up: the choice is not stuck on part of the alphabet.
    let seen: HashSet<u8> = codes.iter().flat_map(|c| c.bytes()).collect();
    assert_eq!(seen.len(), ALPHABET.len());
}

#[test]
fn a_code_is_stored_only_as_a_salted_hash() {
    let (_dir, store) = store();
    let code = issued(store.request_code("telegram", "6001", "Mallory", T0).unwrap());
    let other = issued(store.request_code("telegram", "6002", "Eve", T0).unwrap());
    for (path, bytes) in files(&store) {
        let text = String::from_utf8_lossy(&bytes);
        for c in [&code, &other] {
            assert!(!text.contains(c.as_str()), "{} holds the code {c} in plain text:\n{text}", path.display());
            assert!(!text.contains(&c.to_ascii_lowercase()), "{}", path.display());
        }
    }
    let pending: serde_json::Value = serde_json::from_slice(&std::fs::read(store.dir().join("telegram-pending.json")).unwrap()).unwrap();
    let entries = pending.as_object().unwrap();
    assert_eq!(entries.len(), 2);
    let salts: HashSet<&str> = entries.values().map(|e| e["salt"].as_str().unwrap()).collect();
    assert_eq!(salts.len(), 2, "each code has its own salt");
    for (hash, entry) in entries {
        assert_eq!(hash.len(), 64, "a SHA-256 in hex");
        assert!(entry["user_id"] == "6001" || entry["user_id"] == "6002");
        assert_ne!(hash, &hash_code("", &code), "the hash is salted");
    }
    // Approval is case-insensitive and names the user.
    let approved = store.approve("Telegram", &format!("  {}  ", code.to_ascii_lowercase()), T0 + 5.0).unwrap();
    assert_eq!((approved.user_id.as_str(), approved.user_name.as_str()), ("6001", "Mallory"));
    assert_eq!(store.approved_ids("telegram").unwrap(), HashSet::from(["6001".to_string()]));
    assert!(matches!(store.approve("telegram", &code, T0 + 6.0), Err(PairingError::WrongCode { .. })), "a code works once");
}

#[test]
fn a_code_expires_after_an_hour() {
    let (_dir, store) = store();
    let late = issued(store.request_code("telegram", "6001", "A", T0).unwrap());
    let in_time = issued(store.request_code("telegram", "6002", "B", T0).unwrap());
    assert_eq!(store.approve("telegram", &in_time, T0 + CODE_TTL_SECS - 1.0).unwrap().user_id, "6002");
    let err = store.approve("telegram", &late, T0 + CODE_TTL_SECS + 1.0).unwrap_err();
    assert!(matches!(err, PairingError::Expired { attempts_left: 4, .. }), "{err:?}");
    assert!(err.to_string().contains("has expired"), "{err}");
    assert!(!store.approved_ids("telegram").unwrap().contains("6001"));
    assert!(store.pending(T0 + CODE_TTL_SECS + 1.0).unwrap().is_empty(), "expired codes are not listed");
}

#[test]
fn at_most_three_codes_wait_per_platform_and_the_refusal_is_said_once() {
    let (_dir, store) = store();
    let first = issued(store.request_code("telegram", "1", "a", T0).unwrap());
    for user in ["2", "3"] {
        issued(store.request_code("telegram", user, "x", T0).unwrap());
    }
    assert_eq!(store.request_code("telegram", "4", "d", T0 + 1.0).unwrap(), CodeRequest::TooMany);
    assert_eq!(store.request_code("telegram", "4", "d", T0 + 2.0).unwrap(), CodeRequest::Silent, "told once, then silence");
    assert_eq!(store.pending(T0 + 2.0).unwrap().len(), MAX_PENDING);
    // Another platform has its own three.
    issued(store.request_code("discord", "4", "d", T0 + 2.0).unwrap());
    // Once one is approved, a slot is free again.
    store.approve("telegram", &first, T0 + 3.0).unwrap();
    issued(store.request_code("telegram", "5", "e", T0 + 4.0).unwrap());
    // And once codes expire, too.
    issued(store.request_code("telegram", "6", "f", T0 + CODE_TTL_SECS + 10.0).unwrap());
}

#[test]
fn one_code_per_user_per_ten_minutes_and_a_new_one_replaces_the_old() {
    let (_dir, store) = store();
    let old = issued(store.request_code("telegram", "6001", "M", T0).unwrap());
    assert_eq!(store.request_code("telegram", "6001", "M", T0 + 1.0).unwrap(), CodeRequest::Silent);
    assert_eq!(store.request_code("telegram", "6001", "M", T0 + RATE_LIMIT_SECS - 1.0).unwrap(), CodeRequest::Silent);
    let new = issued(store.request_code("telegram", "6001", "M", T0 + RATE_LIMIT_SECS + 1.0).unwrap());
    assert_ne!(old, new);
    assert_eq!(store.pending(T0 + RATE_LIMIT_SECS + 1.0).unwrap().len(), 1, "one pending code per user");
    assert!(matches!(store.approve("telegram", &old, T0 + 700.0), Err(PairingError::WrongCode { .. })));
    assert_eq!(store.approve("telegram", &new, T0 + 701.0).unwrap().user_id, "6001");
}

#[test]
fn five_failures_lock_approvals_for_an_hour_even_for_the_right_code() {
    let (_dir, store) = store();
    let code = issued(store.request_code("telegram", "6001", "M", T0).unwrap());
    for attempt in 1..=MAX_FAILURES {
        let err = store.approve("telegram", "WRONGCOD", T0 + f64::from(attempt)).unwrap_err();
        match &err {
            PairingError::WrongCode { attempts_left, .. } => assert_eq!(*attempts_left, MAX_FAILURES - attempt),
            other => panic!("attempt {attempt}: {other:?}"),
        }
        if attempt == MAX_FAILURES {
            assert!(err.to_string().contains("now locked for 1 hour"), "{err}");
        }
    }
    let err = store.approve("telegram", &code, T0 + 10.0).unwrap_err();
    assert!(matches!(err, PairingError::LockedOut { minutes: 60, .. }), "{err:?}");
    assert!(err.to_string().contains("locked for another 60 min"), "{err}");
    assert!(store.approved_ids("telegram").unwrap().is_empty());
    assert_eq!(store.lockouts(T0 + 10.0).unwrap(), [("telegram".to_string(), T0 + 5.0 + LOCKOUT_SECS)]);
    // No new codes while locked, and the lock is per platform.
    assert_eq!(store.request_code("telegram", "6002", "N", T0 + 20.0).unwrap(), CodeRequest::TooMany);
    let discord = issued(store.request_code("discord", "7001", "D", T0 + 20.0).unwrap());
    assert_eq!(store.approve("discord", &discord, T0 + 21.0).unwrap().user_id, "7001");
    // After the hour, a fresh code is accepted again.
    let later = T0 + 5.0 + LOCKOUT_SECS + 1.0;
    let fresh = issued(store.request_code("telegram", "6003", "O", later).unwrap());
    assert_eq!(store.approve("telegram", &fresh, later + 1.0).unwrap().user_id, "6003");
}

#[test]
fn a_success_resets_the_failure_count() {
    let (_dir, store) = store();
    let code = issued(store.request_code("telegram", "1", "a", T0).unwrap());
    for i in 0..(MAX_FAILURES - 1) {
        store.approve("telegram", "WRONGCOD", T0 + f64::from(i)).unwrap_err();
    }
    store.approve("telegram", &code, T0 + 10.0).unwrap();
    let err = store.approve("telegram", "WRONGCOD", T0 + 11.0).unwrap_err();
    assert!(matches!(err, PairingError::WrongCode { attempts_left: 4, .. }), "{err:?}");
}

#[test]
fn platforms_are_kept_apart() {
    let (_dir, store) = store();
    let telegram = issued(store.request_code("telegram", "42", "T", T0).unwrap());
    let err = store.approve("discord", &telegram, T0 + 1.0).unwrap_err();
    assert!(matches!(err, PairingError::WrongCode { .. }), "a Telegram code is no Discord code: {err:?}");
    store.approve("telegram", &telegram, T0 + 2.0).unwrap();
    assert!(store.approved_ids("telegram").unwrap().contains("42"));
    assert!(store.approved_ids("discord").unwrap().is_empty(), "the same id on another platform is someone else");
    // The same id asking on another platform is not rate limited by the first.
    issued(store.request_code("discord", "42", "D", T0 + 3.0).unwrap());
    assert!(matches!(store.revoke("discord", "42"), Ok(false)));
    assert!(store.revoke("telegram", "42").unwrap());
    assert!(store.approved_ids("telegram").unwrap().is_empty());
}

#[test]
fn platform_names_cannot_leave_the_directory() {
    let (_dir, store) = store();
    for bad in ["../x", "tele gram", "", "a/b", "a-b"] {
        assert!(matches!(store.request_code(bad, "1", "x", T0), Err(PairingError::BadPlatform(_))), "{bad:?}");
        assert!(matches!(store.approve(bad, "ABCDEFGH", T0), Err(PairingError::BadPlatform(_))), "{bad:?}");
    }
}

#[test]
fn every_file_is_owner_only() {
    let (_dir, store) = store();
    let code = issued(store.request_code("telegram", "1", "a", T0).unwrap());
    store.approve("telegram", &code, T0 + 1.0).unwrap();
    store.approve("telegram", "WRONGCOD", T0 + 2.0).unwrap_err();
    let found = files(&store);
    let names: HashSet<String> = found.iter().map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    for expected in ["telegram-pending.json", "telegram-approved.json", "_rate_limits.json", ".lock"] {
        assert!(names.contains(expected), "{expected} missing: {names:?}");
    }
    for (path, _) in &found {
        assert_eq!(std::fs::metadata(path).unwrap().permissions().mode() & 0o777, 0o600, "{}", path.display());
    }
    assert_eq!(std::fs::metadata(store.dir()).unwrap().permissions().mode() & 0o777, 0o700);
}

#[test]
fn concurrent_writers_lose_no_update() {
    let (dir, _) = store();
    let root = dir.path().join("platforms/pairing");
    // Eight writers, each with its own store value and so its own lock file handle (as separate
    // processes would have), all writing the shared rate-limit file.
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let root = root.clone();
            std::thread::spawn(move || {
                let store = PairingStore::new(root);
                let platform = format!("p{t}");
                let codes: Vec<String> =
                    (0..3).map(|u| issued(store.request_code(&platform, &format!("{t}-{u}"), "x", T0).unwrap())).collect();
                for code in codes {
                    store.approve(&platform, &code, T0 + 1.0).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let store = PairingStore::new(root);
    let limits: Limits = serde_json::from_slice(&std::fs::read(store.dir().join(RATE_LIMITS_FILE)).unwrap()).unwrap();
    assert_eq!(limits.keys().filter(|k| !k.starts_with('_')).count(), 24, "every request time was kept: {limits:?}");
    let approved = store.approved().unwrap();
    assert_eq!(approved.len(), 24, "every approval was kept");
    assert!(store.pending(T0 + 2.0).unwrap().is_empty());
}

#[test]
fn listing_revoking_and_clearing() {
    let (_dir, store) = store();
    issued(store.request_code("telegram", "1", "Ann\u{1b}[31m", T0).unwrap());
    let code = issued(store.request_code("discord", "2", "Bob", T0 + 1.0).unwrap());
    let pending = store.pending(T0 + 2.0).unwrap();
    assert_eq!(
        pending.iter().map(|p| (p.platform.as_str(), p.user_id.as_str())).collect::<Vec<_>>(),
        [("telegram", "1"), ("discord", "2")]
    );
    assert_eq!(pending[0].user_name, "Ann[31m", "control characters never reach the operator's terminal");
    store.approve("discord", &code, T0 + 3.0).unwrap();
    let approved = store.approved().unwrap();
    assert_eq!((approved[0].platform.as_str(), approved[0].user_id.as_str(), approved[0].user_name.as_str()), ("discord", "2", "Bob"));
    assert_eq!(store.clear_pending(None).unwrap(), 1);
    assert!(store.pending(T0 + 4.0).unwrap().is_empty());
    assert!(store.revoke("discord", "2").unwrap());
    assert!(store.approved().unwrap().is_empty());
}

#[test]
fn plain_text_codes_from_an_old_store_are_not_accepted() {
    let (_dir, store) = store();
    std::fs::create_dir_all(store.dir()).unwrap();
    let legacy = serde_json::json!({"ABCDEFGH": {"user_id": "9", "user_name": "old", "created_at": T0}});
    std::fs::write(store.dir().join("telegram-pending.json"), legacy.to_string()).unwrap();
    assert!(store.pending(T0 + 1.0).unwrap().is_empty());
    assert!(matches!(store.approve("telegram", "ABCDEFGH", T0 + 1.0), Err(PairingError::WrongCode { .. })));
    // Hermes' approved list reads as it is.
    let approved = serde_json::json!({"77": {"user_name": "Old friend", "approved_at": T0}});
    std::fs::write(store.dir().join("telegram-approved.json"), approved.to_string()).unwrap();
    assert!(store.approved_ids("telegram").unwrap().contains("77"));
}

#[test]
fn a_corrupt_file_names_itself_and_the_fix() {
    let (_dir, store) = store();
    std::fs::create_dir_all(store.dir()).unwrap();
    std::fs::write(store.dir().join(RATE_LIMITS_FILE), b"{not json").unwrap();
    let err = store.request_code("telegram", "1", "a", T0).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("_rate_limits.json") && text.contains("delete it"), "{text}");
}
