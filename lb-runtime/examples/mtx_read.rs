//! Times `read_mtx` on a large Matrix Market file, writing one first when asked.
//!
//! `cargo run --release -p lb-runtime --example mtx_read -- [--write] [--rows N] [--avg D] FILE`
//! With `--write`, FILE is first filled with a seeded power-law matrix (`N` rows and columns,
//! `D` entries per row on average) in column-major entry order, as SuiteSparse files are.

use std::io::{BufWriter, Write};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut write = false;
    let mut rows = 1_000_000usize;
    let mut avg = 16.0f64;
    let mut path = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--write" => write = true,
            "--rows" => rows = args.next().ok_or("--rows needs a value")?.parse()?,
            "--avg" => avg = args.next().ok_or("--avg needs a value")?.parse()?,
            _ => path = Some(arg),
        }
    }
    let path = path.ok_or("usage: mtx_read [--write] [--rows N] [--avg D] FILE")?;
    if write {
        let csc = lb_runtime::generate::power_law(rows, rows, avg, 7).to_csc()?;
        let mut out = BufWriter::new(std::fs::File::create(&path)?);
        writeln!(out, "%%MatrixMarket matrix coordinate real general")?;
        writeln!(out, "{} {} {}", csc.num_rows, csc.num_cols, csc.nnz())?;
        for c in 0..csc.num_cols {
            for e in csc.col(c) {
                writeln!(
                    out,
                    "{} {} {}",
                    csc.row_indices[e] + 1,
                    c + 1,
                    csc.values[e]
                )?;
            }
        }
        out.flush()?;
    }
    let bytes = std::fs::metadata(&path)?.len() as f64;
    // The first read warms the page cache, so the timed reads measure parsing, not the disk.
    let mut nnz = lb_runtime::read_mtx::<f32>(&path)?.nnz();
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let start = Instant::now();
        nnz = lb_runtime::read_mtx::<f32>(&path)?.nnz();
        best = best.min(start.elapsed().as_secs_f64());
    }
    println!(
        "{path}: {:.0} MB, {nnz} entries, read_mtx best of 3: {best:.3} s, {:.0} MB/s on {} threads",
        bytes / 1e6,
        bytes / 1e6 / best,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    // The parse alone, on text already in memory (no file read, no decompression).
    if !path.ends_with(".gz") {
        let text = std::fs::read(&path)?;
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let start = Instant::now();
            lb_runtime::parse_mtx_bytes::<f32>(&text)?;
            best = best.min(start.elapsed().as_secs_f64());
        }
        println!(
            "parse_mtx_bytes best of 3: {best:.3} s, {:.0} MB/s",
            bytes / 1e6 / best
        );
    }
    Ok(())
}
