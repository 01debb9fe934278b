//! Fault injection shared by the platform fakes: rules that answer the next `n` matching calls,
//! or a seeded fraction of them, with a fault; and extra latency per scope. Each fake supplies its
//! own scope type (which calls a rule covers) and fault type (what the call gets instead).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;

struct Rule<S, F> {
    scope: S,
    remaining: Option<usize>,
    fraction: Option<f64>,
    fault: F,
}

pub(crate) struct FaultRules<S, F> {
    rules: Vec<Rule<S, F>>,
    latency: Vec<(S, Duration)>,
    rng: StdRng,
}

impl<S, F: Clone> FaultRules<S, F> {
    pub(crate) fn new() -> Self {
        Self { rules: Vec::new(), latency: Vec::new(), rng: StdRng::seed_from_u64(1) }
    }

    pub(crate) fn fail_next(&mut self, scope: S, n: usize, fault: F) {
        self.rules.push(Rule { scope, remaining: Some(n), fraction: None, fault });
    }

    pub(crate) fn fail_fraction(&mut self, scope: S, fraction: f64, fault: F) {
        self.rules.push(Rule { scope, remaining: None, fraction: Some(fraction), fault });
    }

    pub(crate) fn delay(&mut self, scope: S, d: Duration) {
        self.latency.push((scope, d));
    }

    pub(crate) fn reseed(&mut self, seed: u64) {
        self.rng = StdRng::seed_from_u64(seed);
    }

    pub(crate) fn clear(&mut self) {
        self.rules.clear();
        self.latency.clear();
    }

    /// The fault for a call whose scope test is `matches`, if a rule fires (first rule wins).
    pub(crate) fn fault_for(&mut self, matches: impl Fn(&S) -> bool) -> Option<F> {
        for rule in self.rules.iter_mut().filter(|r| matches(&r.scope)) {
            if let Some(n) = rule.remaining {
                if n == 0 {
                    continue;
                }
                rule.remaining = Some(n - 1);
                return Some(rule.fault.clone());
            }
            if let Some(p) = rule.fraction
                && self.rng.random::<f64>() < p
            {
                return Some(rule.fault.clone());
            }
        }
        None
    }

    pub(crate) fn latency_for(&self, matches: impl Fn(&S) -> bool) -> Option<Duration> {
        self.latency.iter().filter(|(scope, _)| matches(scope)).map(|(_, d)| *d).max()
    }
}
