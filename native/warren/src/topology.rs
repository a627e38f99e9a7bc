//! Who talks to whom: the binary tree and the ring over ranks `0..world`.
//!
//! Pure functions, no I/O. The tree is the heap layout rooted at rank 0 (parent `(r-1)/2`,
//! children `2r+1`, `2r+2`); the ring is `r -> (r+1) % world`.

/// A worker's neighbours in both topologies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// This worker's rank.
    pub rank: usize,
    /// Number of workers.
    pub world: usize,
    /// Tree parent (`None` at the root).
    pub parent: Option<usize>,
    /// Tree children, in increasing rank order (the fixed reduction order).
    pub children: Vec<usize>,
    /// Ring predecessor (receives from it).
    pub ring_prev: usize,
    /// Ring successor (sends to it).
    pub ring_next: usize,
}

impl Topology {
    /// Computes the topology of `rank` in a world of `world` workers.
    ///
    /// # Panics
    /// If `rank >= world`.
    pub fn new(rank: usize, world: usize) -> Topology {
        assert!(rank < world, "rank {rank} out of range for world {world}");
        let parent = if rank == 0 { None } else { Some((rank - 1) / 2) };
        let children = [2 * rank + 1, 2 * rank + 2].into_iter().filter(|&c| c < world).collect();
        Topology { rank, world, parent, children, ring_prev: (rank + world - 1) % world, ring_next: (rank + 1) % world }
    }

    /// The tree every tree pass runs on: a small allreduce, and the pass that opens every
    /// other call (a barrier, a broadcast's or a ring's agreement, an allgather's sizes,
    /// checkpoints, recovery, `finalize`). One tree for all of them means two ranks making
    /// different calls always meet on it, so a mismatch is found at once, never by a timeout.
    /// In a world of 4, where rank 0 keeps a link to every rank (its children 1 and 2, its
    /// ring predecessor 3), it is the flat tree: every other rank is a child of rank 0, so a
    /// pass takes two levels of messages (up, down) instead of the heap tree's four (3 to 1
    /// to 0, then back), and rank 0 reduces in rank order (`x0 op x1 op x2 op x3`). Any other
    /// world: the heap tree (a flat tree would need links that do not exist beyond 4 ranks,
    /// and is the heap tree below 4).
    pub fn call_tree(&self) -> Topology {
        if self.world != 4 {
            return self.clone();
        }
        let (parent, children) = if self.rank == 0 { (None, vec![1, 2, 3]) } else { (Some(0), vec![]) };
        Topology { parent, children, ..self.clone() }
    }

    /// Every distinct peer this worker keeps a link to, in increasing rank order.
    pub fn neighbours(&self) -> Vec<usize> {
        let mut n: Vec<usize> = self.parent.into_iter().chain(self.children.iter().copied()).collect();
        if self.world > 1 {
            n.push(self.ring_prev);
            n.push(self.ring_next);
        }
        n.retain(|&p| p != self.rank);
        n.sort_unstable();
        n.dedup();
        n
    }

    /// Whether `node` lies in the subtree rooted at `root` (a node is in its own subtree).
    pub fn in_subtree(root: usize, mut node: usize) -> bool {
        loop {
            if node == root {
                return true;
            }
            if node == 0 || node < root {
                return false;
            }
            node = (node - 1) / 2;
        }
    }

    /// The neighbour on the tree path from this worker towards `target` (`None` if `target`
    /// is this worker).
    pub fn tree_hop_towards(&self, target: usize) -> Option<usize> {
        if target == self.rank {
            return None;
        }
        self.children.iter().copied().find(|&c| Self::in_subtree(c, target)).or(self.parent)
    }

    /// This worker's part in moving data from `root` to the ranks `to` along the tree (an
    /// undirected graph): `None` if it lies on no tree path from `root` to one of them, else
    /// the neighbour it receives from (`None` at the root) and the neighbours it forwards to,
    /// in increasing rank order.
    pub fn tree_route(&self, root: usize, to: &[usize]) -> Option<(Option<usize>, Vec<usize>)> {
        let me = self.rank;
        let mut on_path = me == root;
        let mut dests = Vec::new();
        for &t in to {
            if tree_distance(root, me) + tree_distance(me, t) != tree_distance(root, t) {
                continue;
            }
            on_path = true;
            dests.extend(self.tree_hop_towards(t));
        }
        dests.sort_unstable();
        dests.dedup();
        on_path.then(|| (self.tree_hop_towards(root), dests))
    }
}

/// Number of tree edges between ranks `a` and `b` (the tree as an undirected graph).
pub fn tree_distance(mut a: usize, mut b: usize) -> usize {
    let mut d = 0;
    while a != b {
        if a > b {
            a = (a - 1) / 2;
        } else {
            b = (b - 1) / 2;
        }
        d += 1;
    }
    d
}

/// Splits `len` bytes into `parts` contiguous chunks whose boundaries are multiples of `align`;
/// returns `parts + 1` offsets. Chunks differ in size by at most `align` bytes, and the
/// remainder goes to the first chunks.
pub fn chunk_offsets(len: usize, parts: usize, align: usize) -> Vec<usize> {
    assert!(parts > 0 && align > 0 && len % align == 0);
    let elems = len / align;
    let (base, extra) = (elems / parts, elems % parts);
    let mut offs = Vec::with_capacity(parts + 1);
    let mut at = 0;
    offs.push(0);
    for i in 0..parts {
        at += (base + usize::from(i < extra)) * align;
        offs.push(at);
    }
    offs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_route_reaches_only_the_ranks_on_the_paths_to_the_targets() {
        // The heap tree of 7: 0 -> {1, 2}, 1 -> {3, 4}, 2 -> {5, 6}.
        let route = |me, root, to: &[usize]| Topology::new(me, 7).tree_route(root, to);
        assert_eq!(route(1, 1, &[4]), Some((None, vec![4])));
        assert_eq!(route(4, 1, &[4]), Some((Some(1), vec![])));
        for other in [0, 2, 3, 5, 6] {
            assert_eq!(route(other, 1, &[4]), None, "rank {other} is off the path 1 -> 4");
        }
        // 3 -> 6 goes 3, 1, 0, 2, 6; and 3 -> 4 branches at 1.
        assert_eq!(route(3, 3, &[6, 4]), Some((None, vec![1])));
        assert_eq!(route(1, 3, &[6, 4]), Some((Some(3), vec![0, 4])));
        assert_eq!(route(0, 3, &[6, 4]), Some((Some(1), vec![2])));
        assert_eq!(route(2, 3, &[6, 4]), Some((Some(0), vec![6])));
        assert_eq!(route(6, 3, &[6, 4]), Some((Some(2), vec![])));
        assert_eq!(route(5, 3, &[6, 4]), None);
        // Every rank a target: the whole tree, as a broadcast.
        let all: Vec<usize> = (0..7).collect();
        for me in 0..7 {
            let t = Topology::new(me, 7);
            let (src, dests) = t.tree_route(0, &all).unwrap();
            assert_eq!(src, t.parent);
            assert_eq!(dests, t.children);
        }
    }

    #[test]
    fn tree_shape() {
        let t = Topology::new(0, 7);
        assert_eq!((t.parent, t.children.clone()), (None, vec![1, 2]));
        let t = Topology::new(2, 7);
        assert_eq!((t.parent, t.children.clone()), (Some(0), vec![5, 6]));
        let t = Topology::new(3, 5);
        assert_eq!((t.parent, t.children.clone()), (Some(1), vec![]));
        let t = Topology::new(1, 4);
        assert_eq!(t.children, vec![3]);
    }

    #[test]
    fn the_call_tree_is_flat_in_a_world_of_four_only() {
        let t = Topology::new(0, 4).call_tree();
        assert_eq!((t.parent, t.children.clone()), (None, vec![1, 2, 3]));
        for r in 1..4 {
            let t = Topology::new(r, 4).call_tree();
            assert_eq!((t.parent, t.children.clone()), (Some(0), vec![]));
            assert!(Topology::new(0, 4).neighbours().contains(&r), "rank 0 links to rank {r}");
        }
        for world in [1, 2, 3, 5, 8] {
            for r in 0..world {
                assert_eq!(Topology::new(r, world).call_tree(), Topology::new(r, world));
            }
        }
    }

    #[test]
    fn every_parent_child_pair_is_mutual() {
        for world in 1..40 {
            for r in 0..world {
                let t = Topology::new(r, world);
                for &c in &t.children {
                    assert_eq!(Topology::new(c, world).parent, Some(r));
                }
                let next = Topology::new(t.ring_next, world);
                assert_eq!(next.ring_prev, r);
                for n in t.neighbours() {
                    assert!(Topology::new(n, world).neighbours().contains(&r), "{world} {r} {n}");
                }
            }
        }
    }

    #[test]
    fn ring_and_neighbours_small_worlds() {
        assert_eq!(Topology::new(0, 1).neighbours(), Vec::<usize>::new());
        assert_eq!(Topology::new(0, 2).neighbours(), vec![1]);
        assert_eq!(Topology::new(1, 2).neighbours(), vec![0]);
        assert_eq!(Topology::new(3, 8).neighbours(), vec![1, 2, 4, 7]);
    }

    #[test]
    fn hops_follow_the_tree() {
        let t = Topology::new(1, 10);
        assert_eq!(t.tree_hop_towards(8), Some(3));
        assert_eq!(t.tree_hop_towards(9), Some(4));
        assert_eq!(t.tree_hop_towards(2), Some(0));
        assert_eq!(t.tree_hop_towards(1), None);
        assert!(Topology::in_subtree(1, 7));
        assert!(!Topology::in_subtree(2, 7));
    }

    #[test]
    fn tree_distances() {
        assert_eq!(tree_distance(3, 3), 0);
        assert_eq!(tree_distance(1, 0), 1);
        assert_eq!(tree_distance(3, 4), 2);
        assert_eq!(tree_distance(7, 6), 5);
        assert_eq!(tree_distance(9, 2), 4);
    }

    #[test]
    fn chunks_cover_everything_aligned() {
        for len_elems in [0usize, 1, 3, 7, 100, 1001] {
            for parts in 1..9 {
                for align in [1usize, 4, 8] {
                    let offs = chunk_offsets(len_elems * align, parts, align);
                    assert_eq!(offs.len(), parts + 1);
                    assert_eq!(*offs.last().unwrap(), len_elems * align);
                    for w in offs.windows(2) {
                        assert!(w[0] <= w[1] && (w[1] - w[0]) % align == 0);
                    }
                }
            }
        }
    }
}
