//! A watch circuit breaker: a token bucket per target object, charged by every watch event that
//! would wake the target. When a target's bucket runs dry (a controller and something else
//! fighting over a watched object), its circuit opens for a cooldown: watch events then reach
//! it only periodically, at most one per probe interval, and the target can say so (Crossplane's
//! `Responsive=False/WatchCircuitOpen`).
//!
//! Unlike a breaker that drops what it does not let through, an event held back here is never
//! lost: the caller is told when the next probe is due and queues the target for then (work
//! queues coalesce the repeats), so the last change a fight leaves behind is always seen.
//!
//! The breaker is local state, per controller, and forgets a target when told (its object is
//! being deleted, so a new object with the same name starts closed).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::metrics::Metrics;
use crate::object::ObjectKey;

/// How many recent event sources a target remembers, to name the loudest when it opens.
const RECENT_SOURCES: usize = 16;

/// How a breaker behaves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CircuitConfig {
    /// Events a target may receive in a burst (the bucket's capacity).
    pub burst: f64,
    /// Tokens added back per second.
    pub refill_per_second: f64,
    /// How long a circuit stays open once it opened.
    pub cooldown: Duration,
    /// While open, how often an event is let through.
    pub probe_interval: Duration,
}

impl Default for CircuitConfig {
    /// Crossplane's defaults: bursts of 100, 1 event a second sustained, open for 5 minutes,
    /// a probe every 30 seconds while open.
    fn default() -> Self {
        CircuitConfig { burst: 100.0, refill_per_second: 1.0, cooldown: Duration::from_secs(300), probe_interval: Duration::from_secs(30) }
    }
}

/// What happens to one watch event for a target.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The circuit is closed: deliver it.
    Allowed,
    /// The circuit is open but a probe is due: deliver it.
    Probe,
    /// The circuit is open: hold it back, and wake the target after this long instead.
    Held(Duration),
}

struct Bucket {
    tokens: f64,
    refilled: Instant,
    recent: VecDeque<String>,
    open: Option<Open>,
}

struct Open {
    since: Instant,
    /// When the next event may go through.
    next_probe: Instant,
    /// Events were held for `next_probe`: the target is woken then, and that is the probe.
    probe_taken: bool,
    /// The source that sent the most of the recent events when the circuit opened.
    loudest: String,
}

/// A target's open circuit.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenCircuit {
    /// The source that sent the most of the recent events when it opened.
    pub loudest: String,
    /// How long until it closes.
    pub closes_in: Duration,
}

/// A breaker for the targets of one controller.
pub struct Breaker {
    controller: String,
    config: CircuitConfig,
    metrics: Arc<Metrics>,
    buckets: Mutex<HashMap<ObjectKey, Bucket>>,
}

impl Breaker {
    /// A breaker whose openings and events are counted under `controller`.
    pub fn new(controller: impl Into<String>, config: CircuitConfig, metrics: Arc<Metrics>) -> Self {
        Breaker { controller: controller.into(), config, metrics, buckets: Mutex::new(HashMap::new()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, Bucket>> {
        self.buckets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Charges one event from `source` (e.g. `NopResource/a`) to `target` and says whether it
    /// goes through now.
    pub fn admit(&self, target: &ObjectKey, source: &str) -> Verdict {
        self.admit_at(target, source, Instant::now())
    }

    fn admit_at(&self, target: &ObjectKey, source: &str, now: Instant) -> Verdict {
        let config = self.config;
        let mut buckets = self.lock();
        let bucket = buckets.entry(target.clone()).or_insert_with(|| Bucket {
            tokens: config.burst,
            refilled: now,
            recent: VecDeque::with_capacity(RECENT_SOURCES),
            open: None,
        });
        let elapsed = now.saturating_duration_since(bucket.refilled).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * config.refill_per_second).min(config.burst);
        bucket.refilled = now;
        if bucket.recent.len() == RECENT_SOURCES {
            bucket.recent.pop_front();
        }
        bucket.recent.push_back(source.to_string());

        if let Some(open) = &mut bucket.open {
            if now.saturating_duration_since(open.since) < config.cooldown {
                if now >= open.next_probe && open.probe_taken {
                    // Held events woke the target at `next_probe`: that was this interval's probe.
                    open.next_probe += config.probe_interval;
                    open.probe_taken = false;
                }
                if now >= open.next_probe {
                    open.next_probe = now + config.probe_interval;
                    self.metrics.circuit_event(&self.controller, "halfopen_allowed");
                    return Verdict::Probe;
                }
                open.probe_taken = true;
                self.metrics.circuit_event(&self.controller, "dropped");
                return Verdict::Held(open.next_probe - now);
            }
            bucket.open = None;
            bucket.recent.clear();
            bucket.recent.push_back(source.to_string());
            self.metrics.circuit_closed(&self.controller);
        }
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            self.metrics.circuit_event(&self.controller, "allowed");
            return Verdict::Allowed;
        }
        bucket.open = Some(Open { since: now, next_probe: now + config.probe_interval, probe_taken: true, loudest: loudest(&bucket.recent) });
        self.metrics.circuit_opened(&self.controller);
        tracing::info!(controller = %self.controller, target = %target, source, "too many watch events; the circuit is open");
        self.metrics.circuit_event(&self.controller, "dropped");
        Verdict::Held(config.probe_interval)
    }

    /// Whether `target`'s circuit is open now: the loudest source, and how long until it
    /// closes.
    pub fn open_because(&self, target: &ObjectKey) -> Option<OpenCircuit> {
        let buckets = self.lock();
        let open = buckets.get(target)?.open.as_ref()?;
        let closes_in = self.config.cooldown.checked_sub(open.since.elapsed()).filter(|d| !d.is_zero())?;
        Some(OpenCircuit { loudest: open.loudest.clone(), closes_in })
    }

    /// Forgets `target` (its object is being deleted or is gone).
    pub fn reset(&self, target: &ObjectKey) {
        self.lock().remove(target);
    }
}

/// The source seen most often in `recent` (the latest of equals).
fn loudest(recent: &VecDeque<String>) -> String {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    let mut best = ("", 0);
    for source in recent {
        let count = counts.entry(source).or_insert(0);
        *count += 1;
        if *count >= best.1 {
            best = (source, *count);
        }
    }
    best.0.to_string()
}

/// The message of `Responsive=False/WatchCircuitOpen`, as Crossplane words it.
pub fn open_message(loudest: &str) -> String {
    format!("Too many watch events from {loudest}. Allowing events periodically.")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker(burst: f64) -> Breaker {
        let config = CircuitConfig { burst, refill_per_second: 1.0, cooldown: Duration::from_secs(60), probe_interval: Duration::from_secs(10) };
        Breaker::new("composite/xs.example.org", config, Metrics::new())
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey { namespace: None, name: name.to_string() }
    }

    #[test]
    fn a_burst_goes_through_then_the_circuit_opens_naming_the_loudest_source() {
        let b = breaker(3.0);
        let t0 = Instant::now();
        for source in ["A/x", "B/y", "A/x"] {
            assert_eq!(b.admit_at(&key("a"), source, t0), Verdict::Allowed);
        }
        assert_eq!(b.admit_at(&key("a"), "A/x", t0), Verdict::Held(Duration::from_secs(10)));
        assert_eq!(b.open_because(&key("a")).map(|o| o.loudest).as_deref(), Some("A/x"));
        // Other targets have buckets of their own.
        assert_eq!(b.admit_at(&key("b"), "A/x", t0), Verdict::Allowed);
        assert_eq!(b.open_because(&key("b")), None);
        let metrics = b.metrics.render();
        assert!(metrics.contains("oxplane_circuit_breaker_opens_total{controller=\"composite/xs.example.org\"} 1"), "{metrics}");
        assert!(metrics.contains("oxplane_circuit_breaker_events_total{controller=\"composite/xs.example.org\",result=\"allowed\"} 4"), "{metrics}");
    }

    #[test]
    fn while_open_one_event_per_probe_interval_goes_through_and_held_ones_are_due_then() {
        let b = breaker(1.0);
        let t0 = Instant::now();
        assert_eq!(b.admit_at(&key("a"), "A/x", t0), Verdict::Allowed);
        assert_eq!(b.admit_at(&key("a"), "A/x", t0), Verdict::Held(Duration::from_secs(10)));
        // Held events are all due at the next probe, which they then take.
        assert_eq!(b.admit_at(&key("a"), "A/x", t0 + Duration::from_secs(4)), Verdict::Held(Duration::from_secs(6)));
        // The held ones woke the target at 10 s: the next probe is due at 20 s.
        assert_eq!(b.admit_at(&key("a"), "A/x", t0 + Duration::from_secs(12)), Verdict::Held(Duration::from_secs(8)));
        // Held again (for 20 s), so an event at 30 s is the probe of the next interval...
        assert_eq!(b.admit_at(&key("a"), "A/x", t0 + Duration::from_secs(30)), Verdict::Probe);
        // ...and the one after waits a whole interval from it.
        assert_eq!(b.admit_at(&key("a"), "A/x", t0 + Duration::from_secs(31)), Verdict::Held(Duration::from_secs(9)));
        // A quiet interval without held events: the next event goes straight through.
        assert_eq!(b.admit_at(&key("a"), "A/x", t0 + Duration::from_secs(55)), Verdict::Probe);
    }

    #[test]
    fn the_circuit_closes_after_the_cooldown_and_a_reset_forgets_everything() {
        let b = breaker(1.0);
        let t0 = Instant::now();
        b.admit_at(&key("a"), "A/x", t0);
        assert!(matches!(b.admit_at(&key("a"), "A/x", t0), Verdict::Held(_)));
        // After the cooldown the bucket has refilled (capped at the burst) and events flow.
        assert_eq!(b.admit_at(&key("a"), "A/x", t0 + Duration::from_secs(61)), Verdict::Allowed);
        let metrics = b.metrics.render();
        assert!(metrics.contains("oxplane_circuit_breaker_closes_total{controller=\"composite/xs.example.org\"} 1"), "{metrics}");
        assert!(matches!(b.admit_at(&key("a"), "A/x", t0 + Duration::from_secs(61)), Verdict::Held(_)));
        b.reset(&key("a"));
        assert_eq!(b.open_because(&key("a")), None);
        assert_eq!(b.admit_at(&key("a"), "A/x", t0 + Duration::from_secs(61)), Verdict::Allowed);
    }

    #[test]
    fn tokens_refill_at_the_configured_rate() {
        let b = breaker(2.0);
        let t0 = Instant::now();
        assert_eq!(b.admit_at(&key("a"), "A/x", t0), Verdict::Allowed);
        assert_eq!(b.admit_at(&key("a"), "A/x", t0), Verdict::Allowed);
        // One second later one token is back.
        assert_eq!(b.admit_at(&key("a"), "A/x", t0 + Duration::from_secs(1)), Verdict::Allowed);
        assert!(matches!(b.admit_at(&key("a"), "A/x", t0 + Duration::from_secs(1)), Verdict::Held(_)));
    }

    #[test]
    fn the_message_is_crossplanes() {
        assert_eq!(open_message("NopResource/a"), "Too many watch events from NopResource/a. Allowing events periodically.");
    }
}
