//! The SSSP and BFS drivers as `lb::algorithms` had them before the frontier stayed on the
//! device, around today's kernels: `--host-loop` runs them next to the device-resident drivers,
//! so that both wall times come from one process on one GPU. Per call the graph's offsets are
//! downloaded (for the edge count); per iteration the frontier is uploaded, the O(V) state is
//! copied to a snapshot on the device, the queue is cleared from the host, the kernel runs, and
//! the queue comes back to be sorted and deduplicated on the host. An overflow restores the
//! snapshot, grows the queue and reruns the iteration (with a queue of `num_rows` slots and
//! kernels that push each vertex once per launch it does not happen).

use std::time::Instant;

use lb::algorithms::{bfs_visit, sssp_relax, BfsResult, SsspResult, Traversal, EDGE_SLOTS};
use lb::prelude::*;
use lb::{Error, Result};

/// `lb::algorithms::sssp` as a host-driven loop.
pub fn sssp(dev: &Device, g: &DeviceCsr<f32>, source: usize, s: Schedule) -> Result<SsspResult> {
    let clock = Instant::now();
    let mut dist = vec![f32::INFINITY; g.num_rows()];
    *dist
        .get_mut(source)
        .ok_or_else(|| Error::Shape(format!("source {source} is not a vertex")))? = 0.0;
    let mut dist = dev.upload(&dist)?;
    let mut marks = dev.zeros::<u32>(g.num_rows())?;
    let mut attempt = 0u32;
    let mut run = traverse(
        dev,
        g,
        source,
        &mut dist,
        |queue, frontier, dist, edges, _| {
            // A fresh stamp per attempt: a rerun must push the vertices the failed attempt marked.
            attempt += 1;
            sssp_relax::launch_with(dev, s, g, frontier, dist, &mut marks, attempt, queue, edges)
        },
    )?;
    let dist = dist.download()?;
    run.wall_ms = clock.elapsed().as_secs_f64() * 1e3;
    Ok(SsspResult { dist, run })
}

/// `lb::algorithms::bfs` as a host-driven loop.
pub fn bfs(dev: &Device, g: &DeviceCsr<f32>, source: usize, s: Schedule) -> Result<BfsResult> {
    let clock = Instant::now();
    let mut depth = vec![u32::MAX; g.num_rows()];
    *depth
        .get_mut(source)
        .ok_or_else(|| Error::Shape(format!("source {source} is not a vertex")))? = 0;
    let mut depth = dev.upload(&depth)?;
    let mut run = traverse(
        dev,
        g,
        source,
        &mut depth,
        |queue, frontier, depth, edges, level| {
            let level = u32::try_from(level)
                .map_err(|_| Error::Shape(format!("bfs: level {level} exceeds u32")))?;
            bfs_visit::launch_with(dev, s, g, frontier, depth, level, queue, edges)
        },
    )?;
    let depth = depth.download()?;
    run.wall_ms = clock.elapsed().as_secs_f64() * 1e3;
    Ok(BfsResult { depth, run })
}

/// The host-driven frontier loop: `step(queue, frontier, state, edges, iteration)` runs one
/// kernel; `state` is snapshotted before each iteration and restored before a rerun.
fn traverse<T: lb::Element>(
    dev: &Device,
    g: &DeviceCsr<f32>,
    source: usize,
    state: &mut DeviceBuffer<T>,
    mut step: impl FnMut(
        &mut DeviceQueue,
        &DeviceBuffer<u32>,
        &mut DeviceBuffer<T>,
        &mut DeviceBuffer<u64>,
        usize,
    ) -> Result<Launch>,
) -> Result<Traversal> {
    let offsets = g.download()?.row_offsets;
    let mut queue = DeviceQueue::new(dev, g.num_rows().max(1))?;
    let mut snapshot = dev.zeros::<T>(state.len())?;
    let mut edges = dev.zeros::<u64>(EDGE_SLOTS)?;
    let source =
        u32::try_from(source).map_err(|_| Error::Shape(format!("source {source} exceeds u32")))?;
    let mut frontier = vec![source];
    // The iterations' traffic, as the device-resident drivers count theirs.
    let before = dev.transferred();
    let mut run = Traversal::default();
    while !frontier.is_empty() {
        let on_device = dev.upload(&frontier)?;
        dev.copy(state, &mut snapshot)?;
        let launch = loop {
            queue.clear()?;
            match step(&mut queue, &on_device, state, &mut edges, run.iterations) {
                Ok(launch) => break launch,
                Err(Error::QueueOverflow { needed, .. }) => {
                    dev.copy(&snapshot, state)?;
                    let needed = usize::try_from(needed)
                        .map_err(|_| Error::Shape(format!("a queue of {needed} items")))?;
                    queue.grow(needed)?;
                    run.retries += 1;
                }
                Err(e) => return Err(e),
            }
        };
        if let Some(ms) = launch.elapsed_ms {
            *run.elapsed_ms.get_or_insert(0.0) += ms;
        }
        run.iterations += 1;
        run.edges += frontier
            .iter()
            .map(|&u| (offsets[u as usize + 1] - offsets[u as usize]) as u64)
            .sum::<u64>();
        frontier = queue.download()?;
        frontier.sort_unstable();
        frontier.dedup();
    }
    let moved = dev.transferred().since(before);
    run.bytes_to_host = moved.to_host;
    run.bytes_to_device = moved.to_device;
    Ok(run)
}
