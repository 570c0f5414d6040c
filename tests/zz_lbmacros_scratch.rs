use lb::prelude::*;

#[load_balanced(schedule = "auto", reduce = "sum", output = "c", lanes = "k")]
fn spmm(a: &Csr<f32>, b: &[f32], k: usize, #[tile] row: usize, #[atom] nz: usize, #[lane] j: usize) -> f32 {
    a.values[nz] * b[a.col_indices[nz] as usize * k + j]
}

#[load_balanced(schedule = "thread_mapped", tiles = "frontier")]
fn relax(g: &Csr<f32>, frontier: &[u32], dist: &mut [f32], hits: &mut [u32], #[tile] u: usize, #[atom] e: usize) {
    let v = g.col_indices[e] as usize;
    let d = dist[u] + g.values[e];
    if d < atomic_min(&mut dist[v], d) {
        atomic_add(&mut hits[v], 1);
    }
}

#[load_balanced(schedule = "thread_mapped", reduce = "max", output = "m")]
fn weird(a: &Csr<f32>, s: i64, #[tile] row: usize, #[atom] nz: usize, #[rank] r: usize) -> i64 {
    let mut acc = 0;
    for j in 0..=r {
        acc += j as i64;
    }
    let x = if a.values[nz] > 0.5 { 3 } else if a.values[nz] < -0.5 { -3 } else { 0 };
    let t = (a.col_indices[nz] as i64 * 7) % 5;
    (acc * s + x - t + row as i64).max(-100).min(1_000_000) ^ 1
}

#[test]
fn scratch() {
    let dev = Device::default();
    let a = Csr::new(3, 3, vec![0, 2, 2, 5], vec![0, 2, 0, 1, 2], vec![1.0f32, -2.0, 0.25, 0.75, -0.9]).unwrap();
    let k = 2;
    let b: Vec<f32> = (0..6).map(|i| i as f32).collect();
    let mut c = vec![0.0f32; 6];
    spmm::cpu(&a, &b, k, &mut c);
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let db = dev.upload(&b).unwrap();
    let mut dc = dev.upload(&vec![f32::NAN; 6]).unwrap();
    spmm::launch(&dev, &da, &db, k, &mut dc).unwrap();
    assert_eq!(dev.download(&dc).unwrap(), c);
    println!("spmm {c:?}");

    let frontier = vec![0u32, 2];
    let mut dist = vec![0.0f32, 10.0, 10.0];
    let mut hits = vec![0u32; 3];
    relax::cpu(&a, &frontier, &mut dist, &mut hits);
    let df = dev.upload(&frontier).unwrap();
    let mut ddist = dev.upload(&[0.0f32, 10.0, 10.0]).unwrap();
    let mut dh = dev.upload(&[0u32; 3]).unwrap();
    relax::launch(&dev, &da, &df, &mut ddist, &mut dh).unwrap();
    println!("relax {dist:?} {hits:?} gpu {:?} {:?}", dev.download(&ddist).unwrap(), dev.download(&dh).unwrap());

    let mut m = vec![0i64; 3];
    weird::cpu(&a, 3, &mut m);
    let mut dm = dev.upload(&[7i64; 3]).unwrap();
    weird::launch(&dev, &da, 3, &mut dm).unwrap();
    assert_eq!(dev.download(&dm).unwrap(), m);
    println!("weird {m:?}");
    let mut short = dev.upload(&[0i64; 2]).unwrap();
    println!("{:?}", weird::launch(&dev, &da, 3, &mut short).unwrap_err().to_string());
    println!("{}", &weird::PTX[..weird::PTX.len().min(600)]);
}
