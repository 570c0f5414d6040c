//! The graph ops, SSSP and BFS from `lb::algorithms`: each is a host-driven loop of launches, not
//! one launch over a `Problem`, so they get their own small path: verify against the sequential
//! reference, then time the driver's kernel time and report traversed edges per second.

use lb::algorithms::{bfs, bfs_levels, bfs_unchecked, dijkstra, schedules, sssp, sssp_unchecked};
use lb::prelude::*;

use crate::corpus::Matrix;
use crate::report::{Context, Record};
use crate::{Cli, Op};

/// The simulator runs every launch of every iteration on the CPU, so SSSP there (many
/// iterations on long-diameter graphs) stays fast only on small graphs.
pub const SIM_MAX_EDGES: usize = 20_000;

/// The traversals start at vertex 0: every corpus member has one, and a fixed source keeps runs
/// comparable across schedules.
const SOURCE: usize = 0;

/// Why `m` is not run for a graph op, if it is not.
pub fn skip_reason(m: &Matrix, gpu: bool) -> Option<String> {
    let a = &m.csr;
    if a.num_rows != a.num_cols {
        Some(format!(
            "not square ({} × {}), not a graph",
            a.num_rows, a.num_cols
        ))
    } else if a.num_rows == 0 {
        Some("no vertices".into())
    } else if !gpu && a.nnz() > SIM_MAX_EDGES {
        Some(format!(
            "{} edges > {SIM_MAX_EDGES}, the simulator's limit",
            a.nnz()
        ))
    } else {
        None
    }
}

/// One traversal's outcome, common to both drivers.
struct Traversal {
    iterations: usize,
    edges: u64,
    elapsed_ms: Option<f32>,
    /// Largest relative distance error (SSSP) or 0/∞ for depths that match / do not (BFS).
    error: f64,
}

/// The reference result of one op on one graph.
enum Reference {
    Dist(Vec<f32>),
    Depth(Vec<u32>),
}

impl Reference {
    /// One traversal with schedule `s`, through the kernels without bounds tests when
    /// `unchecked` (`--unchecked`).
    fn traverse(
        &self,
        dev: &Device,
        g: &DeviceCsr<f32>,
        s: Schedule,
        unchecked: bool,
    ) -> lb::Result<Traversal> {
        match self {
            Reference::Dist(want) => {
                let run = if unchecked { sssp_unchecked } else { sssp };
                let r = run(dev, g, SOURCE, s)?;
                Ok(Traversal {
                    iterations: r.iterations,
                    edges: r.edges,
                    elapsed_ms: r.elapsed_ms,
                    error: dist_error(&r.dist, want),
                })
            }
            Reference::Depth(want) => {
                let run = if unchecked { bfs_unchecked } else { bfs };
                let r = run(dev, g, SOURCE, s)?;
                Ok(Traversal {
                    iterations: r.iterations,
                    edges: r.edges,
                    elapsed_ms: r.elapsed_ms,
                    error: if &r.depth == want { 0.0 } else { f64::INFINITY },
                })
            }
        }
    }
}

/// f32 sums along different paths of equal length may round differently, hence a relative
/// error; an infinity on one side only is an infinite error.
fn dist_error(got: &[f32], want: &[f32]) -> f64 {
    if got.len() != want.len() {
        return f64::INFINITY;
    }
    got.iter()
        .zip(want)
        .map(|(&g, &w)| {
            if g == w {
                0.0
            } else {
                let d = (f64::from(g) - f64::from(w)).abs();
                if d.is_finite() {
                    d / f64::from(w.abs()).max(f64::from(f32::MIN_POSITIVE))
                } else {
                    f64::INFINITY
                }
            }
        })
        .fold(0.0, f64::max)
}

/// Every schedule of `op` (SSSP or BFS) on the square matrix `m`, from vertex 0, with weights
/// |values| (Dijkstra and the relaxation need nonnegative weights); with `--unchecked`, each
/// schedule also through the kernels without bounds tests, as a `<schedule>+unchecked` row.
pub fn run_graph(
    cli: &Cli,
    op: Op,
    m: &Matrix,
    dev: &Device,
    wanted: &[Schedule],
    ctx: &Context,
) -> Vec<Record> {
    let base = Record::base(ctx, op, m);
    let mut g = m.csr.clone();
    g.values.iter_mut().for_each(|w| *w = w.abs());
    let reference = match op {
        Op::Sssp => Reference::Dist(dijkstra(&g, SOURCE)),
        _ => Reference::Depth(bfs_levels(&g, SOURCE)),
    };
    let dg = match DeviceCsr::upload(dev, &g) {
        Ok(dg) => dg,
        Err(e) => return vec![base.failed(format!("setting up: {e}"))],
    };
    let mut out = Vec::new();
    for &s in schedules()
        .iter()
        .filter(|s| wanted.is_empty() || wanted.contains(s))
    {
        out.push(measure(cli, dev, &dg, &reference, s, false, &base));
        if cli.unchecked {
            out.push(measure(cli, dev, &dg, &reference, s, true, &base));
        }
    }
    out
}

/// Verifies schedule `s` once, then (GPU) times `--reps` traversals by their kernel time.
fn measure(
    cli: &Cli,
    dev: &Device,
    g: &DeviceCsr<f32>,
    reference: &Reference,
    s: Schedule,
    unchecked: bool,
    base: &Record,
) -> Record {
    let mut r = base.clone();
    r.schedule = if unchecked {
        format!("{}{}", s.name(), crate::variants::UNCHECKED)
    } else {
        s.name().into()
    };
    let first = match reference.traverse(dev, g, s, unchecked) {
        Ok(t) => t,
        Err(e) => return r.failed(e.to_string()),
    };
    r.iterations = Some(first.iterations);
    r.edges = Some(first.edges);
    r.max_rel_err = Some(first.error);
    if first.error > cli.tolerance {
        return r.failed(match reference {
            Reference::Dist(_) => format!(
                "wrong distances: max relative error {:.2e} > {:.0e}",
                first.error, cli.tolerance
            ),
            Reference::Depth(_) => "wrong depths".into(),
        });
    }
    // The simulator reports no kernel time: correctness, iterations and edges only.
    let Some(first_ms) = first.elapsed_ms else {
        return r;
    };
    let reps = ((cli.budget_ms / f64::from(first_ms).max(1e-3)) as usize).clamp(3, cli.reps.max(3));
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        match reference.traverse(dev, g, s, unchecked) {
            Ok(t) => times.push(f64::from(t.elapsed_ms.unwrap_or(f32::NAN))),
            Err(e) => return r.failed(format!("while timing: {e}")),
        }
    }
    times.sort_by(f64::total_cmp);
    let ms = times[times.len() / 2];
    r.median_ms = Some(ms);
    r.reps = Some(reps);
    r.mteps = Some(first.edges as f64 / (ms * 1e-3) / 1e6);
    r
}
