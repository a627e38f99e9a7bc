//! Who is in a job, as data: a [`View`] is `(epoch, members by task id)`. Ranks are the
//! members' positions in task-id order, and everything rank-shaped derives from the view: the
//! tree and the ring ([`View::topology`]) and where recovery data lives ([`Placement`]).
//! Task ids may be sparse (tasks `0, 2, 5` form a world of 3 with ranks 0, 1, 2).
//!
//! A view changes only as a whole, with a new epoch: elastic membership ([`elastic`]) changes
//! it at checkpoint boundaries ([`Roster`] decides, every member plans the same [`Transition`]);
//! ranks, topology and placement are then derived again. Pure, no I/O.

pub mod elastic;
#[cfg(test)]
mod elastic_props;
mod placement;

use serde::{Deserialize, Serialize};

pub use elastic::{Change, Limits, ReplicaMove, Role, Roster, TaskState, Transition};
pub use placement::{Placed, Placement};

use crate::topology::Topology;

/// Orders task ids: numbers numerically, before names, which order as strings. A total order
/// (ties between spellings of one number, `7` and `07`, break as strings), so every worker
/// derives the same ranks.
pub fn task_order(a: &str, b: &str) -> std::cmp::Ordering {
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(x), Ok(y)) => x.cmp(&y).then_with(|| a.cmp(b)),
        (Ok(_), Err(_)) => std::cmp::Ordering::Less,
        (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
        (Err(_), Err(_)) => a.cmp(b),
    }
}

/// The members of a job at one epoch, in rank order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "ViewFields")]
pub struct View {
    epoch: u64,
    members: Vec<String>,
}

/// The wire form of a view, normalised by [`View::new`] when read.
#[derive(Deserialize)]
struct ViewFields {
    epoch: u64,
    members: Vec<String>,
}

impl From<ViewFields> for View {
    fn from(f: ViewFields) -> View {
        View::new(f.epoch, f.members)
    }
}

impl View {
    /// The view of `members` (in any order; duplicates count once) at `epoch`.
    pub fn new<S: Into<String>>(epoch: u64, members: impl IntoIterator<Item = S>) -> View {
        let mut members: Vec<String> = members.into_iter().map(Into::into).collect();
        members.sort_by(|a, b| task_order(a, b));
        members.dedup();
        View { epoch, members }
    }

    /// The view of a world of one: this task alone.
    pub fn solo(task_id: &str) -> View {
        View::new(0, [task_id])
    }

    /// The epoch: changes whenever the members do.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Task ids in rank order.
    pub fn members(&self) -> &[String] {
        &self.members
    }

    /// Number of members.
    pub fn world(&self) -> usize {
        self.members.len()
    }

    /// The rank of a task id, if it is a member.
    pub fn rank_of(&self, task_id: &str) -> Option<usize> {
        self.members.binary_search_by(|m| task_order(m, task_id)).ok()
    }

    /// The task id at `rank`.
    pub fn task_of(&self, rank: usize) -> Option<&str> {
        self.members.get(rank).map(String::as_str)
    }

    /// The task ids of `ranks` (ranks outside the view are left out).
    pub fn tasks_of(&self, ranks: &[usize]) -> Vec<String> {
        ranks.iter().filter_map(|&r| self.task_of(r)).map(str::to_string).collect()
    }

    /// The tree and ring neighbours of `rank` in this view.
    ///
    /// # Panics
    /// If `rank` is not a rank of this view.
    pub fn topology(&self, rank: usize) -> Topology {
        Topology::new(rank, self.world())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_follow_numeric_task_order_and_ids_may_be_sparse() {
        let v = View::new(3, ["5", "0", "2"]);
        assert_eq!(v.members(), ["0", "2", "5"]);
        assert_eq!((v.world(), v.epoch()), (3, 3));
        assert_eq!(v.rank_of("5"), Some(2));
        assert_eq!(v.rank_of("2"), Some(1));
        assert_eq!(v.rank_of("1"), None);
        assert_eq!(v.task_of(0), Some("0"));
        assert_eq!(v.tasks_of(&[2, 0, 9]), vec!["5".to_string(), "0".to_string()]);
        assert_eq!(v.topology(2), Topology::new(2, 3));
        // Numbers order numerically ("10" after "9"), names as strings, without duplicates.
        assert_eq!(View::new(0, ["10", "9", "9"]).members(), ["9", "10"]);
        assert_eq!(View::new(0, ["b", "a"]).rank_of("b"), Some(1));
        // Numbers before names, so the order is total even for a mix.
        let mixed = View::new(0, ["1a", "10", "9", "b", "07", "7"]);
        assert_eq!(mixed.members(), ["07", "7", "9", "10", "1a", "b"]);
        for (rank, task) in mixed.members().iter().enumerate() {
            assert_eq!(mixed.rank_of(task), Some(rank));
        }
    }

    #[test]
    fn a_view_read_from_the_wire_is_normalised() {
        let v: View = serde_json::from_str(r#"{"epoch":1,"members":["7","3","3"]}"#).unwrap();
        assert_eq!(v, View::new(1, ["3", "7"]));
        let back: View = serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap();
        assert_eq!(back, v);
    }
}
