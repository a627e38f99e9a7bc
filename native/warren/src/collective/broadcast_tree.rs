//! Tree broadcast from any root: the tree is used as an undirected graph; each rank receives
//! from the neighbour towards the root and forwards, as it arrives, to its other neighbours
//! (or, for [`broadcast_tree_to`], only along the tree paths from the root to some ranks).

use crate::error::Result;
use crate::topology::Topology;

use super::Net;

/// Broadcasts `buf` from `root` (whose `buf` holds the data; every other rank's `buf` has the
/// same length, already agreed on).
pub(crate) fn broadcast_tree(net: &mut Net, topo: &Topology, root: usize, buf: &mut [u8], what: &str) -> Result<()> {
    let source = topo.tree_hop_towards(root);
    let dests: Vec<usize> =
        topo.parent.into_iter().chain(topo.children.iter().copied()).filter(|&d| Some(d) != source).collect();
    forward(net, topo, source, &dests, buf, what)
}

/// Sends `buf` from `root` to the ranks `to` only, along the tree paths between them: a rank
/// on none of those paths takes no part (and returns at once, its `buf` untouched), so a
/// transfer to one rank moves the data over the tree edges between the two, not to every
/// rank. Every rank must pass the same `root` and `to`, and a rank on a path a `buf` of the
/// agreed length (see [`Topology::tree_route`]).
pub(crate) fn broadcast_tree_to(
    net: &mut Net,
    topo: &Topology,
    root: usize,
    to: &[usize],
    buf: &mut [u8],
    what: &str,
) -> Result<()> {
    match topo.tree_route(root, to) {
        Some((source, dests)) => forward(net, topo, source, &dests, buf, what),
        None => Ok(()),
    }
}

/// Receives `buf` from `source` (none at the root) and forwards it, as it arrives, to `dests`.
fn forward(
    net: &mut Net,
    topo: &Topology,
    source: Option<usize>,
    dests: &[usize],
    buf: &mut [u8],
    what: &str,
) -> Result<()> {
    let n = buf.len();
    let mut sent = vec![0usize; dests.len()];
    let mut recv = if source.is_none() { n } else { 0 };
    let me = topo.rank;
    loop {
        let mut progressed = false;
        if let Some(src) = source {
            if recv < n {
                let got = net.link(src)?.read_some(&mut buf[recv..])?;
                recv += got;
                progressed |= got > 0;
            }
        }
        for (d, s) in dests.iter().zip(sent.iter_mut()) {
            if *s < recv {
                let k = net.link(*d)?.write_some(&buf[*s..recv])?;
                *s += k;
                progressed |= k > 0;
            }
        }
        if recv == n && sent.iter().all(|&s| s == n) {
            return Ok(());
        }
        net.settle(progressed, || match source {
            Some(src) if recv < n => format!("{what} on rank {me}: data from rank {src}"),
            _ => format!("{what} on rank {me}: sending to ranks {dests:?}"),
        })?;
    }
}
