//! Where recovery data lives in a view: the results of the calls since the last checkpoint,
//! and the replicas of every worker's local model. [`Placement::holders`] is the one
//! placement function; everything else (who keeps what, who can serve what) derives from it.

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
}

impl Placement {
    /// Placement for `world` workers: each call's result kept by `result_replicas` workers
    /// spread evenly around the ring (0, or not less than `world`: by every worker), and each
    /// local model by the owner's next `local_replicas` ring successors (at most `world - 1`).
    pub fn new(world: usize, result_replicas: usize, local_replicas: usize) -> Placement {
        Placement { world, result_replicas, local_copies: local_replicas.min(world.saturating_sub(1)) }
    }

    /// Number of workers.
    pub fn world(&self) -> usize {
        self.world
    }

    /// Number of workers keeping a replica of each local model (besides its owner).
    pub fn local_copies(&self) -> usize {
        self.local_copies
    }

    /// The ranks that keep `data`: for a result, in increasing rank order; for a local model,
    /// its replicas, nearest ring successor first (the owner keeps its own model besides).
    pub fn holders(&self, data: Placed) -> Vec<usize> {
        let world = self.world;
        match data {
            Placed::Result(_) if self.result_replicas == 0 || self.result_replicas >= world => (0..world).collect(),
            Placed::Result(seq) => {
                let base = seq as usize % world;
                let mut h: Vec<usize> =
                    (0..self.result_replicas).map(|j| (base + j * world / self.result_replicas) % world).collect();
                h.sort_unstable();
                h.dedup();
                h
            }
            Placed::LocalModel(owner) => (1..=self.local_copies).map(|j| (owner + j) % world).collect(),
        }
    }

    /// The owners whose local models `holder` keeps a replica of, nearest ring predecessor
    /// first: the order in which a checkpoint's ring shift delivers them.
    pub fn local_models_kept_by(&self, holder: usize) -> Vec<usize> {
        let world = self.world;
        let mut owners: Vec<usize> =
            (0..world).filter(|&o| self.holders(Placed::LocalModel(o)).contains(&holder)).collect();
        owners.sort_by_key(|&o| (holder + world - o) % world);
        owners
    }
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

    proptest! {
        /// Who keeps what is the inverse of who holds what, and every model has its copies on
        /// distinct workers other than its owner.
        #[test]
        fn kept_by_is_the_inverse_of_holders(world in 1usize..40, copies in 0usize..6) {
            let p = Placement::new(world, 0, copies);
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
                let ring: Vec<usize> = (1..=p.local_copies()).map(|j| (holder + world - j) % world).collect();
                prop_assert_eq!(&kept, &ring, "the ring shift delivers the predecessors in this order");
                for o in kept {
                    prop_assert!(p.holders(Placed::LocalModel(o)).contains(&holder));
                }
            }
        }
    }
}
