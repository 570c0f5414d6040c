//! The GCN layer of `examples/gcn.rs`, shared with `tests/gcn.rs`: the normalised adjacency built
//! on the host, the dense feature transform H = X·W on the host, the two aggregations of H over
//! the graph as lb kernels with one lane per hidden feature, and the f64 reference that judges
//! them.
//!
//! The aggregation is where a GNN's irregularity lives (a vertex's neighbour count is its row
//! length, a power law on real graphs), so it is the part written as an lb kernel; X·W is a
//! dense product, every row the same length, with nothing for a schedule to balance (a dense
//! GEMM such as cuBLAS's does it on a GPU).

use lb::prelude::*;

/// The GCN aggregation Y = Â·H: one edge (i, j) times one feature of H's row j. With `lanes` the
/// k features of a row are consecutive threads, so a warp reads runs of H's rows.
#[load_balanced(schedule = "auto", reduce = "sum", output = "y", lanes = "k")]
fn gcn(a: &Csr<f32>, h: &[f32], k: usize, #[atom] nz: usize, #[lane] j: usize) -> f32 {
    a.values[nz] * h[a.col_indices[nz] as usize * k + j]
}

/// The mean aggregation of GraphSAGE, y_i = (1/deg i)·Σ h_j over i's neighbours: the graph's
/// pattern only (its values are not read), the weight is the tile's `inv_deg`.
#[load_balanced(schedule = "auto", reduce = "sum", output = "y", lanes = "k")]
fn mean(
    a: &Csr<f32>,
    h: &[f32],
    inv_deg: &[f32],
    k: usize,
    #[tile] row: usize,
    #[atom] nz: usize,
    #[lane] j: usize,
) -> f32 {
    inv_deg[row] * h[a.col_indices[nz] as usize * k + j]
}

/// Both kernels are `auto`, so they have the same schedules.
pub const SCHEDULES: &[Schedule] = gcn::SCHEDULES;

/// The largest error relative to the sum of the terms' magnitudes that passes: the schedules add
/// in different orders and fuse the multiply into the sum, so results agree to f32 rounding only.
const TOLERANCE: f64 = 1e-5;

/// Which aggregation a launch runs.
#[derive(Clone, Copy)]
enum Aggregation {
    /// Y = Â·H with Â's values.
    Gcn,
    /// Y = D⁻¹·pattern(Â)·H.
    Mean,
}

impl Aggregation {
    const ALL: [Aggregation; 2] = [Aggregation::Gcn, Aggregation::Mean];
}

/// Â = D^-1/2 (A + Aᵀ + I) D^-1/2 over the pattern of a square A (its values are ignored): the
/// graph made undirected, a self-loop on every vertex so a vertex keeps its own features and no
/// degree is zero, and edge (i, j) weighted 1/√(d_i d_j) with d the degrees of A + Aᵀ + I (Kipf &
/// Welling's renormalisation). Â is symmetric with spectral radius 1, so repeated layers neither
/// blow up nor vanish.
pub fn normalized_adjacency(a: &Csr<f32>) -> lb::Result<Csr<f32>> {
    if a.num_rows != a.num_cols {
        return Err(lb::Error::InvalidMatrix(format!(
            "an adjacency matrix is square, this one is {} × {}",
            a.num_rows, a.num_cols
        )));
    }
    let n = a.num_rows;
    let mut triplets = Vec::with_capacity(2 * a.nnz() + n);
    for row in 0..n {
        triplets.push((row, row, 1.0f32));
        for nz in a.row(row) {
            let col = a.col_indices[nz] as usize;
            triplets.push((row, col, 1.0));
            triplets.push((col, row, 1.0));
        }
    }
    // Duplicates (an edge stored both ways, a stored self-loop) merge into one entry.
    let mut hat = Csr::from_triplets(n, n, triplets)?;
    let inv_sqrt: Vec<f64> = (0..n)
        .map(|row| 1.0 / (hat.row(row).len() as f64).sqrt())
        .collect();
    for row in 0..n {
        for nz in hat.row(row) {
            hat.values[nz] = (inv_sqrt[row] * inv_sqrt[hat.col_indices[nz] as usize]) as f32;
        }
    }
    Ok(hat)
}

/// H = X·W on the host, X row-major `n × f`, W row-major `f × k`, in f32 (the GPU would take
/// this from a dense GEMM). The check below starts from this H, so it judges the aggregation.
pub fn transform(x: &[f32], w: &[f32], f: usize, k: usize) -> Vec<f32> {
    let mut h = vec![0.0f32; x.len() / f * k];
    for (x_row, h_row) in x.chunks_exact(f).zip(h.chunks_exact_mut(k)) {
        for (&xv, w_row) in x_row.iter().zip(w.chunks_exact(k)) {
            for (hv, &wv) in h_row.iter_mut().zip(w_row) {
                *hv += xv * wv;
            }
        }
    }
    h
}

/// One layer's host inputs: the aggregation matrix, its inverse row lengths (the mean's weights)
/// and H = X·W, row-major `a.num_cols × k`.
pub struct Layer {
    pub a: Csr<f32>,
    inv_deg: Vec<f32>,
    h: Vec<f32>,
    k: usize,
}

impl Layer {
    /// The layer of aggregation matrix `a` on random features X (`a.num_cols × f`) and weights W
    /// (`f × k`, scaled by 1/√f so H's entries stay near X's), seeded.
    pub fn new(a: Csr<f32>, f: usize, k: usize, seed: u64) -> Layer {
        let x = lb::generate::random_vector(a.num_cols * f, seed);
        let scale = 1.0 / (f as f32).sqrt();
        let w: Vec<f32> = lb::generate::random_vector(f * k, seed + 1)
            .into_iter()
            .map(|v| v * scale)
            .collect();
        let h = transform(&x, &w, f, k);
        // An empty row's mean is the sum's identity, 0, whatever its weight.
        let inv_deg = (0..a.num_rows)
            .map(|row| 1.0 / a.row(row).len().max(1) as f32)
            .collect();
        Layer { a, inv_deg, h, k }
    }

    /// Y in f64 from the f32 inputs the kernel reads, and the sum of each entry's term
    /// magnitudes (the tolerance's scale).
    fn expected(&self, aggregation: Aggregation) -> Expected {
        let k = self.k;
        let mut value = vec![0.0f64; self.a.num_rows * k];
        let mut magnitude = vec![0.0f64; self.a.num_rows * k];
        for row in 0..self.a.num_rows {
            for nz in self.a.row(row) {
                let weight = f64::from(match aggregation {
                    Aggregation::Gcn => self.a.values[nz],
                    Aggregation::Mean => self.inv_deg[row],
                });
                let col = self.a.col_indices[nz] as usize;
                for j in 0..k {
                    let term = weight * f64::from(self.h[col * k + j]);
                    value[row * k + j] += term;
                    magnitude[row * k + j] += term.abs();
                }
            }
        }
        Expected { value, magnitude }
    }
}

/// The f64 result of an aggregation and the scale of its rounding, per entry.
struct Expected {
    value: Vec<f64>,
    magnitude: Vec<f64>,
}

impl Expected {
    /// The largest |got − value| / magnitude; a NaN (an entry no kernel wrote) is infinite.
    fn max_relative_error(&self, got: &[f32]) -> f64 {
        assert_eq!(got.len(), self.value.len(), "output length");
        got.iter()
            .zip(self.value.iter().zip(&self.magnitude))
            .map(|(&g, (&v, &m))| {
                let e = (f64::from(g) - v).abs() / m.max(f64::MIN_POSITIVE);
                if e.is_nan() {
                    f64::INFINITY
                } else {
                    e
                }
            })
            .fold(0.0, f64::max)
    }
}

/// A layer's inputs on a device, and its output Y (`a.num_rows × k`).
struct DeviceLayer {
    a: DeviceCsr<f32>,
    h: DeviceBuffer<f32>,
    inv_deg: DeviceBuffer<f32>,
    k: usize,
    nan: DeviceBuffer<f32>,
    y: DeviceBuffer<f32>,
}

impl DeviceLayer {
    fn upload(dev: &Device, layer: &Layer) -> lb::Result<DeviceLayer> {
        let nan = dev.upload(&vec![f32::NAN; layer.a.num_rows * layer.k])?;
        Ok(DeviceLayer {
            a: DeviceCsr::upload(dev, &layer.a)?,
            h: dev.upload(&layer.h)?,
            inv_deg: dev.upload(&layer.inv_deg)?,
            k: layer.k,
            y: dev.zeros(nan.len())?,
            nan,
        })
    }

    /// Fills Y with NaN, so an entry a schedule fails to write shows up in the check instead of
    /// passing with the previous schedule's value.
    fn poison(&mut self, dev: &Device) -> lb::Result<()> {
        dev.copy(&self.nan, &mut self.y)
    }

    /// Runs `aggregation` under `schedule` into Y.
    fn launch(
        &mut self,
        dev: &Device,
        aggregation: Aggregation,
        schedule: Schedule,
    ) -> lb::Result<Launch> {
        match aggregation {
            Aggregation::Gcn => {
                gcn::launch_with(dev, schedule, &self.a, &self.h, self.k, &mut self.y)
            }
            Aggregation::Mean => mean::launch_with(
                dev,
                schedule,
                &self.a,
                &self.h,
                &self.inv_deg,
                self.k,
                &mut self.y,
            ),
        }
    }
}

/// Bytes an aggregation must move: the graph once (the mean reads no values but a weight per
/// row), H once, Y once.
fn bytes(layer: &Layer, aggregation: Aggregation) -> usize {
    let a = &layer.a;
    let graph = match aggregation {
        Aggregation::Gcn => (a.num_rows + 1) * 8 + a.nnz() * 8,
        Aggregation::Mean => (a.num_rows + 1) * 8 + a.nnz() * 4 + a.num_rows * 4,
    };
    graph + (a.num_cols + a.num_rows) * layer.k * 4
}

/// The median GPU time in ms of `reps` launches.
fn median_ms(
    dev: &Device,
    on: &mut DeviceLayer,
    aggregation: Aggregation,
    schedule: Schedule,
    reps: usize,
) -> lb::Result<f64> {
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let launch = on.launch(dev, aggregation, schedule)?;
        times.push(launch.elapsed_ms.unwrap_or(f32::NAN));
    }
    times.sort_by(f32::total_cmp);
    Ok(f64::from(times[times.len() / 2]))
}

/// Runs both aggregations under every generated schedule on `dev`, checks each result against
/// the f64 reference and hands `print` a table: a header, then per schedule the GPU time
/// (median of `reps`) and GB/s of each kernel, or on the simulator its instructions, with the
/// larger of the two errors. True when every schedule passed.
pub fn check_schedules(
    dev: &Device,
    layer: &Layer,
    reps: usize,
    print: &mut dyn FnMut(&str),
) -> lb::Result<bool> {
    let expected = Aggregation::ALL.map(|aggregation| layer.expected(aggregation));
    let mut on = DeviceLayer::upload(dev, layer)?;
    print(&if dev.is_gpu() {
        format!(
            "{:<22} {:>9} {:>7} {:>9} {:>7} {:>12} {:>7}",
            "schedule", "gcn (us)", "GB/s", "mean (us)", "GB/s", "max rel err", "check"
        )
    } else {
        format!(
            "{:<22} {:>14} {:>14} {:>12} {:>7}",
            "schedule", "gcn instr", "mean instr", "max rel err", "check"
        )
    });
    let mut all_ok = true;
    for &schedule in SCHEDULES {
        let mut err = 0.0f64;
        let mut cells = String::new();
        for (aggregation, expected) in Aggregation::ALL.into_iter().zip(&expected) {
            on.poison(dev)?;
            let launch = on.launch(dev, aggregation, schedule)?;
            err = err.max(expected.max_relative_error(&dev.download(&on.y)?));
            if dev.is_gpu() {
                let ms = median_ms(dev, &mut on, aggregation, schedule, reps)?;
                let gbs = bytes(layer, aggregation) as f64 / (ms * 1e-3) / 1e9;
                cells += &format!(" {:>9.1} {:>7.1}", ms * 1e3, gbs);
            } else {
                let instructions = launch.sim.unwrap_or_default().instructions;
                cells += &format!(" {instructions:>14}");
            }
        }
        let ok = err <= TOLERANCE;
        all_ok &= ok;
        let verdict = if ok { "ok" } else { "FAILED" };
        print(&format!(
            "{:<22}{cells} {:>12.2e} {:>7}",
            schedule.name(),
            err,
            verdict
        ));
    }
    Ok(all_ok)
}
