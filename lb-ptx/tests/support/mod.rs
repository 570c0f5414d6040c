//! Plumbing shared by the schedule test harnesses: device memory helpers, the CSR tile sets
//! (`Matrix` with awkward floats, `Tiles` with integer-valued ones), running a generated plan on
//! the simulator the way the runtime does, the bodies several harnesses use, and CPU reference
//! checks.

// Each test crate that includes this module uses a different subset of it.
#![allow(dead_code)]

use crate::codegen_common::*;
use lb_ptx::body::*;
use lb_ptx::ir::Module;
use lb_ptx::plan::{
    DeviceLimits, KernelPlan, OffsetWidth, Plan, ProblemSize, Temp, TempCount, TempRole,
};
use lb_ptx::sim::{self, LaunchConfig, Memory};
use lb_ptx::{generate, IndexWidth, Options, Schedule};

pub fn upload(mem: &mut Memory, bytes: &[u8]) -> u64 {
    let addr = mem.alloc(bytes.len().max(1) as u64).unwrap();
    mem.write(addr, bytes).unwrap();
    addr
}

pub fn bytes_of<T: Copy, const W: usize>(v: &[T], f: impl Fn(T) -> [u8; W]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

pub fn read_words<const W: usize>(mem: &Memory, addr: u64, n: usize) -> Vec<[u8; W]> {
    mem.read(addr, (W * n) as u64)
        .unwrap()
        .chunks(W)
        .map(|c| c.try_into().unwrap())
        .collect()
}

pub fn read_u64(mem: &Memory, addr: u64, n: usize) -> Vec<u64> {
    read_words::<8>(mem, addr, n)
        .into_iter()
        .map(u64::from_le_bytes)
        .collect()
}

pub fn read_u32(mem: &Memory, addr: u64, n: usize) -> Vec<u32> {
    read_words::<4>(mem, addr, n)
        .into_iter()
        .map(u32::from_le_bytes)
        .collect()
}

/// A CSR tile set built from row lengths, with awkward float values.
pub struct Matrix {
    pub cols: usize,
    pub offsets: Vec<u64>,
    pub indices: Vec<u32>,
    pub values: Vec<f32>,
}

impl Matrix {
    /// Atoms of the longest row, what the runtime passes as `ProblemSize::max_tile_atoms`.
    pub fn longest(&self) -> u64 {
        self.offsets
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or(0)
    }

    pub fn from_lengths(lengths: &[usize]) -> Matrix {
        let cols = 37;
        let mut offsets = vec![0u64];
        let (mut indices, mut values) = (Vec::new(), Vec::new());
        for (r, &n) in lengths.iter().enumerate() {
            for j in 0..n {
                indices.push(((r * 31 + j * 17) % cols) as u32);
                values.push(((r as f32) * 0.37 - (j as f32) * 1.93).sin() * 1e2 + 1e-3);
            }
            offsets.push(indices.len() as u64);
        }
        Matrix {
            cols,
            offsets,
            indices,
            values,
        }
    }

    /// Row `r` alone, with the same columns.
    pub fn row_of(&self, r: usize) -> Matrix {
        let atoms = self.atoms(r);
        Matrix {
            cols: self.cols,
            offsets: vec![0, atoms.len() as u64],
            indices: self.indices[atoms.clone()].to_vec(),
            values: self.values[atoms].to_vec(),
        }
    }

    pub fn rows(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    pub fn atoms(&self, r: usize) -> std::ops::Range<usize> {
        self.offsets[r] as usize..self.offsets[r + 1] as usize
    }
}

/// Tile offsets as a plan of `width` reads them.
pub fn offsets_bytes(offsets: &[u64], width: OffsetWidth) -> Vec<u8> {
    match width {
        OffsetWidth::U32 => offsets
            .iter()
            .flat_map(|&o| u32::try_from(o).unwrap().to_le_bytes())
            .collect(),
        OffsetWidth::U64 => bytes_of(offsets, u64::to_le_bytes),
    }
}

pub fn csr_args(mem: &mut Memory, m: &Matrix) -> Vec<u64> {
    csr_args_at(mem, m, OffsetWidth::U64)
}

/// [`csr_args`] with the offsets stored at `width`.
pub fn csr_args_at(mem: &mut Memory, m: &Matrix, width: OffsetWidth) -> Vec<u64> {
    vec![
        upload(mem, &offsets_bytes(&m.offsets, width)),
        upload(mem, &bytes_of(&m.indices, u32::to_le_bytes)),
        upload(mem, &bytes_of(&m.values, f32::to_le_bytes)),
        m.rows() as u64,
        m.cols as u64,
        m.nnz() as u64,
    ]
}

/// How a harness runs a plan: the device limits its grids come from, the byte that fills the
/// temporaries the plan does not ask to be zeroed, whether error flags are zeroed regardless,
/// and how many of the plan's kernels it launches.
pub struct Runner {
    pub limits: DeviceLimits,
    pub garbage: u8,
    pub zero_error_flags: bool,
    pub upto: usize,
}

impl Runner {
    /// At most `grid` resident blocks (one per SM), garbage `0xCD` in the temporaries, zeroed
    /// error flags, the first `upto` kernels.
    pub fn resident(grid: u32, upto: usize) -> Runner {
        Runner {
            limits: DeviceLimits {
                sm_count: grid,
                blocks_per_sm: 1,
            },
            garbage: 0xCD,
            zero_error_flags: true,
            upto,
        }
    }

    /// Runs the first `upto` kernels of `plan` like the runtime does: grids from the plan's rule
    /// under `limits`, temporaries sized by `TempCount`, allocated and appended to `args`.
    /// Returns the temporaries' addresses and the first kernel's grid.
    pub fn run(
        &self,
        module: &Module,
        plan: &Plan,
        mut args: Vec<u64>,
        size: ProblemSize,
        mem: &mut Memory,
    ) -> (Vec<u64>, u32) {
        // Per-block temporaries and `min_grid` count the grid before a strided grid's cap.
        let first =
            plan.kernels[0]
                .grid
                .uncapped()
                .blocks(&size, plan.kernels[0].block, &self.limits);
        let mut temps = Vec::new();
        for t in plan.temps.iter() {
            let count = match t.count {
                TempCount::PerBlock { extra } => u64::from(first) + extra,
                TempCount::Fixed(n) => n,
                TempCount::PerTile { per_tile, extra } => size.tiles * per_tile + extra,
                TempCount::PerAtoms { atoms, extra } => size.atoms.div_ceil(atoms) + extra,
            };
            // Counters start zero by contract: the workspace is made zeroed and every launch
            // leaves them zero.
            let fill = if t.zero
                || t.role == TempRole::Counters
                || (self.zero_error_flags && t.role == TempRole::ErrorFlag)
            {
                0
            } else {
                self.garbage
            };
            temps.push(upload(
                mem,
                &vec![fill; (count * u64::from(t.elem_bytes)) as usize],
            ));
        }
        args.extend(&temps);
        // No output mirrors (`KernelParams::mirrors`): table and count 0.
        args.extend([0, 0]);
        for k in plan.kernels.iter().take(self.upto) {
            if !k.needed(&size, first) {
                continue;
            }
            let grid = k.grid.blocks(&size, k.block, &self.limits);
            launch_kernel(module, k, grid, &args, mem);
        }
        if self.upto >= plan.kernels.len() {
            for (t, &addr) in plan.temps.iter().zip(&temps) {
                if t.role == TempRole::Counters {
                    let words = read_u64(mem, addr, t.elem_bytes as usize * count_of(t) / 8);
                    assert!(
                        words.iter().all(|&w| w == 0),
                        "`{}` left its counters `{}` at {words:?}, not zero",
                        plan.schedule,
                        t.name
                    );
                }
            }
        }
        (temps, first)
    }
}

/// Elements of a [`TempRole::Counters`] temporary (always a fixed count).
fn count_of(t: &Temp) -> usize {
    match t.count {
        TempCount::Fixed(n) => n as usize,
        _ => panic!("counters `{}` have no fixed size", t.name),
    }
}

/// Launches kernel `k` of a plan over `grid` blocks.
pub fn launch_kernel(module: &Module, k: &KernelPlan, grid: u32, args: &[u64], mem: &mut Memory) {
    let cfg = LaunchConfig {
        grid,
        block: k.block,
        dynamic_shared: k.dynamic_shared,
    };
    sim::launch(module, &k.entry, cfg, args, mem).unwrap_or_else(|e| panic!("{}: {e}", k.entry));
}

/// Runs every kernel of `plan` the way the runtime does: grids from the plan for a single
/// resident block, temporaries sized by `TempCount` and filled with garbage (none of them asks
/// to be zeroed). Returns the temporaries' addresses and the main kernel's grid.
pub fn run_plan(
    g: &lb_ptx::Generated,
    plan: &Plan,
    args: Vec<u64>,
    size: ProblemSize,
    mem: &mut Memory,
) -> (Vec<u64>, u32) {
    let module = sim::parse(&g.ptx).unwrap();
    let runner = Runner {
        limits: DeviceLimits {
            sm_count: 1,
            blocks_per_sm: 1,
        },
        garbage: 0xCD,
        zero_error_flags: false,
        upto: usize::MAX,
    };
    runner.run(&module, plan, args, size, mem)
}

pub fn opts(schedule: Schedule, block: u32, items: u32, index: IndexWidth) -> Options {
    Options {
        schedules: vec![schedule],
        block,
        items_per_thread: items,
        index,
        ..Options::default()
    }
}

/// `spmv` with another reduction.
pub fn spmv_reduce(reduce: Reduce) -> Body {
    let mut b = spmv();
    b.name = format!("spmv_{reduce:?}").to_lowercase();
    b.reduce = Some((Ty::F32, reduce));
    b
}

/// No reduce: `fn visit(a: &Csr<f32>, visits: &mut [u32], seen: &mut [u64], ranks: &mut [u64],
/// #[tile] row, #[atom] nz, #[rank] r) { atomic_add(&mut visits[nz], 1); seen[nz] = row as u64;
/// ranks[nz] = r as u64; }`
pub fn visit_seen() -> Body {
    let nz = || index(IndexRole::Atom);
    Body {
        name: "visit".into(),
        params: vec![
            csr("a", Ty::F32),
            slice("visits", Ty::U32, true),
            slice("seen", Ty::U64, true),
            slice("ranks", Ty::U64, true),
        ],
        roles: vec![IndexRole::Tile, IndexRole::Atom, IndexRole::Rank],
        locals: vec![],
        block: Block {
            stmts: vec![
                Stmt::Expr(atomic(
                    AtomicOp::Add,
                    Ty::U32,
                    ArrayRef::Param(1),
                    nz(),
                    vec![int(Ty::U32, 1)],
                )),
                Stmt::Store {
                    array: ArrayRef::Param(2),
                    index: nz(),
                    value: index(IndexRole::Tile),
                },
                Stmt::Store {
                    array: ArrayRef::Param(3),
                    index: nz(),
                    value: index(IndexRole::Rank),
                },
            ],
            value: None,
        },
        reduce: None,
        guards: Guards::Every,
        out_storage: None,
        epilogue: None,
    }
}

pub fn size(m: &Matrix, lanes: usize) -> ProblemSize {
    ProblemSize {
        tiles: m.rows() as u64,
        atoms: m.nnz() as u64,
        lanes: lanes as u64,
        max_tile_atoms: u64::MAX,
        offsets: OffsetWidth::U64,
    }
}

pub fn x_of(n: usize) -> Vec<f32> {
    (0..n).map(|i| (i as f32 * 0.71).cos() * 3.3).collect()
}

/// Runs a reducing `spmv`-like body (or `spmm` with `k` lanes) and returns the output bits.
pub fn run_reduce(
    body: &Body,
    o: &Options,
    plan_index: usize,
    m: &Matrix,
    k: Option<usize>,
) -> Vec<u32> {
    run_reduce_at(body, o, plan_index, m, (k, 0))
}

/// [`run_reduce`] with the dense input and the output `offset` bytes past the start of their
/// allocations (which are 256-byte aligned): a multiple of 4 that is not one of 16 leaves them
/// aligned to their elements but not to a vector of four.
pub fn run_reduce_at(
    body: &Body,
    o: &Options,
    plan_index: usize,
    m: &Matrix,
    (k, offset): (Option<usize>, usize),
) -> Vec<u32> {
    let g = generate(body, o).unwrap();
    run_reduce_in(&g, &g.plans[plan_index], m, (k, offset))
}

/// [`run_reduce_at`] for one plan of `g`, as given (its kernels perhaps in another order).
pub fn run_reduce_in(
    g: &lb_ptx::Generated,
    plan: &Plan,
    m: &Matrix,
    (k, offset): (Option<usize>, usize),
) -> Vec<u32> {
    run_reduce_keeping(g, plan, m, (k, offset)).0
}

/// [`run_reduce_in`], keeping the simulator's memory and the temporaries' addresses (in plan
/// order) for a test that reads them afterwards.
pub fn run_reduce_keeping(
    g: &lb_ptx::Generated,
    plan: &Plan,
    m: &Matrix,
    (k, offset): (Option<usize>, usize),
) -> (Vec<u32>, Vec<u64>, Memory) {
    let width = plan.offsets;
    let lanes = k.unwrap_or(1);
    let x = x_of(m.cols * lanes);
    let mut mem = Memory::new();
    let mut args = csr_args_at(&mut mem, m, width);
    let mut padded = vec![0u8; offset];
    padded.extend(bytes_of(&x, f32::to_le_bytes));
    args.extend([upload(&mut mem, &padded) + offset as u64, x.len() as u64]);
    if let Some(k) = k {
        args.push(k as u64);
    }
    let n = m.rows() * lanes;
    let mut nan = vec![0u8; offset];
    nan.extend(bytes_of(
        &vec![f32::from_bits(0x7FC0_1234); n],
        f32::to_le_bytes,
    ));
    let y = upload(&mut mem, &nan) + offset as u64;
    args.extend([y, n as u64]);
    let (temps, _) = run_plan(g, plan, args, size(m, lanes), &mut mem);
    (read_u32(&mem, y, n), temps, mem)
}

/// Checks `spmv` sums (or `spmm` with `k` lanes) against an f64 loop.
pub fn check_sum(got: &[u32], m: &Matrix, k: Option<usize>, what: &str) {
    let lanes = k.unwrap_or(1);
    let x = x_of(m.cols * lanes);
    for r in 0..m.rows() {
        for l in 0..lanes {
            let (mut want, mut scale) = (0f64, 0f64);
            for nz in m.atoms(r) {
                let xi = match k {
                    Some(k) => m.indices[nz] as usize * k + l,
                    None => m.indices[nz] as usize,
                };
                let t = f64::from(m.values[nz] * x[xi]);
                want += t;
                scale += t.abs();
            }
            let got = f32::from_bits(got[r * lanes + l]);
            assert!(
                (f64::from(got) - want).abs() <= 1e-5 * scale + 1e-30,
                "{what}: row {r} lane {l}: got {got}, want {want}"
            );
        }
    }
}

pub fn check_min_max(got: &[u32], m: &Matrix, reduce: Reduce, what: &str) {
    let x = x_of(m.cols);
    assert_eq!(got.len(), m.rows());
    for (r, &got) in got.iter().enumerate() {
        let terms = m
            .atoms(r)
            .map(|nz| m.values[nz] * x[m.indices[nz] as usize]);
        let want = match reduce {
            Reduce::Min => terms.fold(f32::INFINITY, f32::min),
            _ => terms.fold(f32::NEG_INFINITY, f32::max),
        };
        assert_eq!(got, want.to_bits(), "{what}: row {r}");
    }
}

pub fn check_visits(o: &Options, plan_index: usize, m: &Matrix, what: &str) {
    let g = generate(&visit_seen(), o).unwrap();
    let mut mem = Memory::new();
    let mut args = csr_args_at(&mut mem, m, g.plans[plan_index].offsets);
    let n = m.nnz();
    let visits = upload(&mut mem, &vec![0u8; 4 * n]);
    let seen = upload(&mut mem, &vec![0xEE; 8 * n]);
    let ranks = upload(&mut mem, &vec![0xEE; 8 * n]);
    args.extend([visits, n as u64, seen, n as u64, ranks, n as u64]);
    run_plan(&g, &g.plans[plan_index], args, size(m, 1), &mut mem);
    let visits: Vec<u32> = read_words::<4>(&mem, visits, n)
        .into_iter()
        .map(u32::from_le_bytes)
        .collect();
    let seen: Vec<u64> = read_words::<8>(&mem, seen, n)
        .into_iter()
        .map(u64::from_le_bytes)
        .collect();
    let ranks: Vec<u64> = read_words::<8>(&mem, ranks, n)
        .into_iter()
        .map(u64::from_le_bytes)
        .collect();
    for r in 0..m.rows() {
        for nz in m.atoms(r) {
            assert_eq!(visits[nz], 1, "{what}: atom {nz} visits");
            assert_eq!(seen[nz], r as u64, "{what}: atom {nz} tile");
            assert_eq!(
                ranks[nz],
                nz as u64 - m.offsets[r],
                "{what}: atom {nz} rank"
            );
        }
    }
}

pub fn giant_rows() -> Vec<(&'static str, Vec<usize>)> {
    vec![
        ("one tile holds every atom", vec![700]),
        ("all tiles empty", vec![0; 300]),
        ("zero tiles", vec![]),
        (
            "alternating empty and giant",
            vec![0, 900, 0, 0, 1200, 0, 3, 0, 0],
        ),
        (
            "longer than a thread's and a block's share",
            vec![2, 9, 15, 300, 1, 0, 500, 4],
        ),
        ("a single atom", vec![1]),
        ("a single atom among empty tiles", vec![0, 0, 0, 1, 0, 0]),
        (
            "more tiles than threads",
            (0..3000).map(|r| (r * 7919) % 4).collect(),
        ),
    ]
}

/// `body` with a `frontier: &[u32]` parameter appended, taken as the tile set.
pub fn with_frontier(mut body: Body) -> (Body, usize) {
    body.name = format!("{}_frontier", body.name);
    body.params.push(slice("frontier", Ty::U32, false));
    let p = body.params.len() - 1;
    (body, p)
}

pub fn frontier_opts(s: Schedule, block: u32, items: u32, index: IndexWidth, p: usize) -> Options {
    Options {
        tiles: Some(p),
        ..opts(s, block, items, index)
    }
}

/// Runs a reducing `spmv`-like body over `frontier` under `base` (with the frontier added);
/// returns the output bits (one per row, rows outside the frontier keep their NaN filling).
pub fn run_frontier_reduce(
    body: &Body,
    m: &Matrix,
    frontier: &[u32],
    base: &Options,
    plan_index: usize,
) -> Vec<u32> {
    let (body, p) = with_frontier(body.clone());
    let o = Options {
        tiles: Some(p),
        ..base.clone()
    };
    let g = generate(&body, &o).unwrap();
    let x = x_of(m.cols);
    let mut mem = Memory::new();
    let mut args = csr_args_at(&mut mem, m, g.plans[plan_index].offsets);
    args.extend([
        upload(&mut mem, &bytes_of(&x, f32::to_le_bytes)),
        x.len() as u64,
        upload(&mut mem, &bytes_of(frontier, u32::to_le_bytes)),
        frontier.len() as u64,
    ]);
    let n = m.rows();
    let nan = bytes_of(&vec![f32::from_bits(NAN_FILL); n], f32::to_le_bytes);
    let y = upload(&mut mem, &nan);
    args.extend([y, n as u64]);
    run_plan(
        &g,
        &g.plans[plan_index],
        args,
        frontier_size(m, frontier),
        &mut mem,
    );
    read_words::<4>(&mem, y, n)
        .into_iter()
        .map(u32::from_le_bytes)
        .collect()
}

/// The `ProblemSize` the runtime passes for a launch over `frontier` of `m` (one lane).
pub fn frontier_size(m: &Matrix, frontier: &[u32]) -> ProblemSize {
    ProblemSize {
        tiles: frontier.len() as u64,
        atoms: m.nnz() as u64,
        lanes: 1,
        max_tile_atoms: m.longest(),
        offsets: OffsetWidth::U64,
    }
}

pub const NAN_FILL: u32 = 0x7FC0_1234;

/// Checks sums (within the tolerance) or min/max (exactly) of the frontier's rows, and that rows
/// outside it were not written.
pub fn check_frontier(got: &[u32], m: &Matrix, frontier: &[u32], reduce: Reduce, what: &str) {
    let x = x_of(m.cols);
    for r in 0..m.rows() {
        let got = got[r];
        if !frontier.contains(&(r as u32)) {
            assert_eq!(got, NAN_FILL, "{what}: row {r} is not in the frontier");
            continue;
        }
        let terms: Vec<f32> = m
            .atoms(r)
            .map(|nz| m.values[nz] * x[m.indices[nz] as usize])
            .collect();
        match reduce {
            Reduce::Sum => {
                let want: f64 = terms.iter().map(|&t| f64::from(t)).sum();
                let scale: f64 = terms.iter().map(|&t| f64::from(t).abs()).sum();
                let got = f64::from(f32::from_bits(got));
                assert!(
                    (got - want).abs() <= 1e-5 * scale + 1e-30,
                    "{what}: row {r}: got {got}, want {want}"
                );
            }
            Reduce::Min => {
                let want = terms.into_iter().fold(f32::INFINITY, f32::min);
                assert_eq!(got, want.to_bits(), "{what}: row {r}");
            }
            Reduce::Max => {
                let want = terms.into_iter().fold(f32::NEG_INFINITY, f32::max);
                assert_eq!(got, want.to_bits(), "{what}: row {r}");
            }
        }
    }
}

/// `visit` over `frontier`: every atom of every entry is visited once per entry, with its tile
/// and rank.
pub fn check_frontier_visits(m: &Matrix, frontier: &[u32], base: &Options, what: &str) {
    let (body, p) = with_frontier(visit_seen());
    let o = Options {
        tiles: Some(p),
        ..base.clone()
    };
    let g = generate(&body, &o).unwrap();
    let mut mem = Memory::new();
    let mut args = csr_args_at(&mut mem, m, g.plans[0].offsets);
    let n = m.nnz();
    let visits = upload(&mut mem, &vec![0u8; 4 * n]);
    let seen = upload(&mut mem, &vec![0xEE; 8 * n]);
    let ranks = upload(&mut mem, &vec![0xEE; 8 * n]);
    args.extend([visits, n as u64, seen, n as u64, ranks, n as u64]);
    args.extend([
        upload(&mut mem, &bytes_of(frontier, u32::to_le_bytes)),
        frontier.len() as u64,
    ]);
    let size = ProblemSize {
        tiles: frontier.len() as u64,
        atoms: n as u64,
        lanes: 1,
        max_tile_atoms: m.longest(),
        offsets: OffsetWidth::U64,
    };
    run_plan(&g, &g.plans[0], args, size, &mut mem);
    let visits: Vec<u32> = read_words::<4>(&mem, visits, n)
        .into_iter()
        .map(u32::from_le_bytes)
        .collect();
    let seen: Vec<u64> = read_words::<8>(&mem, seen, n)
        .into_iter()
        .map(u64::from_le_bytes)
        .collect();
    let ranks: Vec<u64> = read_words::<8>(&mem, ranks, n)
        .into_iter()
        .map(u64::from_le_bytes)
        .collect();
    for r in 0..m.rows() {
        let times = frontier.iter().filter(|&&t| t as usize == r).count() as u32;
        for nz in m.atoms(r) {
            assert_eq!(visits[nz], times, "{what}: atom {nz} visits");
            if times > 0 {
                assert_eq!(seen[nz], r as u64, "{what}: atom {nz} tile");
                assert_eq!(
                    ranks[nz],
                    nz as u64 - m.offsets[r],
                    "{what}: atom {nz} rank"
                );
            }
        }
    }
}

/// A CSR tile set; `exact` values (the default, [`Tiles::new`]) are small integers, so sums are
/// exact in any order; otherwise fractions whose float sums depend on the order.
#[derive(Clone, Debug)]
pub struct Tiles {
    pub offsets: Vec<u64>,
    pub cols: Vec<u32>,
    pub values: Vec<f32>,
    pub ncols: usize,
}

impl Tiles {
    pub fn new(sizes: &[usize]) -> Tiles {
        Tiles::with_exact(sizes, true)
    }

    pub fn with_exact(sizes: &[usize], exact: bool) -> Tiles {
        let ncols = 50;
        let mut offsets = vec![0u64];
        let (mut cols, mut values) = (Vec::new(), Vec::new());
        for (r, &n) in sizes.iter().enumerate() {
            for j in 0..n {
                cols.push(((r * 13 + j * 7) % ncols) as u32);
                let k = (r * 5 + j * 3) % 17;
                values.push(if exact {
                    k as f32 - 8.0
                } else {
                    (k as f32 - 8.0) / 7.0 + 1e-3 * j as f32
                });
            }
            offsets.push(cols.len() as u64);
        }
        Tiles {
            offsets,
            cols,
            values,
            ncols,
        }
    }

    pub fn rows(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn atoms(&self, r: usize) -> std::ops::Range<usize> {
        self.offsets[r] as usize..self.offsets[r + 1] as usize
    }

    pub fn upload(&self, mem: &mut Memory) -> Vec<u64> {
        self.upload_at(mem, OffsetWidth::U64)
    }

    /// [`Tiles::upload`] with the offsets stored at `width`.
    pub fn upload_at(&self, mem: &mut Memory, width: OffsetWidth) -> Vec<u64> {
        vec![
            upload(mem, &offsets_bytes(&self.offsets, width)),
            upload(mem, &bytes_of(&self.cols, u32::to_le_bytes)),
            upload(mem, &bytes_of(&self.values, f32::to_le_bytes)),
            self.rows() as u64,
            self.ncols as u64,
            self.values.len() as u64,
        ]
    }

    pub fn size(&self, frontier: Option<&[u32]>, lanes: u64) -> ProblemSize {
        ProblemSize {
            tiles: frontier.map_or(self.rows(), <[u32]>::len) as u64,
            atoms: self.values.len() as u64,
            lanes,
            // The runtime passes the longest tile; with a frontier it bounds the grid.
            max_tile_atoms: frontier.map_or(u64::MAX, |_| {
                self.offsets
                    .windows(2)
                    .map(|w| w[1] - w[0])
                    .max()
                    .unwrap_or(0)
            }),
            offsets: OffsetWidth::U64,
        }
    }
}

/// `fn vmin(a: &Csr<f32>, #[atom] nz) -> f32 { a.values[nz] }` under `reduce`.
pub fn values_body(name: &str, reduce: Reduce) -> Body {
    let v = load(
        Ty::F32,
        ArrayRef::Field(0, CsrField::Values),
        index(IndexRole::Atom),
    );
    Body {
        name: name.into(),
        params: vec![csr("a", Ty::F32)],
        roles: vec![IndexRole::Atom],
        locals: vec![],
        block: Block {
            stmts: vec![],
            value: Some(Box::new(v)),
        },
        reduce: Some((Ty::F32, reduce)),
        guards: Guards::Every,
        out_storage: None,
        epilogue: None,
    }
}

/// `fn isum(a, #[atom] nz, #[rank] r) -> i64 { nz as i64 * 7 - r as i64 }`: 64-bit values.
pub fn isum() -> Body {
    let v = bin(
        BinaryOp::Sub,
        Ty::I64,
        bin(
            BinaryOp::Mul,
            Ty::I64,
            cast(Ty::I64, index(IndexRole::Atom)),
            int(Ty::I64, 7),
        ),
        cast(Ty::I64, index(IndexRole::Rank)),
    );
    Body {
        name: "isum".into(),
        params: vec![csr("a", Ty::F32)],
        roles: vec![IndexRole::Atom, IndexRole::Rank],
        locals: vec![],
        block: Block {
            stmts: vec![],
            value: Some(Box::new(v)),
        },
        reduce: Some((Ty::I64, Reduce::Sum)),
        guards: Guards::Every,
        out_storage: None,
        epilogue: None,
    }
}

/// No reduce: `atomic_add(&mut counts[nz], 1); tile_of[nz] = row; rank_of[nz] = r;` with an
/// optional frontier parameter right after the tile set.
pub fn visit(frontier: bool) -> Body {
    let f = usize::from(frontier);
    let mut params = vec![csr("a", Ty::F32)];
    if frontier {
        params.push(slice("frontier", Ty::U32, false));
    }
    params.extend([
        slice("counts", Ty::U32, true),
        slice("tile_of", Ty::U64, true),
        slice("rank_of", Ty::U64, true),
    ]);
    let count = atomic(
        AtomicOp::Add,
        Ty::U32,
        ArrayRef::Param(1 + f),
        index(IndexRole::Atom),
        vec![int(Ty::U32, 1)],
    );
    Body {
        name: if frontier { "visit_f" } else { "visit" }.into(),
        params,
        roles: vec![IndexRole::Tile, IndexRole::Atom, IndexRole::Rank],
        locals: vec![],
        block: Block {
            stmts: vec![
                Stmt::Expr(count),
                Stmt::Store {
                    array: ArrayRef::Param(2 + f),
                    index: index(IndexRole::Atom),
                    value: index(IndexRole::Tile),
                },
                Stmt::Store {
                    array: ArrayRef::Param(3 + f),
                    index: index(IndexRole::Atom),
                    value: index(IndexRole::Rank),
                },
            ],
            value: None,
        },
        reduce: None,
        guards: Guards::Every,
        out_storage: None,
        epilogue: None,
    }
}

/// `spmv` over a frontier: `fn spmv_f(a, frontier: &[u32], x: &[f32], #[tile] row, #[atom] nz)`.
pub fn spmv_frontier() -> Body {
    let mut b = spmv();
    b.name = "spmv_f".into();
    b.params.insert(1, slice("frontier", Ty::U32, false));
    let ExprKind::Binary { rhs, .. } = &mut b.block.value.as_mut().unwrap().kind else {
        unreachable!()
    };
    let ExprKind::Load { array, .. } = &mut rhs.kind else {
        unreachable!()
    };
    *array = ArrayRef::Param(2);
    b
}

pub fn nan_f32(n: usize) -> Vec<u8> {
    bytes_of(&vec![f32::NAN; n], f32::to_le_bytes)
}

pub fn xvec(n: usize) -> Vec<f32> {
    (0..n).map(|i| (i % 9) as f32 - 4.0).collect()
}

/// Uploads `t`, the frontier if any, and the outputs of `visit(frontier.is_some())`: zeroed
/// counts, tiles and ranks filled with `0xFF`, one each per atom. Returns the arguments and the
/// outputs' addresses.
pub fn visit_args(mem: &mut Memory, t: &Tiles, frontier: Option<&[u32]>) -> (Vec<u64>, [u64; 3]) {
    let nnz = t.values.len();
    let mut args = t.upload(mem);
    if let Some(f) = frontier {
        args.extend([upload(mem, &bytes_of(f, u32::to_le_bytes)), f.len() as u64]);
    }
    let counts = upload(mem, &vec![0; 4 * nnz]);
    let tile_of = upload(mem, &vec![0xFF; 8 * nnz]);
    let rank_of = upload(mem, &vec![0xFF; 8 * nnz]);
    args.extend([counts, nnz as u64, tile_of, nnz as u64, rank_of, nnz as u64]);
    (args, [counts, tile_of, rank_of])
}

/// Checks the outputs of `visit` against the sequential loop: every atom of the active tiles
/// (the frontier's, or every tile) counted once per occurrence of its tile, with its tile and
/// rank. `what` names the run in the messages.
pub fn check_visit_outputs(
    mem: &Memory,
    t: &Tiles,
    frontier: Option<&[u32]>,
    [counts, tile_of, rank_of]: [u64; 3],
    what: &dyn std::fmt::Debug,
) {
    let nnz = t.values.len();
    let mut want = vec![0u32; nnz];
    let all: Vec<u32> = (0..t.rows() as u32).collect();
    for &r in frontier.unwrap_or(&all) {
        for nz in t.atoms(r as usize) {
            want[nz] += 1;
        }
    }
    let got: Vec<u32> = read_words::<4>(mem, counts, nnz)
        .into_iter()
        .map(u32::from_le_bytes)
        .collect();
    assert_eq!(got, want, "visit counts {what:?}");
    let tiles = read_u64(mem, tile_of, nnz);
    let ranks = read_u64(mem, rank_of, nnz);
    for r in 0..t.rows() {
        for nz in t.atoms(r) {
            if want[nz] > 0 {
                assert_eq!(tiles[nz], r as u64, "{what:?}: tile of {nz}");
                assert_eq!(
                    ranks[nz],
                    nz as u64 - t.offsets[r],
                    "{what:?}: rank of {nz}"
                );
            }
        }
    }
}

/// The frontier test cases over one matrix with two giant tiles (7 and 100): empty, a single
/// empty tile, out of order, repeats, and longer than the matrix has atoms.
pub fn frontier_cases() -> (Matrix, Vec<(&'static str, Vec<u32>)>) {
    let rows: Vec<usize> = (0..300)
        .map(|r| match r {
            7 => 5_000,
            100 => 900,
            _ => r % 4,
        })
        .collect();
    let m = Matrix::from_lengths(&rows);
    let cases: Vec<(&'static str, Vec<u32>)> = vec![
        ("empty frontier", vec![]),
        ("one empty tile", vec![3 * 4]),
        (
            "out of order with giant tiles",
            vec![250, 7, 3, 100, 0, 299, 12],
        ),
        ("repeated tiles", vec![5, 7, 5, 5, 100, 7, 1, 1]),
        // More entries than a block scans at once (block 32), and more atoms than the whole
        // matrix: the grid is sized from `nnz`, so each thread's share has to grow.
        (
            "long frontier, repeats over nnz",
            (0..900)
                .map(|k| [7, 100, (k * 13) % 300][k as usize % 3])
                .collect(),
        ),
    ];
    (m, cases)
}

/// A small xorshift generator for the huge-tile cases, seeded per run (the seed is in every
/// failure message, so a failing case can be replayed with `LB_HUGE_SEED`).
pub struct Rng(pub u64);

impl Rng {
    pub fn fresh() -> Rng {
        use std::hash::{BuildHasher, Hasher};
        let seed = std::env::var("LB_HUGE_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                let mut h = std::collections::hash_map::RandomState::new().build_hasher();
                h.write_u64(0x5eed);
                h.finish()
            });
        Rng(seed | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `lo..hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo) as u64) as usize
    }
}

/// Tile sets around the huge-tile split for blocks of `block` threads (`t` = the split's
/// threshold): one giant tile among many one-atom tiles, several huge tiles of awkward sizes
/// among small and medium ones, a huge first and last tile, empty tiles around a giant one, and
/// tiles just below and at the threshold. Sizes and positions are drawn from `rng`.
pub fn huge_tile_sets(rng: &mut Rng, block: u32) -> Vec<(&'static str, Vec<usize>)> {
    let t = lb_ptx::primitives::huge::threshold(block, false) as usize;
    let giant = rng.range(2 * t, 4 * t);
    let mut one_atom = vec![1; rng.range(200, 600)];
    let at = rng.range(0, one_atom.len());
    one_atom[at] = giant;
    let mut several: Vec<usize> = (0..rng.range(100, 300)).map(|_| rng.range(0, 5)).collect();
    for size in [t, t + 1, rng.range(t, 3 * t), rng.range(block as usize, t)] {
        let at = rng.range(0, several.len());
        several[at] = size;
    }
    let mut first = vec![rng.range(t, 2 * t)];
    first.extend((0..rng.range(50, 150)).map(|_| rng.range(0, 3)));
    let mut last: Vec<usize> = (0..rng.range(50, 150)).map(|_| rng.range(0, 3)).collect();
    last.push(rng.range(t, 2 * t));
    vec![
        ("one giant tile among one-atom tiles", one_atom),
        ("several huge tiles", several),
        ("a huge first tile", first),
        ("a huge last tile", last),
        ("empty tiles around a giant one", vec![0, 0, 0, giant, 0, 0]),
        (
            "just below and at the threshold",
            vec![t - 1, 3, t, 0, t - 1],
        ),
    ]
}

/// Every huge-tile check of schedule `s` at block `block`: sums (plain, `checked`, and lanes
/// k = 1, 3, 33), min and max, a body without `reduce` that must visit every atom once, frontiers
/// with and without the giant tile, and two launches that agree bitwise.
pub fn check_huge_tiles(s: Schedule, block: u32) {
    let mut rng = Rng::fresh();
    let seed = rng.0;
    let o = opts(s, block, 1, IndexWidth::U64);
    let checked = Options {
        checked: true,
        ..o.clone()
    };
    let lanes = Options {
        lanes: Some(2),
        ..o.clone()
    };
    for (what, sizes) in huge_tile_sets(&mut rng, block) {
        let what = format!("{} (block {block}), {what}, seed {seed}", s.name());
        let m = Matrix::from_lengths(&sizes);
        let got = run_reduce(&spmv(), &o, 0, &m, None);
        check_sum(&got, &m, None, &what);
        assert_eq!(got, run_reduce(&spmv(), &o, 0, &m, None), "{what}: twice");
        let got = run_reduce(&spmv(), &checked, 0, &m, None);
        check_sum(&got, &m, None, &format!("{what}, checked"));
        for reduce in [Reduce::Min, Reduce::Max] {
            let got = run_reduce(&spmv_reduce(reduce), &o, 0, &m, None);
            check_min_max(&got, &m, reduce, &format!("{what}, {reduce:?}"));
        }
        check_visits(&o, 0, &m, &format!("{what}, visits"));
        let giant = (0..m.rows()).max_by_key(|&r| m.atoms(r).len()).unwrap() as u32;
        let others: Vec<u32> = (0..m.rows() as u32).rev().filter(|&r| r != giant).collect();
        let mut with = others.clone();
        with.insert(with.len() / 2, giant);
        with.push(giant);
        for (which, f) in [("with", &with), ("without", &others)] {
            let what = format!("{what}, frontier {which} the giant tile");
            let base = opts(s, block, 1, IndexWidth::U64);
            let got = run_frontier_reduce(&spmv(), &m, f, &base, 0);
            check_frontier(&got, &m, f, Reduce::Sum, &what);
            check_frontier_visits(&m, f, &base, &what);
        }
    }
    // Lanes: a giant tile (past the SpMV threshold and at least three lane chunks), and tiles
    // around the lane threshold and one lane chunk (walked whole, no partial) and just past it;
    // around the mid tier's threshold and piece (one piece, stored whole; two pieces, the second
    // of one atom) and around its ceiling (eight pieces; the huge tier's first tile); and a run of mid tiles of random sizes, so that the pieces' search of the
    // mid list has many entries. k = 129 takes two lane passes of 32 groups; 3 and 33 leave
    // threads without a lane group.
    let lt = lb_ptx::primitives::huge::LANE_THRESHOLD as usize;
    let chunk = lb_ptx::primitives::huge::LANE_CHUNK as usize;
    let mt = lb_ptx::primitives::huge::MID_THRESHOLD as usize;
    let piece = lb_ptx::primitives::huge::PIECE as usize;
    let ceiling = lb_ptx::primitives::huge::MID_CEILING as usize;
    let giant = huge_tile_sets(&mut rng, block)[2].1[0].max(rng.range(2 * chunk + 1, 3 * chunk));
    let mut sizes = vec![0, giant, 1, 2, 0, lt - 1, lt, chunk, chunk + 1, 1, 0];
    sizes.extend([
        mt - 1,
        mt,
        mt + 1,
        piece,
        piece + 1,
        2 * piece,
        2 * piece + 1,
        ceiling - 1,
        ceiling,
        0,
    ]);
    sizes.extend((0..rng.range(40, 80)).map(|_| rng.range(0, ceiling + 8)));
    let m = Matrix::from_lengths(&sizes);
    for k in [1, 3, 16, 32, 33, 64, 129] {
        let what = format!("{} (block {block}), lanes {k}, seed {seed}", s.name());
        let got = run_reduce(&spmm(), &lanes, 0, &m, Some(k));
        check_sum(&got, &m, Some(k), &what);
        assert_eq!(
            got,
            run_reduce(&spmm(), &lanes, 0, &m, Some(k)),
            "{what}: twice"
        );
    }
}

/// The simulated critical path of `plan`: the sum over its kernels (they run one after the
/// other) of the busiest thread's instruction count, on a device with `limits`.
pub fn critical_path(g: &lb_ptx::Generated, plan: &Plan, m: &Matrix, limits: DeviceLimits) -> u64 {
    let module = sim::parse(&g.ptx).unwrap();
    let mut mem = Memory::new();
    let mut args = csr_args_at(&mut mem, m, plan.offsets);
    let x = x_of(m.cols);
    args.extend([
        upload(&mut mem, &bytes_of(&x, f32::to_le_bytes)),
        x.len() as u64,
    ]);
    let y = upload(&mut mem, &vec![0; 4 * m.rows()]);
    args.extend([y, m.rows() as u64]);
    let size = ProblemSize {
        offsets: plan.offsets,
        ..size(m, 1)
    };
    let runner = Runner {
        limits,
        garbage: 0xCD,
        zero_error_flags: true,
        upto: 0,
    };
    let (temps, _) = runner.run(&module, plan, args.clone(), size, &mut mem);
    args.extend(temps);
    args.extend([0, 0]);
    let mut path = 0;
    for k in plan.kernels.iter() {
        let grid = k.grid.blocks(&size, k.block, &limits);
        let cfg = LaunchConfig {
            grid,
            block: k.block,
            dynamic_shared: k.dynamic_shared,
        };
        let stats = sim::launch(&module, &k.entry, cfg, &args, &mut mem).unwrap();
        path += stats
            .per_thread_instructions
            .iter()
            .max()
            .copied()
            .unwrap_or(0);
    }
    let got: Vec<u32> = read_words::<4>(&mem, y, m.rows())
        .into_iter()
        .map(u32::from_le_bytes)
        .collect();
    check_sum(
        &got,
        m,
        None,
        &format!("critical path of {}", plan.schedule),
    );
    path
}

/// One row of `giant` atoms among `rows` one-atom rows (the giant-row matrix, scaled to
/// the simulator).
pub fn giant_row(rows: usize, giant: usize) -> Matrix {
    let mut sizes = vec![1; rows];
    sizes[rows / 3] = giant;
    Matrix::from_lengths(&sizes)
}

/// Checks that `s`'s critical path on the giant-row matrix is within `factor` of merge path's,
/// and prints both.
pub fn check_no_cliff(s: Schedule, factor: u64) {
    let m = giant_row(6000, 60_000);
    let limits = DeviceLimits {
        sm_count: 132,
        blocks_per_sm: 8,
    };
    let path = |s: Schedule| {
        let g = generate(&spmv(), &opts(s, 128, 1, IndexWidth::U64)).unwrap();
        critical_path(&g, &g.plans[0], &m, limits)
    };
    let (mine, merge) = (path(s), path(Schedule::MergePath));
    println!(
        "giant row: {} busiest-thread path {mine}, merge_path {merge}",
        s.name()
    );
    assert!(
        mine <= factor * merge,
        "{}: critical path {mine} vs merge_path {merge}",
        s.name()
    );
}
