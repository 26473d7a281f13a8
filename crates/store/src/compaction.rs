//! The automatic compaction policy, shared by every backend.
//!
//! History is kept for a window that is the larger of a revision count and a time span, so a
//! burst of writes cannot compact away what a briefly disconnected watcher still needs.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::Revision;

/// How much history automatic compaction keeps, and how often it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactionPolicy {
    /// Keep at least this many of the newest revisions.
    pub keep_revisions: u64,
    /// Keep at least every revision written within this span.
    pub keep_for: Duration,
    /// How often to check whether there is something to compact.
    pub interval: Duration,
    /// When false, history is only compacted by explicit calls.
    pub enabled: bool,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        CompactionPolicy {
            keep_revisions: 10_000,
            keep_for: Duration::from_secs(300),
            interval: Duration::from_secs(30),
            enabled: true,
        }
    }
}

impl CompactionPolicy {
    /// A policy that never compacts on its own.
    pub fn disabled() -> Self {
        CompactionPolicy { enabled: false, ..CompactionPolicy::default() }
    }
}

/// Remembers which revision was current at which moment, to translate the policy's time span
/// into a revision. Revisions that existed before the clock started count as written at start,
/// so a restart never compacts more than the policy allows.
#[derive(Debug)]
pub struct RevisionClock {
    policy: CompactionPolicy,
    samples: VecDeque<(Instant, Revision)>,
    last_check: Instant,
}

impl RevisionClock {
    /// Starts the clock with the store's current revision.
    pub fn new(policy: CompactionPolicy, now: Instant, current: Revision) -> Self {
        let mut samples = VecDeque::new();
        samples.push_back((now, current));
        RevisionClock { policy, samples, last_check: now }
    }

    /// Whether the policy's interval has elapsed since the last check.
    pub fn due(&self, now: Instant) -> bool {
        self.policy.enabled && now.duration_since(self.last_check) >= self.policy.interval
    }

    /// Records the current revision and returns the revision to compact to, if it is newer
    /// than `compacted`.
    pub fn check(&mut self, now: Instant, current: Revision, compacted: Revision) -> Option<Revision> {
        self.last_check = now;
        if self.samples.back().map(|s| s.1) != Some(current) {
            self.samples.push_back((now, current));
        }
        // The newest revision that is older than the time window.
        let cutoff = now.checked_sub(self.policy.keep_for)?;
        let mut by_age = None;
        while let Some(&(at, rev)) = self.samples.front() {
            if at > cutoff {
                break;
            }
            by_age = Some(rev);
            // Keep the last sample at or before the cutoff: it stays the answer until a newer
            // one also ages out.
            if self.samples.get(1).is_some_and(|next| next.0 <= cutoff) {
                self.samples.pop_front();
            } else {
                break;
            }
        }
        let by_count = current.saturating_sub(self.policy.keep_revisions);
        let target = by_age?.min(by_count);
        (target > compacted).then_some(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> CompactionPolicy {
        CompactionPolicy {
            keep_revisions: 100,
            keep_for: Duration::from_secs(60),
            interval: Duration::from_secs(1),
            enabled: true,
        }
    }

    #[test]
    fn keeps_the_time_window_when_it_is_larger() {
        let t0 = Instant::now();
        let mut clock = RevisionClock::new(policy(), t0, 0);
        // 1000 revisions in the last 30 s: nothing is old enough.
        assert_eq!(clock.check(t0 + Duration::from_secs(30), 1000, 0), None);
        // At 61 s the revision current at t0 (0) ages out: still nothing above it.
        assert_eq!(clock.check(t0 + Duration::from_secs(61), 1100, 0), None);
        // At 91 s the sample taken at 30 s (1000) is older than the window.
        assert_eq!(clock.check(t0 + Duration::from_secs(91), 1200, 0), Some(1000));
    }

    #[test]
    fn keeps_the_revision_window_when_it_is_larger() {
        let t0 = Instant::now();
        let mut clock = RevisionClock::new(policy(), t0, 50);
        assert_eq!(clock.check(t0 + Duration::from_secs(10), 120, 0), None);
        // 120 was written long ago, but only 20 revisions since: keep 100 revisions.
        assert_eq!(clock.check(t0 + Duration::from_secs(200), 140, 0), Some(40));
        // Never moves backwards.
        assert_eq!(clock.check(t0 + Duration::from_secs(201), 140, 40), None);
    }

    #[test]
    fn disabled_is_never_due() {
        let t0 = Instant::now();
        let clock = RevisionClock::new(CompactionPolicy::disabled(), t0, 0);
        assert!(!clock.due(t0 + Duration::from_secs(3600)));
    }
}
