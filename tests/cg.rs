//! The conjugate-gradient solver of `examples/cg.rs` (its module, compiled in here) on the
//! simulator and, in the `gpu_*` twin (ignored without `--include-ignored`, which
//! `scripts/gpu-run.sh` passes), on CUDA GPU 0: it converges on a fresh random right-hand side
//! (the seed is printed) and its f64 residual agrees with the host CG's.

#[path = "../examples/cg/solver.rs"]
mod solver;

use lb::prelude::*;
use solver::{check_square, cpu_cg, device_cg, poisson3d, relative_residual, Options};

fn seed() -> u64 {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64);
    eprintln!("seed {s}");
    s
}

/// CG on the n³ Poisson matrix with every SpMV schedule named in `schedules` (None: the
/// heuristic): converged within `bound` iterations, residual within tol of the host CG's.
fn converges(dev: &Device, n: usize, schedules: &[Option<Schedule>], graph: bool) {
    let a = poisson3d(n).unwrap();
    let tol = 1e-5;
    // CG on this matrix needs O(n) iterations; 10·n is far more than any rounding explains.
    let bound = 10 * n;
    for &schedule in schedules {
        let b = lb::generate::random_vector(a.num_rows, seed());
        let opts = Options {
            max_iters: bound,
            tol,
            check_every: 3,
            schedule,
            graph,
        };
        let what = schedule.map_or("auto", |s| s.name());
        let gpu = device_cg(dev, &a, &b, &opts).unwrap();
        let cpu = cpu_cg(&a, &b, tol, bound);
        assert!(cpu.converged, "{what}: the host CG did not converge");
        assert!(
            gpu.converged && gpu.estimate <= tol,
            "{what}: {} iterations",
            gpu.iterations
        );
        eprintln!(
            "{what}: {} iterations, {:.0} µs each",
            gpu.iterations,
            gpu.wall.as_secs_f64() * 1e6 / gpu.iterations as f64
        );
        let (gpu_res, cpu_res) = (
            relative_residual(&a, &b, &gpu.x),
            relative_residual(&a, &b, &cpu.x),
        );
        assert!(
            (gpu_res - cpu_res).abs() <= tol && gpu_res <= 2.0 * tol,
            "{what}: device residual {gpu_res}, host {cpu_res}"
        );
        // A check every 3 iterations stops at most 2 late; f32 rounding adds a few more.
        assert!(
            gpu.iterations <= cpu.iterations + 2 + cpu.iterations / 4,
            "{what}: {} iterations, the host CG {}",
            gpu.iterations,
            cpu.iterations
        );
    }
}

/// Every SpMV schedule, and the heuristic, on the simulator.
#[test]
fn converges_on_the_simulator() {
    let mut schedules: Vec<_> = solver::SPMV_SCHEDULES.iter().map(|&s| Some(s)).collect();
    schedules.push(None);
    converges(&Device::simulator(), 8, &schedules, false);
}

/// The iterations replayed from a graph of two (captured on the simulator too) converge alike.
#[test]
fn converges_from_a_graph_on_the_simulator() {
    converges(
        &Device::simulator(),
        6,
        &[Some(Schedule::MergePath), Some(Schedule::Lrb), None],
        true,
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_converges() {
    let dev = Device::cuda(0).expect("this test needs a CUDA GPU");
    converges(&dev, 40, &[None], false);
    converges(&dev, 40, &[None], true);
}

/// A zero right-hand side is solved by x = 0 without an iteration (no 0/0 on the device), and a
/// matrix that is not square is refused with its shape.
#[test]
fn edge_cases() {
    let dev = Device::simulator();
    let a = poisson3d(3).unwrap();
    let opts = Options {
        max_iters: 10,
        tol: 1e-5,
        check_every: 1,
        schedule: None,
        graph: false,
    };
    let zero = device_cg(&dev, &a, &vec![0.0; a.num_rows], &opts).unwrap();
    assert!(zero.converged && zero.iterations == 0 && zero.x.iter().all(|&v| v == 0.0));
    let rect = Csr::new(2, 3, vec![0, 1, 1], vec![2], vec![1.0f32]).unwrap();
    let e = check_square(&rect).unwrap_err().to_string();
    assert!(e.contains("square") && e.contains("2 × 3"), "{e}");
    assert!(device_cg(&dev, &rect, &[1.0, 1.0], &opts).is_err());
    assert!(solver::spmv_schedule("nope")
        .unwrap_err()
        .contains("merge_path"));
    assert_eq!(solver::spmv_schedule("auto"), Ok(None));
}

/// q = A·p as a user writes it: a kernel of the test's own over the matrix's columns (CSC), for
/// A = Aᵀ: column j's sum over its nonzeros A[i][j]·p[i] is (Aᵀp)[j] = (Ap)[j].
#[load_balanced(schedule = "merge_path", reduce = "sum", output = "q")]
fn column_spmv(a: &Csc<f32>, p: &[f32], #[atom] nz: usize) -> f32 {
    a.values[nz] * p[a.row_indices[nz] as usize]
}

/// The solver runs with the caller's SpMV, enqueued on the solver's stream, and converges like
/// the host CG.
#[test]
fn converges_with_the_callers_spmv() {
    let dev = Device::simulator();
    let a = poisson3d(6).unwrap();
    let at = DeviceCsc::upload(&dev, &a.to_csc().unwrap()).unwrap();
    let b = lb::generate::random_vector(a.num_rows, seed());
    let opts = Options {
        max_iters: 60,
        tol: 1e-5,
        check_every: 2,
        schedule: None,
        graph: false,
    };
    let mut calls = 0;
    let solve = solver::device_cg_with(&dev, &a, &b, &opts, &mut |stream, p, q| {
        calls += 1;
        drop(column_spmv::launch_async(stream, &at, p, q)?);
        Ok(())
    })
    .unwrap();
    let cpu = cpu_cg(&a, &b, opts.tol, opts.max_iters);
    let (res, cpu_res) = (
        relative_residual(&a, &b, &solve.x),
        relative_residual(&a, &b, &cpu.x),
    );
    assert!(solve.converged, "{} iterations", solve.iterations);
    assert!((res - cpu_res).abs() <= opts.tol, "{res} vs {cpu_res}");
    // One warm-up iteration, then one SpMV per iteration.
    assert_eq!(calls, solve.iterations + 1);
}
