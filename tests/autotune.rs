//! `schedule = "auto"` that measures (docs/tuning.md), on the simulator where the cost is the
//! busiest thread's instructions, so every choice is deterministic: the first launch on a tile
//! set runs every candidate and keeps the cheapest (checked against each schedule launched by
//! name), later launches reuse it, a new tile set tunes again, a tuning file carries the choice
//! to another device and to another process and survives garbage, kernels that write through `&mut` slices
//! or push to queues are tuned on scratch copies and leave exactly one launch's result; over a
//! frontier the rule picks from the frontier's tiles. The `gpu_*` twin (ignored without a
//! GPU; `scripts/gpu-run.sh` runs it) tunes by CUDA-event time.

mod common;

use common::{assert_spmv_close, random_csr, random_vec, scatter, spmv, Shape};
use lb::prelude::*;
use lb::{Picked, Tuning};

fn seed() -> u64 {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64);
    eprintln!("seed {s}");
    s
}

/// A fresh file path in the temporary directory (removed by the caller).
fn temp_file(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "lb-autotune-{}-{name}-{}.tsv",
        std::process::id(),
        seed()
    ))
}

/// The busiest thread's instructions of `schedule` launched by name, in a launch after the first
/// (which fills the tile set's caches): the tuner's cost.
fn busiest(dev: &Device, a: &DeviceCsr<f32>, x: &DeviceBuffer<f32>, s: Schedule) -> Option<u64> {
    let mut y = dev.zeros::<f32>(a.num_rows()).unwrap();
    spmv::launch_with(dev, s, a, x, &mut y).ok()?;
    let l = spmv::launch_with(dev, s, a, x, &mut y).ok()?;
    l.sim?.per_thread_instructions.iter().max().copied()
}

#[test]
fn the_first_launch_measures_every_schedule_and_keeps_the_cheapest() {
    let dev = Device::simulator();
    dev.set_tuning(Tuning::Tune);
    dev.set_tuning_file(None);
    let seed = seed();
    for shape in [Shape::Random, Shape::OneGiantRow, Shape::Alternating] {
        let a = random_csr(shape, 300, 200, seed);
        let x = random_vec(a.num_cols, seed ^ 1);
        let da = DeviceCsr::upload(&dev, &a).unwrap();
        let dx = dev.upload(&x).unwrap();
        // Garbage in the output: the result must be the winner's whole write.
        let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
        let first = spmv::launch(&dev, &da, &dx, &mut dy).unwrap();
        let Picked::Tuned(costs) = &first.picked else {
            panic!(
                "{shape:?}: the first launch did not tune: {:?}",
                first.picked
            );
        };
        assert_spmv_close(&a, &x, &dy.download().unwrap(), "tuned launch");
        // Every generated schedule was a candidate, each at the cost it has by name.
        assert_eq!(costs.len(), spmv::SCHEDULES.len(), "{shape:?}: {costs:?}");
        for &(s, c) in costs {
            assert_eq!(busiest(&dev, &da, &dx, s).map(|n| n as f64), Some(c), "{s}");
        }
        let cheapest = costs.iter().map(|c| c.1).fold(f64::INFINITY, f64::min);
        assert_eq!(costs[0].1, cheapest);
        assert_eq!(first.schedule, costs[0].0.name());
        // The next launch reuses the choice without measuring.
        let second = spmv::launch(&dev, &da, &dx, &mut dy).unwrap();
        assert_eq!(second.picked, Picked::Cached);
        assert_eq!(second.schedule, first.schedule);
        assert_spmv_close(&a, &x, &dy.download().unwrap(), "cached launch");
        // The choice belongs to the tile set: a new upload (another matrix as far as lb can
        // tell) is measured again.
        let again = DeviceCsr::upload(&dev, &a).unwrap();
        let third = spmv::launch(&dev, &again, &dx, &mut dy).unwrap();
        assert!(
            matches!(third.picked, Picked::Tuned(_)),
            "{:?}",
            third.picked
        );
    }
}

/// The sum of each frontier row's values: `auto` over a frontier.
#[load_balanced(schedule = "auto", tiles = "frontier", reduce = "sum", output = "y")]
fn frontier_sums(a: &Csr<f32>, frontier: &[u32], #[atom] nz: usize) -> f32 {
    a.values[nz]
}

/// Over a frontier, `auto` picks from the frontier's tiles, not the whole graph's, even with
/// tuning on (a frontier launch is not tuned), and so does `launch_unchecked`: on a graph with
/// one hub row of 50 000 atoms among 20 000 rows of 2, whose statistics say `merge_path`, a
/// frontier of short rows runs `thread_mapped` and one holding the hub `merge_path`; every
/// frontier row's sum matches the host's in f64. Inside a graph capture, where nothing can be
/// waited for, the whole graph's pick runs, and the replay sums right.
#[test]
fn auto_over_a_frontier_picks_from_the_frontiers_tiles() {
    frontier_picks(&Device::simulator());
}

/// The same on a GPU, where the frontier's statistics come from its own kernel and the
/// capture is a CUDA graph's.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_auto_over_a_frontier_picks_from_the_frontiers_tiles() {
    frontier_picks(&Device::cuda(0).expect("this test needs a CUDA GPU"));
}

fn frontier_picks(dev: &Device) {
    dev.set_tuning(Tuning::Tune);
    dev.set_tuning_file(None);
    let s = seed();
    let (n, m) = (20_000, 60_000);
    let mut row_offsets = vec![0usize];
    let mut col_indices: Vec<u32> = (0..50_000).collect();
    row_offsets.push(col_indices.len());
    for r in 1..n {
        let c = (r * 2 + s as usize % 7) % (m - 1);
        col_indices.extend([c as u32, c as u32 + 1]);
        row_offsets.push(col_indices.len());
    }
    let values = random_vec(col_indices.len(), s);
    let a = Csr::new(n, m, row_offsets, col_indices, values).unwrap();
    let da = DeviceCsr::upload(dev, &a).unwrap();
    assert_eq!(
        lb::choose_schedule(frontier_sums::SCHEDULES, da.stats(), 1),
        Schedule::MergePath
    );
    for (frontier, expect) in [
        ((1..700u32).collect::<Vec<_>>(), Schedule::ThreadMapped),
        ((0..700u32).rev().collect::<Vec<_>>(), Schedule::MergePath),
    ] {
        let df = dev.upload(&frontier).unwrap();
        let mut dy = dev.zeros::<f32>(n).unwrap();
        let l = frontier_sums::launch(dev, &da, &df, &mut dy).unwrap();
        assert_eq!(l.schedule, expect.name());
        assert_eq!(l.picked, Picked::Rule);
        // SAFETY: every frontier entry is a row of `a`.
        let u = unsafe { frontier_sums::launch_unchecked(dev, &da, &df, &mut dy) }.unwrap();
        assert_eq!(u.schedule, expect.name());
        let y = dy.download().unwrap();
        for &r in &frontier {
            let r = r as usize;
            let want: f64 = a.row(r).map(|e| f64::from(a.values[e])).sum();
            let tol = 1e-4 * (1.0 + a.row(r).len() as f64).sqrt() * (1.0 + want.abs());
            assert!(
                (f64::from(y[r]) - want).abs() <= tol,
                "row {r}: {} against {want}",
                y[r]
            );
        }
    }
    // Inside a capture nothing can be waited for: the whole graph's pick, and the replay's sums
    // are right.
    let short: Vec<u32> = (1..700).collect();
    let df = dev.upload(&short).unwrap();
    let mut dy = dev.zeros::<f32>(n).unwrap();
    let stream = dev.new_stream().unwrap();
    frontier_sums::launch_with_async(&stream, Schedule::MergePath, &da, &df, &mut dy)
        .unwrap()
        .wait()
        .unwrap();
    dev.fill(&mut dy, 0.0).unwrap();
    stream.wait_for(&dev.stream()).unwrap();
    stream.begin_capture().unwrap();
    let pending = frontier_sums::launch_async(&stream, &da, &df, &mut dy).unwrap();
    assert_eq!(pending.launch().schedule, Schedule::MergePath.name());
    drop(pending);
    let graph = stream.end_capture().unwrap();
    // SAFETY: `da`, `df` and `dy` outlive the replay, which is synchronized here.
    unsafe { graph.launch() }.unwrap();
    stream.synchronize().unwrap();
    let y = dy.download().unwrap();
    for &r in &short {
        let r = r as usize;
        let want: f64 = a.row(r).map(|e| f64::from(a.values[e])).sum();
        assert!(
            (f64::from(y[r]) - want).abs() <= 1e-4 * (1.0 + want.abs()),
            "replayed row {r}"
        );
    }
}

#[test]
fn the_rule_picks_when_tuning_is_off_and_a_schedule_named_is_named() {
    let dev = Device::simulator();
    dev.set_tuning(Tuning::Rule);
    let a = random_csr(Shape::Random, 100, 80, seed());
    let x = random_vec(a.num_cols, 3);
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let dx = dev.upload(&x).unwrap();
    let mut dy = dev.zeros::<f32>(a.num_rows).unwrap();
    let l = spmv::launch(&dev, &da, &dx, &mut dy).unwrap();
    assert_eq!(l.picked, Picked::Rule);
    let rule = lb::choose_schedule(spmv::SCHEDULES, da.stats(), 1);
    assert_eq!(l.schedule, rule.name());
    let named = spmv::launch_with(&dev, Schedule::MergePath, &da, &dx, &mut dy).unwrap();
    assert_eq!(named.picked, Picked::Named);
}

#[test]
fn a_tuning_file_carries_the_choice_to_another_device_and_survives_garbage() {
    let path = temp_file("file");
    std::fs::write(&path, "not a tuning file\n\t\t\n\u{1}\u{2}\n").unwrap();
    let a = random_csr(Shape::Random, 200, 150, seed());
    let x = random_vec(a.num_cols, 5);
    let run = |dev: &Device| {
        dev.set_tuning(Tuning::Tune);
        dev.set_tuning_file(Some(path.clone()));
        let da = DeviceCsr::upload(dev, &a).unwrap();
        let dx = dev.upload(&x).unwrap();
        let mut dy = dev.zeros::<f32>(a.num_rows).unwrap();
        let l = spmv::launch(dev, &da, &dx, &mut dy).unwrap();
        assert_spmv_close(&a, &x, &dy.download().unwrap(), "launch");
        l
    };
    // The garbage lines are skipped with a warning; the measured choice is appended.
    let first = run(&Device::simulator());
    assert!(
        matches!(first.picked, Picked::Tuned(_)),
        "{:?}",
        first.picked
    );
    // A second device (its own memory, caches and file reading, as a second process has)
    // finds the choice for a tile set of the same shape and does not measure.
    let second = run(&Device::simulator());
    assert_eq!(second.picked, Picked::Persisted);
    assert_eq!(second.schedule, first.schedule);
    // A stale entry (a schedule this kernel was not generated for) is ignored.
    let text = std::fs::read_to_string(&path).unwrap();
    let stale = text.replace(&format!("\t{}\n", first.schedule), "\tno_such_schedule\n");
    std::fs::write(&path, stale).unwrap();
    let third = run(&Device::simulator());
    assert!(
        matches!(third.picked, Picked::Tuned(_)),
        "{:?}",
        third.picked
    );
    std::fs::remove_file(&path).unwrap();
}

/// One tuned-or-persisted SpMV on a fresh simulator device through the tuning file `path`, on
/// the matrix of `seed`, checked against the reference.
fn persisted_launch(path: std::path::PathBuf, seed: u64) -> Launch {
    let dev = Device::simulator();
    dev.set_tuning(Tuning::Tune);
    dev.set_tuning_file(Some(path));
    let a = random_csr(Shape::OneGiantRow, 180, 120, seed);
    let x = random_vec(a.num_cols, seed ^ 3);
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let dx = dev.upload(&x).unwrap();
    let mut dy = dev.zeros::<f32>(a.num_rows).unwrap();
    let l = spmv::launch(&dev, &da, &dx, &mut dy).unwrap();
    assert_spmv_close(&a, &x, &dy.download().unwrap(), "launch");
    l
}

/// The tuning file across processes: this process measures and appends its choice to a file that
/// already holds a torn last line (a writer killed mid-line); a second process (this test binary
/// run again, on this test alone, with the file, the matrix's seed and the choice in its
/// environment) reads the file and reuses the choice without measuring.
#[test]
fn a_second_process_reuses_the_persisted_choice() {
    const NAME: &str = "a_second_process_reuses_the_persisted_choice";
    if let Some(path) = std::env::var_os("LB_AUTOTUNE_CHILD_FILE") {
        let var = |name: &str| std::env::var(name).expect("set by the parent process");
        let seed: u64 = var("LB_AUTOTUNE_CHILD_SEED").parse().unwrap();
        let l = persisted_launch(path.into(), seed);
        assert_eq!(l.picked, Picked::Persisted);
        assert_eq!(l.schedule, var("LB_AUTOTUNE_CHILD_SCHEDULE"));
        return;
    }
    let path = temp_file("process");
    std::fs::write(&path, "garbage\tthat was cut off mid-li").unwrap();
    let seed = seed();
    let first = persisted_launch(path.clone(), seed);
    assert!(
        matches!(first.picked, Picked::Tuned(_)),
        "{:?}",
        first.picked
    );
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", NAME, "--nocapture"])
        .env("LB_AUTOTUNE_CHILD_FILE", &path)
        .env("LB_AUTOTUNE_CHILD_SEED", seed.to_string())
        .env("LB_AUTOTUNE_CHILD_SCHEDULE", first.schedule.as_ref())
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "the second process failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A kernel that adds into its `&mut` slices is tuned on scratch copies of them: the first
/// launch measures every schedule, and the caller's buffers (which start non-zero) see exactly one
/// launch's adds, the chosen schedule's, and so does a later launch that reuses the choice.
#[test]
fn kernels_with_side_effects_tune_on_scratch_copies_and_run_once() {
    let dev = Device::simulator();
    dev.set_tuning(Tuning::Tune);
    dev.set_tuning_file(None);
    let seed = seed();
    for shape in [Shape::Random, Shape::OneGiantRow, Shape::Empty] {
        let a = random_csr(shape, 150, 60, seed);
        let da = DeviceCsr::upload(&dev, &a).unwrap();
        let start_counts: Vec<u32> = (0..a.num_cols as u32).map(|c| c % 7).collect();
        let start_sums: Vec<f32> = random_vec(a.num_cols, seed ^ 2);
        let mut counts = dev.upload(&start_counts).unwrap();
        let mut sums = dev.upload(&start_sums).unwrap();
        let first = scatter::launch(&dev, &da, &mut counts, &mut sums).unwrap();
        let Picked::Tuned(costs) = &first.picked else {
            panic!(
                "{shape:?}: the first launch did not tune: {:?}",
                first.picked
            );
        };
        assert_eq!(
            costs.len(),
            scatter::SCHEDULES.len(),
            "{shape:?}: {costs:?}"
        );
        // One launch's adds on top of what the buffers held: no candidate run reached them.
        let (mut want_counts, mut want_sums) = (start_counts.clone(), vec![0f64; a.num_cols]);
        for (s, w) in start_sums.iter().zip(&mut want_sums) {
            *w = f64::from(*s);
        }
        for row in 0..a.num_rows {
            for nz in a.row_offsets[row]..a.row_offsets[row + 1] {
                let c = a.col_indices[nz] as usize;
                want_counts[c] += 1;
                if a.values[nz] >= 0.0 {
                    want_sums[c] += f64::from(a.values[nz]) * (row as f64 + 1.0);
                }
            }
        }
        let check = |counts: &DeviceBuffer<u32>, sums: &DeviceBuffer<f32>, what: &str| {
            assert_eq!(counts.download().unwrap(), want_counts, "{shape:?}: {what}");
            for (c, (got, want)) in sums.download().unwrap().iter().zip(&want_sums).enumerate() {
                let tol = 1e-4 * want.abs().max(1.0) * a.nnz().max(1) as f64;
                assert!(
                    (f64::from(*got) - want).abs() <= tol,
                    "{shape:?}: {what}: column {c}: {got} against {want}"
                );
            }
        };
        check(&counts, &sums, "tuned launch");
        // The next launch reuses the choice and adds once more.
        let (mut counts, mut sums) = (
            dev.upload(&start_counts).unwrap(),
            dev.upload(&start_sums).unwrap(),
        );
        let second = scatter::launch(&dev, &da, &mut counts, &mut sums).unwrap();
        assert_eq!(second.picked, Picked::Cached, "{shape:?}");
        assert_eq!(second.schedule, first.schedule, "{shape:?}");
        check(&counts, &sums, "cached launch");
    }
}

/// Queue pushes are side effects too: an `auto` kernel that pushes is tuned on scratch queues,
/// and the caller's queue holds one launch's pushes.
#[load_balanced(schedule = "auto")]
fn push_positive(a: &Csr<f32>, out: &mut Queue, #[atom] nz: usize) {
    if a.values[nz] > 0.0 {
        out.push(nz as u32);
    }
}

#[test]
fn queue_pushes_are_tuned_on_scratch_queues_and_not_repeated() {
    let dev = Device::simulator();
    dev.set_tuning(Tuning::Tune);
    dev.set_tuning_file(None);
    let a = random_csr(Shape::Random, 120, 50, seed());
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    // Exactly the room one launch needs: a second launch's pushes would overflow it.
    let want: Vec<u32> = (0..a.nnz() as u32)
        .filter(|&nz| a.values[nz as usize] > 0.0)
        .collect();
    let mut q = DeviceQueue::new(&dev, want.len().max(1)).unwrap();
    let l = push_positive::launch(&dev, &da, &mut q).unwrap();
    assert!(matches!(l.picked, Picked::Tuned(_)), "{:?}", l.picked);
    assert_eq!(q.pushed().unwrap(), want.len() as u64);
    let mut got = q.download().unwrap();
    got.sort_unstable();
    assert_eq!(got, want);
    // A later launch reuses the choice and pushes once more, after what the queue holds.
    q.grow(2 * want.len().max(1)).unwrap();
    let l = push_positive::launch(&dev, &da, &mut q).unwrap();
    assert_eq!(l.picked, Picked::Cached);
    assert_eq!(q.pushed().unwrap(), 2 * want.len() as u64);
    let mut got = q.download().unwrap();
    got.sort_unstable();
    let mut twice: Vec<u32> = want.iter().flat_map(|&nz| [nz, nz]).collect();
    twice.sort_unstable();
    assert_eq!(got, twice);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_tunes_by_time() {
    let dev = Device::cuda(0).expect("this test needs a CUDA GPU");
    dev.set_tuning(Tuning::Tune);
    dev.set_tuning_file(None);
    let a = random_csr(Shape::Alternating, 4000, 3000, seed());
    let x = random_vec(a.num_cols, 9);
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let dx = dev.upload(&x).unwrap();
    let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
    let first = spmv::launch(&dev, &da, &dx, &mut dy).unwrap();
    let Picked::Tuned(costs) = &first.picked else {
        panic!("the first launch did not tune: {:?}", first.picked);
    };
    eprintln!("{costs:?}");
    assert_eq!(costs.len(), spmv::SCHEDULES.len());
    assert!(costs.windows(2).all(|w| w[0].1 <= w[1].1));
    // The fastest, or the heuristic's pick when the fastest was not 1% faster than it.
    let rule = lb::choose_schedule(spmv::SCHEDULES, da.stats(), 1);
    let rule_cost = costs.iter().find(|c| c.0 == rule).map(|c| c.1);
    let kept_rule =
        first.schedule == rule.name() && rule_cost.is_some_and(|r| costs[0].1 >= 0.99 * r);
    assert!(
        first.schedule == costs[0].0.name() || kept_rule,
        "{}",
        first.schedule
    );
    assert_spmv_close(&a, &x, &dy.download().unwrap(), "tuned launch");
    let second = spmv::launch(&dev, &da, &dx, &mut dy).unwrap();
    assert_eq!(second.picked, Picked::Cached);
    assert_spmv_close(&a, &x, &dy.download().unwrap(), "cached launch");
}

/// Tuning changes no report: a launch whose candidates report a bad `x` runs the heuristic's pick
/// and reports it at its wait, as an untuned launch does; a report an earlier launch left on the
/// stream is not taken by the candidates (they run on a stream of their own) and comes back from
/// the stream's next synchronization; then the launch that tuned ran and is correct.
#[test]
fn tuning_keeps_every_report() {
    let dev = Device::simulator();
    dev.set_tuning(Tuning::Tune);
    dev.set_tuning_file(None);
    let a = random_csr(Shape::Random, 200, 150, seed());
    let short = dev.upload(&random_vec(a.num_cols / 2, 1)).unwrap();
    let full = dev.upload(&random_vec(a.num_cols, 2)).unwrap();
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let mut dy = dev.zeros::<f32>(a.num_rows).unwrap();
    let stream = dev.new_stream().unwrap();
    stream.wait_for(&dev.stream()).unwrap();
    let is_oob = |r: lb::Result<()>| {
        assert!(
            matches!(r, Err(lb::Error::OutOfBounds { ref param, .. }) if param == "x"),
            "{r:?}"
        )
    };
    let bad = common::spmv_checked::launch_async(&stream, &da, &short, &mut dy).unwrap();
    assert_eq!(bad.launch().picked, Picked::Rule);
    is_oob(bad.wait().map(drop));
    // A bad launch by name, dropped unread, then a tuning launch: the report is the stream's.
    drop(
        common::spmv_checked::launch_with_async(&stream, Schedule::MergePath, &da, &short, &mut dy)
            .unwrap(),
    );
    let tuned = common::spmv_checked::launch_async(&stream, &da, &full, &mut dy).unwrap();
    assert!(
        matches!(tuned.launch().picked, Picked::Tuned(_)),
        "{:?}",
        tuned.launch().picked
    );
    is_oob(stream.synchronize());
    tuned.wait().unwrap();
    assert_spmv_close(
        &a,
        &full.download().unwrap(),
        &dy.download().unwrap(),
        "after the reports",
    );
    let again = common::spmv_checked::launch_async(&stream, &da, &full, &mut dy).unwrap();
    assert_eq!(again.wait().unwrap().picked, Picked::Cached);
}
