//! Graph algorithms driven from the host around load-balanced kernels whose state stays on the
//! device: single-source shortest paths (frontier relaxation, thesis §6.1.3, and the bucketed
//! Near-Far method, [`sssp_near_far`]), breadth-first search, direction-optimizing BFS
//! ([`bfs_direction_optimizing`]), BFS and SSSP across the devices of a group ([`MultiBfs`], [`MultiSssp`]), connected components ([`connected_components`]) and PageRank
//! ([`pagerank`]), each with a sequential reference to check it against (Dijkstra with a binary
//! heap, queue BFS, union-find, f64 power iteration).
//! `docs/graph-apps.md` gives the overview; below is the frontier machinery SSSP and BFS share.
//!
//! # The frontier stays on the device
//!
//! Each iteration runs the kernel over the frontier, and the kernel pushes the vertices it
//! improved into a [`DeviceQueue`](crate::DeviceQueue). Two queues alternate: the one just filled is the next
//! launch's frontier ([`DeviceQueue::slots`](crate::DeviceQueue::slots): its own memory, no copy), the other is cleared on
//! the device and filled. The host learns the next frontier's length from the push counter
//! that the launch's overflow check reads anyway ([`Launch::pushed`](crate::Launch::pushed)), so an iteration moves at
//! most 16 bytes between host and device: that counter (8) and, with the checked kernels, the
//! first word of the error flag (8). [`Traversal::bytes_to_host`] and
//! [`Traversal::bytes_to_device`] count it ([`Device::transferred`](crate::Device::transferred)).
//!
//! **Invariant: each vertex is pushed at most once per iteration, and every vertex that must be
//! in the next frontier is marked on the device, whether or not its push fit.** BFS claims each
//! vertex once with `atomic_cas` on `depth` (`depth[v] == level + 1` marks the next frontier).
//! SSSP stamps a vertex whose distance dropped with the iteration's number in `marks`
//! (`atomic_max`), and only the lane that raised the stamp pushes it; stamps only grow, so they
//! never need clearing, and `marks[v] == iteration + 1` marks the next frontier. Hence a queue of
//! `num_rows` slots never overflows, and no host sort or deduplication is needed.
//!
//! A smaller, caller-chosen capacity may overflow. The kernel has still relaxed every edge and
//! marked every vertex it should have pushed, so nothing is rerun and nothing is restored: the
//! overflowed queue is replaced by one of the reported size and
//! [`collect_marked`](fn@collect_marked) refills it from the marks (one thread per vertex, over
//! a one-entry-per-vertex tile set built at the first overflow). No O(V) state is copied or
//! snapshotted per iteration.
//!
//! Under [`Choice::Auto`] a frontier of at most [`block_levels_limit`] vertices (on a graph of
//! short rows) is expanded by one block that runs level after level in one launch
//! ([`BLOCK_LEVELS`], lb-runtime's [`bfs_block_levels`](crate::bfs_block_levels) and
//! [`sssp_block_levels`](crate::sssp_block_levels)) with the same claims and stamps, until a
//! frontier is empty or longer; the host then reads 8 bytes for all those levels. A road
//! network's thousands of small levels cost one launch, not one each.
//!
//! `edges` is counted on the device too: the first lane of each frontier vertex adds its
//! out-degree to one of [`EDGE_SLOTS`] counters (spread so that the atomics do not all hit one
//! address), read once at the end.

mod bfs;
mod cc;
mod dobfs;
mod driver;
mod multi_bfs;
mod multi_frontier;
pub use multi_frontier::FrontierExchange;
mod multi_sssp;
mod nearfar;
mod pagerank;
mod sssp;

pub use bfs::{bfs, bfs_into, bfs_levels, bfs_unchecked, bfs_visit, bfs_with_capacity, BfsResult};
pub use cc::{cc_hook, components_union_find, connected_components, CcResult};
pub use dobfs::{
    bfs_direction_optimizing, bfs_direction_optimizing_into, dobfs_pull, dobfs_push, Direction,
    DoBfsGraph, DoBfsLevel, DoBfsResult, CLAIM_SLOTS,
};
pub use driver::{
    block_levels_limit, collect_marked, schedules, step_schedule, Choice, Step, Traversal,
    BLOCK_LEVELS, EDGE_SLOTS,
};
pub use multi_bfs::{absorb_claims, bfs_multi, collect_rows_marked, MultiBfs, MultiBfsResult};
pub use multi_sssp::{
    absorb_distances, collect_rows_improved, pack_claimed, sssp_relax_claim, sssp_relax_rows,
    MultiSssp, MultiSsspResult,
};
pub use nearfar::{
    near_far_divide, near_far_relax, sssp_near_far, weight_sum, Delta, NearFarResult, WEIGHT_SLOTS,
    WINDOW,
};
pub use pagerank::{
    pagerank, pagerank_pull, pagerank_reference, PageRankGraph, PageRankOptions, PageRankResult,
};
pub use sssp::{dijkstra, sssp, sssp_relax, sssp_unchecked, sssp_with_capacity, SsspResult};
