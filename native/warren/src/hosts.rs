//! Where the ranks live, for hierarchical allreduce (under the hosts reduction order only):
//! the ranks grouped by host id, each host's ranks in a chain led by its lowest rank, and a
//! ring over the leaders. Pure, no I/O.

use std::collections::BTreeMap;

/// The host layout as one rank sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostLayout {
    /// The ranks of this rank's host in increasing order; the first is the host's leader.
    pub local: Vec<usize>,
    /// Every host's leader (its lowest rank), in increasing order: the leaders' ring.
    pub leaders: Vec<usize>,
}

impl HostLayout {
    /// The layout `rank` sees, given every rank's host id (indexed by rank). `None` when a
    /// hierarchy would add nothing (one host, or one rank per host) or a host id is unknown
    /// (empty).
    pub fn new(host_ids: &[&str], rank: usize) -> Option<HostLayout> {
        if rank >= host_ids.len() || host_ids.iter().any(|h| h.is_empty()) {
            return None;
        }
        let mut hosts: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (r, h) in host_ids.iter().enumerate() {
            hosts.entry(h).or_default().push(r);
        }
        if hosts.len() < 2 || hosts.len() == host_ids.len() {
            return None;
        }
        let mut leaders: Vec<usize> = hosts.values().map(|ranks| ranks[0]).collect();
        leaders.sort_unstable();
        Some(HostLayout { local: hosts[host_ids[rank]].clone(), leaders })
    }

    /// The neighbour towards the leader in the host's chain (`None` for the leader).
    pub fn up(&self, rank: usize) -> Option<usize> {
        let i = self.index(rank);
        i.checked_sub(1).map(|j| self.local[j])
    }

    /// The neighbour away from the leader in the host's chain (`None` for the last rank).
    pub fn down(&self, rank: usize) -> Option<usize> {
        self.local.get(self.index(rank) + 1).copied()
    }

    /// For a leader: its place in the leaders' ring, its predecessor and its successor.
    pub fn leader_ring(&self, rank: usize) -> Option<(usize, usize, usize)> {
        let i = self.leaders.iter().position(|&l| l == rank)?;
        let w = self.leaders.len();
        Some((i, self.leaders[(i + w - 1) % w], self.leaders[(i + 1) % w]))
    }

    /// The peers `rank` needs links to for the hierarchy (chain and leaders' ring).
    pub fn neighbours(&self, rank: usize) -> Vec<usize> {
        let mut n: Vec<usize> = self.up(rank).into_iter().chain(self.down(rank)).collect();
        if let Some((_, prev, next)) = self.leader_ring(rank) {
            n.extend([prev, next]);
        }
        n.retain(|&p| p != rank);
        n.sort_unstable();
        n.dedup();
        n
    }

    fn index(&self, rank: usize) -> usize {
        self.local.iter().position(|&r| r == rank).expect("a rank is on its own host")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_chains_and_the_leaders_ring() {
        let ids = ["b", "a", "b", "a", "c", "b"];
        let l = HostLayout::new(&ids, 2).unwrap();
        assert_eq!(l.local, [0, 2, 5]);
        assert_eq!(l.leaders, [0, 1, 4]);
        assert_eq!((l.up(2), l.down(2)), (Some(0), Some(5)));
        assert_eq!((l.up(0), l.down(5)), (None, None));
        assert_eq!(l.leader_ring(0), Some((0, 4, 1)));
        assert_eq!(l.leader_ring(2), None);
        assert_eq!(l.neighbours(0), [1, 2, 4]);
        assert_eq!(l.neighbours(5), [2]);
        let c = HostLayout::new(&ids, 4).unwrap();
        assert_eq!((c.local.clone(), c.up(4), c.down(4)), (vec![4], None, None));
        assert_eq!(c.neighbours(4), [0, 1]);
    }

    #[test]
    fn links_are_symmetric() {
        let ids = ["x", "y", "x", "z", "y", "x", "z", "x"];
        for r in 0..ids.len() {
            let l = HostLayout::new(&ids, r).unwrap();
            for p in l.neighbours(r) {
                assert!(HostLayout::new(&ids, p).unwrap().neighbours(p).contains(&r), "{r} -> {p}");
            }
        }
    }

    #[test]
    fn no_hierarchy_when_it_adds_nothing() {
        assert_eq!(HostLayout::new(&["a", "a", "a"], 0), None, "one host");
        assert_eq!(HostLayout::new(&["a", "b", "c"], 0), None, "one rank per host");
        assert_eq!(HostLayout::new(&["a", "a", "", "b"], 0), None, "an unknown host");
    }
}
