//! The bootstrap cache: results of calls made once before the first checkpoint (feature
//! counts, a sampler seed, histogram bounds), kept for the whole job and served to a restarted
//! worker by key, whatever the order in which it makes those calls again.
//!
//! A key is the caller's signature — its source location (`#[track_caller]`) and how many
//! times that location has been called — or an explicit string from a foreign caller (the JVM
//! passes its own), hashed to 64 bits. The element type and count are stored with the result,
//! so a caller asking for the same key with a different size is told so instead of being
//! served the wrong bytes.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use crate::collective::header::CallHeader;

/// A bootstrap call's identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BootstrapKey {
    /// Human-readable form, for error messages (`src/main.rs:42:9#0`).
    pub name: String,
    /// 64-bit hash of the name, the form that travels.
    pub hash: u64,
}

impl BootstrapKey {
    /// The key of a named call site's `nth` call.
    pub fn new(site: &str, nth: u32) -> BootstrapKey {
        let name = format!("{site}#{nth}");
        let d = Sha256::digest(name.as_bytes());
        // Never 0 or u64::MAX, which mean "no key" in proposals.
        let hash = u64::from_le_bytes(d[..8].try_into().unwrap()).clamp(1, u64::MAX - 1);
        BootstrapKey { name, hash }
    }
}

/// Cached bootstrap results, and a counter of calls per site for building keys.
#[derive(Debug, Default)]
pub struct BootstrapCache {
    entries: HashMap<u64, (String, CallHeader, Vec<u8>)>,
    calls_per_site: HashMap<String, u32>,
}

impl BootstrapCache {
    /// The key of the next call from `site` (each call of a site gets the next counter).
    pub fn next_key(&mut self, site: &str) -> BootstrapKey {
        let n = self.calls_per_site.entry(site.to_string()).or_insert(0);
        let key = BootstrapKey::new(site, *n);
        *n += 1;
        key
    }

    /// Stores a result. A second result under the same key is a collision: refused with the
    /// key name and header of both calls (the cached one first).
    pub fn insert(
        &mut self,
        key: &BootstrapKey,
        header: CallHeader,
        data: Vec<u8>,
    ) -> Result<(), [(String, CallHeader); 2]> {
        if let Some((name, h, _)) = self.entries.get(&key.hash) {
            if name != &key.name || h.count != header.count || h.dtype != header.dtype {
                return Err([(name.clone(), *h), (key.name.clone(), header)]);
            }
            return Ok(());
        }
        self.entries.insert(key.hash, (key.name.clone(), header, data));
        Ok(())
    }

    /// The cached result for a key hash: its name, header and bytes.
    pub fn get(&self, hash: u64) -> Option<(&str, &CallHeader, &[u8])> {
        self.entries.get(&hash).map(|(n, h, d)| (n.as_str(), h, d.as_slice()))
    }

    /// Number of cached results.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::header::{CallKind, Numbering};
    use crate::reduce::{DataType, Op};

    fn hdr(count: u64) -> CallHeader {
        CallHeader {
            seq: 0,
            numbering: Numbering::Bootstrap,
            kind: CallKind::AllreduceTree,
            dtype: DataType::U64,
            op: Op::Max,
            elem_size: 8,
            root: 0,
            count,
            tag: 0,
        }
    }

    #[test]
    fn keys_count_calls_per_site_and_are_stable() {
        let mut c = BootstrapCache::default();
        let a0 = c.next_key("main.rs:10:5");
        let a1 = c.next_key("main.rs:10:5");
        let b0 = c.next_key("main.rs:11:5");
        assert_ne!(a0, a1);
        assert_ne!(a0.hash, b0.hash);
        assert_eq!(a0, BootstrapKey::new("main.rs:10:5", 0));
        assert_eq!(a1.name, "main.rs:10:5#1");
    }

    #[test]
    fn stores_and_detects_collisions() {
        let mut c = BootstrapCache::default();
        let k = BootstrapKey::new("x", 0);
        c.insert(&k, hdr(8), vec![1; 8]).unwrap();
        c.insert(&k, hdr(8), vec![1; 8]).unwrap();
        let [(cached_key, cached), (_, new)] = c.insert(&k, hdr(16), vec![1; 16]).unwrap_err();
        let (cached, new) = (cached.declaration(0, Some(&cached_key)).call, new.declaration(0, None).call);
        assert!(cached.contains("x#0") && cached.contains("8 bytes"), "{cached}");
        assert!(new.contains("16 bytes"), "{new}");
        let forged = BootstrapKey { name: "y#0".into(), hash: k.hash };
        assert!(c.insert(&forged, hdr(8), vec![]).is_err());
        assert_eq!(c.get(k.hash).unwrap().2, &[1; 8]);
        assert!(c.get(12345).is_none());
    }
}
