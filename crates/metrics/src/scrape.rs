//! Gauges read from a component's own state when `/metrics` is scraped (queue depths, open
//! watch streams, running informers, store revisions): values nobody records as they change,
//! so they are looked up at scrape time and encoded by `prometheus-client` as constant gauges.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// Label names and values of one sample, in the order they are printed.
pub type Labels = Vec<(&'static str, String)>;

#[derive(Debug)]
struct GaugeFamily {
    name: &'static str,
    help: &'static str,
    samples: Vec<(Labels, i64)>,
}

/// Gauge families filled in at scrape time, then encoded in Prometheus' text format.
#[derive(Debug, Default)]
pub struct Scrape {
    families: Vec<GaugeFamily>,
}

impl Scrape {
    /// An empty scrape.
    pub fn new() -> Scrape {
        Scrape::default()
    }

    /// Adds the gauge family `name` with its samples (a family with none still prints its
    /// `HELP` and `TYPE` lines, so a scraper sees that it exists).
    pub fn gauge(&mut self, name: &'static str, help: &'static str, samples: impl IntoIterator<Item = (Labels, i64)>) -> &mut Scrape {
        self.families.push(GaugeFamily { name, help, samples: samples.into_iter().collect() });
        self
    }

    /// The families in Prometheus' text format (0.0.4).
    pub fn render(self) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self));
        crate::encode(&registry)
    }
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for family in &self.families {
            let mut metric = encoder.encode_descriptor(family.name, family.help, None, prometheus_client::metrics::MetricType::Gauge)?;
            for (labels, value) in &family.samples {
                ConstGauge::new(*value).encode(metric.encode_family(labels)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_print_their_labels_in_order_and_escape_values() {
        let mut scrape = Scrape::new();
        scrape.gauge("oxplane_things", "Things by kind", [(vec![("kind", "a\"b".to_string()), ("state", "ok".to_string())], 3)]);
        scrape.gauge("oxplane_empty", "Nothing yet", []);
        let text = scrape.render();
        assert!(text.contains("# TYPE oxplane_things gauge\n"), "{text}");
        assert!(text.contains("oxplane_things{kind=\"a\\\"b\",state=\"ok\"} 3\n"), "{text}");
        assert!(text.contains("# HELP oxplane_empty Nothing yet\n# TYPE oxplane_empty gauge\n"), "{text}");
    }
}
