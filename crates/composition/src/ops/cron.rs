//! CronOperations: at each time their `schedule` (standard five-field cron, or a descriptor
//! such as `@hourly`, read by the `croner` crate) names, an Operation named
//! `<cronoperation>-<scheduled time in unix seconds>` labelled
//! `ops.crossplane.io/cronoperation=<name>`. Only the latest missed time is run, and not when
//! it is later than `startingDeadlineSeconds`. `concurrencyPolicy`: `Allow` runs beside
//! running Operations, `Forbid` waits for them, `Replace` deletes them first. Finished
//! Operations beyond the history limits are deleted. Paused (`crossplane.io/paused: "true"`):
//! `Scheduling=False/SchedulePaused`; a schedule that does not parse:
//! `Scheduling=False/ScheduleInvalid`.

use std::sync::Arc;
use std::time::Duration;

use croner::Cron;
use oxplane_runtime::Runtime;
use oxplane_runtime::conditions::{self, Condition};
use oxplane_runtime::controller::{Action, Controller, ControllerConfig, ReconcileError, Reconciler, spec_or_metadata_changed};
use oxplane_runtime::events::EventRecorder;
use oxplane_runtime::object::{self, ObjectKey};
use oxplane_runtime::watches::WatchEvent;
use serde_json::{Map, Value, json};

use super::history::{collect_garbage, delete_running, operation_from_template, owned, running_names, set_run_status};
use super::{Clock, LABEL_CRON_OPERATION, cron_operation_kind, operation_kind};

/// How often missed runs are looked back through at most (a schedule long unattended).
const MAX_MISSED: usize = 100_000;

/// A parsed schedule.
pub struct Schedule(Cron);

impl Schedule {
    /// Parses a cron schedule as Crossplane's standard parser reads it: five fields or a
    /// descriptor.
    pub fn parse(text: &str) -> Result<Schedule, String> {
        Cron::new(text).parse().map(Schedule).map_err(|e| format!("invalid schedule {text:?}: {e}"))
    }

    /// The first scheduled time after `t`.
    pub fn next_after(&self, t: jiff::Timestamp) -> Option<jiff::Timestamp> {
        let start = chrono::DateTime::from_timestamp(t.as_second(), 0)?;
        let next = self.0.find_next_occurrence(&start, false).ok()?;
        jiff::Timestamp::from_second(next.timestamp()).ok()
    }

    /// The latest scheduled time after `after` and not after `now`.
    pub fn latest_due(&self, after: jiff::Timestamp, now: jiff::Timestamp) -> Option<jiff::Timestamp> {
        let mut due = None;
        let mut t = after;
        for _ in 0..MAX_MISSED {
            match self.next_after(t) {
                Some(next) if next <= now => {
                    due = Some(next);
                    t = next;
                }
                _ => break,
            }
        }
        due
    }
}

/// Runs CronOperations.
pub struct CronReconciler {
    runtime: Runtime,
    clock: Clock,
    recorder: EventRecorder,
}

fn parse_time(object: &Value, pointer: &str) -> Option<jiff::Timestamp> {
    object.pointer(pointer).and_then(Value::as_str).and_then(object::parse_time)
}

#[async_trait::async_trait]
impl Reconciler for CronReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, ReconcileError> {
        let kube = &self.runtime.kube;
        let Some(mut cron) = kube.get(&cron_operation_kind(), None, &key.name).await? else {
            return Ok(Action::Done);
        };
        if object::is_deleting(&cron) {
            // Its Operations go with it: it is their controller owner.
            return Ok(Action::Done);
        }
        let before = conditions::status_of(&cron);
        if object::annotation(&cron, "crossplane.io/paused") == Some("true") {
            conditions::set(&mut cron, Condition::new("Scheduling", "False", "SchedulePaused"));
            conditions::set(&mut cron, Condition::reconcile_paused());
            if conditions::status_of(&cron) != before {
                kube.replace_status(&cron_operation_kind(), &cron).await?;
            }
            return Ok(Action::Done);
        }
        let text = cron.pointer("/spec/schedule").and_then(Value::as_str).unwrap_or_default().to_string();
        let schedule = match Schedule::parse(&text) {
            Ok(schedule) => schedule,
            Err(message) => {
                conditions::set(&mut cron, Condition::new("Scheduling", "False", "ScheduleInvalid").with_message(message.clone()));
                conditions::set(&mut cron, Condition::reconcile_error(message));
                if conditions::status_of(&cron) != before {
                    kube.replace_status(&cron_operation_kind(), &cron).await?;
                }
                return Ok(Action::Done);
            }
        };
        let mut operations = collect_garbage(kube, &cron, owned(kube, LABEL_CRON_OPERATION, &key.name).await?).await?;
        let now = self.clock.now();
        let last = parse_time(&cron, "/status/lastScheduleTime").or_else(|| parse_time(&cron, "/metadata/creationTimestamp")).unwrap_or(now);
        let mut wait_for_running = false;
        if let Some(due) = schedule.latest_due(last, now) {
            let deadline = cron.pointer("/spec/startingDeadlineSeconds").and_then(Value::as_i64);
            let late = now.duration_since(due).as_secs();
            let policy = cron.pointer("/spec/concurrencyPolicy").and_then(Value::as_str).unwrap_or("Allow").to_string();
            let busy = running_names(&operations);
            if deadline.is_some_and(|d| late > d) {
                self.recorder.warning(&cron, "ScheduleOperation", format!("Missed the scheduled time {due} by more than startingDeadlineSeconds ({}s)", deadline.unwrap_or_default()));
                object::set_status_field(&mut cron, "lastScheduleTime", json!(due.to_string()));
            } else if policy == "Forbid" && !busy.is_empty() {
                wait_for_running = true;
            } else {
                if policy == "Replace" {
                    delete_running(kube, &mut operations).await?;
                }
                let name = format!("{}-{}", key.name, due.as_second());
                let operation = operation_from_template(&cron, LABEL_CRON_OPERATION, &name, &Map::new());
                match kube.create(&operation_kind(), &operation).await {
                    Ok(created) => {
                        self.recorder.normal(&cron, "ScheduleOperation", format!("Created Operation {name}"));
                        operations.insert(0, created);
                    }
                    Err(error) if error.is_already_exists() => {}
                    Err(error) => {
                        conditions::set(&mut cron, Condition::reconcile_error(format!("cannot create Operation {name}: {error}")));
                        kube.replace_status(&cron_operation_kind(), &cron).await?;
                        return Err(error.into());
                    }
                }
                object::set_status_field(&mut cron, "lastScheduleTime", json!(due.to_string()));
            }
        }
        set_run_status(&mut cron, &operations);
        conditions::set(&mut cron, Condition::new("Scheduling", "True", "ScheduleActive"));
        conditions::set(&mut cron, Condition::reconcile_success());
        if conditions::status_of(&cron) != before {
            kube.replace_status(&cron_operation_kind(), &cron).await?;
        }
        if wait_for_running {
            // A running Operation finishing wakes this CronOperation through its watch.
            return Ok(Action::RequeueAfter(Duration::from_secs(30)));
        }
        let next = schedule.next_after(now).map(|n| n.duration_since(now).unsigned_abs()).unwrap_or(Duration::from_secs(3600));
        Ok(Action::RequeueAfter(self.clock.real(next).max(Duration::from_millis(50))))
    }
}

/// Starts the CronOperation controller, named `cronoperation.ops.crossplane.io`; a change of
/// one of its Operations wakes the CronOperation.
pub fn start_controller(runtime: &Runtime, clock: Clock) -> Arc<Controller> {
    let recorder = EventRecorder::new(runtime.kube.clone(), "cronoperation.ops.crossplane.io");
    let reconciler = Arc::new(CronReconciler { runtime: runtime.clone(), clock, recorder });
    let controller = Controller::start(ControllerConfig::new("cronoperation.ops.crossplane.io"), reconciler, runtime.metrics.clone());
    controller.watch_own(&runtime.watches, &cron_operation_kind().gvk, spec_or_metadata_changed);
    controller.watch_mapped(&runtime.watches, &operation_kind().gvk, |event| owner_key(event, LABEL_CRON_OPERATION));
    controller
}

/// The owner an Operation event concerns, by the owner label.
pub(super) fn owner_key(event: &WatchEvent, label: &str) -> Vec<ObjectKey> {
    match event {
        WatchEvent::Applied { new, .. } => object::label(new, label).map(|n| vec![ObjectKey::new(None, n)]).unwrap_or_default(),
        WatchEvent::Deleted(old) => object::label(old, label).map(|n| vec![ObjectKey::new(None, n)]).unwrap_or_default(),
        WatchEvent::State(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn at(text: &str) -> jiff::Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn every_minute_fires_on_the_minute() {
        let schedule = Schedule::parse("*/1 * * * *").unwrap();
        assert_eq!(schedule.next_after(at("2026-01-01T00:00:30Z")), Some(at("2026-01-01T00:01:00Z")));
        assert_eq!(schedule.next_after(at("2026-01-01T00:01:00Z")), Some(at("2026-01-01T00:02:00Z")));
    }

    #[test]
    fn only_the_latest_missed_time_is_due() {
        let schedule = Schedule::parse("*/5 * * * *").unwrap();
        assert_eq!(schedule.latest_due(at("2026-01-01T00:00:00Z"), at("2026-01-01T00:17:00Z")), Some(at("2026-01-01T00:15:00Z")));
        assert_eq!(schedule.latest_due(at("2026-01-01T00:15:00Z"), at("2026-01-01T00:17:00Z")), None);
        let hourly = Schedule::parse("@hourly").unwrap();
        assert_eq!(hourly.latest_due(at("2026-01-01T00:00:00Z"), at("2026-01-01T02:30:00Z")), Some(at("2026-01-01T02:00:00Z")));
    }

    #[test]
    fn a_bad_schedule_says_why() {
        let error = Schedule::parse("every minute").err().unwrap();
        assert!(error.starts_with("invalid schedule \"every minute\": "), "{error}");
        assert!(Schedule::parse("61 * * * *").is_err());
    }

    #[test]
    fn a_fast_clock_runs_ahead_and_waits_less() {
        let clock = Clock::with_rate(60);
        std::thread::sleep(Duration::from_millis(100));
        let ahead = clock.now().duration_since(jiff::Timestamp::now()).as_secs_f64();
        assert!(ahead > 4.0, "{ahead}");
        assert_eq!(clock.real(Duration::from_secs(60)), Duration::from_secs(1));
        assert_eq!(Clock::system().real(Duration::from_secs(60)), Duration::from_secs(60));
    }
}
