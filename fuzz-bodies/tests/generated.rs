//! Every generated kernel under each of its schedules on the simulator, on random and adversarial
//! matrices, against the macro's CPU reference and against sums recomputed in f64 from the plain
//! function's value for each atom. A failure prints the seed that rebuilds the same kernels.

use lb::prelude::*;
use lb_fuzz_bodies::bodies::{ALL, REPLAY, SEED};
use lb_fuzz_bodies::rng::Rng;
use lb_fuzz_bodies::{Case, DeviceCase, Kernel, Reduce};

/// A matrix with the given row lengths and random columns below `cols` (sorted, repeats allowed).
fn matrix(rng: &mut Rng, cols: usize, lengths: &[usize]) -> Csr<f32> {
    let mut offsets = vec![0];
    let (mut col_indices, mut values) = (Vec::new(), Vec::new());
    for &len in lengths {
        let mut row: Vec<u32> = (0..len).map(|_| rng.below(cols) as u32).collect();
        row.sort_unstable();
        col_indices.extend(row);
        values.extend(rng.values(len));
        offsets.push(col_indices.len());
    }
    Csr::new(lengths.len(), cols, offsets, col_indices, values).expect("a valid matrix")
}

/// The shapes the schedules find hardest: no tiles, no atoms, one atom, empty rows among short
/// ones, one row larger than a block (a huge tile at a block of 32), rows longer than a warp.
fn matrices(rng: &mut Rng) -> Vec<(&'static str, Csr<f32>)> {
    let rows = 1 + rng.below(300);
    let random: Vec<usize> = (0..rows)
        .map(|_| {
            if rng.below(5) == 0 {
                0
            } else {
                1 + rng.below(12)
            }
        })
        .collect();
    let mut one_atom = vec![0; 1 + rng.below(40)];
    let at = rng.below(one_atom.len());
    one_atom[at] = 1;
    let mut giant: Vec<usize> = (0..200).map(|_| rng.below(6)).collect();
    let at = rng.below(giant.len());
    giant[at] = 3000;
    let long: Vec<usize> = (0..60)
        .map(|r| if r % 2 == 0 { 0 } else { 33 + rng.below(300) })
        .collect();
    let cols = 1 + rng.below(400);
    vec![
        ("empty", matrix(rng, 5, &[])),
        ("all rows empty", matrix(rng, 7, &[0; 40])),
        ("one atom", matrix(rng, cols, &one_atom)),
        ("random", matrix(rng, cols, &random)),
        ("one giant row", matrix(rng, cols, &giant)),
        ("long rows", matrix(rng, cols, &long)),
        (
            "power law",
            lb::generate::power_law(1 + rng.below(600), cols, 6.0, rng.next_u64()),
        ),
    ]
}

/// The terms a reduction collects: their sum in f64 with what any order of adding them can give,
/// and their min and max (order-free but for the sign of a zero; `f32::min` drops NaN).
#[derive(Clone)]
struct Terms {
    exact: f64,
    magnitude: f64,
    count: usize,
    nan: bool,
    pos_inf: bool,
    neg_inf: bool,
    min: f32,
    max: f32,
}

impl Default for Terms {
    fn default() -> Terms {
        Terms {
            exact: 0.0,
            magnitude: 0.0,
            count: 0,
            nan: false,
            pos_inf: false,
            neg_inf: false,
            min: f32::INFINITY,
            max: f32::NEG_INFINITY,
        }
    }
}

impl Terms {
    fn add(&mut self, v: f32) {
        self.count += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        if v.is_nan() {
            self.nan = true;
        } else if v == f32::INFINITY {
            self.pos_inf = true;
        } else if v == f32::NEG_INFINITY {
            self.neg_inf = true;
        } else {
            self.exact += f64::from(v);
            self.magnitude += f64::from(v).abs();
        }
    }

    /// Whether `got` is a sum of the terms in some order. `None`: the order decides (a finite
    /// partial sum may overflow), so nothing is claimed.
    fn admits(&self, got: f32) -> Option<bool> {
        // Below this no partial sum of finite f32 terms can overflow.
        let safe = self.magnitude <= f64::from(f32::MAX) / 2.0;
        if self.nan || (self.pos_inf && self.neg_inf) {
            return Some(got.is_nan());
        }
        if !safe {
            return None;
        }
        if self.pos_inf || self.neg_inf {
            let want = if self.pos_inf {
                f32::INFINITY
            } else {
                f32::NEG_INFINITY
            };
            return Some(got == want);
        }
        // Each addition rounds once (relative 2^-24, plus an absolute denormal step); a product
        // fused into the sum (fma) differs from its rounded value by as much again.
        let tol =
            (self.count as f64 + 2.0) * 2f64.powi(-23) * self.magnitude + self.count as f64 * 1e-44;
        Some(got.is_finite() && (f64::from(got) - self.exact).abs() <= tol)
    }
}

/// Equal as values (either zero sign: `min`/`max` may pick either), or both NaN.
fn same(a: f32, b: f32) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

/// What the plain function says, one atom at a time in the reference's order: the terms of
/// each output and of each slot of `h`, and the final `w`.
struct Expected {
    y_terms: Vec<Terms>,
    /// Whether a tile runs (every tile, or those of the frontier): the others' outputs stay as
    /// they were.
    listed: Vec<bool>,
    h_terms: Vec<Terms>,
    w: Vec<f32>,
}

fn expected(kernel: &Kernel, case: &Case, w0: &[f32], h0: &[f32]) -> Expected {
    let a = case.a;
    let mut w = w0.to_vec();
    // `h` starts at zero for each atom, so after the call its one atomic's slot holds exactly
    // the atom's term; the test knows the slots the generator picks from.
    let mut h = vec![0.0f32; h0.len()];
    let mut h_terms: Vec<Terms> = h0
        .iter()
        .map(|&v| {
            let mut t = Terms::default();
            t.add(v);
            t
        })
        .collect();
    let mut y_terms = vec![Terms::default(); a.num_rows * case.k];
    let tiles: Vec<usize> = if kernel.frontier {
        case.f.iter().map(|&t| t as usize).collect()
    } else {
        (0..a.num_rows).collect()
    };
    let mut listed = vec![false; a.num_rows];
    for t in tiles {
        listed[t] = true;
        for j in 0..case.k {
            for nz in a.row(t) {
                let v = (kernel.atom)(case, &mut w, &mut h, t, nz, j);
                y_terms[t * case.k + j].add(v);
                let mut slots = [t, a.col_indices[nz] as usize, nz % 7, case.n as usize % 5];
                slots.sort_unstable();
                for (i, &slot) in slots.iter().enumerate() {
                    if i > 0 && slots[i - 1] == slot {
                        continue;
                    }
                    let term = std::mem::take(&mut h[slot]);
                    if term.to_bits() != 0 {
                        h_terms[slot].add(term);
                    }
                }
            }
        }
    }
    // Anything left is a slot the generator writes and the scan above misses.
    assert!(
        h.iter().all(|v| v.to_bits() == 0),
        "{}: an atomic's slot outside the ones the test scans (fuzz-bodies/build.rs, `atomic`)",
        kernel.name
    );
    Expected {
        y_terms,
        listed,
        h_terms,
        w,
    }
}

/// Compares one output array: up to three mismatches go to `bad`, and outputs about which the
/// expectation claims nothing are counted in `skipped`.
fn compare(
    what: &str,
    got: &[f32],
    want: impl Fn(usize) -> Option<bool>,
    show: impl Fn(usize) -> String,
    bad: &mut Vec<String>,
    skipped: &mut usize,
) {
    let mut shown = 0;
    for (i, value) in got.iter().enumerate() {
        match want(i) {
            None => *skipped += 1,
            Some(true) => {}
            Some(false) => {
                if shown < 3 {
                    bad.push(format!("{what}[{i}]: got {value}, {}", show(i)));
                }
                shown += 1;
            }
        }
    }
}

/// What the run covered, for its summary line.
struct Tally {
    launches: usize,
    checked: usize,
    skipped: usize,
}

/// One kernel on one matrix: the reference, then every schedule. Returns the mismatches.
fn run(
    kernel: &Kernel,
    dev: &Device,
    name: &str,
    a: &Csr<f32>,
    rng: &mut Rng,
    tally: &mut Tally,
) -> Vec<String> {
    let k = if kernel.lanes { 1 + rng.below(4) } else { 1 };
    let x = rng.values(a.num_rows.max(a.num_cols) * k + 1);
    // A frontier: some of the tiles, shuffled, each once; now and then none.
    let mut f: Vec<u32> = Vec::new();
    if kernel.frontier && rng.below(8) != 0 {
        f = (0..a.num_rows as u32)
            .filter(|_| rng.below(5) < 3)
            .collect();
        for i in (1..f.len()).rev() {
            f.swap(i, rng.below(i + 1));
        }
    }
    let case = Case {
        a,
        f: &f,
        x: &x,
        s: rng.value(),
        n: rng.below(20) as u32,
        k,
    };
    let w0 = rng.values((a.nnz() * k).max(1));
    let h0 = rng.values(a.num_rows.max(a.num_cols).max(7));
    let mut bad = Vec::new();
    let context = format!(
        "{} on {name} (k = {k}, s = {}, n = {}, frontier of {} tiles)",
        kernel.name,
        case.s,
        case.n,
        if kernel.frontier { f.len() } else { a.num_rows }
    );

    let want = expected(kernel, &case, &w0, &h0);
    let (mut w_cpu, mut h_cpu) = (w0.clone(), h0.clone());
    let mut y_cpu = vec![f32::NAN; a.num_rows * k];
    (kernel.cpu)(&case, &mut w_cpu, &mut h_cpu, &mut y_cpu);
    // The macro's reference against the plain function's: the harness and `cpu` agree.
    if let Some(i) = (0..w0.len()).find(|&i| !same(w_cpu[i], want.w[i])) {
        bad.push(format!(
            "{context}: cpu() w[{i}] = {} but the atoms give {}",
            w_cpu[i], want.w[i]
        ));
    }
    // Outputs start as NaN, on the device and for `cpu`; tiles off the frontier keep it.
    let y_ok = |got: &[f32], i: usize| match kernel.reduce {
        _ if !want.listed[i / k] => Some(got[i].is_nan()),
        Some(Reduce::Sum) => want.y_terms[i].admits(got[i]),
        Some(Reduce::Min) => Some(same(got[i], want.y_terms[i].min)),
        Some(Reduce::Max) => Some(same(got[i], want.y_terms[i].max)),
        None => Some(true),
    };
    if kernel.reduce.is_some() {
        compare(
            &format!("{context}: cpu() y"),
            &y_cpu,
            |i| y_ok(&y_cpu, i),
            |i| format!("f64 sum {}", want.y_terms[i].exact),
            &mut bad,
            &mut tally.skipped,
        );
    }

    let da = DeviceCsr::upload(dev, a).expect("upload");
    let dx = dev.upload(&x).expect("upload");
    let df = dev.upload(&f).expect("upload");
    let dcase = DeviceCase {
        a: &da,
        f: &df,
        x: &dx,
        s: case.s,
        n: case.n,
        k,
    };
    for &schedule in kernel.schedules {
        let what = format!("{context}, {}", schedule);
        let mut dw = dev.upload(&w0).expect("upload");
        let mut dh = dev.upload(&h0).expect("upload");
        // NaN first: every output, empty tiles' included, must be written.
        let mut dy = dev.upload(&vec![f32::NAN; a.num_rows * k]).expect("upload");
        tally.launches += 1;
        if let Err(e) = (kernel.launch)(dev, schedule, &dcase, &mut dw, &mut dh, &mut dy) {
            bad.push(format!("{what}: launch failed: {e}"));
            continue;
        }
        let (w, h, y) = (
            dev.download(&dw).expect("download"),
            dev.download(&dh).expect("download"),
            dev.download(&dy).expect("download"),
        );
        tally.checked += w.len() + h.len() + if kernel.reduce.is_some() { y.len() } else { 0 };
        compare(
            &format!("{what}: w"),
            &w,
            |i| Some(same(w[i], w_cpu[i])),
            |i| format!("cpu() {}", w_cpu[i]),
            &mut bad,
            &mut tally.skipped,
        );
        compare(
            &format!("{what}: h"),
            &h,
            |i| match kernel.h_op {
                Reduce::Sum => want.h_terms[i].admits(h[i]),
                _ => Some(same(h[i], h_cpu[i])),
            },
            |i| format!("cpu() {}, f64 sum {}", h_cpu[i], want.h_terms[i].exact),
            &mut bad,
            &mut tally.skipped,
        );
        if kernel.reduce.is_some() {
            compare(
                &format!("{what}: y"),
                &y,
                |i| y_ok(&y, i),
                |i| format!("cpu() {}, f64 sum {}", y_cpu[i], want.y_terms[i].exact),
                &mut bad,
                &mut tally.skipped,
            );
        }
    }
    bad
}

/// Fresh matrices and inputs per kernel and round: the simulator is quick at these sizes, and
/// each round is another draw of the adversarial shapes.
const ROUNDS: usize = 2;

#[test]
fn generated_kernels_match_the_cpu_reference() {
    eprintln!(
        "{} generated kernels, seed {SEED} (replay: {REPLAY})",
        ALL.len()
    );
    let dev = Device::simulator();
    let mut rng = Rng(SEED ^ 0x5EED);
    let mut tally = Tally {
        launches: 0,
        checked: 0,
        skipped: 0,
    };
    let mut failures = Vec::new();
    for kernel in ALL {
        let drawn: Vec<_> = (0..ROUNDS).flat_map(|_| matrices(&mut rng)).collect();
        for (name, a) in drawn {
            let bad = run(kernel, &dev, name, &a, &mut rng, &mut tally);
            if !bad.is_empty() {
                failures.push(format!("{}\n{}", bad.join("\n"), kernel.source));
            }
        }
    }
    eprintln!(
        "{} launches, {} values checked, {} skipped (a sum whose overflow depends on the order)",
        tally.launches, tally.checked, tally.skipped
    );
    assert!(
        failures.is_empty(),
        "{} kernel × matrix cases disagree with the reference (replay: {REPLAY}):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
