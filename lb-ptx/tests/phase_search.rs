//! `two_phase` and `multi_phase` on the simulator against CPU loops: the prefix-sum searches on
//! their own (interpolation against lower-bound binary search), the partition array, every body
//! on adversarial, random and frontier tile sets, lanes, determinism, plans, ptxas and snapshots.

mod codegen_common;

use codegen_common::*;
use lb_ptx::body::*;
use lb_ptx::builder::KernelBuilder;
use lb_ptx::ir::{BinOp, Module, Operand, Rounding, Space, Special, Type};
use lb_ptx::plan::{DeviceLimits, Plan, ProblemSize, Select, TempCount};
use lb_ptx::schedules::partition::{tiles_ending_by, Search};
use lb_ptx::sim::{self, LaunchConfig, Memory};
use lb_ptx::{generate, ptxas, IndexWidth, Options, Schedule};
use proptest::prelude::*;

const SCHEDULES: [Schedule; 2] = [Schedule::TwoPhase, Schedule::MultiPhase];

/// A CSR tile set built from row lengths, with awkward float values.
struct Matrix {
    cols: usize,
    offsets: Vec<u64>,
    indices: Vec<u32>,
    values: Vec<f32>,
}

impl Matrix {
    fn from_lengths(lengths: &[usize]) -> Matrix {
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

    fn rows(&self) -> usize {
        self.offsets.len() - 1
    }

    fn nnz(&self) -> usize {
        self.values.len()
    }

    fn atoms(&self, r: usize) -> std::ops::Range<usize> {
        self.offsets[r] as usize..self.offsets[r + 1] as usize
    }
}

fn upload(mem: &mut Memory, bytes: &[u8]) -> u64 {
    let addr = mem.alloc(bytes.len().max(1) as u64);
    mem.write(addr, bytes).unwrap();
    addr
}

fn bytes_of<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

fn read_words<const N: usize>(mem: &Memory, addr: u64, n: usize) -> Vec<[u8; N]> {
    mem.read(addr, (N * n) as u64)
        .unwrap()
        .chunks(N)
        .map(|c| c.try_into().unwrap())
        .collect()
}

fn csr_args(mem: &mut Memory, m: &Matrix) -> Vec<u64> {
    vec![
        upload(mem, &bytes_of(&m.offsets, u64::to_le_bytes)),
        upload(mem, &bytes_of(&m.indices, u32::to_le_bytes)),
        upload(mem, &bytes_of(&m.values, f32::to_le_bytes)),
        m.rows() as u64,
        m.cols as u64,
        m.nnz() as u64,
    ]
}

/// Runs every kernel of `plan` the way the runtime does: grids from the plan, temporaries sized
/// Runs every kernel of `plan` the way the runtime does: grids from the plan, temporaries sized
/// by `TempCount` and filled with garbage (none of them asks to be zeroed). Returns the
/// temporaries' addresses and the main kernel's grid.
fn run_plan(
    g: &lb_ptx::Generated,
    plan: &Plan,
    mut args: Vec<u64>,
    size: ProblemSize,
    mem: &mut Memory,
) -> (Vec<u64>, u32) {
    let module = sim::parse(&g.ptx).unwrap();
    let limits = DeviceLimits {
        sm_count: 1,
        blocks_per_sm: 1,
    };
    let first = plan.kernels[0]
        .grid
        .blocks(&size, plan.kernels[0].block, &limits);
    let mut temps = Vec::new();
    for t in plan.temps.iter() {
        let count = match t.count {
            TempCount::PerBlock { extra } => u64::from(first) + extra,
            TempCount::Fixed(n) => n,
            TempCount::PerTile { per_tile, extra } => size.tiles * per_tile + extra,
        };
        let fill = if t.zero { 0 } else { 0xCD };
        let addr = upload(mem, &vec![fill; (count * u64::from(t.elem_bytes)) as usize]);
        temps.push(addr);
        args.push(addr);
    }
    for k in plan.kernels.iter() {
        let cfg = LaunchConfig {
            grid: k.grid.blocks(&size, k.block, &limits),
            block: k.block,
            dynamic_shared: k.dynamic_shared,
        };
        sim::launch(&module, &k.entry, cfg, &args, mem)
            .unwrap_or_else(|e| panic!("{}: {e}", k.entry));
    }
    (temps, first)
}

fn opts(schedule: Schedule, block: u32, items: u32, index: IndexWidth) -> Options {
    Options {
        schedules: vec![schedule],
        block,
        items_per_thread: items,
        index,
        ..Options::default()
    }
}

/// `spmv` with another reduction.
fn spmv_reduce(reduce: Reduce) -> Body {
    let mut b = spmv();
    b.name = format!("spmv_{reduce:?}").to_lowercase();
    b.reduce = Some((Ty::F32, reduce));
    b
}

/// No reduce: `fn visit(a: &Csr<f32>, visits: &mut [u32], seen: &mut [u64], ranks: &mut [u64],
/// #[tile] row, #[atom] nz, #[rank] r) { atomic_add(&mut visits[nz], 1); seen[nz] = row as u64;
/// ranks[nz] = r as u64; }`
fn visit() -> Body {
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
    }
}

fn size(m: &Matrix, lanes: usize) -> ProblemSize {
    ProblemSize {
        tiles: m.rows() as u64,
        atoms: m.nnz() as u64,
        lanes: lanes as u64,
    }
}

fn x_of(n: usize) -> Vec<f32> {
    (0..n).map(|i| (i as f32 * 0.71).cos() * 3.3).collect()
}

/// Runs a reducing `spmv`-like body (or `spmm` with `k` lanes) and returns the output bits.
fn run_reduce(
    body: &Body,
    o: &Options,
    plan_index: usize,
    m: &Matrix,
    k: Option<usize>,
) -> Vec<u32> {
    let g = generate(body, o).unwrap();
    let lanes = k.unwrap_or(1);
    let x = x_of(m.cols * lanes);
    let mut mem = Memory::new();
    let mut args = csr_args(&mut mem, m);
    args.extend([
        upload(&mut mem, &bytes_of(&x, f32::to_le_bytes)),
        x.len() as u64,
    ]);
    if let Some(k) = k {
        args.push(k as u64);
    }
    let n = m.rows() * lanes;
    let nan = bytes_of(&vec![f32::from_bits(0x7FC0_1234); n], f32::to_le_bytes);
    let y = upload(&mut mem, &nan);
    args.extend([y, n as u64]);
    run_plan(&g, &g.plans[plan_index], args, size(m, lanes), &mut mem);
    read_words::<4>(&mem, y, n)
        .into_iter()
        .map(u32::from_le_bytes)
        .collect()
}

/// Checks `spmv` sums (or `spmm` with `k` lanes) against an f64 loop.
fn check_sum(got: &[u32], m: &Matrix, k: Option<usize>, what: &str) {
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

fn check_min_max(got: &[u32], m: &Matrix, reduce: Reduce, what: &str) {
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

fn check_visits(o: &Options, plan_index: usize, m: &Matrix, what: &str) {
    let g = generate(&visit(), o).unwrap();
    let mut mem = Memory::new();
    let mut args = csr_args(&mut mem, m);
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

/// Every body on `m` under both schedules, with block size `block` and `items` per thread.
/// How many plans of one index width `s` has (`multi_phase`: one per search).
fn variants(s: Schedule) -> usize {
    generate(&spmv(), &opts(s, 32, 1, IndexWidth::U32))
        .unwrap()
        .plans
        .len()
}

/// Every body on `m` under both schedules and every search variant, with block size `block`
/// and `items` per thread.
fn check_all(m: &Matrix, block: u32, items: u32, what: &str) {
    for s in SCHEDULES {
        let o = opts(s, block, items, IndexWidth::U32);
        for p in 0..variants(s) {
            let what = format!("{what} / {} plan {p} block {block} items {items}", s.name());
            let sum = run_reduce(&spmv(), &o, p, m, None);
            check_sum(&sum, m, None, &what);
            for r in [Reduce::Min, Reduce::Max] {
                let got = run_reduce(&spmv_reduce(r), &o, p, m, None);
                check_min_max(&got, m, r, &what);
            }
            check_visits(&o, p, m, &what);
        }
    }
}

fn giant_rows() -> Vec<(&'static str, Vec<usize>)> {
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

#[test]
fn adversarial_tile_sets() {
    for (what, rows) in giant_rows() {
        let m = Matrix::from_lengths(&rows);
        check_all(&m, 32, 1, what);
    }
}

#[test]
fn default_block_and_other_shares() {
    let rows: Vec<usize> = (0..400)
        .map(|r| if r % 50 == 7 { 600 } else { r % 5 })
        .collect();
    let m = Matrix::from_lengths(&rows);
    check_all(&m, 256, 1, "default block");
    check_all(&m, 64, 3, "3 per thread");
    check_all(&m, 32, 2, "2 per thread");
}

#[test]
fn lanes_including_counts_that_are_not_multiples_of_32() {
    for k in [1, 3, 33] {
        let m = Matrix::from_lengths(&[0, 5, 40, 0, 0, 120, 1, 2, 0]);
        for s in SCHEDULES {
            let o = Options {
                lanes: Some(2),
                ..opts(s, 32, 1, IndexWidth::U32)
            };
            for p in 0..variants(s) {
                let got = run_reduce(&spmm(), &o, p, &m, Some(k));
                check_sum(&got, &m, Some(k), &format!("{} plan {p} k = {k}", s.name()));
            }
        }
    }
}

#[test]
fn deterministic_and_the_64_bit_variant_agrees() {
    let rows: Vec<usize> = (0..200).map(|r| [0, 1, 90, 3, 0, 17][r % 6]).collect();
    let m = Matrix::from_lengths(&rows);
    for s in SCHEDULES {
        let auto = opts(s, 32, 1, IndexWidth::Auto);
        let n = variants(s);
        let g = generate(&spmv(), &auto).unwrap();
        assert_eq!(g.plans.len(), 2 * n);
        let first = run_reduce(&spmv(), &auto, 0, &m, None);
        // Every variant finds the same shares, so all of them agree bit for bit.
        for p in 0..2 * n {
            let again = run_reduce(&spmv(), &auto, p, &m, None);
            assert_eq!(first, again, "{}: plan {p} differs", s.name());
        }
        let forced = run_reduce(&spmv(), &opts(s, 32, 1, IndexWidth::U64), 0, &m, None);
        assert_eq!(first, forced, "{}: IndexWidth::U64 differs", s.name());
        for p in 0..n {
            check_visits(&opts(s, 32, 1, IndexWidth::U64), p, &m, "u64 visits");
        }
    }
}

/// A tile far longer than a block's share: with block 32 and 2 items per thread, the tile of
/// 50 000 atoms spans about 780 blocks, so its carries cross hundreds of block boundaries.
#[test]
fn long_tiles_spanning_many_blocks() {
    let rows = [3, 50_000, 0, 7, 0, 20_000, 1, 0];
    let m = Matrix::from_lengths(&rows);
    check_all(&m, 32, 2, "long tiles");
    for s in SCHEDULES {
        let auto = opts(s, 32, 2, IndexWidth::Auto);
        let first = run_reduce(&spmv(), &auto, 0, &m, None);
        let again = run_reduce(&spmv(), &auto, 0, &m, None);
        assert_eq!(first, again, "{}: two launches differ", s.name());
        let wide = run_reduce(&spmv(), &auto, variants(s), &m, None);
        assert_eq!(first, wide, "{}: u64 variant differs", s.name());
    }
}

/// `body` with a `frontier: &[u32]` parameter appended, taken as the tile set.
fn with_frontier(mut body: Body) -> (Body, usize) {
    body.name = format!("{}_frontier", body.name);
    body.params.push(slice("frontier", Ty::U32, false));
    let p = body.params.len() - 1;
    (body, p)
}

fn frontier_opts(s: Schedule, block: u32, items: u32, index: IndexWidth, p: usize) -> Options {
    Options {
        tiles: Some(p),
        ..opts(s, block, items, index)
    }
}

/// Runs a reducing `spmv`-like body over `frontier`; returns the output bits (one per row, rows
/// outside the frontier keep their NaN filling).
fn run_frontier_reduce(
    body: &Body,
    m: &Matrix,
    frontier: &[u32],
    (s, block, items, index): (Schedule, u32, u32, IndexWidth),
    plan_index: usize,
) -> Vec<u32> {
    let (body, p) = with_frontier(body.clone());
    let o = frontier_opts(s, block, items, index, p);
    let g = generate(&body, &o).unwrap();
    let x = x_of(m.cols);
    let mut mem = Memory::new();
    let mut args = csr_args(&mut mem, m);
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
    let size = ProblemSize {
        tiles: frontier.len() as u64,
        atoms: m.nnz() as u64,
        lanes: 1,
    };
    run_plan(&g, &g.plans[plan_index], args, size, &mut mem);
    read_words::<4>(&mem, y, n)
        .into_iter()
        .map(u32::from_le_bytes)
        .collect()
}

const NAN_FILL: u32 = 0x7FC0_1234;

/// Checks sums (within the tolerance) or min/max (exactly) of the frontier's rows, and that rows
/// outside it were not written.
fn check_frontier(got: &[u32], m: &Matrix, frontier: &[u32], reduce: Reduce, what: &str) {
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
fn check_frontier_visits(m: &Matrix, frontier: &[u32], cfg: (Schedule, u32, u32), what: &str) {
    let (body, p) = with_frontier(visit());
    let o = frontier_opts(cfg.0, cfg.1, cfg.2, IndexWidth::U32, p);
    let g = generate(&body, &o).unwrap();
    let mut mem = Memory::new();
    let mut args = csr_args(&mut mem, m);
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

fn check_frontier_all(m: &Matrix, frontier: &[u32], block: u32, items: u32, what: &str) {
    for s in SCHEDULES {
        let what = format!("{what} / {} block {block} items {items}", s.name());
        for r in [Reduce::Sum, Reduce::Min, Reduce::Max] {
            let body = spmv_reduce(r);
            for p in 0..variants(s) {
                let cfg = (s, block, items, IndexWidth::U32);
                let got = run_frontier_reduce(&body, m, frontier, cfg, p);
                check_frontier(&got, m, frontier, r, &format!("{what} plan {p}"));
            }
        }
        check_frontier_visits(m, frontier, (s, block, items), &what);
    }
}

#[test]
fn frontier_tile_sets() {
    let rows: Vec<usize> = (0..300)
        .map(|r| match r {
            7 => 5_000,
            100 => 900,
            _ => r % 4,
        })
        .collect();
    let m = Matrix::from_lengths(&rows);
    let cases: Vec<(&str, Vec<u32>)> = vec![
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
    for (what, frontier) in &cases {
        check_frontier_all(&m, frontier, 32, 2, what);
    }
    let (_, frontier) = &cases[2];
    check_frontier_all(&m, frontier, 256, 1, "default block");
}

/// A kernel that answers `queries[i]` against the sorted `array` with both searches, at width
/// `w`: `out[2i]` by lower-bound binary search, `out[2i + 1]` by interpolation, over `lo..hi`.
fn search_kernel(w: Type) -> Module {
    let mut b = KernelBuilder::new("search");
    let array = b.load_param("array", Type::U64);
    let lo = b.load_param("lo", Type::U64);
    let hi = b.load_param("hi", Type::U64);
    let queries = b.load_param("queries", Type::U64);
    let count = b.load_param("count", Type::U64);
    let out = b.load_param("out", Type::U64);
    let tid = b.special(Special::TidX);
    let i = b.cvt(Rounding::None, Type::U64, Type::U32, tid);
    let inside = b.setp(lb_ptx::ir::Cmp::Lt, Type::U64, i, count);
    let scope = b.if_begin(inside, false);
    let narrow = |b: &mut KernelBuilder, r| {
        if w == Type::U64 {
            r
        } else {
            b.cvt(Rounding::None, Type::U32, Type::U64, r)
        }
    };
    let addr = b.elem_addr(queries, i, 8);
    let a = b.ld(Space::Global, Type::U64, addr);
    let a = narrow(&mut b, a);
    let (lo, hi) = (narrow(&mut b, lo), narrow(&mut b, hi));
    for (k, search) in [Search::LowerBound, Search::Interpolation]
        .into_iter()
        .enumerate()
    {
        let mut end = |b: &mut KernelBuilder, j| {
            let j = if w == Type::U64 {
                j
            } else {
                b.cvt(Rounding::None, Type::U64, Type::U32, j)
            };
            let addr = b.elem_addr(array, j, 8);
            let v = b.ld(Space::Global, Type::U64, addr);
            narrow(b, v)
        };
        let r = tiles_ending_by(&mut b, w, search, a, (lo, hi), &mut end);
        let r = if w == Type::U64 {
            r
        } else {
            b.cvt(Rounding::None, Type::U64, Type::U32, r)
        };
        let slot = b.bin(BinOp::Mul, Type::U64, i, Operand::Imm(2));
        let slot = b.bin(BinOp::Add, Type::U64, slot, Operand::Imm(k as i64));
        let addr = b.elem_addr(out, slot, 8);
        b.st(Space::Global, Type::U64, addr, r);
    }
    b.if_end(scope);
    Module {
        version: (7, 8),
        target: "sm_75".into(),
        kernels: vec![b.finish()],
    }
}

/// Both searches over `array[lo..hi]` for every query, against `partition_point`.
fn check_searches(array: &[u64], (lo, hi): (usize, usize), queries: &[u64], what: &str) {
    for w in [Type::U32, Type::U64] {
        let module = search_kernel(w);
        let mut mem = Memory::new();
        let args = vec![
            upload(&mut mem, &bytes_of(array, u64::to_le_bytes)),
            lo as u64,
            hi as u64,
            upload(&mut mem, &bytes_of(queries, u64::to_le_bytes)),
            queries.len() as u64,
            upload(&mut mem, &vec![0xAB; 16 * queries.len().max(1)]),
        ];
        let cfg = LaunchConfig {
            grid: 1,
            block: queries.len().max(1) as u32,
            dynamic_shared: 0,
        };
        sim::launch(&module, "search", cfg, &args, &mut mem).unwrap();
        let got: Vec<u64> = read_words::<8>(&mem, args[5], 2 * queries.len())
            .into_iter()
            .map(u64::from_le_bytes)
            .collect();
        for (q, &a) in queries.iter().enumerate() {
            let want = lo + array[lo..hi].partition_point(|&e| e <= a);
            assert_eq!(got[2 * q], want as u64, "{what} {w:?}: binary, query {a}");
            assert_eq!(
                got[2 * q + 1],
                want as u64,
                "{what} {w:?}: interpolation, query {a}"
            );
        }
    }
}

#[test]
fn searches_agree_on_edge_cases() {
    let queries: Vec<u64> = (0..40).chain([99, 1000, 1 << 31]).collect();
    check_searches(&[5], (0, 1), &queries, "a single element");
    check_searches(&[7; 20], (0, 20), &queries, "all equal");
    check_searches(&[0; 9], (0, 9), &queries, "all zero");
    check_searches(
        &[3, 3, 3, 8, 8, 9, 30, 30, 30, 30, 31],
        (0, 11),
        &queries,
        "repeats",
    );
    check_searches(&[1, 2, 4, 8, 16, 32], (2, 5), &queries, "a sub-range");
    check_searches(&[1, 2, 4], (1, 1), &queries, "an empty range");
    check_searches(&[0, 0, 0, 0, 1000], (0, 5), &queries, "one huge step");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn searches_agree_on_random_sorted_arrays(
        steps in prop::collection::vec(prop_oneof![3 => 0u64..3, 1 => 0u64..200], 1..200),
        queries in prop::collection::vec(0u64..3000, 1..64),
    ) {
        let array: Vec<u64> = steps
            .iter()
            .scan(0, |sum, &s| {
                *sum += s;
                Some(*sum)
            })
            .collect();
        check_searches(&array, (0, array.len()), &queries, "random");
    }
}

/// The partition array: block `c` starts at the number of tiles ending at or before atom
/// `c × chunk` (0 for block 0), the slot after the last block holds `tiles`, and the visits
/// (checked elsewhere) cover every atom once.
#[test]
fn partition_array_holds_each_blocks_first_tile() {
    let rows: Vec<usize> = (0..500)
        .map(|r| match r % 37 {
            3 => 300,
            5..=9 => 0,
            k => k % 4,
        })
        .chain([0; 200])
        .collect();
    let m = Matrix::from_lengths(&rows);
    for s in SCHEDULES {
        for (block, items) in [(32u32, 1u32), (32, 3), (64, 7)] {
            let o = opts(s, block, items, IndexWidth::U32);
            for p in 0..variants(s) {
                let g = generate(&visit(), &o).unwrap();
                let plan = &g.plans[p];
                assert!(plan.kernels[0].entry.ends_with("_partition"));
                let mut mem = Memory::new();
                let mut args = csr_args(&mut mem, &m);
                let n = m.nnz();
                for bytes in [4, 8, 8] {
                    args.extend([upload(&mut mem, &vec![0; bytes * n]), n as u64]);
                }
                let (temps, blocks) = run_plan(&g, plan, args, size(&m, 1), &mut mem);
                let starts: Vec<u64> =
                    read_words::<8>(&mem, *temps.last().unwrap(), blocks as usize + 1)
                        .into_iter()
                        .map(u64::from_le_bytes)
                        .collect();
                // `items_per_thread` 1 means the work-oriented default, 7.
                let chunk = u64::from(block * if items <= 1 { 7 } else { items });
                for (c, &start) in starts.iter().enumerate() {
                    let a = (c as u64 * chunk).min(n as u64);
                    let want = if c == 0 {
                        0
                    } else {
                        m.offsets[1..].partition_point(|&e| e <= a) as u64
                    };
                    assert_eq!(
                        start,
                        want,
                        "{} plan {p} block {block} items {items}: slot {c}",
                        s.name()
                    );
                }
                assert_eq!(starts[blocks as usize], m.rows() as u64);
            }
        }
    }
}

#[test]
fn plans_put_the_partition_before_the_main_kernel() {
    let g = generate(&spmv(), &opts(Schedule::TwoPhase, 128, 1, IndexWidth::Auto)).unwrap();
    let entries: Vec<Vec<&str>> = g
        .plans
        .iter()
        .map(|p| p.kernels.iter().map(|k| k.entry.as_ref()).collect())
        .collect();
    assert_eq!(
        entries,
        [
            [
                "spmv_two_phase_u32_partition",
                "spmv_two_phase_u32",
                "spmv_two_phase_u32_fixup",
                "spmv_two_phase_u32_fixup_spans"
            ],
            [
                "spmv_two_phase_u64_partition",
                "spmv_two_phase_u64",
                "spmv_two_phase_u64_fixup",
                "spmv_two_phase_u64_fixup_spans"
            ]
        ]
    );
    assert_eq!(g.plans[0].kernels[0].grid, g.plans[0].kernels[1].grid);
    let last = g.plans[0].temps.last().unwrap();
    assert_eq!(
        (last.name.as_ref(), last.count),
        ("block_starts", TempCount::PerBlock { extra: 1 })
    );

    let g = generate(
        &spmv(),
        &opts(Schedule::MultiPhase, 128, 1, IndexWidth::Auto),
    )
    .unwrap();
    let mains: Vec<(&str, Option<u64>, Option<Select>)> = g
        .plans
        .iter()
        .map(|p| (p.kernels[1].entry.as_ref(), p.index_limit, p.select))
        .collect();
    let interpolation = Select::Spread {
        max_avg: 9,
        max_std_dev: 8,
        low: true,
    };
    let binary = Select::Spread {
        max_avg: 9,
        max_std_dev: 8,
        low: false,
    };
    let limit = Some(u64::from(u32::MAX));
    assert_eq!(
        mains,
        [
            (
                "spmv_multi_phase_interpolation_u32",
                limit,
                Some(interpolation)
            ),
            ("spmv_multi_phase_binary_u32", limit, Some(binary)),
            (
                "spmv_multi_phase_interpolation_u64",
                None,
                Some(interpolation)
            ),
            ("spmv_multi_phase_binary_u64", None, Some(binary)),
        ]
    );
    // The rule of B&B §3.1.2: interpolation up to 9 atoms per tile on average and a standard
    // deviation up to 8; binary search everywhere else.
    let at = |atoms| ProblemSize {
        tiles: 10,
        atoms,
        lanes: 1,
    };
    for (atoms, std_dev, interpolates) in [
        (90, 0.0, true),
        (90, 8.0, true),
        (90, 8.5, false),
        (91, 0.0, false),
        (0, 0.0, true),
    ] {
        assert_eq!(interpolation.matches(&at(atoms), std_dev), interpolates);
        assert_eq!(binary.matches(&at(atoms), std_dev), !interpolates);
    }
}

#[test]
fn modules_assemble_without_spills() {
    let checked = |o: Options| Options { checked: true, ..o };
    for s in SCHEDULES {
        let auto = opts(s, 256, 1, IndexWidth::Auto);
        let lanes = Options {
            lanes: Some(2),
            ..auto.clone()
        };
        let (spmv_frontier, p) = with_frontier(spmv());
        let (visit_frontier, q) = with_frontier(visit());
        let frontier = |p| Options {
            tiles: Some(p),
            ..auto.clone()
        };
        let cases = [
            ("spmv", spmv(), auto.clone()),
            ("spmv checked", spmv(), checked(auto.clone())),
            ("spmv min", spmv_reduce(Reduce::Min), auto.clone()),
            ("spmm", spmm(), lanes.clone()),
            ("spmm checked", spmm(), checked(lanes)),
            ("visit", visit(), auto.clone()),
            ("mix", mix(), auto.clone()),
            ("spmv frontier", spmv_frontier.clone(), frontier(p)),
            ("spmv frontier checked", spmv_frontier, checked(frontier(p))),
            ("visit frontier", visit_frontier, frontier(q)),
        ];
        for (what, body, o) in cases {
            let g = generate(&body, &o).unwrap();
            assert_eq!(sim::parse(&g.ptx).unwrap().to_string(), g.ptx);
            ptxas::assert_assembles(&format!("{what} / {}", s.name()), &g.ptx);
        }
    }
}

#[test]
fn snapshot_two_phase_spmv_u32() {
    let g = generate(&spmv(), &opts(Schedule::TwoPhase, 256, 1, IndexWidth::U32)).unwrap();
    insta::assert_snapshot!(g.ptx);
}

#[test]
fn snapshot_multi_phase_visit_u64() {
    let g = generate(
        &visit(),
        &opts(Schedule::MultiPhase, 256, 1, IndexWidth::U64),
    )
    .unwrap();
    insta::assert_snapshot!(g.ptx);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn random_tile_sets(
        rows in prop::collection::vec(
            prop_oneof![4 => 0usize..4, 2 => 0usize..40, 1 => Just(0usize), 1 => 100usize..400],
            0..120,
        ),
        block in prop_oneof![Just(32u32), Just(64u32)],
        items in prop_oneof![Just(1u32), Just(2u32), Just(5u32)],
    ) {
        let m = Matrix::from_lengths(&rows);
        check_all(&m, block, items, "random");
    }
}
