//! What the BFS and SSSP examples share: their arguments, the graph they traverse (a Matrix
//! Market file or the seeded default), and their table of results. Included by those two
//! examples alone (`#[path]`), so the other examples do not carry it.

use crate::common::{number, MAX_ROWS};
use lb::algorithms::Traversal;
use lb::prelude::*;

pub struct Args {
    pub path: Option<String>,
    pub vertices: usize,
    pub source: usize,
    /// Every edge also reversed (`--undirected`).
    pub undirected: bool,
    /// A `W × W` grid of two-way streets instead of the power law (`--grid W`).
    pub grid: Option<usize>,
    /// BFS only: `lb::algorithms::bfs_direction_optimizing` next to each push row.
    pub direction_optimizing: bool,
    /// SSSP only: `lb::algorithms::sssp_near_far` next to each row of plain relaxation.
    pub near_far: bool,
}

/// The arguments of the example `name`: `[graph.mtx] [--vertices N] [--source S]
/// [--undirected]`, for `bfs` `[--direction-optimizing]` and for `sssp` `[--near-far]`.
pub fn parse_args(name: &str) -> Result<Args, String> {
    let mut args = Args {
        path: None,
        vertices: 5_000,
        source: 0,
        undirected: false,
        grid: None,
        direction_optimizing: false,
        near_far: false,
    };
    let extra = match name {
        "bfs" => " [--direction-optimizing]",
        "sssp" => " [--near-far]",
        _ => "",
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--vertices" => args.vertices = number(&mut it, "--vertices", 1..=MAX_ROWS)?,
            "--source" => args.source = number(&mut it, "--source", 0..=MAX_ROWS - 1)?,
            "--undirected" => args.undirected = true,
            "--grid" => args.grid = Some(number(&mut it, "--grid", 1..=MAX_GRID)?),
            "--direction-optimizing" if name == "bfs" => args.direction_optimizing = true,
            "--near-far" if name == "sssp" => args.near_far = true,
            "-h" | "--help" => {
                return Err(format!(
                    "usage: {name} [graph.mtx | --grid W] [--vertices N] [--source S] \
                     [--undirected]{extra}"
                ))
            }
            _ if arg.starts_with('-') => return Err(format!("unknown option `{arg}`")),
            _ => args.path = Some(arg),
        }
    }
    Ok(args)
}

/// The side of the largest `--grid`: 4 000 × 4 000 vertices.
const MAX_GRID: usize = 4_000;

/// The graph of `args` (the file's, a `--grid`, or a seeded power law of `args.vertices`
/// vertices), once its size and the source are printed; an error when the source is not one of
/// its vertices.
pub fn graph(args: &Args) -> lb::Result<Csr<f32>> {
    let (mut g, mut origin) = match (&args.path, args.grid) {
        (Some(path), _) => (lb::mtx::read_mtx::<f32>(path)?, format!("from {path}")),
        (None, Some(side)) => (grid(side)?, format!("(a {side} × {side} grid)")),
        (None, None) => (
            lb::generate::power_law(args.vertices, args.vertices, 8.0, 42),
            "(seeded power law)".to_string(),
        ),
    };
    if args.undirected {
        g = undirected(&g)?;
        origin.push_str(", every edge both ways");
    }
    println!(
        "graph: {} vertices, {} edges {origin}; source {}",
        g.num_rows,
        g.nnz(),
        args.source
    );
    if args.source >= g.num_rows {
        return Err(lb::Error::Shape(format!(
            "source {} is not a vertex",
            args.source
        )));
    }
    Ok(g)
}

/// A `side × side` grid of two-way streets, each of a length from 1 to 9 (seeded): a road
/// network's short rows and long diameter, whose small levels `Choice::Auto` runs in one block
/// (docs/graph-apps.md, "Levels in one block").
fn grid(side: usize) -> lb::Result<Csr<f32>> {
    let at = |x: usize, y: usize| y * side + x;
    let length = |a: usize, b: usize| ((a * 7 + b * 13) % 9 + 1) as f32;
    let mut streets = Vec::new();
    for y in 0..side {
        for x in 0..side {
            let mut link = |v: usize| {
                let (u, w) = (at(x, y), length(at(x, y).min(v), at(x, y).max(v)));
                streets.extend([(u, v, w), (v, u, w)]);
            };
            if x + 1 < side {
                link(at(x + 1, y));
            }
            if y + 1 < side {
                link(at(x, y + 1));
            }
        }
    }
    Csr::from_triplets(side * side, side * side, streets)
}

/// `g` with every edge also reversed (an edge present both ways then appears twice, which the
/// drivers handle like any duplicate edge).
fn undirected(g: &Csr<f32>) -> lb::Result<Csr<f32>> {
    let edges = (0..g.num_rows).flat_map(|u| {
        g.row(u).flat_map(move |e| {
            let (v, w) = (g.col_indices[e] as usize, g.values[e]);
            [(u, v, w), (v, u, w)]
        })
    });
    Csr::from_triplets(g.num_rows, g.num_cols, edges.collect())
}

/// The columns of [`print_row`].
pub fn print_header() {
    println!(
        "{:<22} {:>10} {:>12} {:>8} {:>11} {:>11} {:>12} {:>7} {:>7}",
        "schedule",
        "iterations",
        "edges",
        "retries",
        "kernel (ms)",
        "wall (ms)",
        "MTEPS",
        "B/iter",
        "check"
    );
}

/// The row of a traversal run with `Choice::Auto`, labelled with the schedules its steps ran;
/// returns `ok`.
pub fn print_auto_row(r: &Traversal, ok: bool) -> bool {
    let picked: Vec<String> = r
        .schedules
        .iter()
        .map(|(s, n)| format!("{s}:{n}"))
        .collect();
    print_row(&format!("auto ({})", picked.join("+")), r, ok);
    ok
}

/// One traversal's row: traversed edges per second on kernel time on a GPU, on wall time on the
/// simulator (which has no kernel time).
pub fn print_row(label: &str, r: &Traversal, ok: bool) {
    let ms = r.elapsed_ms.map_or(r.wall_ms, f64::from);
    println!(
        "{:<22} {:>10} {:>12} {:>8} {:>11} {:>11.2} {:>12.2} {:>7.1} {:>7}",
        label,
        r.iterations,
        r.edges,
        r.retries,
        r.elapsed_ms
            .map_or_else(|| "n/a".to_string(), |k| format!("{k:.2}")),
        r.wall_ms,
        r.edges as f64 / (ms * 1e-3) / 1e6,
        r.bytes_per_iteration(),
        if ok { "ok" } else { "FAILED" }
    );
}
