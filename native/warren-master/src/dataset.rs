//! From glob patterns to the chunks of a dataset: expand, sort, index (headers only).

use std::collections::BTreeSet;
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use super::queue::ChunkRef;
use warren_base::error::{Error, Result};
use warren_recordio::Index;

/// The files matched by `patterns`, sorted and without duplicates. A pattern that is not a
/// valid glob, or that matches no file, is [`Error::InvalidArgument`] naming it.
pub fn expand(patterns: &[String]) -> Result<Vec<PathBuf>> {
    if patterns.is_empty() {
        return Err(Error::InvalidArgument("the dataset has no file patterns".into()));
    }
    let mut files = BTreeSet::new();
    for pattern in patterns {
        let paths =
            glob::glob(pattern).map_err(|e| Error::InvalidArgument(format!("dataset pattern {pattern:?}: {e}")))?;
        let mut matched = 0;
        for path in paths {
            let path = path.map_err(|e| Error::io(format!("dataset pattern {pattern:?}"), e.into()))?;
            if path.is_file() {
                files.insert(path);
                matched += 1;
            }
        }
        if matched == 0 {
            return Err(Error::InvalidArgument(format!("dataset pattern {pattern:?} matches no file")));
        }
    }
    Ok(files.into_iter().collect())
}

/// Every chunk of the files matched by `patterns`, in file order (files sorted by path),
/// read from the chunk headers only. A file whose headers cannot be read is
/// [`Error::Corrupt`] naming it; a damaged payload is only found when a task is read.
pub fn chunks(patterns: &[String]) -> Result<Vec<ChunkRef>> {
    let mut out = Vec::new();
    for path in expand(patterns)? {
        let name = path.display().to_string();
        let file = File::open(&path).map_err(|e| Error::io(format!("opening dataset file {name}"), e))?;
        let index = Index::load(&mut BufReader::new(file), &name)?;
        out.extend(index.chunks().iter().enumerate().map(|(i, c)| ChunkRef {
            path: name.clone(),
            index: i as u64,
            offset: c.offset,
            len: c.total_len(),
            records: c.num_records(),
        }));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use warren_recordio::{Compressor, Writer, WriterOptions};
    use warren_store::testdir::TestDir;

    #[test]
    fn patterns_expand_sorted_and_index_every_chunk() {
        let dir = TestDir::new("dataset");
        let opts = WriterOptions { max_chunk_bytes: 10, compressor: Compressor::None };
        for (name, n) in [("b.rio", 3), ("a.rio", 2)] {
            let mut w = Writer::create(dir.path().join(name), opts).unwrap();
            for i in 0..n {
                w.write(format!("{name}-record-{i}").as_bytes()).unwrap();
            }
            w.finish().unwrap();
        }
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        let pat = |p: &str| dir.path().join(p).display().to_string();
        let found = chunks(&[pat("*.rio"), pat("a.rio")]).unwrap();
        let names: Vec<_> = found.iter().map(|c| (c.path.rsplit('/').next().unwrap().to_string(), c.index)).collect();
        assert_eq!(
            names,
            [("a.rio", 0), ("a.rio", 1), ("b.rio", 0), ("b.rio", 1), ("b.rio", 2)].map(|(a, b)| (a.to_string(), b))
        );
        assert!(found.iter().all(|c| c.records == 1));

        let err = expand(&[pat("*.rio"), pat("missing-*.rio")]).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument(m) if m.contains("missing-*.rio") && m.contains("matches no file"))
        );
        assert!(matches!(expand(&[pat("[")]), Err(Error::InvalidArgument(_))));
        assert!(matches!(expand(&[]), Err(Error::InvalidArgument(_))));
        // A text file is not RecordIO: indexing names it.
        let err = chunks(&[pat("*.txt")]).unwrap_err();
        assert!(err.to_string().contains("notes.txt"), "{err}");
    }
}
