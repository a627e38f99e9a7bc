//! Bags of keys (pure): a sparse pull or push that works on *sums of rows* (an embedding
//! bag, as `EmbeddingBag` or `embedding_lookup_sparse` do) instead of on each row.
//!
//! A batch of examples, each reading several keys of a sparse table, is given as the keys
//! of every example one after the other and `ends`, where bag `b` holds the keys
//! `ends[b - 1]..ends[b]` (bag 0 from 0). A bagged pull returns one row per bag, the sum of
//! the bag's rows; a bagged push gives one gradient row per bag, which counts for every key
//! of the bag (the gradient of a sum of rows, for each of its rows). Over the wire that is
//! a row per bag instead of a row per key, both ways: a batch of 8 keys an example moves
//! about a third of the bytes of the same batch pulled and pushed row by row (the keys still
//! cross, with the bags' ends).
//!
//! Each server gets its keys of each bag ([`split`]), and only the bags with keys there;
//! the trainer's client adds the servers' sums of a bag in server order, so a bag's sum does
//! not depend on which server answers first.

use super::table::KeySpread;

/// Checks that `ends` cuts `keys` keys into bags: non-decreasing, the last one `keys`
/// (no bags: no keys). The error says what is wrong.
pub(crate) fn check_ends(ends: &[u64], keys: usize) -> Result<(), String> {
    if let Some(b) = ends.windows(2).position(|w| w[1] < w[0]) {
        return Err(format!("bag {} ends at key {}, before bag {b} ends (at {})", b + 1, ends[b + 1], ends[b]));
    }
    match ends.last() {
        None if keys > 0 => Err(format!("{keys} keys in no bag")),
        Some(&last) if last != keys as u64 => {
            Err(format!("the last bag ends at key {last}, but there are {keys} keys"))
        }
        _ => Ok(()),
    }
}

/// [`check_ends`] as the error a caller gets for bags of table `table`.
pub(crate) fn check(table: &str, keys: &[u64], ends: &[u64]) -> warren_base::error::Result<()> {
    check_ends(ends, keys.len())
        .map_err(|why| warren_base::error::Error::InvalidArgument(format!("bags of table {table:?}: {why}")))
}

/// [`check`], and that `floats` (`what`: "a buffer" of a pull, "a gradient" of a push) holds
/// one row of `width` floats per bag.
pub(crate) fn check_rows(
    table: &str,
    keys: &[u64],
    ends: &[u64],
    what: &str,
    floats: usize,
    width: usize,
) -> warren_base::error::Result<()> {
    check(table, keys, ends)?;
    if floats != ends.len() * width {
        return Err(warren_base::error::Error::InvalidArgument(format!(
            "bags of table {table:?}: {what} of {floats} floats for {} bags of width {width}",
            ends.len()
        )));
    }
    Ok(())
}

/// The bag of each key, in key order, for `ends` that passed [`check_ends`].
pub(crate) fn bag_of_each_key(ends: &[u64]) -> impl Iterator<Item = usize> + '_ {
    let starts = std::iter::once(0).chain(ends.iter().copied());
    starts.zip(ends).enumerate().flat_map(|(b, (start, &end))| std::iter::repeat_n(b, (end - start) as usize))
}

/// One server's share of a bagged pull or push.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ServerBags {
    /// Its keys, bag by bag, in the order given.
    pub keys: Vec<u64>,
    /// Where each of its bags ends in `keys`.
    pub ends: Vec<u64>,
    /// Which of the caller's bags each of its bags is.
    pub bags: Vec<usize>,
}

/// Splits bags (`keys` cut by `ends`, checked by [`check_ends`]) over `servers` servers:
/// each server's keys, and only the bags with at least one of its keys.
pub(crate) fn split(keys: &[u64], ends: &[u64], servers: usize) -> Vec<ServerBags> {
    let spread = KeySpread::new(servers);
    let cap = keys.len() / servers.max(1) + keys.len() / 8 + 16;
    let bag_cap = ends.len().min(cap);
    let mut per: Vec<ServerBags> = (0..servers)
        .map(|_| ServerBags {
            keys: Vec::with_capacity(cap),
            ends: Vec::with_capacity(bag_cap),
            bags: Vec::with_capacity(bag_cap),
        })
        .collect();
    // The servers the bag being split has keys at.
    let mut touched: Vec<usize> = Vec::with_capacity(servers);
    let mut start = 0;
    for (b, &end) in ends.iter().enumerate() {
        for &k in &keys[start..end as usize] {
            let s = spread.server(k);
            let mine = &mut per[s];
            if mine.bags.last() != Some(&b) {
                mine.bags.push(b);
                touched.push(s);
            }
            mine.keys.push(k);
        }
        for s in touched.drain(..) {
            let mine = &mut per[s];
            mine.ends.push(mine.keys.len() as u64);
        }
        start = end as usize;
    }
    per
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn bad_ends_say_what_is_wrong() {
        assert_eq!(check_ends(&[2, 1, 3], 3).unwrap_err(), "bag 1 ends at key 1, before bag 0 ends (at 2)");
        assert_eq!(check_ends(&[1, 2], 3).unwrap_err(), "the last bag ends at key 2, but there are 3 keys");
        assert_eq!(check_ends(&[], 3).unwrap_err(), "3 keys in no bag");
        assert!(check_ends(&[], 0).is_ok());
        assert!(check_ends(&[0, 0, 2, 2], 2).is_ok(), "empty bags are bags");
    }

    #[test]
    fn rows_of_the_wrong_size_say_whose_and_how_many() {
        let e = check_rows("emb", &[1, 2, 3], &[2, 3], "a buffer", 6, 4).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid argument: bags of table \"emb\": a buffer of 6 floats for 2 bags of width 4"
        );
        assert!(check_rows("emb", &[1, 2, 3], &[2, 3], "a gradient", 8, 4).is_ok());
        let e = check_rows("emb", &[1, 2, 3], &[2], "a gradient", 4, 4).unwrap_err();
        assert!(e.to_string().contains("the last bag ends at key 2, but there are 3 keys"), "{e}");
    }

    #[test]
    fn each_key_gets_its_bag() {
        let bags: Vec<usize> = bag_of_each_key(&[2, 2, 5]).collect();
        assert_eq!(bags, [0, 0, 2, 2, 2]);
    }

    proptest! {
        /// Each server's bags, put back together, are the caller's bags: every key in its bag,
        /// in the order given, at the server its key belongs to, and no empty bag sent.
        #[test]
        fn a_split_keeps_every_key_in_its_bag_in_order(
            bag_lens in proptest::collection::vec(0usize..6, 0..40),
            seed in any::<u64>(),
            servers in 1usize..5,
        ) {
            let keys: Vec<u64> = (0..bag_lens.iter().sum::<usize>() as u64).map(|i| crate::mix(i ^ seed)).collect();
            let ends: Vec<u64> = bag_lens.iter().scan(0u64, |at, &n| { *at += n as u64; Some(*at) }).collect();
            prop_assert!(check_ends(&ends, keys.len()).is_ok());
            let per = split(&keys, &ends, servers);
            let spread = KeySpread::new(servers);
            let mut want: Vec<Vec<Vec<u64>>> = vec![vec![Vec::new(); ends.len()]; servers];
            for (&k, b) in keys.iter().zip(bag_of_each_key(&ends)) {
                want[spread.server(k)][b].push(k);
            }
            for (s, mine) in per.iter().enumerate() {
                prop_assert!(check_ends(&mine.ends, mine.keys.len()).is_ok());
                prop_assert_eq!(mine.ends.len(), mine.bags.len());
                let mut got: Vec<Vec<u64>> = vec![Vec::new(); ends.len()];
                for (&k, b) in mine.keys.iter().zip(bag_of_each_key(&mine.ends)) {
                    got[mine.bags[b]].push(k);
                }
                prop_assert_eq!(&got, &want[s]);
                prop_assert!(mine.ends.iter().zip(std::iter::once(&0).chain(&mine.ends)).all(|(e, s)| e > s), "no empty bag");
                prop_assert!(mine.bags.windows(2).all(|w| w[0] < w[1]), "bags in order");
            }
        }
    }
}
