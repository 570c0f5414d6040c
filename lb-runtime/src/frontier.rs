//! `schedule = "auto"` over a frontier: the schedule is picked from the statistics of the
//! frontier's tiles, not of the whole tile set, measured on the device when they could change
//! the choice.
//!
//! A frontier of a few thousand vertices of a graph with hubs may hold only short tiles (a
//! one-kernel schedule's case) or a hub (a work-oriented one's); the whole graph's statistics
//! say "hub" for every frontier. The host knows the frontier's length; its atoms and longest
//! tile lie on the device. [`Rule::frontier_picks`](crate::heuristic::Rule::frontier_picks)
//! lists what the rule can pick for any frontier of that length over the tile set: when that is
//! one schedule (a road network's frontier, whose tiles all hold a few atoms, cannot be
//! heavy-tailed), nothing is measured. Otherwise one kernel sums the frontier's tile sizes and
//! finds the longest, and the host reads the two words (16 bytes) before it picks: one wait
//! for the GPU per launch, which a traversal's step pays anyway to read its queue's counter.
//!
//! The kernel (`lb_frontier_stats_u32` / `_u64`, by the tile set's offset width; parameters
//! `offsets, frontier, len, tiles, out`): a grid-stride loop over the entries, each thread's
//! sum and maximum reduced over its warp with butterfly shuffles, one atomic add and one
//! atomic maximum per warp into `out[0]` and `out[1]`, which start at zero. An entry that is
//! not a tile counts nothing (the launch that follows reports it).

use std::fmt::Write;
use std::sync::LazyLock;

use lb_ptx::plan::OffsetWidth;
use lb_ptx::Schedule;

use crate::buffer::DeviceBuffer;
use crate::builtin;
use crate::error::{Error, Result};
use crate::heuristic::DEFAULT_RULE;
use crate::stats::TileStats;
use crate::stream::Stream;
use crate::tiles::DeviceTiles;

/// The module: one entry per offset width.
static PTX: LazyLock<String> = LazyLock::new(ptx);

/// The schedule among `generated` that [`DEFAULT_RULE`] picks for the tiles `frontier` lists
/// (entries of `tiles`) with `lanes` lanes: from the frontier's own statistics (its length, the
/// atoms of its tiles and its longest tile), measured on `stream`'s device only when they could
/// change the choice (see the module's docs), which waits for the stream's work so far. On a
/// stream that is capturing a graph, where nothing can be waited for, the whole tile set's
/// statistics pick instead. The tile set and the frontier must be on `stream`'s device.
pub fn frontier_schedule(
    stream: &Stream,
    tiles: &DeviceTiles,
    frontier: &DeviceBuffer<u32>,
    generated: &[Schedule],
    lanes: u64,
) -> Result<Schedule> {
    let whole = tiles.stats();
    let len = frontier.len() as u64;
    let picks = DEFAULT_RULE.frontier_picks(generated, whole, len, lanes);
    if let [only] = picks[..] {
        return Ok(only);
    }
    // Measuring waits for the GPU, which a capture cannot: the whole tile set's statistics pick,
    // as for every launch before frontiers were measured.
    if stream.capturing() {
        return Ok(crate::heuristic::choose_schedule(generated, whole, lanes));
    }
    let (atoms, longest) = measure(stream, tiles, frontier)?;
    let stats = TileStats::new(len, whole.cols, atoms, longest);
    Ok(crate::heuristic::choose_schedule(generated, &stats, lanes))
}

/// The atoms of the tiles `frontier` lists and the longest of them, summed on `stream`'s
/// device; waits for the stream's work before it (without reading its launches' reports).
pub(crate) fn measure(
    stream: &Stream,
    tiles: &DeviceTiles,
    frontier: &DeviceBuffer<u32>,
) -> Result<(u64, u64)> {
    let dev = stream.device();
    if !frontier.device().same(dev) || !tiles.offsets.device().same(dev) {
        return Err(Error::DeviceMismatch {
            what: "the frontier or the tile set of an `auto` launch over a frontier".into(),
        });
    }
    let len = frontier.len();
    if len == 0 {
        return Ok((0, 0));
    }
    let out = DeviceBuffer::<u64>::from_raw(dev.alloc_raw_on(stream, 16, true)?, 2);
    let entry = match tiles.offsets.width() {
        OffsetWidth::U32 => "lb_frontier_stats_u32",
        OffsetWidth::U64 => "lb_frontier_stats_u64",
    };
    let mut params = [
        tiles.offsets.device_addr(),
        frontier.device_addr(),
        len as u64,
        tiles.num_tiles() as u64,
        out.device_addr(),
    ];
    stream.order_after_device()?;
    // The offsets hold `tiles + 1` entries of the entry's width and the frontier `len` u32
    // entries, both on this device (checked above); the kernel reads an offset pair only for an
    // entry below `tiles`, reads `len` entries, and writes the two u64 of `out`, zeroed on this
    // stream before the launch.
    builtin::launch(stream, &PTX, entry, len, &mut params)?;
    if let Some(cuda) = stream.cudarc() {
        cuda.synchronize()
            .map_err(|e| Error::cuda("measuring a frontier's tiles", e))?;
    }
    match dev.download(&out)?[..] {
        [atoms, longest] => Ok((atoms, longest)),
        _ => Err(Error::Shape(
            "a frontier's statistics came back short".into(),
        )),
    }
}

/// The module's text. Registers: `%rd0`–`%rd4` the parameters, `%rd5` the entry, `%rd7` the
/// grid's stride, `%rd8` the sum, `%rd9` the maximum, `%rd10`–`%rd15` addresses and sizes,
/// `%rd16`–`%rd19` the shuffles' halves joined; `%r1`–`%r4` the grid's coordinates, `%r5`–`%r12`
/// loads and the halves.
fn ptx() -> String {
    let mut out = String::from(".version 7.8\n.target sm_75\n.address_size 64\n");
    for (name, shift, load) in [
        (
            "u32",
            2,
            "ld.global.nc.u32 %r6, [%rd12];\n    ld.global.nc.u32 %r7, [%rd12+4];\n    \
             sub.u32 %r8, %r7, %r6;\n    cvt.u64.u32 %rd13, %r8;",
        ),
        (
            "u64",
            3,
            "ld.global.nc.u64 %rd14, [%rd12];\n    ld.global.nc.u64 %rd15, [%rd12+8];\n    \
             sub.u64 %rd13, %rd15, %rd14;",
        ),
    ] {
        let _ = write!(
            out,
            "\n.visible .entry lb_frontier_stats_{name}(\n    .param .u64 p_offsets,\n    \
             .param .u64 p_frontier,\n    .param .u64 p_len,\n    .param .u64 p_tiles,\n    \
             .param .u64 p_out\n)\n{{\n    .reg .pred %p<3>;\n    .reg .b32 %r<13>;\n    \
             .reg .b64 %rd<20>;\n    ld.param.u64 %rd0, [p_offsets];\n    \
             ld.param.u64 %rd1, [p_frontier];\n    ld.param.u64 %rd2, [p_len];\n    \
             ld.param.u64 %rd3, [p_tiles];\n    ld.param.u64 %rd4, [p_out];\n    \
             mov.u32 %r1, %ctaid.x;\n    mov.u32 %r2, %ntid.x;\n    mov.u32 %r3, %tid.x;\n    \
             mov.u32 %r4, %nctaid.x;\n    mul.wide.u32 %rd5, %r1, %r2;\n    \
             cvt.u64.u32 %rd6, %r3;\n    add.u64 %rd5, %rd5, %rd6;\n    \
             mul.wide.u32 %rd7, %r4, %r2;\n    mov.u64 %rd8, 0;\n    mov.u64 %rd9, 0;\n\
             L0:\n    setp.ge.u64 %p0, %rd5, %rd2;\n    @%p0 bra L1;\n    \
             shl.b64 %rd10, %rd5, 2;\n    add.u64 %rd10, %rd1, %rd10;\n    \
             ld.global.nc.u32 %r5, [%rd10];\n    cvt.u64.u32 %rd11, %r5;\n    \
             setp.ge.u64 %p1, %rd11, %rd3;\n    @%p1 bra L2;\n    \
             shl.b64 %rd12, %rd11, {shift};\n    add.u64 %rd12, %rd0, %rd12;\n    {load}\n    \
             add.u64 %rd8, %rd8, %rd13;\n    max.u64 %rd9, %rd9, %rd13;\nL2:\n    \
             add.u64 %rd5, %rd5, %rd7;\n    bra L0;\nL1:\n"
        );
        for lane in [16, 8, 4, 2, 1] {
            for (acc, op) in [("%rd8", "add"), ("%rd9", "max")] {
                let _ = write!(
                    out,
                    "    cvt.u32.u64 %r9, {acc};\n    shr.u64 %rd16, {acc}, 32;\n    \
                     cvt.u32.u64 %r10, %rd16;\n    \
                     shfl.sync.bfly.b32 %r11, %r9, {lane}, 31, 4294967295;\n    \
                     shfl.sync.bfly.b32 %r12, %r10, {lane}, 31, 4294967295;\n    \
                     cvt.u64.u32 %rd17, %r11;\n    cvt.u64.u32 %rd18, %r12;\n    \
                     shl.b64 %rd18, %rd18, 32;\n    or.b64 %rd17, %rd17, %rd18;\n    \
                     {op}.u64 {acc}, {acc}, %rd17;\n"
                );
            }
        }
        out.push_str(
            "    and.b32 %r9, %r3, 31;\n    setp.ne.u32 %p2, %r9, 0;\n    @%p2 bra L3;\n    \
             atom.global.add.u64 %rd19, [%rd4], %rd8;\n    \
             atom.global.max.u64 %rd19, [%rd4+8], %rd9;\nL3:\n    ret;\n}\n",
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Device;
    use crate::tiles::Tiles;
    use rand::{Rng, SeedableRng};

    /// The tile set's tile sizes for `frontier`, summed and maxed on the host.
    fn on_host(offsets: &[usize], frontier: &[u32]) -> (u64, u64) {
        frontier
            .iter()
            .filter(|&&t| (t as usize) + 1 < offsets.len())
            .map(|&t| (offsets[t as usize + 1] - offsets[t as usize]) as u64)
            .fold((0, 0), |(s, m), n| (s + n, m.max(n)))
    }

    /// On the simulator, fresh random tile sets at both offset widths (empty tiles, one giant
    /// tile) and frontiers of every shape: empty, one entry, repeats, entries that are not
    /// tiles, and more entries than the grid's threads (the loop strides).
    #[test]
    fn the_kernel_sums_and_maxes_the_frontiers_tiles() {
        let dev = Device::simulator();
        let stream = dev.stream();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x5eed);
        for round in 0..12 {
            let n = rng.random_range(1..400);
            let mut offsets = vec![0usize];
            for i in 0..n {
                let size = match rng.random_range(0..6) {
                    0 => 0,
                    1 if i == n / 2 => 5_000,
                    _ => rng.random_range(1..9),
                };
                offsets.push(offsets[i] + size);
            }
            let set = Tiles {
                num_tiles: n,
                tile_offsets: offsets.clone(),
            };
            let width = if round % 2 == 0 {
                OffsetWidth::U32
            } else {
                OffsetWidth::U64
            };
            let tiles = DeviceTiles::upload_with_offsets(&dev, &set, width).unwrap();
            for len in [0usize, 1, 7, 300, 2_100] {
                let frontier: Vec<u32> = (0..len)
                    .map(|_| match rng.random_range(0..10) {
                        0 => (n + rng.random_range(0..5)) as u32,
                        _ => rng.random_range(0..n) as u32,
                    })
                    .collect();
                let on_dev = dev.upload(&frontier).unwrap();
                let got = measure(&stream, &tiles, &on_dev).unwrap();
                assert_eq!(
                    got,
                    on_host(&offsets, &frontier),
                    "round {round}, {len} entries"
                );
            }
        }
    }

    /// Over a tile set with a hub, the pick follows the frontier: a few short tiles get the
    /// rule's small-problem schedule, a frontier holding the hub the heavy-tail one.
    #[test]
    fn the_pick_follows_the_frontier() {
        let dev = Device::simulator();
        let stream = dev.stream();
        let n = 20_000;
        let mut offsets = vec![0usize];
        for i in 0..n {
            offsets.push(offsets[i] + if i == 0 { 50_000 } else { 2 });
        }
        let set = Tiles {
            num_tiles: n,
            tile_offsets: offsets,
        };
        let tiles = DeviceTiles::upload(&dev, &set).unwrap();
        let short = dev.upload(&(1..600u32).collect::<Vec<_>>()).unwrap();
        let hub = dev.upload(&(0..600u32).collect::<Vec<_>>()).unwrap();
        let all = Schedule::ALL;
        let whole = crate::heuristic::choose_schedule(all, tiles.stats(), 1);
        assert_eq!(whole, Schedule::MergePath);
        let on_short = frontier_schedule(&stream, &tiles, &short, all, 1).unwrap();
        let on_hub = frontier_schedule(&stream, &tiles, &hub, all, 1).unwrap();
        assert_eq!(on_short, Schedule::ThreadMapped);
        assert_eq!(on_hub, Schedule::MergePath);
    }

    /// ptxas (when `LB_PTXAS` names it) accepts the module for sm_75, sm_80 and sm_90, unspilled.
    #[test]
    fn the_module_assembles() {
        lb_ptx::ptxas::assert_assembles("the frontier statistics kernels", &PTX);
    }
}
