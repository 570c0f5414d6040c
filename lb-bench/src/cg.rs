//! `--cg N`: the conjugate-gradient solver of `examples/cg.rs` on the N³ 3-D Poisson matrix, once
//! with each lb SpMV schedule (and `auto`) and once with cuSPARSE's SpMV in the same solver: the
//! other four kernels of an iteration, the stream and the convergence checks are the same, so
//! the µs per iteration compare the SpMVs as a solver sees them.

use std::io::Write;

use lb::prelude::*;
use serde::Serialize;

use crate::baseline::{CuCsr, Cusparse, SPMV_ALGS};

// The solver is shared with the example and its test, which use the parts this tool does not.
#[allow(dead_code)]
#[path = "../../examples/cg/solver.rs"]
mod solver;

/// The schedules the solver's SpMV was generated for.
pub const SCHEDULES: &[Schedule] = solver::SPMV_SCHEDULES;

#[derive(Serialize)]
struct CgRecord {
    grid: usize,
    rows: usize,
    nnz: usize,
    spmv: String,
    iterations: usize,
    converged: bool,
    /// ‖b − A·x‖ / ‖b‖ in f64.
    residual: f64,
    us_per_iter: f64,
    error: Option<String>,
}

/// Runs CG with every SpMV; returns how many solves failed or did not converge.
pub fn run(
    dev: &Device,
    n: usize,
    schedules: &[Schedule],
    cusparse: Option<&Cusparse>,
    json: Option<&mut dyn Write>,
) -> usize {
    let a = match solver::poisson3d(n) {
        Ok(a) => a,
        Err(e) => {
            println!("lb-bench: the {n}³ Poisson matrix: {e}");
            return 1;
        }
    };
    let b = lb::generate::random_vector(a.num_rows, 7);
    let opts = solver::Options {
        max_iters: 2_000,
        tol: 1e-5,
        check_every: 10,
        schedule: None,
        graph: false,
    };
    let cpu = solver::cpu_cg(&a, &b, opts.tol, opts.max_iters);
    println!(
        "lb-bench: CG on the {n}³ Poisson matrix ({} rows, {} nonzeros); CPU f64 CG: {} iterations, residual {:.3e}",
        a.num_rows,
        a.nnz(),
        cpu.iterations,
        solver::relative_residual(&a, &b, &cpu.x)
    );
    println!(
        "{:<22} {:>10} {:>10} {:>14} {:>10}",
        "spmv", "converged", "iterations", "‖b−Ax‖/‖b‖", "µs/iter"
    );
    let mut solves: Vec<(String, Result<solver::Solve, String>)> = Vec::new();
    let graphed = solver::Options {
        graph: true,
        ..opts
    };
    solves.push((
        "auto, graph".into(),
        solver::device_cg(dev, &a, &b, &graphed).map_err(|e| e.to_string()),
    ));
    for s in std::iter::once(None).chain(schedules.iter().map(|&s| Some(s))) {
        let name = s.map_or("auto", |s| s.name()).to_string();
        let opts = solver::Options {
            schedule: s,
            ..opts
        };
        solves.push((
            name,
            solver::device_cg(dev, &a, &b, &opts).map_err(|e| e.to_string()),
        ));
    }
    if let Some(cs) = cusparse {
        for (alg, alg_name) in SPMV_ALGS {
            solves.push((
                format!("cusparse {alg_name}"),
                cusparse_cg(dev, cs, &a, &b, &opts, alg),
            ));
        }
    }
    let mut failed = 0;
    let mut out = json;
    for (spmv, solve) in solves {
        let record = match solve {
            Ok(s) => CgRecord {
                grid: n,
                rows: a.num_rows,
                nnz: a.nnz(),
                spmv,
                iterations: s.iterations,
                converged: s.converged,
                residual: solver::relative_residual(&a, &b, &s.x),
                us_per_iter: s.wall.as_secs_f64() * 1e6 / s.iterations.max(1) as f64,
                error: None,
            },
            Err(e) => CgRecord {
                grid: n,
                rows: a.num_rows,
                nnz: a.nnz(),
                spmv,
                iterations: 0,
                converged: false,
                residual: f64::NAN,
                us_per_iter: f64::NAN,
                error: Some(e),
            },
        };
        failed += usize::from(!record.converged);
        println!(
            "{:<22} {:>10} {:>10} {:>14.3e} {:>10.1}{}",
            record.spmv,
            record.converged,
            record.iterations,
            record.residual,
            record.us_per_iter,
            record
                .error
                .as_deref()
                .map_or_else(String::new, |e| format!("  ERROR {e}"))
        );
        if let Some(w) = out.as_mut() {
            if let Ok(line) = serde_json::to_string(&record) {
                let _ = writeln!(w, "{line}");
            }
        }
    }
    failed
}

/// The solver with cuSPARSE's SpMV (`alg`) on the device's stream, which is cuSPARSE's.
fn cusparse_cg(
    dev: &Device,
    cs: &Cusparse,
    a: &Csr<f32>,
    b: &[f32],
    opts: &solver::Options,
    alg: cudarc::cusparse::sys::cusparseSpMVAlg_t,
) -> Result<solver::Solve, String> {
    let e = |e: lb::Error| e.to_string();
    let ca = CuCsr::upload(dev, a)?;
    // Descriptors are made for vectors of the solver's shape, then pointed at its p and q at
    // every call.
    let shape_x = dev.zeros::<f32>(a.num_cols).map_err(e)?;
    let mut shape_y = dev.zeros::<f32>(a.num_rows).map_err(e)?;
    cs.spmv_rebound(&ca, &shape_x, &mut shape_y, alg, |call| {
        solver::device_cg_with(dev, a, b, opts, &mut |_stream, p, q| {
            call(p, q).map_err(|message| lb::Error::Cuda {
                context: "cuSPARSE SpMV".into(),
                message,
            })
        })
        .map_err(e)
    })
}
