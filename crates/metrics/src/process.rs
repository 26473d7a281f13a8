//! The process' own metrics, read from `/proc/self` at each scrape under the names every
//! Prometheus client library uses (`process_cpu_seconds_total`, `process_resident_memory_bytes`,
//! `process_open_fds`, ...). Written by hand: `prometheus-client` has no process collector,
//! and the files are a few lines each. On systems without `/proc` they are left out.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Reads `/proc/self` at each scrape.
#[derive(Debug)]
pub struct ProcessCollector;

/// Clock ticks per second of `/proc/<pid>/stat`'s CPU times: Linux reports them in USER_HZ,
/// which is 100 on every architecture it supports.
const USER_HZ: f64 = 100.0;

/// User plus system CPU seconds, from `/proc/self/stat`.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: fields after it
    // start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of stat (utime, stime) are the 12th and 13th after the name.
    let user: f64 = fields.get(11)?.parse().ok()?;
    let system: f64 = fields.get(12)?.parse().ok()?;
    Some((user + system) / USER_HZ)
}

/// A `kB` line of `/proc/self/status` (`VmRSS`, `VmSize`) in bytes.
fn status_bytes(status: &str, field: &str) -> Option<i64> {
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: i64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// The soft limit of open files, from `/proc/self/limits`.
fn max_fds() -> Option<i64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

fn gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: Option<i64>) -> Result<(), std::fmt::Error> {
    let Some(value) = value else { return Ok(()) };
    let metric = ConstGauge::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(seconds) = cpu_seconds() {
            let metric = ConstCounter::new(seconds);
            metric.encode(encoder.encode_descriptor("process_cpu_seconds", "Total user and system CPU time spent in seconds", None, MetricType::Counter)?)?;
        }
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        gauge(&mut encoder, "process_resident_memory_bytes", "Resident memory size in bytes", status_bytes(&status, "VmRSS:"))?;
        gauge(&mut encoder, "process_virtual_memory_bytes", "Virtual memory size in bytes", status_bytes(&status, "VmSize:"))?;
        let open = std::fs::read_dir("/proc/self/fd").ok().map(|d| i64::try_from(d.count()).unwrap_or(i64::MAX));
        gauge(&mut encoder, "process_open_fds", "Number of open file descriptors", open)?;
        gauge(&mut encoder, "process_max_fds", "Maximum number of open file descriptors", max_fds())?;
        Ok(())
    }
}
