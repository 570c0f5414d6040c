//! The instruction budget: simulator instructions per nonzero of the SpMV body under every
//! schedule on four fixed matrices, held to the checked-in table `tests/instruction_budget.tsv`,
//! and per (nonzero × lane) of the SpMM body at k = 32 and 128 on a 27-point stencil and a
//! power-law matrix, held to `tests/spmm_instruction_budget.tsv`.
//!
//! A schedule whose count grows by more than 5% over its budget fails the test, and so does a
//! (matrix, schedule) pair the table does not list or a row no run produced. Changing the table is
//! a deliberate, reviewed change: `LB_UPDATE_BUDGET=1 cargo test --test instruction_budget`
//! rewrites it from the current counts, and the diff shows what moved. The counts are a guide and
//! a regression guard, not GPU speed: the simulator counts PTX instructions, not cycles.

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use lb::prelude::*;

/// y = A·x, the body the budget is about (the same as `examples/spmv.rs`).
#[load_balanced(schedule = "every", reduce = "sum", output = "y")]
fn spmv(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

/// C = A·B with B row-major `cols × k`: the lanes are the columns of B (`examples/spmm.rs`).
#[load_balanced(schedule = "every", reduce = "sum", output = "c", lanes = "k")]
fn spmm(a: &Csr<f32>, b: &[f32], k: usize, #[atom] nz: usize, #[lane] j: usize) -> f32 {
    a.values[nz] * b[a.col_indices[nz] as usize * k + j]
}

const TABLE: &str = "tests/instruction_budget.tsv";
const SPMM_TABLE: &str = "tests/spmm_instruction_budget.tsv";
/// The growth over the budget that fails the test.
const SLACK: f64 = 1.05;

/// A 2-D 5-point stencil on an `n × n` grid.
fn stencil5(n: usize) -> Csr<f32> {
    let mut t = Vec::new();
    for i in 0..n {
        for j in 0..n {
            let r = i * n + j;
            t.push((r, r, 4.0));
            if i > 0 {
                t.push((r, r - n, -1.0));
            }
            if i + 1 < n {
                t.push((r, r + n, -1.0));
            }
            if j > 0 {
                t.push((r, r - 1, -1.0));
            }
            if j + 1 < n {
                t.push((r, r + 1, -1.0));
            }
        }
    }
    Csr::from_triplets(n * n, n * n, t).expect("a valid stencil")
}

/// `rows` one-nonzero rows and, at row `rows / 3`, one row of `giant` nonzeros.
fn giant_row(rows: usize, giant: usize) -> Csr<f32> {
    let cols = giant.max(rows);
    let mut t = Vec::new();
    for r in 0..rows {
        if r == rows / 3 {
            t.extend((0..giant).map(|c| (r, c, 0.5 + (c % 7) as f32)));
        } else {
            t.push((r, (r * 7919) % cols, 1.0 - (r % 5) as f32));
        }
    }
    Csr::from_triplets(rows, cols, t).expect("a valid matrix")
}

fn matrices() -> Vec<(&'static str, Csr<f32>)> {
    vec![
        ("regular-2048x8", lb::generate::uniform(2048, 2048, 8, 11)),
        ("stencil5-48", stencil5(48)),
        (
            "power_law-3000",
            lb::generate::power_law(3000, 3000, 8.0, 13),
        ),
        ("giant_row-4096", giant_row(4096, 16_384)),
    ]
}

/// The f64 reference, independent of the macro.
fn check(a: &Csr<f32>, x: &[f32], got: &[f32], what: &str) {
    assert_eq!(got.len(), a.num_rows, "{what}: output length");
    for (row, &value) in got.iter().enumerate().take(a.num_rows) {
        let (mut exact, mut magnitude) = (0.0f64, 0.0f64);
        for nz in a.row(row) {
            let term = f64::from(a.values[nz]) * f64::from(x[a.col_indices[nz] as usize]);
            exact += term;
            magnitude += term.abs();
        }
        let err = (f64::from(value) - exact).abs();
        assert!(
            err <= 1e-5 * magnitude.max(1e-30),
            "{what}: row {row}: got {value}, f64 reference {exact}"
        );
    }
}

/// Instructions per nonzero for every (matrix, schedule), keyed `"matrix\tschedule"`.
fn measure() -> BTreeMap<String, f64> {
    let dev = Device::simulator();
    let mut out = BTreeMap::new();
    for (name, a) in matrices() {
        let x = lb::generate::random_vector(a.num_cols, 5);
        let da = DeviceCsr::upload(&dev, &a).unwrap();
        let dx = dev.upload(&x).unwrap();
        for &s in spmv::SCHEDULES {
            let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
            let launch = spmv::launch_with(&dev, s, &da, &dx, &mut dy).unwrap();
            check(&a, &x, &dev.download(&dy).unwrap(), s.name());
            let stats = launch.sim.expect("the simulator reports instructions");
            let per_nz = stats.instructions as f64 / a.nnz().max(1) as f64;
            out.insert(format!("{name}\t{}", s.name()), per_nz);
        }
    }
    out
}

fn render(measured: &BTreeMap<String, f64>, what: &str) -> String {
    let mut text = format!(
        "# Simulator instructions per {what} (tests/instruction_budget.rs).\n\
         # Rewrite with LB_UPDATE_BUDGET=1 cargo test --test instruction_budget; review the diff.\n\
         # matrix\tschedule\tinstructions per {what}\n",
    );
    for (key, v) in measured {
        writeln!(text, "{key}\t{v:.2}").unwrap();
    }
    text
}

fn parse(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (key, v) = l
                .rsplit_once('\t')
                .expect("matrix, schedule and a number per line");
            (key.to_string(), v.parse().expect("a number"))
        })
        .collect()
}

#[test]
fn spmv_stays_within_its_instruction_budget() {
    hold_to_budget(&measure(), TABLE, "nonzero of the SpMV body");
}

#[test]
fn spmm_stays_within_its_instruction_budget() {
    hold_to_budget(
        &measure_spmm(),
        SPMM_TABLE,
        "nonzero × lane of the SpMM body",
    );
}

/// A 3-D 27-point stencil on an `n × n × n` grid: every row has up to 27 nonzeros.
fn stencil27(n: usize) -> Csr<f32> {
    let mut t = Vec::new();
    let at = |x: usize, y: usize, z: usize| (x * n + y) * n + z;
    for (x, y, z) in (0..n).flat_map(|x| (0..n).flat_map(move |y| (0..n).map(move |z| (x, y, z)))) {
        for (dx, dy, dz) in (0..27).map(|d| (d / 9, d / 3 % 3, d % 3)) {
            let (u, v, w) = (x + dx, y + dy, z + dz);
            if (1..=n).contains(&u) && (1..=n).contains(&v) && (1..=n).contains(&w) {
                let value = if (dx, dy, dz) == (1, 1, 1) {
                    26.0
                } else {
                    -1.0
                };
                t.push((at(x, y, z), at(u - 1, v - 1, w - 1), value));
            }
        }
    }
    Csr::from_triplets(n * n * n, n * n * n, t).expect("a valid stencil")
}

/// Instructions per (nonzero × lane) of SpMM for every (matrix and k, schedule).
fn measure_spmm() -> BTreeMap<String, f64> {
    let dev = Device::simulator();
    let mut out = BTreeMap::new();
    let matrices = [
        ("stencil27-8", stencil27(8)),
        ("power_law-600", lb::generate::power_law(600, 600, 8.0, 17)),
    ];
    for (name, a) in matrices {
        let da = DeviceCsr::upload(&dev, &a).unwrap();
        for k in [32usize, 128] {
            let b = lb::generate::random_vector(a.num_cols * k, 7);
            let db = dev.upload(&b).unwrap();
            for &s in spmm::SCHEDULES {
                let mut dc = dev.upload(&vec![f32::NAN; a.num_rows * k]).unwrap();
                let launch = spmm::launch_with(&dev, s, &da, &db, k, &mut dc).unwrap();
                let what = format!("{name} k={k} {}", s.name());
                common::assert_spmm_close(&a, &b, k, &dev.download(&dc).unwrap(), &what);
                let stats = launch.sim.expect("the simulator reports instructions");
                let per = stats.instructions as f64 / (a.nnz() * k).max(1) as f64;
                out.insert(format!("{name} k={k}\t{}", s.name()), per);
            }
        }
    }
    out
}

/// Compares `measured` with the table at `table` (or rewrites it under `LB_UPDATE_BUDGET`, set
/// to anything but empty: an empty value, as `LB_UPDATE_BUDGET= cargo test` leaves it, checks).
fn hold_to_budget(measured: &BTreeMap<String, f64>, table: &str, what: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(table);
    if std::env::var_os("LB_UPDATE_BUDGET").is_some_and(|v| !v.is_empty()) {
        std::fs::write(&path, render(measured, what)).unwrap();
        eprintln!("instruction budget rewritten: {}", path.display());
        return;
    }
    let budget = parse(&std::fs::read_to_string(&path).expect("the checked-in budget table"));
    let mut failures = Vec::new();
    for (key, &got) in measured {
        match budget.get(key) {
            None => failures.push(format!("{key}: {got:.2} per {what}, but no budget")),
            Some(&want) if got > want * SLACK => failures.push(format!(
                "{key}: {got:.2} per {what}, budget {want:.2} (+{:.1}%)",
                100.0 * (got / want - 1.0)
            )),
            Some(_) => {}
        }
    }
    failures.extend(
        budget
            .keys()
            .filter(|k| !measured.contains_key(*k))
            .map(|k| format!("{k}: in the budget, but no such run")),
    );
    assert!(
        failures.is_empty(),
        "instruction budget exceeded (rewrite the table with LB_UPDATE_BUDGET=1 only for a \
         reviewed change):\n{}",
        failures.join("\n")
    );
}
