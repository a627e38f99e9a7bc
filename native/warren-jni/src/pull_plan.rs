//! The pulls of one `PsClient.pull` call, assembled apart from the JNI: each entry's floats go
//! straight into an aligned direct buffer or into a buffer of their own (written back to the
//! Java array afterwards); dense ranges are checked, direct buffers that overlap refused, and
//! only then is anything sent. The export (`clientPull` in [`crate::ps`]) reads the entries
//! from the Java side and writes the copied ones back; everything between is here.

use std::ops::Range;

use warren::ps::Pull;

use crate::errors::{JniError, JniResult};

/// A sparse entry's keys and, if it is bagged, its bags' ends.
pub(crate) type SparseEntry = (Vec<u64>, Option<Vec<u64>>);

/// Where one entry's pulled floats go.
pub(crate) enum PullOut<'b> {
    /// Straight into (aligned) direct buffer memory.
    Direct(&'b mut [f32]),
    /// Into a buffer of its own, copied out once the pull is done.
    Copied(Vec<f32>),
}

impl PullOut<'_> {
    fn floats(&mut self) -> &mut [f32] {
        match self {
            PullOut::Direct(dst) => dst,
            PullOut::Copied(v) => v.as_mut_slice(),
        }
    }
}

/// One table's pull, as the Java side gave it.
pub(crate) struct PullEntry<'b> {
    /// The table.
    pub(crate) table: String,
    /// A dense entry's first element (ignored for a sparse one).
    pub(crate) start: i64,
    /// A sparse entry's keys and bags' ends; `None`: dense.
    pub(crate) sparse: Option<SparseEntry>,
    /// Where its floats go (a dense entry pulls as many elements as this holds).
    pub(crate) out: PullOut<'b>,
}

/// Pulls every entry in one call of `pull` (the client's round trip): refuses direct buffers
/// that overlap (`direct`: their bytes) and bad dense ranges before anything is sent.
pub(crate) fn pull_all(
    entries: &mut [PullEntry<'_>],
    direct: Vec<Range<usize>>,
    pull: impl FnOnce(&mut [Pull<'_>]) -> warren::Result<()>,
) -> JniResult<()> {
    refuse_overlaps(direct)?;
    let mut pulls = Vec::with_capacity(entries.len());
    for e in entries.iter_mut() {
        let table = e.table.as_str();
        let out = e.out.floats();
        pulls.push(match &e.sparse {
            Some((keys, None)) => Pull::Sparse { table, keys, out },
            Some((keys, Some(ends))) => Pull::SparseBags { table, keys, ends, out },
            None => Pull::Dense { table, range: dense_range(e.start, out.len())?, out },
        });
    }
    Ok(pull(&mut pulls)?)
}

/// Elements `start..start + len` of a dense table, checked.
fn dense_range(start: i64, len: usize) -> JniResult<Range<u64>> {
    let start = u64::try_from(start).map_err(|_| JniError::Argument(format!("start {start} is negative")))?;
    let end = start.checked_add(len as u64).ok_or_else(|| JniError::Argument("start + count overflows".into()))?;
    Ok(start..end)
}

/// Refuses direct buffers pulled into where they overlap (`spans`: their bytes), as two
/// pulls would then write the same floats.
fn refuse_overlaps(mut spans: Vec<Range<usize>>) -> JniResult<()> {
    spans.retain(|r| !r.is_empty());
    spans.sort_by_key(|r| r.start);
    if spans.windows(2).any(|w| w[1].start < w[0].end) {
        return Err(JniError::Argument("two pulls write to overlapping parts of one direct buffer".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry<'b>(table: &str, start: i64, sparse: Option<SparseEntry>, out: PullOut<'b>) -> PullEntry<'b> {
        PullEntry { table: table.into(), start, sparse, out }
    }

    /// A client that fills each pull's floats with its index, so a test sees where each went.
    fn fill(pulls: &mut [Pull<'_>]) -> warren::Result<()> {
        for (i, p) in pulls.iter_mut().enumerate() {
            let out = match p {
                Pull::Dense { out, .. } | Pull::Sparse { out, .. } | Pull::SparseBags { out, .. } => out,
            };
            out.fill(i as f32 + 1.0);
        }
        Ok(())
    }

    #[test]
    fn each_entry_becomes_its_pull_and_its_floats_land_where_it_asked() {
        let mut direct = vec![0f32; 3];
        let mut seen = Vec::new();
        let mut entries = vec![
            entry("b", 5, None, PullOut::Copied(vec![0.0; 2])),
            entry("w", -1, Some((vec![3, 1], None)), PullOut::Direct(&mut direct)),
            entry("e", 0, Some((vec![1, 2, 4], Some(vec![2, 3]))), PullOut::Copied(vec![0.0; 4])),
        ];
        pull_all(&mut entries, vec![], |pulls| {
            for p in pulls.iter() {
                seen.push(match p {
                    Pull::Dense { table, range, out } => format!("dense {table} {range:?} {}", out.len()),
                    Pull::Sparse { table, keys, out } => format!("sparse {table} {keys:?} {}", out.len()),
                    Pull::SparseBags { table, keys, ends, out } => {
                        format!("bags {table} {keys:?} {ends:?} {}", out.len())
                    }
                });
            }
            fill(pulls)
        })
        .unwrap();
        assert_eq!(seen, ["dense b 5..7 2", "sparse w [3, 1] 3", "bags e [1, 2, 4] [2, 3] 4"]);
        assert!(matches!(&entries[0].out, PullOut::Copied(v) if v == &[1.0, 1.0]));
        assert!(matches!(&entries[2].out, PullOut::Copied(v) if v == &[3.0; 4]));
        drop(entries);
        assert_eq!(direct, [2.0; 3], "the direct entry was pulled into in place");
    }

    #[test]
    fn bad_dense_ranges_and_overlapping_buffers_fail_before_anything_is_sent() {
        let refused = |mut entries: Vec<PullEntry<'_>>, direct: Vec<Range<usize>>| {
            let mut sent = false;
            let e = pull_all(&mut entries, direct, |_| {
                sent = true;
                Ok(())
            })
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
            assert!(!sent, "nothing is sent on bad input: {e}");
            e
        };
        let e = refused(vec![entry("b", -3, None, PullOut::Copied(vec![0.0; 1]))], vec![]);
        assert!(e.contains("start -3 is negative"), "{e}");
        let e = refused(vec![], vec![0..16, 12..20]);
        assert!(e.contains("overlapping parts of one direct buffer"), "{e}");
    }

    #[test]
    fn pulls_into_parts_of_one_buffer_that_touch_pass_and_overlapping_ones_are_refused() {
        assert!(refuse_overlaps(vec![100..164, 0..64, 64..100]).is_ok(), "side by side, in any order");
        assert!(refuse_overlaps(vec![0..64, 50..50, 64..64]).is_ok(), "empty parts overlap nothing");
        let e = refuse_overlaps(vec![0..64, 200..264, 60..68]).unwrap_err().to_string();
        assert!(e.contains("overlapping parts of one direct buffer"), "{e}");
        assert!(refuse_overlaps(vec![0..64, 0..64]).is_err(), "the same part twice");
    }
}
