//! Per-collective latency histograms (`hdrhistogram`), kept by every communicator.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::collective::header::CallKind;

/// Latency histograms, in microseconds, by collective.
///
/// Each call is timed on the calling worker from its start to its return: it includes waiting
/// for slower workers (so the last worker to arrive sees little more than the transfer, and
/// the others its lateness), and in robust mode any recovery the call waited through (a lost
/// peer's replacement joining, consensus, replay). A checkpoint counts both its phases and the
/// durable write, if any.
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
        // `record` grows the histogram to fit the value; `saturating_record` would clamp it to
        // the range seen so far (a 1.5 s wait after 100 us calls would read as ~100 us).
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX).max(1);
        if h.record(us).is_err() {
            h.saturating_record(us);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_call_after_fast_ones_keeps_its_latency() {
        let mut stats = CallStats::default();
        for _ in 0..100 {
            stats.record(CallKind::AllreduceTree, Duration::from_micros(80));
        }
        stats.record(CallKind::AllreduceTree, Duration::from_millis(1500));
        let h = stats.get("allreduce(tree)").unwrap();
        assert_eq!(h.len(), 101);
        assert!(h.max() >= 1_499_000, "max {} us", h.max());
        assert!(h.value_at_quantile(0.5) < 100, "median {} us", h.value_at_quantile(0.5));
        assert!(stats.summary().contains("n=101"), "{}", stats.summary());
    }
}
