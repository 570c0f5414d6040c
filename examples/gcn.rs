//! A graph convolution layer's forward pass, Y = Â·(X·W), and the mean aggregation of GraphSAGE,
//! with the sparse aggregation as lb SpMM kernels whose lanes are the k hidden features. Every
//! generated schedule of both is checked against an f64 reference.
//!
//! `cargo run --release --example gcn` takes a seeded power-law graph; `cargo run --release
//! --example gcn -- path/to/graph.mtx` reads a Matrix Market file. Either is made undirected, given
//! a self-loop per vertex and normalised, Â = D^-1/2 (A + Aᵀ + I) D^-1/2 (Kipf & Welling); with
//! `--as-is` the file's matrix is Â itself (its values, any shape). `--k K` sets the hidden
//! features (default 32), `--features F` the input features (default 64), `--rows N` the default
//! graph's vertices, `--reps N` the timed repetitions on a GPU. X·W is a dense product done on the
//! host (`gcn/layer.rs` says why). On a GPU the table shows time and GB/s per kernel; on the
//! simulator, instructions.

mod common;
#[path = "gcn/layer.rs"]
mod layer;

use common::{number, MAX_ROWS};
use layer::{check_schedules, normalized_adjacency, Layer};
use lb::prelude::*;
use std::process::ExitCode;

struct Args {
    path: Option<String>,
    as_is: bool,
    rows: usize,
    k: usize,
    features: usize,
    reps: usize,
}

const USAGE: &str = "usage: gcn [graph.mtx [--as-is]] [--k K] [--features F] [--rows N] [--reps N]";

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        path: None,
        as_is: false,
        rows: 2_000,
        k: 32,
        features: 64,
        reps: 20,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--rows" => args.rows = number(&mut it, "--rows", 1..=MAX_ROWS)?,
            "--k" => args.k = number(&mut it, "--k", 1..=1024)?,
            "--features" => args.features = number(&mut it, "--features", 1..=4096)?,
            "--reps" => args.reps = number(&mut it, "--reps", 1..=1_000_000)?,
            "--as-is" => args.as_is = true,
            "-h" | "--help" => return Err(USAGE.to_string()),
            _ if arg.starts_with('-') => return Err(format!("unknown option `{arg}`\n{USAGE}")),
            _ => args.path = Some(arg),
        }
    }
    if args.as_is && args.path.is_none() {
        return Err(format!("--as-is needs a .mtx file\n{USAGE}"));
    }
    Ok(args)
}

fn run(args: &Args) -> lb::Result<bool> {
    let (a, origin) = match &args.path {
        Some(path) => (lb::mtx::read_mtx::<f32>(path)?, format!("from {path}")),
        None => (
            lb::generate::power_law(args.rows, args.rows, 8.0, 42),
            "(seeded power law)".to_string(),
        ),
    };
    println!(
        "graph: {} × {}, {} edges {origin}",
        a.num_rows,
        a.num_cols,
        a.nnz()
    );
    let a_hat = if args.as_is {
        a
    } else {
        normalized_adjacency(&a)?
    };
    let layer = Layer::new(a_hat, args.features, args.k, 7);
    println!(
        "Â: {} nonzeros{}; X: {} × {}, W: {} × {} (X·W on the host)",
        layer.a.nnz(),
        if args.as_is {
            " (as given)"
        } else {
            " (A + Aᵀ + I, normalised)"
        },
        layer.a.num_cols,
        args.features,
        args.features,
        args.k
    );
    let dev = Device::default();
    println!("device: {}", dev.name());
    check_schedules(&dev, &layer, args.reps, &mut |line| println!("{line}"))
}

fn main() -> ExitCode {
    common::exit(
        "gcn",
        parse_args(),
        run,
        "a schedule disagreed with the reference",
    )
}
