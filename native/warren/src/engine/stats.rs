//! Per-collective latency histograms (`hdrhistogram`), kept by every communicator.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::proto::CallKind;

/// Latency histograms, in microseconds, by collective.
#[derive(Debug, Default)]
pub struct CallStats {
    by_kind: BTreeMap<&'static str, Histogram<u64>>,
}

impl CallStats {
    pub(crate) fn record(&mut self, kind: CallKind, took: Duration) {
        let h = self
            .by_kind
            .entry(kind.name())
            .or_insert_with(|| Histogram::new(3).expect("3 significant digits is valid"));
        h.saturating_record(took.as_micros().max(1) as u64);
    }

    /// The histogram of one collective (`"allreduce(tree)"`, `"broadcast"`, ...).
    pub fn get(&self, kind: &str) -> Option<&Histogram<u64>> {
        self.by_kind.get(kind)
    }

    /// One line per collective: count, median, p99 and max in microseconds.
    pub fn summary(&self) -> String {
        self.by_kind
            .iter()
            .map(|(k, h)| {
                format!(
                    "{k}: n={} p50={}us p99={}us max={}us",
                    h.len(),
                    h.value_at_quantile(0.5),
                    h.value_at_quantile(0.99),
                    h.max()
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}
