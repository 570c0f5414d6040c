//! Connected components by hooking and pointer jumping (Shiloach & Vishkin's scheme, in the
//! asynchronous min-label form of Soman, Kishore & Narayanan, "A fast GPU algorithm for graph
//! connectivity", IPDPS workshops 2010), with union-find as its reference.
//!
//! Every vertex starts as its own label. One iteration is one launch over every edge `u → v`:
//! when the two endpoints' labels differ, the smaller one is written (`atomic_min`) into the
//! larger label's own entry (hooking that tree under the other) and into the endpoint that held
//! the larger; the first lane of each vertex also replaces its label by its label's label
//! (pointer jumping, which halves the paths the labels follow). Labels only fall, and each is
//! always a vertex of its own vertex's component no larger than that vertex, so at the fixed
//! point every component carries one label, its smallest vertex.
//!
//! # Convergence on the device
//!
//! A lane that sees two different labels, or lowers a label by jumping, raises `changed[0]` to
//! the iteration's stamp (`atomic_max`; stamps grow, so it is never cleared). An iteration that
//! did not raise it wrote no label at all, so every lane read the final labels and every edge's
//! endpoints agreed. (Were jumps left out of the flag, a hook could compare two labels read
//! before a concurrent jump lowered one of them, and the loop would stop with an edge whose
//! endpoints disagree.) The host reads that one `u32` per iteration (4 bytes) next to the
//! launch's error flag (8), 12 bytes in all.

use std::time::Instant;

use super::driver::{stamp, Traversal};
use crate::prelude::*;
use crate::{Error, Result};

/// Hooks the larger of the endpoints' labels under the smaller, both ways (so a directed
/// graph's weakly connected components come out), and jumps each vertex's label once.
#[load_balanced(schedule = "auto")]
pub fn cc_hook(
    g: &Csr<f32>,
    labels: &mut [u32],
    changed: &mut [u32],
    mark: u32,
    #[tile] u: usize,
    #[atom] e: usize,
    #[rank] k: usize,
) {
    if k == 0 {
        let up = labels[u] as usize;
        let jump = labels[up];
        if jump < atomic_min(&mut labels[u], jump) {
            atomic_max(&mut changed[0], mark);
        }
    }
    let v = g.col_indices[e] as usize;
    let lu = labels[u];
    let lv = labels[v];
    if lu < lv {
        atomic_min(&mut labels[lv as usize], lu);
        atomic_min(&mut labels[v], lu);
        atomic_max(&mut changed[0], mark);
    } else if lv < lu {
        atomic_min(&mut labels[lu as usize], lv);
        atomic_min(&mut labels[u], lv);
        atomic_max(&mut changed[0], mark);
    }
}

/// What [`connected_components`] computed.
#[derive(Clone, Debug, PartialEq)]
pub struct CcResult {
    /// The smallest vertex of each vertex's component.
    pub labels: Vec<u32>,
    /// How many components (distinct labels).
    pub components: usize,
    /// `edges` counts every edge once per iteration (each iteration visits them all);
    /// `retries` is always 0.
    pub run: Traversal,
}

/// The connected components of `g`, taking each edge in both directions (for a directed graph:
/// its weakly connected components), each labelled by its smallest vertex.
///
/// ```
/// use lb::algorithms::{components_union_find, connected_components};
/// use lb::prelude::*;
///
/// let g = Csr::from_triplets(5, 5, vec![(0, 3, 1.0), (4, 1, 1.0), (3, 2, 1.0)])?;
/// let dev = Device::default();
/// let r = connected_components(&dev, &DeviceCsr::upload(&dev, &g)?, Schedule::ThreadMapped)?;
/// assert_eq!(r.labels, vec![0, 1, 0, 0, 1]);
/// assert_eq!(r.labels, components_union_find(&g));
/// # Ok::<(), lb::Error>(())
/// ```
pub fn connected_components(
    dev: &Device,
    g: &DeviceCsr<f32>,
    schedule: Schedule,
) -> Result<CcResult> {
    let clock = Instant::now();
    let n = g.num_rows();
    if n != g.num_cols() {
        return Err(Error::Shape(format!(
            "cc: a graph's adjacency matrix is square, this one is {n} × {}",
            g.num_cols()
        )));
    }
    if u32::try_from(n).is_err() {
        return Err(Error::Shape(format!("cc: {n} vertices exceed u32 labels")));
    }
    // Each vertex its own component. An upload of `0..n`: a one-thread-per-vertex kernel needs
    // a tile set of `n` one-atom rows, which costs more host work to build and validate (about
    // 200 ms of the wall time at 6.5 M vertices on an H100) than this upload.
    let mut labels = dev.upload(&(0..n as u32).collect::<Vec<u32>>())?;
    let mut changed = dev.zeros::<u32>(1)?;
    let mut run = Traversal::default();
    let before = dev.transferred();
    loop {
        let mark = stamp(run.iterations, "cc")?;
        let launch = cc_hook::launch_with(dev, schedule, g, &mut labels, &mut changed, mark)?;
        if let Some(ms) = launch.elapsed_ms {
            *run.elapsed_ms.get_or_insert(0.0) += ms;
        }
        run.iterations += 1;
        run.edges += g.nnz() as u64;
        if changed.download()?.first() != Some(&mark) {
            break;
        }
    }
    let moved = dev.transferred().since(before);
    run.bytes_to_host = moved.to_host;
    run.bytes_to_device = moved.to_device;
    let labels = labels.download()?;
    // A component's label is its smallest vertex, the one vertex labelled by itself.
    let roots = labels
        .iter()
        .enumerate()
        .filter(|&(u, &l)| l as usize == u)
        .count();
    run.wall_ms = clock.elapsed().as_secs_f64() * 1e3;
    Ok(CcResult {
        labels,
        components: roots,
        run,
    })
}

/// Union-find with path halving, each edge taken both ways: the reference for
/// [`connected_components`], every vertex labelled by its component's smallest vertex. Panics
/// if `g` is not square.
pub fn components_union_find(g: &Csr<f32>) -> Vec<u32> {
    assert_eq!(g.num_rows, g.num_cols, "a graph is square");
    let mut parent: Vec<usize> = (0..g.num_rows).collect();
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    for u in 0..g.num_rows {
        for e in g.row(u) {
            let (a, b) = (
                find(&mut parent, u),
                find(&mut parent, g.col_indices[e] as usize),
            );
            // The smaller root stays a root, so each root is its component's smallest vertex.
            if a < b {
                parent[b] = a;
            } else if b < a {
                parent[a] = b;
            }
        }
    }
    (0..g.num_rows)
        .map(|u| find(&mut parent, u) as u32)
        .collect()
}
