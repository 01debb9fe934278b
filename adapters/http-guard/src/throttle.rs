//! Key guessing: after repeated authentication failures from one peer, that peer is locked out
//! for a while, correct key or not, so a guesser gets a handful of tries a minute.
//!
//! Peers are counted by address: an IPv4 address, or the /64 network of an IPv6 address (one
//! machine usually holds a whole /64, so counting single IPv6 addresses would be no limit). The
//! table is bounded; when it is full, peers whose count has lapsed go first, then the oldest
//! peers that are not locked out. Behind a reverse proxy every client has the proxy's address;
//! such a proxy should limit on its own.

use crate::Refusal;
use http::StatusCode;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many failures lock a peer out, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThrottleLimits {
    /// Failures within `window` that lock a peer out.
    pub max_failures: u32,
    pub window: Duration,
    /// How long a peer stays locked out.
    pub lockout: Duration,
    /// The most peers remembered at once.
    pub max_peers: usize,
}

impl Default for ThrottleLimits {
    /// Ten failures in a minute lock a peer out for a minute; up to 4,096 peers are remembered.
    fn default() -> Self {
        Self { max_failures: 10, window: Duration::from_secs(60), lockout: Duration::from_secs(60), max_peers: 4096 }
    }
}

#[derive(Debug, Clone, Copy)]
struct Peer {
    window_started: Instant,
    failures: u32,
    locked_until: Option<Instant>,
}

impl Peer {
    fn locked(&self, now: Instant) -> Option<Duration> {
        self.locked_until.filter(|until| *until > now).map(|until| until - now)
    }

    /// Neither locked out nor counting: forgetting it changes nothing.
    fn lapsed(&self, now: Instant, window: Duration) -> bool {
        self.locked(now).is_none() && now.saturating_duration_since(self.window_started) >= window
    }
}

/// Authentication failures per peer; shared by all requests of one listener.
#[derive(Debug, Default)]
pub struct AuthThrottle {
    limits: ThrottleLimits,
    peers: Mutex<HashMap<IpAddr, Peer>>,
}

impl AuthThrottle {
    pub fn new(limits: ThrottleLimits) -> Self {
        Self { limits, peers: Mutex::new(HashMap::new()) }
    }

    /// `Err(wait)` while `peer` is locked out, with the time left.
    pub fn check(&self, peer: IpAddr, now: Instant) -> Result<(), Duration> {
        let peers = self.peers.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match peers.get(&peer_key(peer)).and_then(|p| p.locked(now)) {
            Some(wait) => Err(wait),
            None => Ok(()),
        }
    }

    /// Counts one failed authentication of `peer`; the failure that reaches the limit starts
    /// the lockout.
    pub fn record_failure(&self, peer: IpAddr, now: Instant) {
        let limits = self.limits;
        // Nothing in this critical section panics, so a poisoned lock still holds valid counts.
        let mut peers = self.peers.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let key = peer_key(peer);
        if !peers.contains_key(&key) && peers.len() >= limits.max_peers {
            make_room(&mut peers, now, limits);
        }
        let entry = peers.entry(key).or_insert(Peer { window_started: now, failures: 0, locked_until: None });
        if entry.lapsed(now, limits.window) {
            *entry = Peer { window_started: now, failures: 0, locked_until: None };
        }
        entry.failures += 1;
        if entry.failures >= limits.max_failures {
            // Counting starts afresh once the lockout ends.
            *entry = Peer { window_started: now + limits.lockout, failures: 0, locked_until: Some(now + limits.lockout) };
        }
    }

    /// How many peers are remembered (for tests of the bound).
    pub fn remembered(&self) -> usize {
        self.peers.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).len()
    }
}

/// The 429 answer for a peer locked out for `wait`; the listener adds `Retry-After`
/// ([`retry_after_secs`]).
pub fn locked_out(wait: Duration) -> Refusal {
    Refusal::new(
        StatusCode::TOO_MANY_REQUESTS,
        "too_many_auth_failures",
        format!("Too many failed authentications from your address; try again in {} s with the correct key.", retry_after_secs(wait)),
    )
}

/// Whole seconds to wait, rounded up and at least 1, for `Retry-After`.
pub fn retry_after_secs(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

/// An IPv4 address (IPv4-mapped IPv6 included) as is; an IPv6 address as its /64 network.
fn peer_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        },
    }
}

/// Frees at least one slot: lapsed peers first, then the peer counting the longest that is not
/// locked out, and only when every peer is locked out, the one whose lockout ends first.
fn make_room(peers: &mut HashMap<IpAddr, Peer>, now: Instant, limits: ThrottleLimits) {
    peers.retain(|_, peer| !peer.lapsed(now, limits.window));
    if peers.len() < limits.max_peers {
        return;
    }
    let victim = peers
        .iter()
        .filter(|(_, p)| p.locked(now).is_none())
        .min_by_key(|(_, p)| p.window_started)
        .or_else(|| peers.iter().min_by_key(|(_, p)| p.locked_until))
        .map(|(ip, _)| *ip);
    if let Some(ip) = victim {
        peers.remove(&ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const A: IpAddr = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 1));
    const B: IpAddr = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 2));

    fn limits() -> ThrottleLimits {
        ThrottleLimits { max_failures: 3, window: Duration::from_secs(60), lockout: Duration::from_secs(60), max_peers: 8 }
    }

    #[test]
    fn the_limit_locks_the_peer_out_until_the_lockout_ends() {
        let throttle = AuthThrottle::new(limits());
        let t0 = Instant::now();
        for i in 0..2 {
            throttle.record_failure(A, t0 + Duration::from_secs(i));
            assert_eq!(throttle.check(A, t0 + Duration::from_secs(i)), Ok(()), "below the limit");
        }
        throttle.record_failure(A, t0 + Duration::from_secs(10));
        assert_eq!(throttle.check(A, t0 + Duration::from_secs(10)), Err(Duration::from_secs(60)));
        assert_eq!(throttle.check(A, t0 + Duration::from_secs(40)), Err(Duration::from_secs(30)));
        assert_eq!(throttle.check(B, t0 + Duration::from_secs(40)), Ok(()), "other peers are not affected");
        assert_eq!(throttle.check(A, t0 + Duration::from_secs(70)), Ok(()), "the lockout ends");
        throttle.record_failure(A, t0 + Duration::from_secs(71));
        assert_eq!(throttle.check(A, t0 + Duration::from_secs(71)), Ok(()), "counting starts afresh after a lockout");
    }

    #[test]
    fn failures_spread_beyond_the_window_do_not_add_up() {
        let throttle = AuthThrottle::new(limits());
        let t0 = Instant::now();
        for minute in 0..10 {
            throttle.record_failure(A, t0 + Duration::from_secs(61 * minute));
            throttle.record_failure(A, t0 + Duration::from_secs(61 * minute + 1));
        }
        assert_eq!(throttle.check(A, t0 + Duration::from_secs(700)), Ok(()));
    }

    #[test]
    fn ipv6_peers_are_counted_by_their_64_network_and_mapped_ipv4_as_ipv4() {
        let throttle = AuthThrottle::new(limits());
        let now = Instant::now();
        for host in 1..=3u16 {
            throttle.record_failure(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, host)), now);
        }
        assert!(throttle.check(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 9, 9, 9, 9)), now).is_err(), "same /64");
        assert!(throttle.check(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 2, 0, 0, 0, 1)), now).is_ok(), "another /64");
        for _ in 0..3 {
            throttle.record_failure(IpAddr::V6(Ipv4Addr::new(203, 0, 113, 1).to_ipv6_mapped()), now);
        }
        assert!(throttle.check(A, now).is_err());
    }

    #[test]
    fn memory_is_bounded_and_locked_out_peers_are_kept_longest() {
        let throttle = AuthThrottle::new(limits());
        let now = Instant::now();
        for _ in 0..3 {
            throttle.record_failure(A, now);
        }
        for i in 0..1000u32 {
            throttle.record_failure(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)), now + Duration::from_millis(u64::from(i)));
            assert!(throttle.remembered() <= 8);
        }
        assert!(throttle.check(A, now + Duration::from_secs(2)).is_err(), "flooding with new peers does not lift a lockout");
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(59_001)), 60);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert!(locked_out(Duration::from_secs(30)).message.contains("30 s"));
    }
}
