//! `oxplane bench`: benchmarks that print their figures, each beside a baseline measured in
//! the same run, so a ratio can be read without trusting the machine's absolute speed.

mod api;
mod api_etcd;
mod api_tokens;
mod compose;
mod mr;
mod process;
mod sql;
mod store;
mod store_etcd;

use std::time::Duration;

use clap::Subcommand;
use serde::Serialize;

/// The benchmarks.
#[derive(Debug, Subcommand)]
pub enum Which {
    /// The durable store: group-committed writes against plain SQLite, range and watch; with
    /// `--store etcd`, the etcd store against raw etcd.
    Store(store::Args),
    /// The API server over HTTPS beside the raw store, watch fan-out, and CRD scale; with
    /// `--store etcd`, on etcd beside the same server on SQLite and raw etcd.
    Api(api::Args),
    /// Managed resources: 5,000 NopResources to Ready, beside the API alone.
    Mr(mr::Args),
    /// Composition: 1,000 XRs of 3 NopResources each to Ready, and composed-change latency.
    Compose(compose::Args),
    /// provider-sql: PostgreSQL Roles, Databases and Grants to Ready, beside the same
    /// statements from one client with no control plane.
    Sql(sql::Args),
}

/// Runs one benchmark.
pub fn run(which: Which) -> anyhow::Result<()> {
    match which {
        Which::Store(args) => store::run(args),
        Which::Api(args) => api::run(args),
        Which::Mr(args) => mr::run(args),
        Which::Compose(args) => compose::run(args),
        Which::Sql(args) => sql::run(args),
    }
}

/// One measured number.
#[derive(Debug, Serialize)]
pub struct Figure {
    /// Stable name, compared across runs.
    pub name: String,
    /// The value.
    pub value: f64,
    /// Its unit.
    pub unit: &'static str,
}

/// What a benchmark prints.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The benchmark's name.
    pub bench: &'static str,
    /// Its figures.
    pub figures: Vec<Figure>,
}

impl Report {
    /// An empty report for `bench`.
    pub fn new(bench: &'static str) -> Self {
        Report { bench, figures: Vec::new() }
    }

    /// Adds a figure, rounded to a readable precision.
    pub fn add(&mut self, name: impl Into<String>, value: f64, unit: &'static str) {
        let value = (value * 1000.0).round() / 1000.0;
        self.figures.push(Figure { name: name.into(), value, unit });
    }

    /// Prints the report: one JSON object, or an aligned table for people.
    pub fn print(&self, json: bool) -> anyhow::Result<()> {
        if json {
            println!("{}", serde_json::to_string(self)?);
        } else {
            println!("bench {}", self.bench);
            for f in &self.figures {
                println!("  {:<32} {:>14} {}", f.name, f.value, f.unit);
            }
        }
        Ok(())
    }
}

/// The median time of five runs of `run`, in milliseconds.
pub async fn median_of_five_ms<F, Fut>(mut run: F) -> anyhow::Result<f64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = std::time::Instant::now();
        run().await?;
        times.push(t.elapsed());
    }
    Ok(Latencies::new(times).percentile_ms(50.0))
}

/// Latency percentiles of a set of samples.
pub struct Latencies(Vec<Duration>);

impl Latencies {
    /// Sorts the samples.
    pub fn new(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        Latencies(samples)
    }

    /// The `p`-th percentile (0–100) in milliseconds; 0 when there are no samples.
    pub fn percentile_ms(&self, p: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        let rank = ((p / 100.0) * (self.0.len() - 1) as f64).round() as usize;
        self.0[rank.min(self.0.len() - 1)].as_secs_f64() * 1000.0
    }
}
