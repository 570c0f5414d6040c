//! `lrb`: logarithmic radix binning (thesis `seeds/001_ea7a499d193f2b3c.txt` §3.3.4, after Green
//! et al. and Fox et al.): tiles are binned by the bit length of their atom count, reordered so
//! that each bin is contiguous, and processed bin class by bin class with a group size matched
//! to the bin.
//!
//! Kernels, in launch order:
//! 1. `_lrb_count`: one thread per tile adds 1 to `counts[bin]`, `bin = 64 - clz(atoms)` (0 for
//!    an empty tile, `b + 1` for `2^b <= atoms < 2^(b+1)`), so [`Lrb::BINS`] counters cover every
//!    64-bit count ("a counter at location b is incremented", §3.3.4). The adds go to a block's
//!    histogram in shared memory first, and the block adds each of its nonzero bins once.
//! 2. `_lrb_scan`: one thread turns the counts into bin starts (exclusive scan, the total last)
//!    and the counts into scatter cursors.
//! 3. `_lrb_scatter`: one thread per tile takes the next slot of its bin and writes its tile id
//!    there: its rank in the block's shared histogram, after a run the block reserved with one
//!    atomic add on the bin's cursor. The scatter is **not stable**: the order inside a bin
//!    depends on timing. Results do not: each tile is reduced by one group in a fixed order.
//! 4. `_lrb_thread`, `_lrb_warp`, `_lrb_block`: the bins of tiles below 32 atoms, one thread per
//!    tile walking its atoms in order (bitwise the sequential loop; the threads take these tiles
//!    in tile-set order, skipping the larger ones, so their accesses stay coalesced where the
//!    unstable reorder would scatter them); the bins from 32 atoms to
//!    below the block size, one warp per tile (strided partials, a butterfly); the bins of at
//!    least the block size, one block per tile (strided partials, a butterfly per warp, thread 0
//!    folds the warps' partials in warp order). No float atomics, so two launches agree bitwise.
//!    With lanes, a plan whose blocks have 256 threads or more has no `_lrb_block`: every tile of
//!    its bins is the huge-tile split's (below).
//!
//! The warp and block classes are launched only when the tile set's longest tile reaches their
//! first bin (`KernelPlan::min_tile_atoms`), so short rows cost one process kernel, not three.
//!
//! Without a frontier the reorder is cached per tile set (`TempRole::Cached`): the producers run
//! only on the first launch over a tile set.
//!
//! The huge-tile split's walks and fix-ups come between the producers and the class kernels, on
//! their side tracks (`KernelPlan::track`); the warp and block classes have side tracks of their
//! own and the thread class comes last on track 0, so the classes and the split's tiers all run
//! alongside each other (they walk disjoint tiles).
//!
//! Lanes: each process kernel counts tile × lane work items, so every lane of a tile is its own
//! item. A frontier with repeats puts each copy in its bin; every copy stores the same bits.
//!
//! Huge tiles (at least [`crate::primitives::huge::threshold`] atoms) are binned as usual but
//! left out of the warp and block classes (their bins, or each tile in `_lrb_block`) and left to
//! the huge-tile split: its list and scan run first (cached
//! with the bins, five producers in all), its chunked walk and fix-up last.

use std::borrow::Cow;

use super::{common_temps, entry_name, Schedule, ScheduleTemplate};
use crate::body::{Body, IndexRole};
use crate::builder::KernelBuilder;
use crate::codegen::{ptx_type, reduce_combine, reduce_identity, KernelParams};
use crate::ir::{
    AtomOp, BinOp, Cmp, Kernel, Op, Operand, Reg, Rounding, Space, Special, Type, UnOp,
};
use crate::plan::{twin_base, Grid, KernelPlan, OffsetWidth, Plan, Temp, TempCount, TempRole};
use crate::primitives::huge;
use crate::primitives::layout::LANE_BLOCKING;
use crate::primitives::walker::{own_tiles, TileSource, Walker};
use crate::primitives::warp::{butterfly, grid_warps};
use crate::primitives::Layout;
use crate::{GenError, Options};

/// The first bin a warp takes: tiles of at least 32 atoms.
const WARP_BIN: u32 = 6;

/// The `lrb` template.
#[derive(Clone, Copy, Debug, Default)]
pub struct Lrb;

/// The entry suffixes of the kernels that bin the tiles, in launch order, after the huge-tile
/// split's list and scan.
const PRODUCER_KERNELS: [&str; 3] = ["count", "scan", "scatter"];
/// The entry suffixes of the class kernels, in launch order, after the split's walks and
/// fix-ups. The warp and block classes run on side tracks of their own ([`class_track`]) and the
/// thread class last on track 0, so that all three run alongside each other and the split's
/// tiers: they walk disjoint bins into disjoint outputs.
const CLASS_KERNELS: [&str; 3] = ["warp", "block", "thread"];

/// The track of a class kernel (`KernelPlan::track`): the warp and block classes after the
/// split's two ([`huge::HUGE_TRACK`], [`huge::MID_TRACK`]), the thread class on track 0.
fn class_track(class: &str) -> u8 {
    match class {
        "warp" => huge::MID_TRACK + 1,
        "block" => huge::MID_TRACK + 2,
        _ => 0,
    }
}

impl Lrb {
    /// Bins: bit lengths 0..=64 of a 64-bit atom count.
    pub const BINS: u32 = 65;

    /// The first bin a block takes for blocks of `block` threads: tiles of at least `block`
    /// atoms.
    pub fn block_bin(block: u32) -> u32 {
        block.trailing_zeros() + 1
    }

    /// The bin of a tile of `atoms` atoms.
    pub fn bin(atoms: u64) -> u32 {
        64 - atoms.leading_zeros()
    }
}

/// Temporaries after the common ones: counts (then cursors), bin starts, reordered tile ids.
const COUNTS: usize = 0;
const STARTS: usize = 1;
const PERM: usize = 2;

impl ScheduleTemplate for Lrb {
    fn plan(&self, body: &Body, opts: &Options) -> Result<Plan, GenError> {
        let base = entry_name(body, Schedule::Lrb);
        let mid = huge::mid_tier(opts, true);
        let mut kernels = huge::front_kernels(&base, opts, mid);
        // The leading kernels that only produce cached temporaries: the split's (list, scan
        // and, with the mid tier, place), then the binning's count, scan and scatter.
        let producers = (kernels.len() + PRODUCER_KERNELS.len()) as u32;
        // With lanes at blocks of 256 threads or more every block-class tile is the split's:
        // no `_lrb_block` launch at all; with the split's mid tier, which takes every tile of at
        // least a warp's 32 atoms, no `_lrb_warp` either.
        let split = split_bin(huge::split_from(opts, mid));
        let block_class = Lrb::block_bin(opts.block).max(WARP_BIN) < split;
        let warp_class = WARP_BIN < split;
        let classes = CLASS_KERNELS
            .iter()
            .filter(|k| (**k != "block" || block_class) && (**k != "warp" || warp_class));
        // A class whose bins start above the longest tile has no work: not launched, so a
        // tile set of short rows pays one process kernel, not three.
        let first_atoms = |bin: u32| Some(1u64 << (bin - 1));
        let class = |k: &&str| KernelPlan {
            entry: Cow::Owned(format!("{base}_{k}")),
            block: if *k == "scan" { 32 } else { opts.block },
            grid: if *k == "scan" {
                Grid::Fixed(1)
            } else {
                Grid::CoverItems { per_thread: 1 }
            },
            dynamic_shared: 0,
            min_tile_atoms: match *k {
                "warp" => first_atoms(WARP_BIN),
                "block" => first_atoms(Lrb::block_bin(opts.block).max(WARP_BIN)),
                _ => None,
            },
            min_grid: None,
            lanes: None,
            track: class_track(k),
        };
        // The binning's producers, then the split's tiers and the warp and block classes on
        // their side tracks, then the thread class, which runs alongside them.
        kernels.extend(PRODUCER_KERNELS.iter().map(class));
        kernels.extend(huge::back_kernels(&base, body, opts, mid));
        kernels.extend(classes.map(class));
        // Without a frontier the bins and the huge-tile list depend only on the tile set: the
        // runtime keeps them with it and skips the split's list, scan (and place) and the
        // binning's count, scan and scatter on later launches.
        let role = match opts.tiles {
            None => TempRole::Cached { producers },
            Some(_) => TempRole::Scratch,
        };
        let mut temps = common_temps(opts);
        temps.extend([
            Temp {
                name: Cow::Borrowed("lrb_counts"),
                elem_bytes: 8,
                count: TempCount::Fixed(Lrb::BINS.into()),
                zero: true,
                role,
            },
            Temp {
                name: Cow::Borrowed("lrb_starts"),
                elem_bytes: 8,
                count: TempCount::Fixed(u64::from(Lrb::BINS) + 1),
                zero: false,
                role,
            },
            Temp {
                name: Cow::Borrowed("lrb_perm"),
                elem_bytes: 8,
                count: TempCount::PerTile {
                    per_tile: 1,
                    extra: 1,
                },
                zero: false,
                role,
            },
        ]);
        temps.extend(huge::temps(opts, Some(producers), mid));
        Ok(Plan {
            schedule: Cow::Borrowed(Schedule::Lrb.name()),
            kernels: Cow::Owned(kernels),
            temps: Cow::Owned(temps),
            index_limit: None,
            offsets: OffsetWidth::U64,
            select: None,
        })
    }

    fn build(&self, body: &Body, opts: &Options, plan: &Plan) -> Result<Vec<Kernel>, GenError> {
        let first = common_temps(opts).len();
        let mut out = Vec::new();
        for kp in plan.kernels.iter() {
            if let Some(k) = huge::build(body, opts, plan, kp) {
                out.push(k?);
                continue;
            }
            let name = PRODUCER_KERNELS
                .into_iter()
                .chain(CLASS_KERNELS)
                .find(|k| twin_base(&kp.entry).ends_with(&format!("_lrb_{k}")))
                .ok_or_else(|| GenError::Unsupported(format!("no lrb kernel `{}`", kp.entry)))?;
            let mut b = KernelBuilder::new(kp.entry.as_ref());
            let params = KernelParams::declare(&mut b, body, plan)?;
            let t = |k: usize| params.temps[first + k];
            match name {
                "count" => {
                    let layout = Layout::new(&mut b, body, opts, &params)?;
                    let hist = Histogram::declare(&mut b, kp.block);
                    hist.zero(&mut b);
                    b.emit(Op::BarSync);
                    let gs = b.grid_stride_begin(layout.tiles);
                    let tile = layout.tile(&mut b, &params, gs.item, opts.checked, gs.next);
                    let bin = tile_bin(&mut b, &layout, tile);
                    hist.add(&mut b, bin);
                    b.grid_stride_end(gs);
                    b.emit(Op::BarSync);
                    hist.each_bin(&mut b, &mut |b, bin, count| {
                        let addr = b.elem_addr(t(COUNTS), bin, 8);
                        b.atom_global(AtomOp::Add, Type::U64, (addr, 0), count);
                    });
                }
                "scatter" => {
                    let layout = Layout::new(&mut b, body, opts, &params)?;
                    scatter(
                        &mut b,
                        &params,
                        &layout,
                        opts.checked,
                        kp.block,
                        [t(COUNTS), t(PERM)],
                    );
                }
                "scan" => {
                    let tid = b.special(Special::TidX);
                    let lead = b.setp(Cmp::Eq, Type::U32, tid, Operand::Imm(0));
                    let only = b.if_begin(lead, false);
                    let run = b.mov(Type::U64, Operand::Imm(0));
                    let bin = b.mov(Type::U64, Operand::Imm(0));
                    let bins = b.loop_begin();
                    let done = b.setp(Cmp::Ge, Type::U64, bin, Operand::Imm(Lrb::BINS.into()));
                    b.break_if(&bins, done, false);
                    let c_at = b.elem_addr(t(COUNTS), bin, 8);
                    let s_at = b.elem_addr(t(STARTS), bin, 8);
                    let c = b.ld(Space::Global, Type::U64, c_at);
                    b.st(Space::Global, Type::U64, s_at, run);
                    b.st(Space::Global, Type::U64, c_at, run);
                    b.bin_to(BinOp::Add, Type::U64, run, run, c);
                    b.bin_to(BinOp::Add, Type::U64, bin, bin, Operand::Imm(1));
                    b.loop_end(bins);
                    let last = b.mov(Type::U64, Operand::Imm(Lrb::BINS.into()));
                    let s_at = b.elem_addr(t(STARTS), last, 8);
                    b.st(Space::Global, Type::U64, s_at, run);
                    b.if_end(only);
                }
                class => {
                    let layout = Layout::new(&mut b, body, opts, &params)?;
                    let block_bin = Lrb::block_bin(kp.block).max(WARP_BIN);
                    let split_from = huge::split_from(opts, huge::plan_has_mid(plan));
                    let (lo, hi) = match class {
                        "thread" => (0, WARP_BIN),
                        "warp" => (WARP_BIN, block_bin.min(split_bin(split_from))),
                        _ => (block_bin, split_bin(split_from)),
                    };
                    // The thread class walks the tile set itself (`Process::per_thread`), so it
                    // reads no bin starts.
                    let (from, items, tiles) = if class == "thread" {
                        let zero = b.mov(Type::U64, Operand::Imm(0));
                        (zero, layout.items, layout.tiles)
                    } else {
                        let from = start(&mut b, t(STARTS), lo);
                        let to = start(&mut b, t(STARTS), hi.max(lo));
                        let tiles = b.bin(BinOp::Sub, Type::U64, to, from);
                        let items = match layout.lanes {
                            Some(l) => b.bin(BinOp::Mul, Type::U64, tiles, l),
                            None => tiles,
                        };
                        (from, items, tiles)
                    };
                    let p = Process {
                        body,
                        opts,
                        params: &params,
                        layout: &layout,
                        perm: t(PERM),
                        from,
                        block: kp.block,
                        split_from,
                    };
                    match class {
                        "thread" => p.per_thread(&mut b, items)?,
                        "warp" => p.per_warp(&mut b, items, tiles)?,
                        _ => p.per_block(&mut b, items)?,
                    }
                }
            }
            out.push(b.finish());
        }
        Ok(out)
    }
}

/// The first bin whose tiles are all the huge-tile split's, for a split that takes tiles from
/// `threshold` atoms ([`huge::split_from`]): the bin the threshold starts when that is a power of
/// two (bins are powers of two), else none, and `_lrb_block` skips the split's tiles one by one
/// ([`huge::is_huge`]). The warp and block classes stop there, so that they neither walk a tile
/// the split also walks (with lanes the threshold is 256 atoms, which a warp class over blocks of
/// 512 threads reaches, or the mid tier's 32) nor pay one item per (tile, lane) to find each
/// such tile skipped: on an H100 that was 163 µs of a 542 µs SpMM at k = 128 on `rmat-18-ef8`,
/// where at block 256 every block-class tile was the split's.
fn split_bin(threshold: u64) -> u32 {
    if threshold.is_power_of_two() {
        Lrb::bin(threshold)
    } else {
        Lrb::BINS
    }
}

/// The bin of `tile`: the bit length of its atom count (u64).
fn tile_bin(b: &mut KernelBuilder, layout: &Layout, tile: Reg) -> Reg {
    let (begin, end) = layout.atoms(b, tile);
    let size = b.bin(BinOp::Sub, Type::U64, end, begin);
    let lz = b.un(UnOp::Clz, Type::B64, size);
    let bin = b.bin(BinOp::Sub, Type::U32, Operand::Imm(64), lz);
    b.cvt(Rounding::None, Type::U64, Type::U32, bin)
}

/// A block's counts per bin in shared memory, plus a slot past the last bin that counts nothing
/// (where a thread without a tile adds). The count and scatter kernels add a tile to its bin
/// here and make one global atomic per (block, bin) instead of one per tile: on a power-law
/// graph most tiles fall into three or four bins, and one global atomic per tile queued on those
/// few addresses, 4 ms each for the count and the scatter of 6.5 M tiles on an H100.
struct Histogram {
    base: Reg,
    tid: Reg,
    block: u32,
}

const HISTOGRAM: &str = "lb_lrb_histogram";
const BIN_BASES: &str = "lb_lrb_bin_bases";

impl Histogram {
    fn declare(b: &mut KernelBuilder, block: u32) -> Histogram {
        b.shared(HISTOGRAM, 8, (Lrb::BINS + 1) * 8);
        let base = b.mov(Type::U64, Operand::Symbol(HISTOGRAM.into()));
        let tid = b.special(Special::TidX);
        let tid = b.cvt(Rounding::None, Type::U64, Type::U32, tid);
        Histogram { base, tid, block }
    }

    /// `f(bin, value)` in the threads `bin, bin + block, ..` for every bin below [`Lrb::BINS`],
    /// `value` the bin's count. No barrier.
    fn each_bin(&self, b: &mut KernelBuilder, f: &mut dyn FnMut(&mut KernelBuilder, Reg, Reg)) {
        let bin = b.mov(Type::U64, self.tid);
        let bins = b.loop_begin();
        let done = b.setp(Cmp::Ge, Type::U64, bin, Operand::Imm(Lrb::BINS.into()));
        b.break_if(&bins, done, false);
        let addr = b.elem_addr(self.base, bin, 8);
        let count = b.ld(Space::Shared, Type::U64, addr);
        let some = b.setp(Cmp::Ne, Type::U64, count, Operand::Imm(0));
        let scope = b.if_begin(some, false);
        f(b, bin, count);
        b.if_end(scope);
        b.bin_to(
            BinOp::Add,
            Type::U64,
            bin,
            bin,
            Operand::Imm(self.block.into()),
        );
        b.loop_end(bins);
    }

    /// Zeroes every slot, the spare one included. No barrier.
    fn zero(&self, b: &mut KernelBuilder) {
        let slot = b.mov(Type::U64, self.tid);
        let slots = b.loop_begin();
        let done = b.setp(Cmp::Gt, Type::U64, slot, Operand::Imm(Lrb::BINS.into()));
        b.break_if(&slots, done, false);
        let addr = b.elem_addr(self.base, slot, 8);
        b.st(Space::Shared, Type::U64, addr, Operand::Imm(0));
        b.bin_to(
            BinOp::Add,
            Type::U64,
            slot,
            slot,
            Operand::Imm(self.block.into()),
        );
        b.loop_end(slots);
    }

    /// Adds one to `bin` (u64, at most [`Lrb::BINS`]); returns the count before.
    fn add(&self, b: &mut KernelBuilder, bin: Reg) -> Reg {
        let addr = b.elem_addr(self.base, bin, 8);
        b.atom(
            Space::Shared,
            AtomOp::Add,
            Type::U64,
            (addr, 0),
            Operand::Imm(1),
        )
    }
}

/// `_lrb_scatter`: the block takes `block` tiles at a time (every thread the same number of
/// rounds, so that the barriers are uniform); each tile gets its rank within its bin in the
/// block from the shared histogram, the block reserves each bin's run of slots with one atomic
/// on the bin's cursor (`cursors`, the scan's output), and each tile writes its id at its run's
/// start plus its rank.
fn scatter(
    b: &mut KernelBuilder,
    params: &KernelParams,
    layout: &Layout,
    checked: bool,
    block: u32,
    [cursors, perm]: [Reg; 2],
) {
    let hist = Histogram::declare(b, block);
    b.shared(BIN_BASES, 8, Lrb::BINS * 8);
    let bases = b.mov(Type::U64, Operand::Symbol(BIN_BASES.into()));
    let ctaid = b.special(Special::CtaidX);
    let nctaid = b.special(Special::NctaidX);
    let first = b.bin(BinOp::MulWide, Type::U32, ctaid, Operand::Imm(block.into()));
    let stride = b.bin(
        BinOp::MulWide,
        Type::U32,
        nctaid,
        Operand::Imm(block.into()),
    );
    let round = b.mov(Type::U64, first);
    let rounds = b.loop_begin();
    let done = b.setp(Cmp::Ge, Type::U64, round, layout.tiles);
    b.break_if(&rounds, done, false);
    hist.zero(b);
    b.emit(Op::BarSync);
    let item = b.bin(BinOp::Add, Type::U64, round, hist.tid);
    let bin = b.mov(Type::U64, Operand::Imm(Lrb::BINS.into()));
    let tile = b.mov(Type::U64, Operand::Imm(0));
    let skip = b.label();
    let past = b.setp(Cmp::Ge, Type::U64, item, layout.tiles);
    b.bra_if(past, false, skip);
    let t = layout.tile(b, params, item, checked, skip);
    let tb = tile_bin(b, layout, t);
    b.emit(Op::Mov {
        ty: Type::U64,
        dst: tile,
        src: t.into(),
    });
    b.emit(Op::Mov {
        ty: Type::U64,
        dst: bin,
        src: tb.into(),
    });
    b.place(skip);
    let rank = hist.add(b, bin);
    b.emit(Op::BarSync);
    hist.each_bin(b, &mut |b, bin, count| {
        let cursor = b.elem_addr(cursors, bin, 8);
        let run = b.atom_global(AtomOp::Add, Type::U64, (cursor, 0), count);
        let at = b.elem_addr(bases, bin, 8);
        b.st(Space::Shared, Type::U64, at, run);
    });
    b.emit(Op::BarSync);
    let binned = b.setp(Cmp::Lt, Type::U64, bin, Operand::Imm(Lrb::BINS.into()));
    let scope = b.if_begin(binned, false);
    let at = b.elem_addr(bases, bin, 8);
    let run = b.ld(Space::Shared, Type::U64, at);
    let slot = b.bin(BinOp::Add, Type::U64, run, rank);
    let at = b.elem_addr(perm, slot, 8);
    b.st(Space::Global, Type::U64, at, tile);
    b.if_end(scope);
    // The next round zeroes the histogram that this one's stores read.
    b.emit(Op::BarSync);
    b.bin_to(BinOp::Add, Type::U64, round, round, stride);
    b.loop_end(rounds);
}

/// `starts[bin]`.
fn start(b: &mut KernelBuilder, starts: Reg, bin: u32) -> Reg {
    let i = b.mov(Type::U64, Operand::Imm(bin.into()));
    let addr = b.elem_addr(starts, i, 8);
    b.ld(Space::Global, Type::U64, addr)
}

/// One process kernel: work items `0..items` of the reordered tiles from position `from`.
struct Process<'a> {
    body: &'a Body,
    opts: &'a Options,
    params: &'a KernelParams,
    layout: &'a Layout,
    perm: Reg,
    from: Reg,
    block: u32,
    /// Tiles of at least this many atoms are the split's ([`huge::split_from`]).
    split_from: u64,
}

impl Process<'_> {
    /// The tile, its atoms and the lane of work item `item`.
    fn item(&self, b: &mut KernelBuilder, item: Reg) -> (Reg, (Reg, Reg), Option<Reg>) {
        let w = self.layout.work_item(b, item);
        let pos = b.bin(BinOp::Add, Type::U64, self.from, w.position);
        let addr = b.elem_addr(self.perm, pos, 8);
        let tile = b.ld(Space::Global, Type::U64, addr);
        let atoms = self.layout.atoms(b, tile);
        (tile, atoms, self.lane(b, w.lane))
    }

    /// The `#[lane]` index: the work item's, or 0 when the body asks for it without `lanes`.
    fn lane(&self, b: &mut KernelBuilder, lane: Option<Reg>) -> Option<Reg> {
        match lane {
            Some(l) => Some(l),
            None if self.body.roles.contains(&IndexRole::Lane) => {
                Some(b.mov(Type::U64, Operand::Imm(0)))
            }
            None => None,
        }
    }

    fn walker(&self, lane: Option<Reg>) -> Walker<'_> {
        Walker {
            body: self.body,
            params: self.params,
            checked: self.opts.checked,
            lane,
        }
    }

    fn store(
        &self,
        b: &mut KernelBuilder,
        tile: Reg,
        lane: Option<Reg>,
        value: Reg,
    ) -> Result<(), GenError> {
        let Some((ty, _)) = self.body.reduce else {
            return Ok(());
        };
        self.layout.store_output(
            b,
            self.body,
            self.params,
            (tile, lane),
            (value, ty),
            self.opts.checked,
        )
    }

    /// One thread per tile of the thread bins (below 32 atoms), atoms in order. The thread
    /// class walks the tile set in its own order, skipping the larger tiles, instead of going
    /// through the reordered list: the assignment is the same, but neighbouring threads read
    /// neighbouring offsets and store neighbouring outputs, where the list (scattered by
    /// atomics) made every access of a short tile a scattered one. On an H100 that made `lrb`
    /// 3–12× slower than `thread_mapped` on road, stencil and regular matrices, whose tiles are
    /// nearly all in these bins (docs/benchmarks.md, 2026-11-22). `items` counts every tile.
    ///
    /// With `lanes`, each thread owns 1, 2 or 4 lanes of its tiles (picked in the kernel by the
    /// lane count: [`per_lane_blocking`]), as `thread_mapped` does ([`own_tiles`]).
    fn per_thread(&self, b: &mut KernelBuilder, items: Reg) -> Result<(), GenError> {
        let skip_from: u64 = 1 << (WARP_BIN - 1);
        if self.layout.lanes.is_some() {
            let params = (self.params, self.layout);
            let body = (self.body, self.params);
            return self
                .layout
                .per_lane_blocking_vec(b, body, &LANE_BLOCKING, |b, r| {
                    let source = TileSource::Layout;
                    own_tiles(
                        b,
                        self.body,
                        self.opts,
                        params,
                        source,
                        (r, None),
                        Some(skip_from),
                    )
                });
        }
        let gs = b.grid_stride_begin(items);
        let w = self.layout.work_item(b, gs.item);
        let tile = self
            .layout
            .tile(b, self.params, w.position, self.opts.checked, gs.next);
        let (begin, end) = self.layout.atoms(b, tile);
        let size = b.bin(BinOp::Sub, Type::U64, end, begin);
        let warp_sized = b.setp(Cmp::Ge, Type::U64, size, Operand::Imm(skip_from as i64));
        b.bra_if(warp_sized, false, gs.next);
        let lane = self.lane(b, w.lane);
        let zero = b.mov(Type::U64, Operand::Imm(0));
        let part = self.walker(lane).stride(b, tile, (begin, end), zero, 1)?;
        if let Some(part) = part {
            self.store(b, tile, lane, part)?;
        }
        b.grid_stride_end(gs);
        Ok(())
    }

    /// One warp per item; lane 0 stores.
    ///
    /// With `lanes`, the bin's tiles (`count` of them) are walked as the group family walks
    /// them: up to a warp of threads side by side per tile, each owning 1, 2 or 4 lanes and
    /// walking the tile's atoms in order ([`own_tiles`]), so B's rows are read coalesced.
    fn per_warp(&self, b: &mut KernelBuilder, items: Reg, count: Reg) -> Result<(), GenError> {
        if self.layout.lanes.is_some() {
            let params = (self.params, self.layout);
            let (list, from) = (self.perm, self.from);
            let body = (self.body, self.params);
            return self
                .layout
                .per_lane_blocking_vec(b, body, &LANE_BLOCKING, |b, r| {
                    let source = TileSource::List { list, from, count };
                    own_tiles(b, self.body, self.opts, params, source, (r, Some(32)), None)
                });
        }
        let (item, warps, lane_w) = grid_warps(b);
        let lane_w64 = b.cvt(Rounding::None, Type::U64, Type::U32, lane_w);
        let first = b.setp(Cmp::Eq, Type::U32, lane_w, Operand::Imm(0));
        let scope = b.loop_begin();
        let done = b.setp(Cmp::Ge, Type::U64, item, items);
        b.break_if(&scope, done, false);
        let (tile, atoms, lane) = self.item(b, item);
        let part = self.walker(lane).stride(b, tile, atoms, lane_w64, 32)?;
        if let (Some(part), Some(red)) = (part, self.body.reduce) {
            butterfly(b, part, red)?;
            let store = b.if_begin(first, false);
            self.store(b, tile, lane, part)?;
            b.if_end(store);
        }
        b.bin_to(BinOp::Add, Type::U64, item, item, warps);
        b.loop_end(scope);
        Ok(())
    }

    /// One block per item; thread 0 folds the warps' partials in warp order and stores.
    fn per_block(&self, b: &mut KernelBuilder, items: Reg) -> Result<(), GenError> {
        let block = self.block;
        let reduce = self.body.reduce;
        if reduce.is_some() {
            b.shared("lb_smem", 8, 8 * (block / 32));
        }
        let tid = b.special(Special::TidX);
        let tid64 = b.cvt(Rounding::None, Type::U64, Type::U32, tid);
        let ctaid = b.special(Special::CtaidX);
        let nctaid = b.special(Special::NctaidX);
        let item = b.cvt(Rounding::None, Type::U64, Type::U32, ctaid);
        let blocks = b.cvt(Rounding::None, Type::U64, Type::U32, nctaid);
        let lane_w = b.bin(BinOp::And, Type::B32, tid, Operand::Imm(31));
        let warp = b.bin(BinOp::Shr, Type::U64, tid64, Operand::Imm(5));
        let lead = b.setp(Cmp::Eq, Type::U32, tid, Operand::Imm(0));
        let first = b.setp(Cmp::Eq, Type::U32, lane_w, Operand::Imm(0));
        let smem = reduce.map(|_| b.mov(Type::U64, Operand::Symbol("lb_smem".into())));
        let scope = b.loop_begin();
        let done = b.setp(Cmp::Ge, Type::U64, item, items);
        b.break_if(&scope, done, false);
        let (tile, atoms, lane) = self.item(b, item);
        // A tile of the huge-tile split is left to it; the item is block-uniform, so is the skip.
        let size = b.bin(BinOp::Sub, Type::U64, atoms.1, atoms.0);
        let split = huge::is_huge(b, size, self.split_from);
        let mine = b.if_begin(split, true);
        let part = self.walker(lane).stride(b, tile, atoms, tid64, block)?;
        if let (Some(part), Some((ty, red)), Some(smem)) = (part, reduce, smem) {
            let pt = ptx_type(ty);
            butterfly(b, part, (ty, red))?;
            let addr = b.elem_addr(smem, warp, 8);
            b.st_if(first, Space::Shared, pt, addr, part);
            b.emit(Op::BarSync);
            let fold = b.if_begin(lead, false);
            let total = reduce_identity(b, ty, red)?;
            for k in 0..block / 32 {
                let wk = b.mov(Type::U64, Operand::Imm(k.into()));
                let addr = b.elem_addr(smem, wk, 8);
                let v = b.ld(Space::Shared, pt, addr);
                reduce_combine(b, ty, red, total, v)?;
            }
            self.store(b, tile, lane, total)?;
            b.if_end(fold);
            // The partials are read before the next item rewrites them.
            b.emit(Op::BarSync);
        }
        b.if_end(mine);
        b.bin_to(BinOp::Add, Type::U64, item, item, blocks);
        b.loop_end(scope);
        Ok(())
    }
}
