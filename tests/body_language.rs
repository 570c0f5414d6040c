//! The wider body language end to end: math functions, `while` / `loop` / `break` / `continue`,
//! nested helper functions, `match` and tuple `let`s, in kernels launched on `Device::default()`
//! (the simulator without a GPU, the GPU on a GPU machine) through several schedules, on fresh random matrices (empty rows, one long row), against
//! an independent plain-Rust f64 reference and against the macro's `cpu()`.
//!
//! Every kernel is generated for `thread_mapped, merge_path, warp_mapped, lrb`: one thread per
//! tile, work-oriented, a warp per tile, and binned by tile length.
//!
//! The approximated `f32` functions are held to the error bounds docs/kernel-language.md gives
//! for the GPU (the simulator computes the exact function, so it is well inside them; on a GPU
//! this checks the documented bounds against the hardware).

mod common;

use common::{random_csr, Shape};
use lb::prelude::*;

/// A seed that differs from run to run (printed by every failing assertion), unless
/// `LB_TEST_SEED` fixes it to reproduce a failure.
fn fresh_seed() -> u64 {
    if let Some(s) = std::env::var("LB_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return s;
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64)
}

/// Random matrices of the shapes that stress schedules: random rows (some empty), one long row
/// among empty ones, and long rows alternating with empty ones.
fn matrices(seed: u64) -> Vec<(Shape, Csr<f32>)> {
    [Shape::Random, Shape::OneGiantRow, Shape::Alternating]
        .into_iter()
        .enumerate()
        .map(|(i, s)| (s, random_csr(s, 61, 150, seed.wrapping_add(i as u64))))
        .collect()
}

// ---- math functions ----

/// Slots per atom in `math`'s float output.
const F: usize = 20;
/// Slots per atom in `math`'s integer output.
const I: usize = 8;

#[load_balanced(schedule = "thread_mapped, merge_path, warp_mapped, lrb")]
fn math(a: &Csr<f32>, out: &mut [f32], wide: &mut [f64], ints: &mut [u32], #[atom] nz: usize) {
    let x = a.values[nz];
    let f = nz * 20;
    out[f] = (x * 40.0).exp();
    out[f + 1] = (x * 60.0).exp2();
    let p = x.abs() * 100.0 + 0.001;
    out[f + 2] = p.ln();
    out[f + 3] = p.log2();
    out[f + 4] = p.powf(x * 2.0);
    out[f + 5] = x.powi(7);
    out[f + 6] = (x * 3.0).tanh();
    out[f + 7] = (x * 1.5).sin();
    out[f + 8] = (x * 1.5).cos();
    let y = x * 5.0;
    out[f + 9] = y.floor();
    out[f + 10] = y.ceil();
    out[f + 11] = y.round();
    out[f + 12] = y.trunc();
    out[f + 13] = y.clamp(-1.0, 0.5);
    // Ties: -3.5, -2.5, ..., 2.5 round away from zero.
    let tie = (nz % 7) as f32 - 3.5;
    out[f + 14] = tie.round();
    out[f + 15] = (x * 0.2).round();
    out[f + 16] = x.powi(-3);
    out[f + 17] = p.powf(0.0);
    out[f + 18] = x.min(0.25) + x.max(-0.25);
    out[f + 19] = (x * 0.0).exp();
    let d = x as f64 * 7.0;
    let w = nz * 6;
    wide[w] = d.floor();
    wide[w + 1] = d.ceil();
    wide[w + 2] = (d * 0.5).round();
    wide[w + 3] = d.trunc();
    wide[w + 4] = d.powi(5);
    wide[w + 5] = d.clamp(-3.0, 3.0);
    let k = a.col_indices[nz];
    let s = k as i32 - 75;
    let i = nz * 8;
    ints[i] = (k % 1000).pow(3);
    ints[i + 1] = k.leading_zeros();
    ints[i + 2] = k.trailing_zeros();
    ints[i + 3] = k.count_ones();
    ints[i + 4] = s.count_ones();
    ints[i + 5] = (k as u64 * 4294967296).trailing_zeros();
    ints[i + 6] = (s as i64).leading_zeros();
    ints[i + 7] = s.clamp(-10, 10) as u32;
}

/// ulp-relative error bound `r` times `|want|`, plus an absolute floor `abs`.
fn close(got: f32, want: f64, rel: f64, abs: f64) -> bool {
    if want.is_nan() {
        return got.is_nan();
    }
    if want.is_infinite() || got.is_infinite() {
        return f64::from(got) == want;
    }
    (f64::from(got) - want).abs() <= rel * want.abs() + abs
}

/// The independent reference of slot `k` of `math` for value `x` at atom `nz`, and the error
/// the GPU may make there (docs/kernel-language.md's table).
fn math_reference(k: usize, x: f32, nz: usize) -> (f64, f64, f64) {
    let ulp = f64::from(f32::EPSILON);
    let p = f64::from(x.abs() * 100.0 + 0.001);
    let y = f64::from(x * 5.0);
    let exact = 0.5 * ulp;
    let (want, rel, abs) = match k {
        0 => {
            let t = f64::from(x * 40.0);
            (t.exp(), (3.0 + (1.173 * t).abs().floor()) * ulp, 0.0)
        }
        1 => (f64::from(x * 60.0).exp2(), 2.5 * ulp, 0.0),
        2 => (p.ln(), 3.5 * ulp, 2f64.powf(-21.41)),
        3 => (p.log2(), 2.5 * ulp, 2f64.powf(-22.0)),
        4 => {
            let e = f64::from(x * 2.0);
            let r = p.powf(e);
            // ex2's error, and lg2's absolute error amplified by the exponent.
            let amplified = e.abs() * (2f64.powf(-22.0) + 2.0 * ulp * p.log2().abs());
            (r, 2.5 * ulp + amplified * std::f64::consts::LN_2 + ulp, 0.0)
        }
        5 => (f64::from(x).powi(7), 8.0 * ulp, 0.0),
        6 => (f64::from(x * 3.0).tanh(), 2f64.powf(-11.0), 0.0),
        7 => (f64::from(x * 1.5).sin(), 0.0, 2f64.powf(-20.5)),
        8 => (f64::from(x * 1.5).cos(), 0.0, 2f64.powf(-20.5)),
        9 => (y.floor(), 0.0, 0.0),
        10 => (y.ceil(), 0.0, 0.0),
        11 => (y.round(), 0.0, 0.0),
        12 => (y.trunc(), 0.0, 0.0),
        13 => (y.clamp(-1.0, 0.5), 0.0, 0.0),
        14 => (((nz % 7) as f64 - 3.5).round(), 0.0, 0.0),
        15 => (f64::from(x * 0.2).round(), 0.0, 0.0),
        16 => (f64::from(x).powi(-3), 8.0 * ulp, 0.0),
        17 => (1.0, 0.0, 0.0),
        18 => (f64::from(x).min(0.25) + f64::from(x).max(-0.25), 0.0, 0.0),
        _ => (1.0, 0.0, 0.0),
    };
    // The f32 result's own rounding.
    (want, rel + exact, abs)
}

fn int_reference(k: usize, col: u32) -> u32 {
    let s = col as i32 - 75;
    match k {
        0 => (col % 1000) * (col % 1000) * (col % 1000),
        1 => col.leading_zeros(),
        2 => col.trailing_zeros(),
        3 => col.count_ones(),
        4 => s.count_ones(),
        5 => (u64::from(col) << 32).trailing_zeros(),
        6 => i64::from(s).leading_zeros(),
        _ => s.clamp(-10, 10) as u32,
    }
}

#[test]
fn math_functions_match_the_reference_within_the_documented_bounds() {
    let seed = fresh_seed();
    let dev = Device::default();
    for (shape, a) in matrices(seed) {
        let n = a.values.len();
        let check = |what: &str, out: &[f32], wide: &[f64], ints: &[u32]| {
            for nz in 0..n {
                let x = a.values[nz];
                for k in 0..F {
                    let (want, rel, abs) = math_reference(k, x, nz);
                    let got = out[nz * F + k];
                    assert!(
                        close(got, want, rel, abs),
                        "{what} {shape:?} seed {seed}: slot {k} of atom {nz} (x = {x}): got {got}, want {want}"
                    );
                }
                let d = f64::from(x) * 7.0;
                let wants = [
                    d.floor(),
                    d.ceil(),
                    (d * 0.5).round(),
                    d.trunc(),
                    d.powi(5),
                    d.clamp(-3.0, 3.0),
                ];
                for (k, want) in wants.into_iter().enumerate() {
                    let got = wide[nz * 6 + k];
                    assert!(
                        (got - want).abs() <= 4.0 * f64::EPSILON * want.abs(),
                        "{what} {shape:?} seed {seed}: f64 slot {k} of atom {nz}: got {got}, want {want}"
                    );
                }
                for k in 0..I {
                    assert_eq!(
                        ints[nz * I + k],
                        int_reference(k, a.col_indices[nz]),
                        "{what} {shape:?} seed {seed}: integer slot {k} of atom {nz}"
                    );
                }
            }
        };
        let (mut out, mut wide, mut ints) =
            (vec![0f32; n * F], vec![0f64; n * 6], vec![0u32; n * I]);
        math::cpu(&a, &mut out, &mut wide, &mut ints);
        check("cpu", &out, &wide, &ints);
        let da = DeviceCsr::upload(&dev, &a).unwrap();
        for &s in math::SCHEDULES {
            let mut dout = dev.zeros::<f32>(n * F).unwrap();
            let mut dwide = dev.zeros::<f64>(n * 6).unwrap();
            let mut dints = dev.zeros::<u32>(n * I).unwrap();
            math::launch_with(&dev, s, &da, &mut dout, &mut dwide, &mut dints).unwrap();
            check(
                s.name(),
                &dout.download().unwrap(),
                &dwide.download().unwrap(),
                &dints.download().unwrap(),
            );
        }
    }
}

// ---- tuples ----

/// Tuple `let`s: every value is evaluated before any name is bound (a swap swaps), `_` drops a
/// value, a nested tuple binds its names, and a name may be `mut`.
#[load_balanced(
    schedule = "thread_mapped, merge_path, warp_mapped, lrb",
    reduce = "sum",
    output = "y"
)]
fn tuples(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
    let (mut p, q) = (a.values[nz], x[a.col_indices[nz] as usize]);
    let (p2, (_, r)) = (q + 1.0, (p, 0.5f32));
    p -= r;
    let (p, q) = (q, p);
    p * q + p2 * r
}

fn tuples_reference(v: f64, xv: f64) -> f64 {
    let p = v - 0.5;
    let p2 = xv + 1.0;
    // After the swap: (p, q) = (xv, v - 0.5).
    xv * p + p2 * 0.5
}

#[test]
fn tuple_lets_match_the_reference() {
    let seed = fresh_seed();
    let dev = Device::default();
    for (shape, a) in matrices(seed) {
        let x: Vec<f32> = (0..a.num_cols)
            .map(|c| (c % 13) as f32 * 0.25 - 1.5)
            .collect();
        let want: Vec<f64> = (0..a.num_rows)
            .map(|r| {
                (a.row_offsets[r]..a.row_offsets[r + 1])
                    .map(|nz| {
                        tuples_reference(
                            f64::from(a.values[nz]),
                            f64::from(x[a.col_indices[nz] as usize]),
                        )
                    })
                    .sum()
            })
            .collect();
        let mut cpu = vec![0f32; a.num_rows];
        tuples::cpu(&a, &x, &mut cpu);
        let da = DeviceCsr::upload(&dev, &a).unwrap();
        let dx = dev.upload(&x).unwrap();
        for &s in tuples::SCHEDULES {
            let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
            tuples::launch_with(&dev, s, &da, &dx, &mut dy).unwrap();
            let got = dy.download().unwrap();
            for r in 0..a.num_rows {
                let len = (a.row_offsets[r + 1] - a.row_offsets[r]) as f64;
                let tol = 1e-5 * (1.0 + len) * (1.0 + want[r].abs());
                assert!(
                    (f64::from(got[r]) - want[r]).abs() <= tol
                        && (f64::from(cpu[r]) - want[r]).abs() <= tol,
                    "{} {shape:?} seed {seed} row {r}: {} / cpu {} vs {}",
                    s.name(),
                    got[r],
                    cpu[r],
                    want[r]
                );
            }
        }
    }
}

/// Every kernel of this file assembles with ptxas for sm_75, sm_80 and sm_90 (when `LB_PTXAS`
/// or the CUDA toolkit provides it).
#[test]
fn every_module_assembles() {
    for (name, ptx) in [
        ("math", math::PTX),
        ("loops", loops::PTX),
        ("helpers", helpers::PTX),
        ("matching", matching::PTX),
        ("tuples", tuples::PTX),
    ] {
        lb_ptx::ptxas::assert_assembles(name, ptx);
    }
}

// ---- loops ----

/// Per atom: a Collatz-style `while` loop with `continue`, a `loop` left by `break`, a labeled
/// `break` out of nested `for` loops, and an early `return` from inside a loop.
#[load_balanced(
    schedule = "thread_mapped, merge_path, warp_mapped, lrb",
    reduce = "sum",
    output = "y"
)]
fn loops(a: &Csr<f32>, #[atom] nz: usize) -> u64 {
    let mut n = a.col_indices[nz] as u64 + 1;
    let mut steps = 0u64;
    let mut odd = 0u64;
    while n != 1 {
        steps += 1;
        if n & 1 == 0 {
            n /= 2;
            continue;
        }
        odd += 1;
        n = 3 * n + 1;
    }
    let mut k = 0u64;
    loop {
        k += 3;
        if k > steps {
            break;
        }
    }
    let mut found = 0u64;
    'outer: for i in 0..10u64 {
        for j in 0..10u64 {
            if i * j > odd {
                found = i * 16 + j;
                break 'outer;
            }
            if j > i {
                continue 'outer;
            }
        }
    }
    for i in 0..1000u64 {
        if i * i >= steps {
            return steps * 1000000 + odd * 10000 + k * 100 + found + i;
        }
    }
    0
}

/// The same computation, written independently: recursion and iterators instead of loops.
fn loops_reference(col: u32) -> u64 {
    fn collatz(n: u64, steps: u64, odd: u64) -> (u64, u64) {
        match n {
            1 => (steps, odd),
            n if n % 2 == 0 => collatz(n / 2, steps + 1, odd),
            n => collatz(3 * n + 1, steps + 1, odd + 1),
        }
    }
    let (steps, odd) = collatz(u64::from(col) + 1, 0, 0);
    let k = (steps / 3 + 1) * 3;
    // The first (i, j) in the order the loops visit them: j runs to i + 1 (tested, then the
    // outer loop goes on).
    let found = (0..10u64)
        .flat_map(|i| (0..=(i + 1).min(9)).map(move |j| (i, j)))
        .find(|&(i, j)| i * j > odd)
        .map_or(0, |(i, j)| i * 16 + j);
    let i = (0..1000u64).find(|i| i * i >= steps).expect("steps < 10^6");
    steps * 1000000 + odd * 10000 + k * 100 + found + i
}

#[test]
fn loops_with_break_and_continue_match_the_reference() {
    let seed = fresh_seed();
    let dev = Device::default();
    for (shape, a) in matrices(seed) {
        let expected: Vec<u64> = (0..a.num_rows)
            .map(|r| {
                (a.row_offsets[r]..a.row_offsets[r + 1])
                    .map(|nz| loops_reference(a.col_indices[nz]))
                    .sum()
            })
            .collect();
        let mut cpu = vec![0u64; a.num_rows];
        loops::cpu(&a, &mut cpu);
        assert_eq!(cpu, expected, "cpu {shape:?} seed {seed}");
        let da = DeviceCsr::upload(&dev, &a).unwrap();
        for &s in loops::SCHEDULES {
            let mut dy = dev.zeros::<u64>(a.num_rows).unwrap();
            loops::launch_with(&dev, s, &da, &mut dy).unwrap();
            assert_eq!(
                dy.download().unwrap(),
                expected,
                "{} {shape:?} seed {seed}",
                s.name()
            );
        }
    }
}

// ---- helper functions ----

/// Helpers declared inside the body: nested calls, a helper declared after its caller, early
/// `return`s from inside a loop, a helper with a loop of its own.
#[load_balanced(
    schedule = "thread_mapped, merge_path, warp_mapped, lrb",
    reduce = "sum",
    output = "y"
)]
fn helpers(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
    fn sq(v: f32) -> f32 {
        v * v
    }
    fn squash(v: f32) -> f32 {
        if v == 0.0 {
            return 0.0;
        }
        let mut m = v.abs();
        while m > 1.0 {
            m = half(m);
        }
        if v < 0.0 {
            -m
        } else {
            m
        }
    }
    fn half(v: f32) -> f32 {
        v * 0.5
    }
    fn lowest_set_bit(k: u32) -> u32 {
        let mut i = 0u32;
        loop {
            if i == 32 {
                return 32;
            }
            if (k >> i) & 1 == 1 {
                return i;
            }
            i += 1;
        }
    }
    let v = a.values[nz] * x[a.col_indices[nz] as usize];
    let t = v * 3.0;
    sq(squash(t)) + lowest_set_bit(a.col_indices[nz]) as f32
}

fn helpers_reference(a: &Csr<f32>, x: &[f32], nz: usize) -> f64 {
    let t = a.values[nz] * x[a.col_indices[nz] as usize] * 3.0;
    // `t`'s magnitude brought into [0, 1] by halvings, its sign kept.
    let m = f64::from(t.abs());
    let m = if m > 1.0 {
        m / 2f64.powi(m.log2().ceil() as i32)
    } else {
        m
    };
    f64::from(a.col_indices[nz].trailing_zeros()) + m * m
}

/// A reducing kernel's per-tile sums against `f64` references, through `cpu` and every schedule.
fn check_sums(
    what: &str,
    expected: &[f64],
    cpu: &[f32],
    mut launch: impl FnMut(Schedule) -> Vec<f32>,
    schedules: &[Schedule],
) {
    let close = |got: f32, want: f64| (f64::from(got) - want).abs() <= 1e-4 * (1.0 + want.abs());
    for (r, &want) in expected.iter().enumerate() {
        assert!(
            close(cpu[r], want),
            "{what} cpu: row {r}: {} vs {want}",
            cpu[r]
        );
    }
    for &s in schedules {
        let y = launch(s);
        for (r, &want) in expected.iter().enumerate() {
            assert!(
                close(y[r], want),
                "{what} {}: row {r}: {} vs {want}",
                s.name(),
                y[r]
            );
        }
    }
}

#[test]
fn helper_functions_are_inlined_at_every_call() {
    let seed = fresh_seed();
    let dev = Device::default();
    for (shape, a) in matrices(seed) {
        let x = common::random_vec(a.num_cols, seed ^ 0x5eed);
        let expected: Vec<f64> = (0..a.num_rows)
            .map(|r| {
                (a.row_offsets[r]..a.row_offsets[r + 1])
                    .map(|nz| helpers_reference(&a, &x, nz))
                    .sum()
            })
            .collect();
        let mut cpu = vec![0f32; a.num_rows];
        helpers::cpu(&a, &x, &mut cpu);
        let da = DeviceCsr::upload(&dev, &a).unwrap();
        let dx = dev.upload(&x).unwrap();
        let what = format!("helpers {shape:?} seed {seed}");
        check_sums(
            &what,
            &expected,
            &cpu,
            |s| {
                let mut dy = dev.zeros::<f32>(a.num_rows).unwrap();
                helpers::launch_with(&dev, s, &da, &dx, &mut dy).unwrap();
                dy.download().unwrap()
            },
            helpers::SCHEDULES,
        );
    }
}

// ---- match ----

/// `match` on integers, as a value and as a statement: literals, negative literals, `|`,
/// inclusive and half-open ranges, a guard, a binding and `_`.
#[load_balanced(
    schedule = "thread_mapped, merge_path, warp_mapped, lrb",
    reduce = "sum",
    output = "y"
)]
fn matching(a: &Csr<f32>, #[atom] nz: usize) -> i64 {
    let c = a.col_indices[nz] as i64 - 40;
    let mut extra = 0i64;
    match c % 5 {
        0 => extra += 1000,
        -1 | -2 => {
            extra -= 7;
        }
        k if k > 2 => extra += k * 100,
        _ => {}
    }
    let class = match c {
        -40..=-21 => 1,
        -20..0 => 2,
        0 | 2 | 4 => 3,
        3..=60 => 4 + c % 3,
        other => other * 2,
    };
    class * 10 + extra
}

fn matching_reference(col: u32) -> i64 {
    let c = i64::from(col) - 40;
    let r = c % 5;
    let extra = if r == 0 {
        1000
    } else if r == -1 || r == -2 {
        -7
    } else if r > 2 {
        r * 100
    } else {
        0
    };
    let class = if (-40..=-21).contains(&c) {
        1
    } else if (-20..0).contains(&c) {
        2
    } else if c == 0 || c == 2 || c == 4 {
        3
    } else if (3..=60).contains(&c) {
        4 + c % 3
    } else {
        c * 2
    };
    class * 10 + extra
}

#[test]
fn match_on_integers_matches_the_reference() {
    let seed = fresh_seed();
    let dev = Device::default();
    for (shape, a) in matrices(seed) {
        let expected: Vec<i64> = (0..a.num_rows)
            .map(|r| {
                (a.row_offsets[r]..a.row_offsets[r + 1])
                    .map(|nz| matching_reference(a.col_indices[nz]))
                    .sum()
            })
            .collect();
        let mut cpu = vec![0i64; a.num_rows];
        matching::cpu(&a, &mut cpu);
        assert_eq!(cpu, expected, "cpu {shape:?} seed {seed}");
        let da = DeviceCsr::upload(&dev, &a).unwrap();
        for &s in matching::SCHEDULES {
            let mut dy = dev.zeros::<i64>(a.num_rows).unwrap();
            matching::launch_with(&dev, s, &da, &mut dy).unwrap();
            assert_eq!(
                dy.download().unwrap(),
                expected,
                "{} {shape:?} seed {seed}",
                s.name()
            );
        }
    }
}

// ---- f64 transcendental functions ----

/// Slots per atom in `math64`'s output.
const M: usize = 8;
/// The largest |x| whose `sin` and `cos` are held to their ulp bound.
const SIN_COS_EXACT: f64 = 1048576.0;

#[load_balanced(schedule = "thread_mapped, merge_path")]
fn math64(a: &Csr<f32>, xs: &[f64], ys: &[f64], out: &mut [f64], #[atom] nz: usize) {
    // The values are all 1: the product is `xs[nz]` exactly.
    let x = xs[nz] * a.values[nz] as f64;
    let o = nz * 8;
    out[o] = x.exp();
    out[o + 1] = x.exp2();
    out[o + 2] = x.ln();
    out[o + 3] = x.log2();
    out[o + 4] = x.powf(ys[nz]);
    out[o + 5] = x.sin();
    out[o + 6] = x.cos();
    out[o + 7] = x.tanh();
}

/// The `f64` functions' names, in `math64`'s slot order, and the most ulp each may be off
/// Rust's `std`: one more than the worst seen over many runs (docs/kernel-language.md), so
/// that a fresh seed does not fail on a rarer argument of the same accuracy.
const MATH64: [(&str, u64); M] = [
    ("exp", 2),
    ("exp2", 2),
    ("ln", 2),
    ("log2", 2),
    ("powf", 3),
    ("sin", 2),
    ("cos", 2),
    ("tanh", 4),
];

fn math64_reference(k: usize, x: f64, y: f64) -> f64 {
    match k {
        0 => x.exp(),
        1 => x.exp2(),
        2 => x.ln(),
        3 => x.log2(),
        4 => x.powf(y),
        5 => x.sin(),
        6 => x.cos(),
        _ => x.tanh(),
    }
}

/// Units in the last place between `got` and `want` (`u64::MAX` for a NaN against a number, a
/// sign change or a zero against a nonzero); 0 for two NaNs.
fn ulps(got: f64, want: f64) -> u64 {
    if want.is_nan() || got.is_nan() {
        return if want.is_nan() && got.is_nan() {
            0
        } else {
            u64::MAX
        };
    }
    if got.to_bits() == want.to_bits() {
        return 0;
    }
    if got.is_sign_negative() != want.is_sign_negative() || got == 0.0 || want == 0.0 {
        return u64::MAX;
    }
    got.to_bits().abs_diff(want.to_bits())
}

/// The arguments: every special value the functions treat apart, the edges of their ranges,
/// and random values over the scales a kernel meets (uniform near 0, near multiples of π/2,
/// over the range where `exp` is finite, and log-uniform magnitudes from subnormal to the
/// largest finite), each with an exponent `y` that is an odd or even integer, a half, a special
/// value or a random real.
fn math64_inputs(seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut xs = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.0,
        0.5,
        8.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        5e-324,
        -5e-324,
        f64::MIN_POSITIVE,
        f64::MAX,
        f64::MIN,
        709.782712893384,
        709.7827128933841,
        710.0,
        -745.1332191019411,
        -745.1332191019412,
        -746.0,
        1023.5,
        1024.0,
        -1074.0,
        -1074.5,
        -1075.0,
        -1076.0,
        std::f64::consts::FRAC_PI_2,
        std::f64::consts::PI,
        0.55,
        0.549_999_999_999_999_9,
        22.0,
        1e-300,
        1.000_000_000_000_000_2,
        0.999_999_999_999_999_9,
        std::f64::consts::SQRT_2,
    ];
    for i in 0..3000 {
        let u = next();
        let v = next();
        let sign = if next() < 0.5 { -1.0 } else { 1.0 };
        xs.push(match i % 5 {
            0 => (u - 0.5) * 20.0,
            1 => (u * 2000.0).round() * std::f64::consts::FRAC_PI_2 + (v - 0.5) * 1e-3,
            2 => (u - 0.5) * 1500.0,
            3 => sign * 10f64.powf(u * 616.0 - 308.0),
            _ => u * 4.0,
        });
    }
    let ys = (0..xs.len())
        .map(|i| {
            let u = next();
            match i % 7 {
                0 => ((u - 0.5) * 40.0).round(),
                1 => ((u - 0.5) * 40.0).round() + 0.5,
                2 => [
                    0.0,
                    -0.0,
                    f64::INFINITY,
                    f64::NEG_INFINITY,
                    f64::NAN,
                    1.0,
                    -1.0,
                ][i / 7 % 7],
                3 => (u - 0.5) * 600.0,
                _ => (u - 0.5) * 8.0,
            }
        })
        .collect();
    (xs, ys)
}

#[test]
fn f64_transcendentals_are_within_their_ulp_bounds_of_std() {
    let seed = fresh_seed();
    let (xs, ys) = math64_inputs(seed);
    let n = xs.len();
    // One atom per argument.
    let a = Csr::new(n, 1, (0..=n).collect(), vec![0; n], vec![1f32; n]).unwrap();
    let dev = Device::default();
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let dxs = dev.upload(&xs).unwrap();
    let dys = dev.upload(&ys).unwrap();
    for &s in math64::SCHEDULES {
        let mut dout = dev.zeros::<f64>(n * M).unwrap();
        math64::launch_with(&dev, s, &da, &dxs, &dys, &mut dout).unwrap();
        let out = dout.download().unwrap();
        let mut worst = [0u64; M];
        for (i, (&x, &y)) in xs.iter().zip(&ys).enumerate() {
            for (k, &(name, bound)) in MATH64.iter().enumerate() {
                let (got, want) = (out[i * M + k], math64_reference(k, x, y));
                // sin and cos reduce by a three-part π/2, exact up to |x| = 2^20 (no Payne and
                // Hanek reduction): beyond, only the range is promised.
                if (k == 5 || k == 6) && x.abs() > SIN_COS_EXACT {
                    assert!(
                        got.abs() <= 1.0 || (x.is_infinite() && got.is_nan()),
                        "{} seed {seed}: {name}({x:e}) = {got:e}",
                        s.name()
                    );
                    continue;
                }
                let e = ulps(got, want);
                assert!(
                    e <= bound,
                    "{} seed {seed}: {name}({x:e}{}) = {got:e}, std says {want:e} ({e} ulp)",
                    s.name(),
                    if k == 4 {
                        format!(", {y:e}")
                    } else {
                        String::new()
                    }
                );
                worst[k] = worst[k].max(e);
            }
        }
        eprintln!("{}: worst ulp per function {worst:?}", s.name());
    }
}

/// `powf`'s special cases, every special base against every special exponent: where Rust's
/// result is a zero, an infinity, ±1 or NaN (each decided by a rule, not by rounding), exactly
/// its bits (any NaN for NaN); elsewhere within the ulp bound.
#[test]
fn f64_powf_special_cases_are_exactly_rusts() {
    let specials = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.0,
        -2.0,
        3.0,
        -3.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        5e-324,
        f64::MAX,
    ];
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for &x in &specials {
        for &y in &specials {
            xs.push(x);
            ys.push(y);
        }
    }
    let n = xs.len();
    let a = Csr::new(n, 1, (0..=n).collect(), vec![0; n], vec![1f32; n]).unwrap();
    let dev = Device::default();
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let (dxs, dys) = (dev.upload(&xs).unwrap(), dev.upload(&ys).unwrap());
    let mut dout = dev.zeros::<f64>(n * M).unwrap();
    math64::launch(&dev, &da, &dxs, &dys, &mut dout).unwrap();
    let out = dout.download().unwrap();
    for (i, (&x, &y)) in xs.iter().zip(&ys).enumerate() {
        let (got, want) = (out[i * M + 4], x.powf(y));
        let ruled = want == 0.0 || want.is_infinite() || want.is_nan() || want.abs() == 1.0;
        let ok = if ruled {
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan())
        } else {
            ulps(got, want) <= MATH64[4].1
        };
        assert!(ok, "powf({x:e}, {y:e}) = {got:e}, Rust says {want:e}");
    }
}
