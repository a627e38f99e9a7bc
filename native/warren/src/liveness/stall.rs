//! The wording of stall reports, pure: which ranks a wait's description names, and who they
//! are.

use crate::tracker::proto::PeerAddr;

/// The ranks a wait's description (as the collectives write it: `"allreduce #7 on rank 0:
/// child rank 2, parent rank 1"`, `"... sending to ranks [1, 3]"`) says it waits for, in order
/// and without repeats; the rank it runs `on` is not one of them.
pub fn ranks_named(text: &str) -> Vec<usize> {
    let mut ranks = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("rank") {
        let before = rest[..at].trim_end();
        let mut tail = &rest[at + 4..];
        let own = before.ends_with(" on") || before == "on";
        tail = tail.strip_prefix('s').unwrap_or(tail).trim_start();
        let list = tail.starts_with('[');
        tail = tail.trim_start_matches('[');
        loop {
            let digits = tail.len() - tail.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if digits == 0 {
                break;
            }
            if let (false, Ok(r)) = (own, tail[..digits].parse::<usize>()) {
                if !ranks.contains(&r) {
                    ranks.push(r);
                }
            }
            tail = &tail[digits..];
            match tail.strip_prefix(", ") {
                Some(t) if list => tail = t,
                _ => break,
            }
        }
        rest = tail;
    }
    ranks
}

/// `"rank 2 (task 2 on 10.0.0.3, pid 4242), rank 5 (...)"` for `ranks`, from the members'
/// addresses (a rank with none is named alone).
pub(crate) fn identities(ranks: &[usize], peers: &[PeerAddr]) -> String {
    if ranks.is_empty() {
        return "no peer (the call waits on itself)".into();
    }
    let named: Vec<String> = ranks
        .iter()
        .map(|&r| match peers.get(r) {
            Some(p) => format!("rank {r} (task {} on {}, pid {})", p.task_id, p.host, p.pid),
            None => format!("rank {r}"),
        })
        .collect();
    named.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ranks_waited_for_are_read_from_every_wording() {
        assert_eq!(ranks_named("allreduce #7 (f32 sum, 40 B) on rank 0: child rank 2, parent rank 1"), vec![2, 1]);
        assert_eq!(ranks_named("broadcast #3 on rank 4: data from rank 1"), vec![1]);
        assert_eq!(ranks_named("broadcast #3 on rank 4: sending to ranks [1, 3, 12]"), vec![1, 3, 12]);
        assert_eq!(
            ranks_named("allreduce #9 on rank 2: ring step 1 sending to rank 3, step 2 receiving from rank 1"),
            vec![3, 1]
        );
        assert_eq!(ranks_named("barrier on rank 0: child rank 1, child rank 1"), vec![1]);
        assert!(ranks_named("nothing named here").is_empty());
    }

    #[test]
    fn identities_name_task_host_and_pid() {
        let p = PeerAddr {
            rank: 0,
            task_id: "a".into(),
            host: "h".into(),
            port: 1,
            pid: 9,
            host_id: String::new(),
            placed_on: String::new(),
        };
        assert_eq!(identities(&[0, 4], &[p]), "rank 0 (task a on h, pid 9), rank 4");
    }
}
