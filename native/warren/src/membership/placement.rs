//! Where recovery data lives in a view: the results of the calls since the last checkpoint,
//! and the replicas of every worker's local model. [`Placement::holders`] is the one
//! placement function; everything else (who keeps what, who can serve what) derives from it.
//!
//! Replicas follow the *replica ring*, a permutation of the ranks that visits the hosts in
//! turn ([`replica_ring`]), so that a local model and its replicas are not all on one host
//! when a host runs consecutive ranks (a Spark executor of several cores runs consecutive
//! task ids). What it guarantees, with `R` local replicas and a host per rank as the tracker
//! placed them when the view was made:
//!
//! - every host runs the same number of workers, on `H` hosts: each local model has its
//!   replicas on `min(R, H - 1)` hosts other than its owner's, so losing any `min(R, H - 1)`
//!   whole hosts at once loses no local model;
//! - any hosts: losing any one whole host loses no local model whenever no host runs more
//!   than `R` times as many workers as all other hosts together (`n_h <= R * (N - n_h)`; with
//!   more, no placement of `R` replicas per worker can do it: the other hosts keep too few);
//! - one host, or every rank on its own host: the ring is the rank order, as without hosts.
//!
//! Results kept by `k` workers (`WARREN_RESULT_REPLICAS`) lie on `k` consecutive workers of
//! the replica ring: on `min(k, H)` hosts when every host runs the same number of workers,
//! and on at least two hosts for `k >= 2` when no host runs more than half the workers.

use std::collections::BTreeMap;

/// Recovery data that workers keep for one another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// The result of call `seq` since the last checkpoint.
    Result(u32),
    /// The local model of the worker of this rank.
    LocalModel(usize),
}

/// The placement of recovery data in a view of `world` workers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    world: usize,
    result_replicas: usize,
    local_copies: usize,
    /// The replica ring: the rank at each position.
    ring: Vec<usize>,
    /// Each rank's position in the ring.
    at: Vec<usize>,
    /// Whether the ring spreads over hosts (known hosts, several of them, some running
    /// several ranks): results are then kept by consecutive workers of the ring.
    by_host: bool,
}

impl Placement {
    /// Placement for `world` workers whose hosts are unknown (or each on its own host): each
    /// call's result kept by `result_replicas` workers spread evenly around the ring (0, or
    /// not less than `world`: by every worker), and each local model by the owner's next
    /// `local_replicas` ring successors (at most `world - 1`).
    pub fn new(world: usize, result_replicas: usize, local_replicas: usize) -> Placement {
        Placement::with_ring((0..world).collect(), false, result_replicas, local_replicas)
    }

    /// Placement for workers on the hosts `hosts` names (indexed by rank: where the tracker
    /// placed each rank when the view was made, the same on every member): like
    /// [`Placement::new`], but around the replica ring, which spreads each model's replicas
    /// over the hosts, and each result kept by `result_replicas` consecutive workers of that
    /// ring (see the module documentation for what that guarantees). With an unknown (empty)
    /// host id, one host, or a host per rank, it is [`Placement::new`].
    pub fn on_hosts(hosts: &[&str], result_replicas: usize, local_replicas: usize) -> Placement {
        let mut distinct: Vec<&str> = hosts.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        let by_host = !distinct.contains(&"") && distinct.len() > 1 && distinct.len() < hosts.len();
        Placement::with_ring(replica_ring(hosts), by_host, result_replicas, local_replicas)
    }

    fn with_ring(ring: Vec<usize>, by_host: bool, result_replicas: usize, local_replicas: usize) -> Placement {
        let world = ring.len();
        let mut at = vec![0; world];
        for (i, &r) in ring.iter().enumerate() {
            at[r] = i;
        }
        Placement {
            world,
            result_replicas,
            local_copies: local_replicas.min(world.saturating_sub(1)),
            ring,
            at,
            by_host,
        }
    }

    /// Number of workers.
    pub fn world(&self) -> usize {
        self.world
    }

    /// Number of workers keeping a replica of each local model (besides its owner).
    pub fn local_copies(&self) -> usize {
        self.local_copies
    }

    /// The replica ring: the ranks in ring order (the rank order unless hosts run
    /// consecutive ranks).
    pub fn ring(&self) -> &[usize] {
        &self.ring
    }

    /// The predecessor and the successor of `rank` in the replica ring: a checkpoint's ring
    /// shift receives from the one and sends to the other.
    pub fn ring_neighbours(&self, rank: usize) -> (usize, usize) {
        let (w, i) = (self.world, self.at[rank]);
        (self.ring[(i + w - 1) % w], self.ring[(i + 1) % w])
    }

    /// The rank `steps` places after `rank` in the replica ring (`steps < world`).
    fn after(&self, rank: usize, steps: usize) -> usize {
        self.ring[(self.at[rank] + steps) % self.world]
    }

    /// The ranks that keep `data`: for a result, in increasing rank order; for a local model,
    /// its replicas, nearest ring successor first (the owner keeps its own model besides).
    pub fn holders(&self, data: Placed) -> Vec<usize> {
        let world = self.world;
        let k = self.result_replicas;
        match data {
            Placed::Result(_) if k == 0 || k >= world => (0..world).collect(),
            Placed::Result(seq) => {
                let base = seq as usize % world;
                let mut h: Vec<usize> = if self.by_host {
                    (0..k).map(|j| self.ring[(base + j) % world]).collect()
                } else {
                    (0..k).map(|j| (base + j * world / k) % world).collect()
                };
                h.sort_unstable();
                h.dedup();
                h
            }
            Placed::LocalModel(owner) => (1..=self.local_copies).map(|j| self.after(owner, j)).collect(),
        }
    }

    /// The owners whose local models `holder` keeps a replica of, nearest ring predecessor
    /// first: the order in which a checkpoint's ring shift delivers them.
    pub fn local_models_kept_by(&self, holder: usize) -> Vec<usize> {
        (1..=self.local_copies).map(|j| self.after(holder, self.world - j)).collect()
    }
}

/// The replica ring of ranks on `hosts` (indexed by rank): the hosts, largest first (ties by
/// lowest rank), each with its ranks in increasing order, dealt in turn into `b` buckets,
/// `b` = the largest host's size, or the number of ranks on the other hosts if fewer; the
/// ring is the buckets one after the other. Every bucket starts with a rank of the largest
/// host and holds at most one rank of each host but the largest, so when the largest host runs
/// at most half the ranks no two ring neighbours share a host, and otherwise the largest
/// host's ranks come in runs of at most `ceil(n / b)`, each followed by a rank of another
/// host. Hosts of equal size come out in turn (`h0 h1 h2 h0 h1 h2 ...`). The rank order when
/// a host id is unknown (empty), or when there is one host or one rank per host.
pub fn replica_ring(hosts: &[&str]) -> Vec<usize> {
    let n = hosts.len();
    if hosts.iter().any(|h| h.is_empty()) {
        return (0..n).collect();
    }
    let mut by_host: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (r, h) in hosts.iter().enumerate() {
        by_host.entry(h).or_default().push(r);
    }
    let mut groups: Vec<Vec<usize>> = by_host.into_values().collect();
    groups.sort_by_key(|g| (std::cmp::Reverse(g.len()), g[0]));
    let largest = groups.first().map_or(0, Vec::len);
    let buckets = largest.min(n - largest).max(1);
    let mut dealt: Vec<Vec<usize>> = vec![Vec::new(); buckets];
    for (i, r) in groups.into_iter().flatten().enumerate() {
        dealt[i % buckets].push(r);
    }
    dealt.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn results_are_spread_evenly() {
        let holders = |seq, world, replicas| Placement::new(world, replicas, 2).holders(Placed::Result(seq));
        assert_eq!(holders(5, 4, 0), vec![0, 1, 2, 3]);
        assert_eq!(holders(5, 4, 9), vec![0, 1, 2, 3]);
        assert_eq!(holders(0, 10, 2), vec![0, 5]);
        assert_eq!(holders(13, 10, 3), vec![3, 6, 9]);
        for seq in 0..50 {
            assert_eq!(holders(seq, 7, 3).len(), 3);
        }
    }

    #[test]
    fn local_models_go_to_the_ring_successors() {
        let p = Placement::new(8, 0, 2);
        assert_eq!(p.holders(Placed::LocalModel(6)), vec![7, 0]);
        assert_eq!(p.local_models_kept_by(1), vec![0, 7]);
        // Never more copies than other workers; a world of one keeps none.
        assert_eq!(Placement::new(3, 0, 5).holders(Placed::LocalModel(1)), vec![2, 0]);
        assert_eq!(Placement::new(1, 0, 2).local_models_kept_by(0), Vec::<usize>::new());
    }

    #[test]
    fn the_replica_ring_visits_the_hosts_in_turn() {
        // Two consecutive ranks per host, as on Spark executors of two cores.
        assert_eq!(replica_ring(&["a", "a", "b", "b", "c", "c"]), [0, 2, 4, 1, 3, 5]);
        let p = Placement::on_hosts(&["a", "a", "b", "b", "c", "c"], 2, 1);
        assert_eq!(p.holders(Placed::LocalModel(0)), [2]);
        assert_eq!(p.holders(Placed::LocalModel(5)), [0]);
        assert_eq!(p.local_models_kept_by(1), [4]);
        assert_eq!(p.ring_neighbours(1), (4, 3));
        assert_eq!(p.holders(Placed::Result(0)), [0, 2]);
        // A host of four and two of one: runs of two, each followed by another host.
        assert_eq!(replica_ring(&["a", "a", "a", "a", "b", "c"]), [0, 2, 4, 1, 3, 5]);
        // The largest host first; no two neighbours share a host.
        assert_eq!(replica_ring(&["b", "a", "a", "a", "b", "c"]), [1, 0, 2, 4, 3, 5]);
        // The rank order: one host, a host per rank, an unknown host.
        assert_eq!(replica_ring(&["a", "a", "a"]), [0, 1, 2]);
        assert_eq!(replica_ring(&["c", "a", "b"]), [0, 1, 2]);
        assert_eq!(replica_ring(&["a", "a", "", "b"]), [0, 1, 2, 3]);
        assert_eq!(replica_ring(&[]), Vec::<usize>::new());
        assert_eq!(Placement::on_hosts(&["x"; 5], 2, 2), Placement::new(5, 2, 2));
    }

    /// Hosts of the given sizes, indexed by rank: each host's ranks consecutive (`shuffle`
    /// 0, as when tasks are placed in task order), or shuffled by the seed `shuffle`.
    fn host_ids(sizes: &[usize], shuffle: u64) -> Vec<String> {
        let mut ids: Vec<String> = sizes.iter().enumerate().flat_map(|(h, &s)| vec![format!("h{h}"); s]).collect();
        let mut x = shuffle;
        for i in (1..ids.len()).rev() {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ids.swap(i, (x >> 33) as usize % (i + 1));
        }
        ids
    }

    /// Whether every local model survives the loss of every worker on the hosts `lost`:
    /// its owner or one of its replicas is elsewhere.
    fn survives(p: &Placement, ids: &[&str], lost: &[&str]) -> bool {
        let gone = |r: usize| lost.contains(&ids[r]);
        (0..p.world()).all(|o| !gone(o) || p.holders(Placed::LocalModel(o)).iter().any(|&h| !gone(h)))
    }

    /// Every set of `k` hosts out of `hosts`.
    fn subsets<'a>(hosts: &[&'a str], k: usize) -> Vec<Vec<&'a str>> {
        match (k, hosts.split_first()) {
            (0, _) => vec![vec![]],
            (_, None) => vec![],
            (_, Some((&first, rest))) => {
                let mut with: Vec<Vec<&str>> = subsets(rest, k - 1);
                for s in &mut with {
                    s.push(first);
                }
                with.extend(subsets(rest, k));
                with
            }
        }
    }

    proptest! {
        /// Who keeps what is the inverse of who holds what, and every model has its copies on
        /// distinct workers other than its owner, whatever the hosts.
        #[test]
        fn kept_by_is_the_inverse_of_holders(
            sizes in proptest::collection::vec(1usize..6, 1..6), shuffle in any::<u64>(), copies in 0usize..6,
        ) {
            let ids = host_ids(&sizes, shuffle);
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            let world = ids.len();
            let p = Placement::on_hosts(&ids, 0, copies);
            let mut ring = p.ring().to_vec();
            ring.sort_unstable();
            prop_assert_eq!(ring, (0..world).collect::<Vec<_>>(), "the ring is a permutation");
            for owner in 0..world {
                let h = p.holders(Placed::LocalModel(owner));
                prop_assert_eq!(h.len(), copies.min(world - 1));
                prop_assert!(!h.contains(&owner));
                let mut distinct = h.clone();
                distinct.sort_unstable();
                distinct.dedup();
                prop_assert_eq!(distinct.len(), h.len());
            }
            for holder in 0..world {
                let kept = p.local_models_kept_by(holder);
                // The ring shift: step j brings the model of the j-th replica-ring predecessor.
                let mut from = holder;
                for &o in &kept {
                    from = p.ring_neighbours(from).0;
                    prop_assert_eq!(o, from, "the ring shift delivers the predecessors in this order");
                    prop_assert!(p.holders(Placed::LocalModel(o)).contains(&holder));
                }
                let (prev, next) = p.ring_neighbours(holder);
                prop_assert_eq!(p.ring_neighbours(prev).1, holder);
                prop_assert_eq!(p.ring_neighbours(next).0, holder);
            }
        }

        /// Hosts of equal size: each local model's replicas are on min(R, H - 1) other hosts,
        /// and losing any min(R, H - 1) whole hosts at once loses no local model.
        #[test]
        fn equal_hosts_survive_the_loss_of_as_many_hosts_as_replicas(
            hosts in 2usize..6, per_host in 1usize..5, copies in 1usize..5, shuffle in any::<u64>(), task_order in any::<bool>(),
        ) {
            let ids = host_ids(&vec![per_host; hosts], if task_order { 0 } else { shuffle });
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            let p = Placement::on_hosts(&ids, 0, copies);
            let spread = copies.min(hosts - 1).min(p.local_copies());
            for owner in 0..ids.len() {
                let mut on: Vec<&str> = p.holders(Placed::LocalModel(owner)).iter().map(|&h| ids[h]).collect();
                on.retain(|&h| h != ids[owner]);
                on.sort_unstable();
                on.dedup();
                prop_assert!(on.len() >= spread, "rank {} has replicas on {:?} of {:?}", owner, on, ids);
            }
            let names: Vec<String> = (0..hosts).map(|h| format!("h{h}")).collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            for lost in subsets(&names, spread) {
                prop_assert!(survives(&p, &ids, &lost), "losing {:?} of {:?}", lost, ids);
            }
        }

        /// Any hosts: losing one whole host loses no local model whenever every host runs at
        /// most R times as many workers as the others together; when one runs more, no
        /// placement could (the others keep R replicas each, too few for its models).
        #[test]
        fn any_hosts_survive_the_loss_of_one_host_when_the_others_can_keep_its_models(
            sizes in proptest::collection::vec(1usize..8, 2..6), shuffle in any::<u64>(), task_order in any::<bool>(),
            copies in 1usize..4,
        ) {
            let ids = host_ids(&sizes, if task_order { 0 } else { shuffle });
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            let n = ids.len();
            let p = Placement::on_hosts(&ids, 0, copies);
            for (h, &size) in sizes.iter().enumerate() {
                let name = format!("h{h}");
                if size <= copies * (n - size) {
                    prop_assert!(survives(&p, &ids, &[&name]), "losing {} of {:?}", name, ids);
                }
            }
            // Hosts of at most half the workers: no two replica-ring neighbours share a host.
            if sizes.iter().all(|&s| 2 * s <= n) {
                for r in 0..n {
                    prop_assert_ne!(ids[r], ids[p.ring_neighbours(r).1], "ring {:?} of {:?}", p.ring(), ids);
                }
            }
        }

        /// Results kept by k workers: on min(k, H) hosts for hosts of equal size, on two hosts
        /// at least when no host runs more than half the workers; always k distinct workers.
        #[test]
        fn result_keepers_are_spread_over_the_hosts(
            sizes in proptest::collection::vec(1usize..6, 1..6), equal in any::<bool>(), shuffle in any::<u64>(),
            k in 1usize..6, seq in 0u32..100,
        ) {
            let sizes = if equal { vec![sizes[0]; sizes.len()] } else { sizes };
            let ids = host_ids(&sizes, shuffle);
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            let n = ids.len();
            let p = Placement::on_hosts(&ids, k, 2);
            let keepers = p.holders(Placed::Result(seq));
            prop_assert_eq!(keepers.len(), if k >= n { n } else { k });
            prop_assert!(keepers.windows(2).all(|w| w[0] < w[1]), "in increasing rank order");
            let mut on: Vec<&str> = keepers.iter().map(|&r| ids[r]).collect();
            on.sort_unstable();
            on.dedup();
            if equal {
                prop_assert!(on.len() >= k.min(sizes.len()), "keepers {:?} of {:?}", keepers, ids);
            }
            if k >= 2 && sizes.len() >= 2 && sizes.iter().all(|&s| 2 * s <= n) {
                prop_assert!(on.len() >= 2, "keepers {:?} of {:?}", keepers, ids);
            }
        }
    }
}
