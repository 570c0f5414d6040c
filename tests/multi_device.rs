//! Kernels across several devices: a tile set split by a merge path, the rows cut between
//! devices combined where they end, and the all-gather of an iterative method, on 1 to 4
//! simulated devices (and on every GPU of the machine, when run with `--include-ignored` there).

mod common;
// Only the graph generator is used here.
#[allow(dead_code)]
#[path = "common/graphs.rs"]
mod graphs;

use common::{assert_spmm_close, assert_spmv_close, random_csr, random_vec, Shape, SHAPES};
use lb::algorithms::{FrontierExchange, MultiBfs, MultiSssp};
use lb::multi::{Devices, MultiCsr, Reduce, Reduction, SplitOptions, Transport};
use lb::prelude::*;

/// y = α·A·x + β·y: an epilogue, which must see each row's whole sum.
#[load_balanced(schedule = "merge_path", reduce = "sum", output = "y",
    epilogue = |_row, sum, old| alpha * sum + beta * old)]
fn axpby(a: &Csr<f32>, x: &[f32], alpha: f32, beta: f32, #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

const SCHEDULES: [Schedule; 5] = [
    Schedule::MergePath,
    Schedule::ThreadMapped,
    Schedule::BlockMapped,
    Schedule::Lrb,
    Schedule::NonzeroSplit,
];

/// One row far longer than the rest, so that the split cuts it across every device.
fn giant_row(rows: usize, long: usize, seed: u64) -> Csr<f32> {
    giant_rows(rows, long, &[rows / 3], seed)
}

/// The rows `giant` hold `long` atoms each, the others a few: with two of them, a quarter and
/// three quarters down, each is cut between its own devices, so a device that neither owns nor
/// carries into a cut row takes part in its combination with the reduction's identity.
fn giant_rows(rows: usize, long: usize, giant: &[usize], seed: u64) -> Csr<f32> {
    let a = random_csr(Shape::Random, rows, long, seed);
    let mut triplets: Vec<(usize, usize, f32)> = (0..a.num_rows)
        .filter(|r| !giant.contains(r))
        .flat_map(|r| a.row(r).map(move |nz| (r, nz)))
        .map(|(r, nz)| (r, a.col_indices[nz] as usize, a.values[nz]))
        .collect();
    for &row in giant {
        triplets.extend((0..long).map(|c| (row, c, 0.5 + (c % 7) as f32 * 0.25)));
    }
    Csr::from_triplets(rows, long, triplets).expect("valid triplets")
}

/// The matrices of the tests: every adversarial shape, a giant row that spans devices, more
/// devices than rows, and a single row.
fn matrices(seed: u64) -> Vec<(String, Csr<f32>)> {
    let mut out: Vec<(String, Csr<f32>)> = SHAPES
        .iter()
        .enumerate()
        .map(|(i, &s)| (format!("{s:?}"), random_csr(s, 90, 60, seed + i as u64)))
        .collect();
    out.push(("giant row".into(), giant_row(40, 3000, seed + 10)));
    out.push((
        "two giant rows".into(),
        giant_rows(40, 3000, &[10, 30], seed + 13),
    ));
    out.push((
        "two rows".into(),
        random_csr(Shape::Random, 2, 9, seed + 11),
    ));
    out.push((
        "one long row".into(),
        random_csr(Shape::OneGiantRow, 1, 900, seed + 12),
    ));
    out
}

fn seed() -> u64 {
    std::env::var("LB_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_secs())
        })
}

fn sum() -> Reduction {
    common::spmv::REDUCTION.expect("spmv reduces")
}

/// SpMV on every part, then the all-gather of y into every device's x: the step of an
/// iterative method, three times, each against the f64 reference.
fn iterate_spmv(devices: &Devices, a: &Csr<f32>, what: &str, schedule: Schedule) {
    iterate_spmv_split(devices, a, what, schedule, SplitOptions::default());
}

/// [`iterate_spmv`] on a tile set split as `options` say.
fn iterate_spmv_split(
    devices: &Devices,
    a: &Csr<f32>,
    what: &str,
    schedule: Schedule,
    options: SplitOptions,
) {
    let split = MultiCsr::upload_with(devices, a, options).expect("upload");
    if let Some(c) = options.chunks {
        assert!(split.chunks() <= c, "{what}: {} chunks", split.chunks());
    }
    let square = a.num_rows == a.num_cols;
    let mut x_host = random_vec(a.num_cols, 7);
    let mut x = devices.replicate(&x_host).expect("replicate");
    let mut y = split.outputs::<f32>(1).expect("outputs");
    let mut gathered = devices.replicated_zeros::<f32>(a.num_rows).expect("zeros");
    for step in 0..3 {
        let run = |part: &lb::multi::CsrPart<f32>, stream: &Stream, y: &mut DeviceBuffer<f32>| {
            common::spmv::launch_with_async(stream, schedule, part.tiles(), x.on(part.index()), y)
        };
        // Even steps enqueue the all-gather behind the kernels, odd ones run them apart.
        if step % 2 == 0 {
            split
                .launch_and_gather(sum(), &mut y, &mut gathered, run)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
        } else {
            split
                .launch(sum(), &mut y, run)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            split.all_gather(&y, &mut gathered).expect("all-gather");
        }
        let got = split.download(&y).expect("download");
        assert_spmv_close(
            a,
            &x_host,
            &got,
            &format!("{what}, {schedule}, step {step}"),
        );
        for copy in gathered.download_all().expect("download") {
            assert_eq!(copy, got, "{what}: every device holds the gathered y");
        }
        if !square {
            break;
        }
        // y becomes the next x, scaled so the values stay in range.
        let norm = got.iter().fold(1.0f32, |m, v| m.max(v.abs()));
        x_host = got.iter().map(|v| v / norm).collect();
        x = devices.replicate(&x_host).expect("replicate");
    }
}

/// A signed permutation (row `r` holds `sign[r]` at column `perm[r]`) inside the pattern of a
/// random matrix whose other entries are zero: `A·x` is exact in f32 whatever order a schedule
/// sums in, and it neither decays nor converges, so an iteration that read a stale or a
/// half-written `x` gives a different vector.
///
/// With `skewed`, the first quarter of the rows hold 24 zero entries each and the others
/// none, so the merge path gives the last device most of the rows and its piece of the
/// all-gather is the largest by far (what makes the copy engines relay it).
fn signed_permutation(
    n: usize,
    (skewed, banded): (bool, bool),
    seed: u64,
) -> (Csr<f32>, Vec<usize>, Vec<f32>) {
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut perm: Vec<usize> = (0..n).collect();
    perm.shuffle(&mut rng);
    let sign: Vec<f32> = (0..n)
        .map(|_| if rng.random_bool(0.5) { 1.0 } else { -1.0 })
        .collect();
    let mut triplets: Vec<(usize, usize, f32)> = if skewed {
        (0..n / 4)
            .flat_map(|r| (0..24).map(move |k| (r, (r * 31 + k * 7919) % n, 0.0)))
            .collect()
    } else {
        let pattern = random_csr(Shape::Random, n, n, seed + 1);
        (0..n)
            .flat_map(|r| pattern.row(r).map(move |nz| (r, nz)))
            .map(|(r, nz)| (r, pattern.col_indices[nz] as usize, 0.0))
            .collect()
    };
    // With `banded`, a band of zeros on the first half's rows: atoms in their devices' own
    // columns, enough that `SplitOptions::local_columns_first` splits those parts by column
    // (and not the others).
    if banded {
        triplets.extend(band(n / 2, n, 12).map(|(r, c)| (r, c, 0.0)));
    }
    triplets.retain(|&(r, c, _)| c != perm[r]);
    triplets.extend((0..n).map(|r| (r, perm[r], sign[r])));
    triplets.sort_by_key(|&(r, c, _)| (r, c));
    triplets.dedup_by_key(|t| (t.0, t.1));
    let a = Csr::from_triplets(n, n, triplets).expect("valid triplets");
    (a, perm, sign)
}

/// The positions within `w` of the diagonal in the first `rows` rows of an `n`-column matrix.
fn band(rows: usize, n: usize, w: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..rows).flat_map(move |r| (r.saturating_sub(w)..(r + w + 1).min(n)).map(move |c| (r, c)))
}

/// `a` with the positions of [`band`] that it lacks added, valued `value(row, column)`.
fn with_band(a: &Csr<f32>, w: usize, value: impl Fn(usize, usize) -> f32) -> Csr<f32> {
    let mut triplets: Vec<(usize, usize, f32)> = (0..a.num_rows)
        .flat_map(|r| a.row(r).map(move |nz| (r, nz)))
        .map(|(r, nz)| (r, a.col_indices[nz] as usize, a.values[nz]))
        .collect();
    let have: std::collections::HashSet<(usize, usize)> =
        triplets.iter().map(|&(r, c, _)| (r, c)).collect();
    let extra: Vec<_> = band(a.num_rows / 2, a.num_cols, w)
        .filter(|p| !have.contains(p))
        .collect();
    triplets.extend(extra.into_iter().map(|(r, c)| (r, c, value(r, c))));
    Csr::from_triplets(a.num_rows, a.num_cols, triplets).expect("valid triplets")
}

/// `iterations` steps of `x ← A·x` on a [`signed_permutation`], every step enqueued behind the
/// last without a wait, alternating between two gathered arrays so that each step's all-gather
/// overwrites the array the step before it read; then every device's copy of the last result
/// is exactly the host's. The steps are one [`MultiCsr::launch_and_gather_async`] each, or
/// with `one_call` a single [`MultiCsr::iterate_async`] (whose products over a device's own
/// columns start before the others' rows arrive, on a split with
/// `SplitOptions::local_columns_first`).
fn iterate_async(
    devices: &Devices,
    (n, skewed): (usize, bool),
    what: &str,
    schedule: Schedule,
    (options, one_call): (SplitOptions, bool),
    iterations: usize,
) {
    let seed = seed();
    let (a, perm, sign) = signed_permutation(n, (skewed, options.local_columns_first), seed);
    let what = format!(
        "{what}, {schedule}, {options:?}, one call {one_call}, skewed {skewed}, \
         LB_TEST_SEED={seed}"
    );
    let split = MultiCsr::upload_with(devices, &a, options).expect("upload");
    if options.local_columns_first && devices.count() > 1 {
        assert!(
            split.parts().iter().any(|p| p.column_halves().is_some()),
            "{what}: no part is split by column"
        );
    }
    let mut expected = random_vec(n, seed + 2);
    let mut arrays = [
        devices.replicate(&expected).expect("replicate"),
        devices.replicated_zeros::<f32>(n).expect("zeros"),
    ];
    let mut y = split.outputs::<f32>(1).expect("outputs");
    if one_call {
        let [x, spare] = &mut arrays;
        let run = |part: &lb::multi::CsrPart<f32>,
                   stream: &Stream,
                   x: &DeviceBuffer<f32>,
                   y: &mut DeviceBuffer<f32>| {
            common::spmv::launch_with_async(stream, schedule, part.tiles(), x, y)
        };
        split
            .iterate_async(sum(), iterations, x, spare, &mut y, run)
            .and_then(|p| p.wait())
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        for _ in 0..iterations {
            expected = (0..n).map(|r| sign[r] * expected[perm[r]]).collect();
        }
        // The result is in `x` whatever the count's parity.
        arrays.swap(0, iterations % 2);
    }
    let mut pending = Vec::new();
    for i in (0..iterations).filter(|_| !one_call) {
        let (first, second) = arrays.split_at_mut(1);
        let (x, into) = if i % 2 == 0 {
            (&first[0], &mut second[0])
        } else {
            (&second[0], &mut first[0])
        };
        let run = |part: &lb::multi::CsrPart<f32>, stream: &Stream, y: &mut DeviceBuffer<f32>| {
            common::spmv::launch_with_async(stream, schedule, part.tiles(), x.on(part.index()), y)
        };
        let launched = split.launch_and_gather_async(sum(), &mut y, into, run);
        pending.push(launched.unwrap_or_else(|e| panic!("{what}: step {i}: {e}")));
        expected = (0..n).map(|r| sign[r] * expected[perm[r]]).collect();
    }
    for (i, p) in pending.into_iter().enumerate() {
        p.wait().unwrap_or_else(|e| panic!("{what}: step {i}: {e}"));
    }
    for (d, copy) in arrays[iterations % 2]
        .download_all()
        .expect("download")
        .iter()
        .enumerate()
    {
        if let Some(r) = (0..n).find(|&r| copy[r] != expected[r]) {
            panic!(
                "{what}: device {d}'s copy after {iterations} steps: row {r} is {}, not {}",
                copy[r], expected[r]
            );
        }
    }
}

#[test]
fn iterations_enqueued_back_to_back_read_every_gathered_result() {
    for n in 1..=4 {
        let devices = Devices::simulators(n).expect("simulators");
        for chunks in [1, 2] {
            let options = SplitOptions {
                chunks: Some(chunks),
                ..SplitOptions::default()
            };
            for schedule in [Schedule::MergePath, Schedule::Lrb] {
                for skewed in [false, true] {
                    let what = format!("{n} simulators");
                    iterate_async(
                        &devices,
                        (300, skewed),
                        &what,
                        schedule,
                        (options, false),
                        6,
                    );
                }
            }
        }
    }
}

/// The same steps in one call, with and without the products over a device's own columns
/// first: one chunk and two, odd and even step counts, a schedule that walks tiles and one
/// that splits them.
#[test]
fn iterations_in_one_call_start_with_each_devices_own_columns() {
    for n in 1..=4 {
        let devices = Devices::simulators(n).expect("simulators");
        for (chunks, local_columns_first) in [(1, false), (1, true), (2, true)] {
            let options = SplitOptions {
                chunks: Some(chunks),
                local_columns_first,
                ..SplitOptions::default()
            };
            for (schedule, steps) in [(Schedule::MergePath, 5), (Schedule::Lrb, 4)] {
                for skewed in [false, true] {
                    let what = format!("{n} simulators");
                    let shape = (300, skewed);
                    iterate_async(&devices, shape, &what, schedule, (options, true), steps);
                }
            }
        }
    }
}

#[test]
fn spmv_on_one_to_four_simulated_devices_matches_the_f64_reference() {
    let seed = seed();
    eprintln!("LB_TEST_SEED={seed}");
    for n in 1..=4 {
        let devices = Devices::simulators(n).expect("simulators");
        for (name, a) in matrices(seed) {
            if name == "giant row" && n > 1 {
                let split = MultiCsr::upload(&devices, &a).expect("upload");
                let cut = split
                    .parts()
                    .iter()
                    .filter(|p| p.carries_to().is_some())
                    .count();
                assert_eq!(cut, n - 1, "the giant row is cut at every boundary");
            }
            if name == "two giant rows" && n > 2 {
                // Two owners of cut rows: each one's combination takes the other's device in
                // with the identity.
                let split = MultiCsr::upload(&devices, &a).expect("upload");
                let mut owners: Vec<usize> = split
                    .parts()
                    .iter()
                    .filter_map(|p| p.carries_to())
                    .collect();
                owners.dedup();
                assert_eq!(owners.len(), 2, "{n} devices: {owners:?}");
            }
            for &s in &SCHEDULES {
                iterate_spmv(&devices, &a, &format!("{name} on {n} devices"), s);
            }
        }
    }
}

/// Rows weighing more than an atom in the split (`SplitOptions::row_weight`): the same results
/// on one to four devices, and the device with the short rows gets fewer atoms.
#[test]
fn rows_weighted_in_the_split_gather_the_same_results() {
    let seed = seed();
    for n in 1..=4 {
        let devices = Devices::simulators(n).expect("simulators");
        for (name, a) in matrices(seed) {
            for row_weight in [0, 3, 8] {
                let options = SplitOptions {
                    row_weight: Some(row_weight),
                    ..SplitOptions::default()
                };
                let what = format!("{name} on {n} devices, rows weighing {row_weight}");
                iterate_spmv_split(&devices, &a, &what, Schedule::MergePath, options);
            }
        }
    }
    // Long rows first, then many rows of one atom: the last device holds the short rows.
    let devices = Devices::simulators(2).expect("simulators");
    let triplets = (0..4020).flat_map(|r: usize| {
        let len = if r < 20 { 200 } else { 1 };
        (0..len).map(move |j| (r, (r * 31 + j * 17 + seed as usize) % 4020, 1.0 + j as f32))
    });
    let a = Csr::from_triplets(4020, 4020, triplets.collect()).expect("valid triplets");
    let atoms_of_last = |row_weight| {
        let options = SplitOptions {
            row_weight: Some(row_weight),
            ..SplitOptions::default()
        };
        let split = MultiCsr::upload_with(&devices, &a, options).expect("upload");
        split.parts().last().expect("a part").atoms().len()
    };
    assert!(
        atoms_of_last(4) < atoms_of_last(1),
        "rows weighing 4 give the device of short rows fewer atoms"
    );
}

/// Each device's share cut into chunks of whole rows, each chunk's rows gathered as soon as it
/// is done: the same results for every chunk count, with rows cut between devices (whose
/// gathered value waits for the reduce) and without.
#[test]
fn chunked_shares_gather_the_same_results() {
    let seed = seed();
    for n in 1..=4 {
        let devices = Devices::simulators(n).expect("simulators");
        for (name, a) in matrices(seed) {
            for chunks in [1, 2, 3, 7] {
                for s in [Schedule::MergePath, Schedule::Lrb] {
                    let options = SplitOptions {
                        chunks: Some(chunks),
                        ..SplitOptions::default()
                    };
                    let what = format!("{name} on {n} devices in {chunks} chunks");
                    iterate_spmv_split(&devices, &a, &what, s, options);
                }
            }
        }
    }
    let devices = Devices::simulators(3).expect("simulators");
    let a = giant_row(200, 4000, seed + 1);
    let split = MultiCsr::upload_with(
        &devices,
        &a,
        SplitOptions {
            chunks: Some(4),
            ..SplitOptions::default()
        },
    )
    .expect("upload");
    assert!(split.chunks() > 1, "the shares are cut in chunks");
    let carried: Vec<usize> = split
        .parts()
        .iter()
        .filter_map(|p| p.carries_to())
        .collect();
    assert_eq!(carried.len(), 2, "the giant row is cut at both boundaries");
    for owner in carried {
        let p = &split.parts()[owner];
        assert_eq!(
            p.chunk(),
            0,
            "a cut row is carried to its owner's first chunk"
        );
    }
    let err = MultiCsr::upload_with(
        &devices,
        &a,
        SplitOptions {
            chunks: Some(0),
            ..SplitOptions::default()
        },
    )
    .err()
    .expect("no chunks");
    assert!(err.to_string().contains("at least one chunk"), "{err}");
    assert_eq!(MultiCsr::<f32>::auto_chunks(1 << 30, 1), 1);
    assert_eq!(MultiCsr::<f32>::auto_chunks(1 << 30, 2), 1);
    assert_eq!(MultiCsr::<f32>::auto_chunks(1 << 30, 4), 2);
    assert_eq!(MultiCsr::<f32>::auto_chunks(1000, 4), 1);
    // Enough atoms per device on three devices for two chunks by default, and one when each
    // device's own columns go first (they overlap the exchange instead).
    let big = lb::generate::uniform(1 << 16, 1 << 16, 50, 7);
    assert!(big.nnz() / 3 >= MultiCsr::<f32>::CHUNK_ATOMS);
    let big_devices = Devices::simulators(3).expect("simulators");
    let chunks = |local_columns_first| {
        let options = SplitOptions {
            local_columns_first,
            ..SplitOptions::default()
        };
        let split = MultiCsr::upload_with(&big_devices, &big, options).expect("upload");
        split.chunks()
    };
    assert_eq!(chunks(false), 2);
    assert_eq!(chunks(true), 1);
}

/// [`MultiCsr::iterate_async`] with each device's own columns first, on what the signed
/// permutations leave out: SpMM's lanes over a row cut between devices (its partial results
/// combined across devices and across halves), a min reduction (Bellman-Ford rounds, exactly
/// the host's), and the errors of a tile set that cannot iterate and of outputs without room
/// for the partial products.
#[test]
fn iterations_in_one_call_combine_lanes_cut_rows_and_minima() {
    let seed = seed();
    let options = SplitOptions {
        local_columns_first: true,
        ..SplitOptions::default()
    };
    let split_by_column =
        |split: &MultiCsr<f32>| split.parts().iter().any(|p| p.column_halves().is_some());
    // A giant row with a band is cut between devices, and split by column, for most seeds but
    // not all (a device boundary can fall on a row's end): take the first seed from the run's
    // on whose matrix every device count does both, so that every run covers a cut row.
    let split_of = |n: usize, a: &Csr<f32>| {
        let devices = Devices::simulators(n).expect("simulators");
        let split = MultiCsr::upload_with(&devices, a, options).expect("upload");
        (devices, split)
    };
    let banded = |seed: u64| {
        let mut a = giant_row(64, 64, seed);
        a.num_cols = 64;
        with_band(&a, 6, |r, c| 0.25 + ((r + c) % 5) as f32 * 0.125)
    };
    let (seed, a) = (seed..seed + 64)
        .map(|s| (s, banded(s)))
        .find(|(_, a)| {
            (2..=4).all(|n| {
                let (_, split) = split_of(n, a);
                split.parts().iter().any(|p| p.carries_to().is_some()) && split_by_column(&split)
            })
        })
        .expect("a seed whose split cuts the giant row on 2, 3 and 4 devices");
    for n in 2..=4 {
        let (devices, split) = split_of(n, &a);
        for k in [1, 3] {
            let what = format!("SpMM k = {k} on {n} devices, LB_TEST_SEED={seed}");
            let b0 = random_vec(64 * k, seed + k as u64);
            let mut x = devices.replicate(&b0).expect("replicate");
            let mut spare = devices.replicated_zeros::<f32>(64 * k).expect("zeros");
            let mut c = split.outputs::<f32>(k).expect("outputs");
            let reduction = common::spmm::REDUCTION.expect("spmm reduces");
            split
                .iterate_async(reduction, 2, &mut x, &mut spare, &mut c, |p, s, b, c| {
                    common::spmm::launch_with_async(s, Schedule::MergePath, p.tiles(), b, k, c)
                })
                .and_then(|p| p.wait())
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            // Two steps: `spare` holds the first one's result, `x` the second's.
            for (d, (first, second)) in spare
                .download_all()
                .expect("download")
                .iter()
                .zip(&x.download_all().expect("download"))
                .enumerate()
            {
                assert_spmm_close(&a, &b0, k, first, &format!("{what}, step 1, device {d}"));
                assert_spmm_close(&a, first, k, second, &format!("{what}, step 2, device {d}"));
            }
        }
        let g = graphs::nasty_graph(300, 6, 4, seed + n as u64);
        let at = with_band(&pull_graph(&g), 8, |r, c| 0.5 + r.abs_diff(c) as f32);
        let split = MultiCsr::upload_with(&devices, &at, options).expect("upload");
        assert!(split_by_column(&split), "{n} devices");
        let mut dist = vec![f32::INFINITY; at.num_rows];
        dist[0] = 0.0;
        let mut x = devices.replicate(&dist).expect("replicate");
        let mut spare = devices.replicated_zeros::<f32>(at.num_rows).expect("zeros");
        let mut out = split.outputs::<f32>(1).expect("outputs");
        let rounds = 7;
        split
            .iterate_async(
                relax_pull::REDUCTION.expect("min"),
                rounds,
                &mut x,
                &mut spare,
                &mut out,
                |p, s, d, o| relax_pull::launch_with_async(s, Schedule::Lrb, p.tiles(), d, o),
            )
            .and_then(|p| p.wait())
            .unwrap_or_else(|e| panic!("Bellman-Ford on {n} devices: {e}"));
        for _ in 0..rounds {
            dist = (0..at.num_rows)
                .map(|v| {
                    at.row(v)
                        .map(|e| dist[at.col_indices[e] as usize] + at.values[e])
                        .fold(f32::INFINITY, f32::min)
                })
                .collect();
        }
        for (d, copy) in x.download_all().expect("download").iter().enumerate() {
            assert_eq!(
                copy, &dist,
                "Bellman-Ford on {n} devices, device {d}, LB_TEST_SEED={seed}"
            );
        }
        // A rectangular tile set has no iteration; outputs made by split_rows have no room for
        // the partial products.
        let wide = random_csr(Shape::Random, 90, 60, seed);
        let wide = MultiCsr::upload_with(&devices, &wide, options).expect("upload");
        let mut y = wide.outputs::<f32>(1).expect("outputs");
        let mut xs = devices.replicated_zeros::<f32>(90).expect("zeros");
        let mut spare = devices.replicated_zeros::<f32>(90).expect("zeros");
        let spmv = |p: &lb::multi::CsrPart<f32>,
                    s: &Stream,
                    x: &DeviceBuffer<f32>,
                    y: &mut DeviceBuffer<f32>| {
            common::spmv::launch_with_async(s, Schedule::MergePath, p.tiles(), x, y)
        };
        let err = wide
            .iterate_async(sum(), 1, &mut xs, &mut spare, &mut y, spmv)
            .err()
            .expect("a rectangular tile set");
        assert!(err.to_string().contains("square"), "{err}");
        let mut rows = split
            .split_rows(&vec![0.0f32; at.num_rows], 1)
            .expect("split rows");
        let mut spare = devices.replicated_zeros::<f32>(at.num_rows).expect("zeros");
        let err = split
            .iterate_async(sum(), 2, &mut x, &mut spare, &mut rows, spmv)
            .err()
            .expect("outputs without partial products");
        assert!(err.to_string().contains("MultiCsr::outputs"), "{err}");
    }
}

/// The model that picks the parts to split by column, on the shares an R-MAT of 8.4 M rows and
/// 131 M atoms gets (rows and atoms per device from its merge-path split, own-column atoms from
/// sampling its edges): the devices with few long rows, which receive most of `x`, are split;
/// those with most of the rows, for which a second pass costs more than their wait, are not.
#[test]
fn parts_are_split_by_column_where_the_early_products_outweigh_a_second_pass() {
    use lb::multi::column_halves_pay;
    let n = 8_388_608;
    // (rows, own-column atoms) of each device, on four devices and on two.
    for (rows, own) in [
        (270_000, 8_600_000),
        (1_050_000, 7_500_000),
        (2_900_000, 8_000_000),
    ] {
        assert!(
            column_halves_pay(own, rows, n - rows),
            "{rows} rows, {own} own"
        );
    }
    assert!(!column_halves_pay(6_300_000, 4_200_000, n - 4_200_000));
    assert!(column_halves_pay(30_000_000, 1_300_000, n - 1_300_000));
    assert!(!column_halves_pay(34_000_000, 7_100_000, n - 7_100_000));
    // Nothing to start early, or nothing to wait for.
    assert!(!column_halves_pay(0, 10, 1000));
    assert!(!column_halves_pay(1000, 10, 0));
}

/// Rows shorter than a 64th of a device's atoms are not cut between devices: no reduce.
#[test]
fn short_rows_stay_whole_and_long_ones_are_cut() {
    let devices = Devices::simulators(4).expect("simulators");
    let a = random_csr(Shape::Random, 400, 50, seed());
    let split = MultiCsr::upload(&devices, &a).expect("upload");
    let longest = (0..a.num_rows).map(|r| a.row(r).len()).max().unwrap_or(0);
    if longest < a.nnz() / 4 / 64 {
        assert!(split.parts().iter().all(|p| p.carries_to().is_none()));
    }
    let g = giant_row(40, 3000, seed());
    let split = MultiCsr::upload(&devices, &g).expect("upload");
    assert_eq!(
        split
            .parts()
            .iter()
            .filter(|p| p.carries_to().is_some())
            .count(),
        3
    );
}

#[test]
fn a_square_matrix_iterates_with_the_gathered_result() {
    let devices = Devices::simulators(3).expect("simulators");
    let mut a = giant_row(64, 64, seed());
    a.num_cols = 64;
    iterate_spmv(&devices, &a, "square giant row", Schedule::MergePath);
}

#[test]
fn spmm_lanes_are_combined_across_devices() {
    let seed = seed();
    for n in [2, 3, 4] {
        let devices = Devices::simulators(n).expect("simulators");
        for (name, a) in matrices(seed) {
            for k in [1, 3, 8] {
                let split = MultiCsr::upload(&devices, &a).expect("upload");
                let b_host = random_vec(a.num_cols * k, seed + k as u64);
                let b = devices.replicate(&b_host).expect("replicate");
                let mut c = split.outputs::<f32>(k).expect("outputs");
                let reduction = common::spmm::REDUCTION.expect("spmm reduces");
                split
                    .launch(reduction, &mut c, |part, stream, c| {
                        common::spmm::launch_with_async(
                            stream,
                            Schedule::MergePath,
                            part.tiles(),
                            b.on(part.index()),
                            k,
                            c,
                        )
                    })
                    .expect("launch");
                let got = split.download(&c).expect("download");
                assert_spmm_close(
                    &a,
                    &b_host,
                    k,
                    &got,
                    &format!("{name}, k = {k}, {n} devices"),
                );
            }
        }
    }
}

#[test]
fn min_reductions_combine_with_min_and_empty_rows_keep_the_identity() {
    let seed = seed();
    let devices = Devices::simulators(4).expect("simulators");
    for (name, a) in matrices(seed) {
        let a = common::to_f64(&a);
        let x_host: Vec<f64> = random_vec(a.num_cols, seed + 3)
            .into_iter()
            .map(f64::from)
            .collect();
        let mut want = vec![0.0f64; a.num_rows];
        common::row_min::cpu(&a, &x_host, &mut want);
        let split = MultiCsr::upload(&devices, &a).expect("upload");
        let x = devices.replicate(&x_host).expect("replicate");
        let mut lo = split.outputs::<f64>(1).expect("outputs");
        let reduction = common::row_min::REDUCTION.expect("a reduce kernel");
        assert_eq!(reduction.op, Reduce::Min);
        split
            .launch(reduction, &mut lo, |part, stream, lo| {
                common::row_min::launch_with_async(
                    stream,
                    Schedule::Lrb,
                    part.tiles(),
                    x.on(part.index()),
                    lo,
                )
            })
            .expect("launch");
        // A minimum does not depend on the order: exactly the sequential result.
        assert_eq!(split.download(&lo).expect("download"), want, "{name}");
    }
}

#[test]
fn an_epilogue_needs_whole_rows_and_gets_them() {
    let devices = Devices::simulators(3).expect("simulators");
    let a = giant_row(30, 500, seed());
    let x_host = random_vec(a.num_cols, 5);
    let old = random_vec(a.num_rows, 6);
    let (alpha, beta) = (2.0f32, -0.5f32);
    let reduction = axpby::REDUCTION.expect("a reduce kernel");
    assert!(reduction.whole_rows);

    let cut = MultiCsr::upload(&devices, &a).expect("upload");
    assert!(cut.parts().iter().any(|p| p.carries_to().is_some()));
    let mut y = cut.outputs::<f32>(1).expect("outputs");
    let x = devices.replicate(&x_host).expect("replicate");
    let err = cut
        .launch(reduction, &mut y, |_, _, _| {
            unreachable!("nothing is launched")
        })
        .expect_err("a cut row under an epilogue");
    assert!(err.to_string().contains("upload_whole_rows"), "{err}");

    let whole = MultiCsr::upload_whole_rows(&devices, &a).expect("upload");
    assert!(whole.parts().iter().all(|p| p.carries_to().is_none()));
    // Each part's output starts as its rows of the old y.
    let mut y = whole.split_rows(&old, 1).expect("split");
    whole
        .launch(reduction, &mut y, |part, stream, y| {
            axpby::launch_with_async(
                stream,
                Schedule::MergePath,
                part.tiles(),
                x.on(part.index()),
                alpha,
                beta,
                y,
            )
        })
        .expect("launch");
    let got = whole.download(&y).expect("download");
    for row in 0..a.num_rows {
        let sum: f64 = a
            .row(row)
            .map(|nz| f64::from(a.values[nz]) * f64::from(x_host[a.col_indices[nz] as usize]))
            .sum();
        let want = f64::from(alpha) * sum + f64::from(beta) * f64::from(old[row]);
        let scale: f64 = a
            .row(row)
            .map(|nz| f64::from(a.values[nz]).abs())
            .sum::<f64>()
            + 1.0;
        assert!(
            (f64::from(got[row]) - want).abs() <= 1e-5 * scale * 4.0,
            "row {row}: {} vs {want}",
            got[row]
        );
    }
}

#[test]
fn mismatched_outputs_and_devices_are_errors() {
    let devices = Devices::simulators(2).expect("simulators");
    let other = Devices::simulators(3).expect("simulators");
    let a = random_csr(Shape::Random, 20, 20, 1);
    let split = MultiCsr::upload(&devices, &a).expect("upload");
    let x = devices.replicate(&random_vec(20, 2)).expect("replicate");
    let mut wrong_count = MultiCsr::upload(&other, &a)
        .expect("upload")
        .outputs::<f32>(1)
        .expect("outputs");
    let launch = |part: &lb::multi::CsrPart<f32>, stream: &Stream, y: &mut DeviceBuffer<f32>| {
        common::spmv::launch_with_async(
            stream,
            Schedule::MergePath,
            part.tiles(),
            x.on(part.index()),
            y,
        )
    };
    let err = split
        .launch(sum(), &mut wrong_count, launch)
        .expect_err("3 outputs for 2 parts");
    assert!(err.to_string().contains("outputs"), "{err}");
    let twin = Devices::simulators(2).expect("simulators");
    let mut elsewhere = MultiCsr::upload(&twin, &a)
        .expect("upload")
        .outputs::<f32>(1)
        .expect("outputs");
    let err = split
        .launch(sum(), &mut elsewhere, launch)
        .expect_err("outputs on another group's devices");
    assert!(err.to_string().contains("part 0"), "{err}");
    let mut gathered = other.replicated_zeros::<f32>(20).expect("zeros");
    let y = split.outputs::<f32>(1).expect("outputs");
    assert!(
        split.all_gather(&y, &mut gathered).is_err(),
        "copies on other devices"
    );
    assert!(Devices::simulators(0).is_err());
    assert!(Devices::cuda(&[0, 0]).is_err());
    assert!(
        split.split_rows(&[1.0f32; 19], 1).is_err(),
        "one value short"
    );
    let ranked = common::row_max_col::REDUCTION.expect("a reduce kernel");
    assert!(
        ranked.whole_rows,
        "an atom's rank restarts where a row is cut"
    );
}

/// Every transport the GPUs of `devices` can use: the peer transports need peer access.
fn transports(devices: &Devices) -> &'static [Transport] {
    if devices.peer_access() {
        &[
            Transport::PeerStores,
            Transport::PeerCopy,
            Transport::PeerKernel,
            Transport::Nccl,
        ]
    } else {
        &[Transport::Nccl]
    }
}

/// Every GPU of the machine (two or more, through NCCL): the iterative SpMV and SpMM agree
/// with the f64 reference, as on the simulators.
#[test]
#[ignore = "needs two or more GPUs and NCCL"]
fn spmv_and_spmm_on_every_gpu() {
    let devices = Devices::cuda_all().expect("GPUs");
    assert!(devices.count() >= 2, "{devices:?}");
    for &t in transports(&devices) {
        devices.set_transport(t).expect("transport");
        for (name, a) in matrices(seed()) {
            for &s in &SCHEDULES {
                iterate_spmv(&devices, &a, &format!("{name} on the GPUs, {t:?}"), s);
            }
            let options = SplitOptions {
                chunks: Some(3),
                ..SplitOptions::default()
            };
            let what = format!("{name} on the GPUs in 3 chunks, {t:?}");
            iterate_spmv_split(&devices, &a, &what, Schedule::MergePath, options);
        }
        let a = giant_row(5000, 200_000, 3);
        for chunks in [1, 4] {
            let options = SplitOptions {
                chunks: Some(chunks),
                ..SplitOptions::default()
            };
            let what = format!("large giant row on the GPUs in {chunks} chunks, {t:?}");
            iterate_spmv_split(&devices, &a, &what, Schedule::MergePath, options);
        }
    }
}

/// Every GPU of the machine, and three of them where there are more: twenty SpMV steps
/// enqueued back to back on matrices of two million rows (each step's kernels and all-gather
/// behind the last's, with no wait), one of them skewed so that one device's piece is relayed,
/// on every transport, in one chunk and in three, and in one call with each device's own
/// columns first (one chunk and two), end exactly where the host's iteration does.
#[test]
#[ignore = "needs two or more GPUs and NCCL"]
fn iterations_enqueued_back_to_back_on_every_gpu() {
    let all = Devices::cuda_all().expect("GPUs");
    assert!(all.count() >= 2, "{all:?}");
    let mut groups = vec![all.clone()];
    if all.count() > 3 {
        groups.push(Devices::cuda(&[0, 1, 2]).expect("three GPUs"));
    }
    for devices in &groups {
        iterate_async_on_gpus(devices);
    }
}

fn iterate_async_on_gpus(devices: &Devices) {
    for &t in transports(devices) {
        devices.set_transport(t).expect("transport");
        let mut configs = vec![(1, false, 2), (3, false, 2), (1, true, 1)];
        if t == Transport::PeerCopy {
            configs.push((2, true, 1));
        }
        for (chunks, local_columns_first, schedules) in configs {
            let options = SplitOptions {
                chunks: Some(chunks),
                local_columns_first,
                ..SplitOptions::default()
            };
            for &schedule in &[Schedule::MergePath, Schedule::ThreadMapped][..schedules] {
                for skewed in [false, true] {
                    let what = format!("{} GPUs, {t:?}", devices.count());
                    eprintln!("{what}: {chunks} chunks, own columns first {local_columns_first}, {schedule}, skewed {skewed}");
                    let how = (options, local_columns_first);
                    iterate_async(devices, (2_000_000, skewed), &what, schedule, how, 20);
                }
            }
        }
    }
}

/// One level of a pull BFS on the transpose (row v lists v's in-neighbours; a 0-valued self
/// loop on every vertex carries its own depth): the smallest of the vertex's depth and
/// `level + 1` for an in-neighbour at `level`. No epilogue, so a cut row combines with min.
#[load_balanced(schedule = "merge_path", reduce = "min", output = "next")]
fn bfs_pull(at: &Csr<f32>, depth: &[u32], level: u32, #[atom] e: usize) -> u32 {
    let d = depth[at.col_indices[e] as usize];
    if at.values[e] == 0.0 {
        d
    } else if d == level {
        level + 1
    } else {
        u32::MAX
    }
}

/// One Bellman-Ford round on the transpose with weights in the values (0 on the self loops).
#[load_balanced(schedule = "lrb", reduce = "min", output = "next")]
fn relax_pull(at: &Csr<f32>, dist: &[f32], #[atom] e: usize) -> f32 {
    dist[at.col_indices[e] as usize] + at.values[e]
}

/// The transpose of `g` with |weights| and a 0-valued self loop on every vertex.
fn pull_graph(g: &Csr<f32>) -> Csr<f32> {
    let mut triplets: Vec<(usize, usize, f32)> = (0..g.num_rows)
        .flat_map(|u| g.row(u).map(move |e| (u, e)))
        .filter(|&(u, e)| g.col_indices[e] as usize != u)
        .map(|(u, e)| (g.col_indices[e] as usize, u, g.values[e].abs() + 0.25))
        .collect();
    triplets.extend((0..g.num_rows).map(|v| (v, v, 0.0)));
    Csr::from_triplets(g.num_rows, g.num_rows, triplets).expect("a valid transpose")
}

/// Iterates `step` on `devices` from `start` until nothing changes; the final array.
fn until_fixed<U: lb::Element + PartialEq>(
    devices: &Devices,
    at: &Csr<f32>,
    start: Vec<U>,
    mut step: impl FnMut(
        &lb::multi::CsrPart<f32>,
        &Stream,
        &DeviceBuffer<U>,
        u32,
        &mut DeviceBuffer<U>,
    ) -> lb::Result<Pending>,
    reduction: Reduction,
) -> Vec<U> {
    let split = MultiCsr::upload(devices, at).expect("upload");
    let mut current = devices.replicate(&start).expect("replicate");
    let mut next = devices.replicated_zeros::<U>(at.num_rows).expect("zeros");
    let mut out = split.outputs::<U>(1).expect("outputs");
    let mut last = start;
    for level in 0..at.num_rows as u32 + 1 {
        split
            .launch_and_gather(reduction, &mut out, &mut next, |part, stream, o| {
                step(part, stream, current.on(part.index()), level, o)
            })
            .expect("launch");
        let now = next.on(0).download().expect("download");
        if now == last {
            return now;
        }
        last = now;
        std::mem::swap(&mut current, &mut next);
    }
    panic!("no fixed point after {} rounds", at.num_rows + 1);
}

/// Level-synchronous BFS and Bellman-Ford SSSP across `n` devices give exactly the results of
/// one device, and those agree with a queue BFS and Dijkstra on the host.
fn graph_apps_agree(n: usize, g: &Csr<f32>, source: usize) {
    let at = pull_graph(g);
    let bfs = |devices: &Devices| {
        let mut depth = vec![u32::MAX; g.num_rows];
        depth[source] = 0;
        until_fixed(
            devices,
            &at,
            depth,
            |part, stream, d, level, o| {
                bfs_pull::launch_with_async(stream, Schedule::MergePath, part.tiles(), d, level, o)
            },
            bfs_pull::REDUCTION.expect("min"),
        )
    };
    let sssp = |devices: &Devices| {
        let mut dist = vec![f32::INFINITY; g.num_rows];
        dist[source] = 0.0;
        until_fixed(
            devices,
            &at,
            dist,
            |part, stream, d, _, o| {
                relax_pull::launch_with_async(stream, Schedule::Lrb, part.tiles(), d, o)
            },
            relax_pull::REDUCTION.expect("min"),
        )
    };
    // n = 0: every GPU of the machine, at least two.
    let (one, many) = if n == 0 {
        let gpus = Devices::cuda_all().expect("GPUs");
        assert!(gpus.count() >= 2, "{gpus:?}");
        (Devices::cuda(&[0]).expect("GPU 0"), gpus)
    } else {
        let sims = Devices::simulators(n).expect("simulators");
        (Devices::simulators(1).expect("a simulator"), sims)
    };
    let depth = bfs(&many);
    assert_eq!(
        depth,
        bfs(&one),
        "BFS on {} devices against one",
        many.count()
    );
    assert_eq!(
        depth,
        lb::algorithms::bfs_levels(g, source),
        "against a queue BFS"
    );
    let dist = sssp(&many);
    assert_eq!(
        dist,
        sssp(&one),
        "SSSP on {} devices against one",
        many.count()
    );
    let want = dijkstra(&at, source);
    for (v, (&got, &w)) in dist.iter().zip(&want).enumerate() {
        assert!(
            (got.is_infinite() && w.is_infinite())
                || (f64::from(got) - w).abs() <= 1e-4 * w.max(1.0),
            "vertex {v}: {got} against Dijkstra's {w}"
        );
    }
}

/// Dijkstra on the pull graph's transpose, in f64.
fn dijkstra(at: &Csr<f32>, source: usize) -> Vec<f64> {
    let mut out_edges = vec![Vec::new(); at.num_rows];
    for v in 0..at.num_rows {
        for e in at.row(v) {
            let u = at.col_indices[e] as usize;
            if u != v {
                out_edges[u].push((v, f64::from(at.values[e])));
            }
        }
    }
    let mut dist = vec![f64::INFINITY; at.num_rows];
    let mut heap = std::collections::BinaryHeap::new();
    dist[source] = 0.0;
    heap.push((std::cmp::Reverse(0u64), source));
    while let Some((std::cmp::Reverse(bits), u)) = heap.pop() {
        let d = f64::from_bits(bits);
        if d > dist[u] {
            continue;
        }
        for &(v, w) in &out_edges[u] {
            if d + w < dist[v] {
                dist[v] = d + w;
                heap.push((std::cmp::Reverse((d + w).to_bits()), v));
            }
        }
    }
    dist
}

#[test]
fn bfs_and_sssp_across_simulated_devices_match_one_device() {
    let seed = seed();
    for n in [2, 3, 4] {
        let g = graphs::nasty_graph(300, 3, 4, seed + n as u64);
        graph_apps_agree(n, &g, 0);
    }
}

/// An R-MAT graph (Chakrabarti, Zhan & Faloutsos; Graph500's probabilities 0.57, 0.19, 0.19,
/// 0.05) with `2^scale` vertices and `edge_factor` edges per vertex, weights in [0.25, 1.25).
fn rmat(scale: u32, edge_factor: usize, seed: u64) -> Csr<f32> {
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let n = 1usize << scale;
    let triplets: Vec<(usize, usize, f32)> = (0..n * edge_factor)
        .map(|_| {
            let (mut r, mut c) = (0, 0);
            for _ in 0..scale {
                let p = next() % 100;
                r = 2 * r + usize::from(p >= 76);
                c = 2 * c + usize::from((57..76).contains(&p) || p >= 95);
            }
            (r, c, 0.25 + (next() % 1000) as f32 / 1000.0)
        })
        .collect();
    Csr::from_triplets(n, n, triplets).expect("a valid R-MAT graph")
}

/// BFS and SSSP on every GPU give the one-GPU result on an R-MAT graph of `2^LB_RMAT_SCALE`
/// vertices (default 2^18) and 16 edges per vertex.
#[test]
#[ignore = "needs two or more GPUs and NCCL"]
fn bfs_and_sssp_on_every_gpu_match_one_gpu() {
    let scale = std::env::var("LB_RMAT_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(18);
    let g = rmat(scale, 16, 5);
    // The vertex with the most out-edges, so the traversal reaches the giant component.
    let source = (0..g.num_rows).max_by_key(|&v| g.row(v).len()).unwrap_or(0);
    let started = std::time::Instant::now();
    graph_apps_agree(0, &g, source);
    eprintln!(
        "R-MAT 2^{scale}: {} vertices, {} edges, BFS and SSSP on every GPU = one GPU = the \
         references ({:.1} s)",
        g.num_rows,
        g.nnz(),
        started.elapsed().as_secs_f64()
    );
}

/// y = A·x in half storage: loads widen to f32, each part's result rounds to f16.
#[load_balanced(schedule = "merge_path", reduce = "sum", output = "y")]
fn hspmv(a: &Csr<lb::f16>, x: &[lb::f16], #[atom] nz: usize) -> lb::f16 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

#[test]
fn half_outputs_combine_cut_rows_in_f32_and_round_once_more() {
    let a32 = giant_row(40, 600, seed());
    let a: Csr<lb::f16> = Csr::new(
        a32.num_rows,
        a32.num_cols,
        a32.row_offsets.clone(),
        a32.col_indices.clone(),
        a32.values.iter().map(|&v| lb::f16::from_f32(v)).collect(),
    )
    .expect("valid");
    let x: Vec<lb::f16> = random_vec(a.num_cols, 4)
        .into_iter()
        .map(lb::f16::from_f32)
        .collect();
    let devices = Devices::simulators(3).expect("simulators");
    let split = MultiCsr::upload(&devices, &a).expect("upload");
    assert!(split.parts().iter().any(|p| p.carries_to().is_some()));
    let xs = devices.replicate(&x).expect("replicate");
    let mut y = split.outputs::<lb::f16>(1).expect("outputs");
    split
        .launch(hspmv::REDUCTION.expect("sum"), &mut y, |part, stream, y| {
            hspmv::launch_with_async(
                stream,
                Schedule::MergePath,
                part.tiles(),
                xs.on(part.index()),
                y,
            )
        })
        .expect("launch");
    let got = split.download(&y).expect("download");
    for (row, value) in got.iter().enumerate() {
        let (mut exact, mut magnitude) = (0.0f64, 0.0f64);
        for nz in a.row(row) {
            let t = f64::from(a.values[nz].to_f32())
                * f64::from(x[a.col_indices[nz] as usize].to_f32());
            exact += t;
            magnitude += t.abs();
        }
        // Up to four roundings to f16 (three pieces of the cut row and their combination),
        // each at most 2^-11 of a value bounded by the magnitude.
        let tol = 4.0 / 2048.0 * magnitude + 1e-7;
        let value = f64::from(value.to_f32());
        assert!(
            (value - exact).abs() <= tol,
            "row {row}: {value} vs {exact}"
        );
    }
}

/// Two buffers of `n` elements on `dev` holding `fill`, and the table of their addresses.
fn mirrors<T: lb::Element>(
    dev: &Device,
    n: usize,
    fill: T,
) -> (Vec<DeviceBuffer<T>>, DeviceBuffer<u64>) {
    let bufs: Vec<DeviceBuffer<T>> = (0..2)
        .map(|_| dev.upload(&vec![fill; n]).unwrap())
        .collect();
    let table = dev
        .upload(&bufs.iter().map(|b| b.device_addr()).collect::<Vec<_>>())
        .unwrap();
    (bufs, table)
}

/// `launch` on `stream` with `table`'s buffers as output mirrors, waited for; the mirrors are
/// turned off after it.
fn with_mirrors(
    stream: &Stream,
    table: &DeviceBuffer<u64>,
    launch: impl FnOnce() -> lb::Result<Pending>,
) {
    // SAFETY: every caller's table lists buffers of this device holding at least the launch's
    // output length, alive until after the wait.
    unsafe { stream.set_output_mirrors(Some(table)) }.unwrap();
    launch().and_then(Pending::wait).unwrap();
    // SAFETY: turning the mirrors off asks nothing.
    unsafe { stream.set_output_mirrors(None) }.unwrap();
}

/// A launch with output mirrors stores every output element at the same element of every
/// mirror too, under every schedule (SpMV), with lanes stored as vectors (SpMM k = 4, 8) and one
/// by one (k = 1, 3, 33), in half precision; a launch after the mirrors are turned off leaves
/// them alone. Mirrors here are buffers of the same simulator: what the GPUs of a group do with
/// each other's memory.
#[test]
fn output_mirrors_receive_every_element_under_every_schedule() {
    let dev = Device::simulator();
    let seed = seed();
    let sentinel = -7.25f32;
    let stream = dev.stream();
    for (name, a) in matrices(seed) {
        let da = DeviceCsr::upload(&dev, &a).unwrap();
        let x = dev.upload(&random_vec(a.num_cols, seed + 1)).unwrap();
        for &s in common::spmv::SCHEDULES {
            let mut y = dev.zeros::<f32>(a.num_rows).unwrap();
            let (mut bufs, table) = mirrors(&dev, a.num_rows, sentinel);
            with_mirrors(&stream, &table, || {
                common::spmv::launch_with_async(&stream, s, &da, &x, &mut y)
            });
            let got = y.download().unwrap();
            for b in &mut bufs {
                assert_eq!(b.download().unwrap(), got, "{name}, {s}");
                b.upload_into(&vec![sentinel; a.num_rows]).unwrap();
            }
            common::spmv::launch_with_async(&stream, s, &da, &x, &mut y)
                .and_then(Pending::wait)
                .unwrap();
            for b in &bufs {
                let after = b.download().unwrap();
                assert!(
                    after.iter().all(|&v| v == sentinel),
                    "{name}, {s}: {after:?}"
                );
            }
        }
        for k in [1, 3, 4, 8, 33] {
            let b = dev
                .upload(&random_vec(a.num_cols * k, seed + k as u64))
                .unwrap();
            for s in [
                Schedule::ThreadMapped,
                Schedule::GroupMapped(8),
                Schedule::MergePath,
            ] {
                let mut c = dev.zeros::<f32>(a.num_rows * k).unwrap();
                let (bufs, table) = mirrors(&dev, a.num_rows * k, sentinel);
                with_mirrors(&stream, &table, || {
                    common::spmm::launch_with_async(&stream, s, &da, &b, k, &mut c)
                });
                let got = c.download().unwrap();
                for m in &bufs {
                    assert_eq!(m.download().unwrap(), got, "{name}, k = {k}, {s}");
                }
            }
        }
        let h: Csr<lb::f16> = Csr::new(
            a.num_rows,
            a.num_cols,
            a.row_offsets.clone(),
            a.col_indices.clone(),
            a.values.iter().map(|&v| lb::f16::from_f32(v)).collect(),
        )
        .unwrap();
        let dh = DeviceCsr::upload(&dev, &h).unwrap();
        let xh: Vec<lb::f16> = random_vec(a.num_cols, seed + 2)
            .into_iter()
            .map(lb::f16::from_f32)
            .collect();
        let xh = dev.upload(&xh).unwrap();
        let mut yh = dev.zeros::<lb::f16>(a.num_rows).unwrap();
        let (bufs, table) = mirrors(&dev, a.num_rows, lb::f16::from_f32(sentinel));
        with_mirrors(&stream, &table, || {
            hspmv::launch_with_async(&stream, Schedule::MergePath, &dh, &xh, &mut yh)
        });
        let got = yh.download().unwrap();
        for m in &bufs {
            assert_eq!(m.download().unwrap(), got, "{name}, f16");
        }
    }
    let other = Device::simulator();
    let foreign = other.upload(&[0u64]).unwrap();
    // SAFETY: refused before anything is stored.
    let err = unsafe { stream.set_output_mirrors(Some(&foreign)) }.unwrap_err();
    assert!(matches!(err, lb::Error::DeviceMismatch { .. }), "{err}");
}

/// Depths, level count and edges expanded by a search of `bfs` from `source`, checked against
/// a queue BFS on the host (`bfs` may have searched before: its buffers are reused).
/// Every way of exchanging the claims is tried, one search after the other.
fn check_bfs_multi(bfs: &mut MultiBfs, g: &Csr<f32>, source: usize, schedule: Schedule) {
    for exchange in [
        FrontierExchange::Auto,
        FrontierExchange::ClaimLists,
        FrontierExchange::AllReduce,
    ] {
        bfs.set_exchange(exchange);
        check_bfs_search(bfs, g, source, schedule, exchange);
    }
}

fn check_bfs_search(
    bfs: &mut MultiBfs,
    g: &Csr<f32>,
    source: usize,
    schedule: Schedule,
    exchange: FrontierExchange,
) {
    let r = bfs.search(source, schedule).expect("bfs_multi");
    let want = lb::algorithms::bfs_levels(g, source);
    assert_eq!(r.depth, want, "{schedule}, {exchange:?}, source {source}");
    // Two levels or more mean one exchange or more; both phases are parts of the wall time.
    assert!(r.expand_ms > 0.0 || r.levels == 0, "{r:?}");
    assert!(r.exchange_ms > 0.0 || r.levels < 2, "{r:?}");
    assert!(r.expand_ms + r.exchange_ms <= r.wall_ms, "{r:?}");
    let deepest = want.iter().filter(|&&d| d != u32::MAX).max().copied();
    assert_eq!(r.levels, deepest.map_or(0, |d| d as usize + 1), "levels");
    // Every level but the last claims something, and its claims travel one way or the other.
    // Level k claims the vertices at depth k + 1, each on at most every device: `Auto` lists
    // the levels whose claims are surely few enough, and no level whose vertices alone are
    // too many.
    let mut at_depth = vec![0usize; r.levels + 1];
    for &d in want.iter().filter(|&&d| d != u32::MAX) {
        at_depth[d as usize] += 1;
    }
    let devices = bfs.graph().devices().count();
    let room = MultiBfs::CLAIMS_PER_VERTEX * g.num_rows as f64;
    let listed = |claims: &dyn Fn(usize) -> usize| {
        (1..r.levels)
            .filter(|&k| claims(at_depth[k]) as f64 <= room)
            .count()
    };
    let (least, most) = match exchange {
        FrontierExchange::AllReduce => (0, 0),
        FrontierExchange::ClaimLists => (r.levels.saturating_sub(1), r.levels.saturating_sub(1)),
        FrontierExchange::Auto => (listed(&|c| c * devices), listed(&|c| c)),
    };
    assert!(
        (least..=most).contains(&r.claim_list_levels),
        "{exchange:?}: {} levels by claim lists, not in {least}..={most}",
        r.claim_list_levels
    );
    let edges: usize = (0..g.num_rows)
        .filter(|&v| want[v] != u32::MAX)
        .map(|v| g.row(v).len())
        .sum();
    assert_eq!(r.edges, edges as u64, "edges expanded");
}

/// A hub (the middle leaf's number) with out-edges to `leaves` leaves and back, and a path
/// hanging off the last leaf: the hub's row lies in the middle of the atoms and is long enough
/// to be cut between devices, and the path makes many levels.
fn star_with_tail(leaves: usize, tail: usize) -> Csr<f32> {
    let n = 1 + leaves + tail;
    let hub = leaves / 2;
    let mut triplets: Vec<(usize, usize, f32)> = (0..=leaves)
        .filter(|&v| v != hub)
        .flat_map(|v| [(hub, v, 1.0), (v, hub, 1.0)])
        .collect();
    triplets.extend((leaves..n - 1).map(|v| (v, v + 1, 1.0)));
    Csr::from_triplets(n, n, triplets).expect("a valid star")
}

#[test]
fn bfs_across_simulated_devices_matches_a_queue_bfs() {
    let seed = seed();
    let star = star_with_tail(3000, 40);
    let one = Csr::new(1, 1, vec![0, 0], vec![], vec![]).expect("one vertex");
    for n in 1..=4 {
        let devices = Devices::simulators(n).expect("simulators");
        let nasty = graphs::nasty_graph(300, 3, 4, seed + n as u64);
        let options = [
            SplitOptions::default(),
            SplitOptions {
                whole_rows: true,
                ..SplitOptions::default()
            },
            SplitOptions {
                chunks: Some(2),
                ..SplitOptions::default()
            },
        ];
        for options in options {
            let split = MultiCsr::upload_with(&devices, &nasty, options).expect("upload");
            let mut bfs = MultiBfs::new(&split).expect("buffers");
            for (source, schedule) in [
                (0, Schedule::MergePath),
                ((seed as usize + n) % 300, Schedule::Lrb),
                (299, Schedule::ThreadMapped),
            ] {
                check_bfs_multi(&mut bfs, &nasty, source, schedule);
            }
            let split = MultiCsr::upload_with(&devices, &star, options).expect("upload");
            if n >= 2 && !options.whole_rows {
                assert!(
                    split.parts().iter().any(|p| p.carries_to().is_some()),
                    "the hub's row is cut between devices"
                );
            }
            // From the hub, from a leaf, and from the end of the tail (nothing after it), one
            // search after the other on the same buffers.
            let mut bfs = MultiBfs::new(&split).expect("buffers");
            for source in [1500, seed as usize % 3000, star.num_rows - 1] {
                check_bfs_multi(&mut bfs, &star, source, Schedule::MergePath);
            }
            // More devices than vertices: most parts hold no row.
            let split = MultiCsr::upload_with(&devices, &one, options).expect("upload");
            let r = lb::algorithms::bfs_multi(&split, 0, Schedule::MergePath).expect("one vertex");
            assert_eq!((r.depth, r.levels, r.edges), (vec![0], 1, 0));
        }
    }
}

#[test]
fn bfs_across_devices_rejects_what_is_not_a_search() {
    let devices = Devices::simulators(2).expect("simulators");
    let g = graphs::nasty_graph(50, 2, 3, 4);
    let split = MultiCsr::upload(&devices, &g).expect("upload");
    let err = lb::algorithms::bfs_multi(&split, 50, Schedule::MergePath).expect_err("source");
    assert!(err.to_string().contains("not a vertex"), "{err}");
    let wide = Csr::new(2, 3, vec![0, 1, 2], vec![2, 0], vec![1.0; 2]).expect("2 × 3");
    let split = MultiCsr::upload(&devices, &wide).expect("upload");
    let err = lb::algorithms::bfs_multi(&split, 0, Schedule::MergePath).expect_err("square");
    assert!(err.to_string().contains("square"), "{err}");
}

/// BFS across every GPU gives the queue BFS's depths, as on one GPU, on an R-MAT graph of
/// `2^LB_RMAT_SCALE` vertices (default 2^18).
#[test]
#[ignore = "needs two or more GPUs and NCCL"]
fn bfs_across_every_gpu_matches_one_gpu() {
    let scale = std::env::var("LB_RMAT_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(18);
    let g = rmat(scale, 16, 9);
    let source = (0..g.num_rows).max_by_key(|&v| g.row(v).len()).unwrap_or(0);
    let gpus = Devices::cuda_all().expect("GPUs");
    assert!(gpus.count() >= 2, "{gpus:?}");
    let one = Devices::cuda(&[0]).expect("GPU 0");
    for devices in [&gpus, &one] {
        let split = MultiCsr::upload(devices, &g).expect("upload");
        let mut bfs = MultiBfs::new(&split).expect("buffers");
        for schedule in [Schedule::MergePath, Schedule::Lrb] {
            check_bfs_multi(&mut bfs, &g, source, schedule);
            check_bfs_multi(&mut bfs, &g, g.num_rows - 1, schedule);
        }
    }
}

/// Distances, round count and edges relaxed by a search of `sssp` from `source`, checked
/// against Dijkstra on the host (`sssp` may have searched before: its buffers are reused).
/// Every way of exchanging the claims is tried, one search after the other.
fn check_sssp_multi(sssp: &mut MultiSssp, g: &Csr<f32>, source: usize, schedule: Schedule) {
    for exchange in [
        FrontierExchange::ClaimLists,
        FrontierExchange::AllReduce,
        FrontierExchange::Auto,
    ] {
        sssp.set_exchange(exchange);
        check_sssp_search(sssp, g, (source, schedule), exchange);
    }
}

fn check_sssp_search(
    sssp: &mut MultiSssp,
    g: &Csr<f32>,
    (source, schedule): (usize, Schedule),
    exchange: FrontierExchange,
) {
    let r = sssp.search(source, schedule).expect("MultiSssp");
    let want = lb::algorithms::dijkstra(g, source);
    assert_eq!(r.dist, want, "{schedule}, {exchange:?}, source {source}");
    // The last round lowers nothing (with claims, it is the round that finds none); every
    // other round's claims travel one way or the other.
    let listed = match exchange {
        FrontierExchange::AllReduce => 0..=0,
        FrontierExchange::ClaimLists => r.rounds - 1..=r.rounds - 1,
        FrontierExchange::Auto => 0..=r.rounds - 1,
    };
    assert!(listed.contains(&r.claim_list_rounds), "{exchange:?}: {r:?}");
    assert!(r.relax_ms > 0.0, "{r:?}");
    assert!(r.exchange_ms > 0.0 || r.rounds < 2, "{r:?}");
    assert!(r.relax_ms + r.exchange_ms <= r.wall_ms, "{r:?}");
    // Every reached vertex's out-edges are relaxed at least once.
    let reached: usize = (0..g.num_rows)
        .filter(|&v| want[v].is_finite())
        .map(|v| g.row(v).len())
        .sum();
    assert!(r.edges >= reached as u64, "{} edges < {reached}", r.edges);
    assert!(
        r.rounds >= 1 && r.rounds <= g.num_rows + 1,
        "{} rounds",
        r.rounds
    );
}

/// A source with edges to `k` vertices, each with edges to the same `k` others: the second
/// layer is claimed by every device that holds a row of the first, so a step's claims summed
/// over three or more devices outnumber the vertices (the lists' inboxes grow).
fn two_layers(k: usize) -> Csr<f32> {
    let n = 1 + 2 * k;
    let mut triplets: Vec<(usize, usize, f32)> = (1..=k).map(|a| (0, a, 1.0)).collect();
    for a in 1..=k {
        triplets.extend((k + 1..n).map(|b| (a, b, ((a + b) % 3) as f32)));
    }
    Csr::from_triplets(n, n, triplets).expect("two layers")
}

#[test]
fn searches_across_devices_take_more_claims_than_vertices() {
    let g = two_layers(60);
    for n in [3, 4] {
        let devices = Devices::simulators(n).expect("simulators");
        let split = MultiCsr::upload(&devices, &g).expect("upload");
        let mut bfs = MultiBfs::new(&split).expect("buffers");
        check_bfs_multi(&mut bfs, &g, 0, Schedule::MergePath);
        let mut sssp = MultiSssp::new(&split).expect("buffers");
        check_sssp_multi(&mut sssp, &g, 0, Schedule::MergePath);
    }
}

#[test]
fn sssp_across_simulated_devices_matches_dijkstra() {
    let seed = seed();
    let star = star_with_tail(3000, 40);
    for n in 1..=4 {
        let devices = Devices::simulators(n).expect("simulators");
        // Integer weights 0..=5: every path's f32 sum is exact, so any order of relaxation
        // gives Dijkstra's distances bit for bit.
        let nasty = graphs::nasty_graph(300, 3, 4, seed + 7 * n as u64);
        for options in [
            SplitOptions::default(),
            SplitOptions {
                chunks: Some(2),
                ..SplitOptions::default()
            },
        ] {
            let split = MultiCsr::upload_with(&devices, &nasty, options).expect("upload");
            let mut sssp = MultiSssp::new(&split).expect("buffers");
            for (source, schedule) in [
                (0, Schedule::MergePath),
                ((seed as usize + n) % 300, Schedule::Lrb),
                (150, Schedule::ThreadMapped),
            ] {
                check_sssp_multi(&mut sssp, &nasty, source, schedule);
            }
            // The hub's row cut between parts (two of them on one device with two chunks).
            let split = MultiCsr::upload_with(&devices, &star, options).expect("upload");
            let mut sssp = MultiSssp::new(&split).expect("buffers");
            for source in [1500, seed as usize % 3000, star.num_rows - 1] {
                check_sssp_multi(&mut sssp, &star, source, Schedule::MergePath);
            }
        }
    }
}

#[test]
fn sssp_across_devices_reports_a_negative_cycle() {
    let devices = Devices::simulators(2).expect("simulators");
    let g = Csr::from_triplets(3, 3, vec![(0, 1, 1.0f32), (1, 2, -3.0), (2, 1, 1.0)])
        .expect("a cycle of weight -2");
    let split = MultiCsr::upload(&devices, &g).expect("upload");
    let err = MultiSssp::new(&split)
        .expect("buffers")
        .search(0, Schedule::MergePath)
        .expect_err("a negative cycle");
    assert!(err.to_string().contains("negative"), "{err}");
    let err = MultiSssp::new(&split)
        .expect("buffers")
        .search(3, Schedule::MergePath)
        .expect_err("source");
    assert!(err.to_string().contains("not a vertex"), "{err}");
}

/// SSSP across every GPU gives Dijkstra's distances within f32 rounding, as on one GPU, on an
/// R-MAT graph of `2^LB_RMAT_SCALE` vertices (default 2^18).
#[test]
#[ignore = "needs two or more GPUs and NCCL"]
fn sssp_across_every_gpu_matches_dijkstra() {
    let scale = std::env::var("LB_RMAT_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(18);
    let g = rmat(scale, 16, 11);
    let source = (0..g.num_rows).max_by_key(|&v| g.row(v).len()).unwrap_or(0);
    let want = lb::algorithms::dijkstra(&g, source);
    let gpus = Devices::cuda_all().expect("GPUs");
    assert!(gpus.count() >= 2, "{gpus:?}");
    let one = Devices::cuda(&[0]).expect("GPU 0");
    for devices in [&gpus, &one] {
        let split = MultiCsr::upload(devices, &g).expect("upload");
        let mut sssp = MultiSssp::new(&split).expect("buffers");
        for schedule in [Schedule::MergePath, Schedule::Lrb] {
            let got = sssp.search(source, schedule).expect("MultiSssp").dist;
            for (v, (&got, &w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (got.is_infinite() && w.is_infinite())
                        || (f64::from(got) - f64::from(w)).abs() <= 1e-4 * f64::from(w).max(1.0),
                    "{schedule} on {} GPUs, vertex {v}: {got} against Dijkstra's {w}",
                    devices.count()
                );
            }
        }
    }
}
