use lb::prelude::*;

#[load_balanced(schedule = "thread_mapped, group_mapped(4), group_mapped(8), warp_mapped, merge_path, dynamic_virtual_warps, lrb", reduce = "sum", output = "y")]
fn spmv(a: &Csr<f32>, x: &[f32], #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

fn giant_row(rows: usize, len: usize) -> Csr<f32> {
    let cols = len.max(rows);
    let mut s = 7u64;
    let mut lcg = || { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); s >> 33 };
    let mut off = vec![0usize];
    let (mut ci, mut v) = (Vec::new(), Vec::new());
    for r in 0..rows {
        let n = if r == rows / 2 { len } else { 1 };
        for _ in 0..n {
            ci.push((lcg() % cols as u64) as u32);
            v.push((lcg() % 1000) as f32 / 500.0 - 1.0);
        }
        off.push(ci.len());
    }
    Csr::new(rows, cols, off, ci, v).unwrap()
}

fn stats(name: &str, mut t: Vec<f64>) {
    t.sort_by(f64::total_cmp);
    let n = t.len();
    let med = t[n / 2];
    let mean = t.iter().sum::<f64>() / n as f64;
    let iq = &t[n / 4..3 * n / 4];
    let iqm = iq.iter().sum::<f64>() / iq.len() as f64;
    let mut hist: Vec<(i64, usize)> = Vec::new();
    for &x in &t {
        let k = (x * 1000.0).round() as i64;
        match hist.iter_mut().find(|h| h.0 == k) { Some(h) => h.1 += 1, None => hist.push((k, 1)) }
    }
    hist.sort_by(|a, b| b.1.cmp(&a.1));
    let top: Vec<String> = hist.iter().take(6).map(|(k, c)| format!("{:.3}x{}", *k as f64 / 1000.0, c)).collect();
    println!("  {name:24} med {med:7.3} iqm {iqm:7.3} mean {mean:7.3} min {:7.3} p10 {:7.3} p90 {:7.3} | {}", t[0], t[n / 10], t[9 * n / 10], top.join(" "));
}

fn run(dev: &Device, label: &str, a: &Csr<f32>, rounds: usize) -> lb::Result<()> {
    let da = DeviceCsr::upload(dev, a)?;
    let dx = dev.upload(&vec![1.0f32; a.num_cols])?;
    let mut dy = dev.zeros::<f32>(a.num_rows)?;
    let st = dev.new_stream()?;
    st.set_timing(true);
    let scheds: Vec<Schedule> = spmv::SCHEDULES.iter().copied().filter(|s| !(label.starts_with("giant") && *s == Schedule::ThreadMapped)).collect();
    for &s in &scheds { spmv::launch_with(dev, s, &da, &dx, &mut dy)?; spmv::launch_with_async(&st, s, &da, &dx, &mut dy)?.wait()?; }
    let mut td = vec![Vec::new(); scheds.len()];
    let mut to = vec![Vec::new(); scheds.len()];
    for _ in 0..rounds {
        for (i, &s) in scheds.iter().enumerate() {
            for timed in [false, true, true] {
                let l = spmv::launch_with(dev, s, &da, &dx, &mut dy)?;
                if timed { td[i].push(l.elapsed_ms.unwrap() as f64 * 1e3); }
            }
            for timed in [false, true, true] {
                let l = spmv::launch_with_async(&st, s, &da, &dx, &mut dy)?.wait()?;
                if timed { to[i].push(l.elapsed_ms.unwrap() as f64 * 1e3); }
            }
        }
    }
    println!("{label} ({} timed each, µs): device stream, then own stream", 2 * rounds);
    for i in 0..scheds.len() {
        stats(&format!("{} dev", scheds[i]), td[i].clone());
        stats(&format!("{} own", scheds[i]), to[i].clone());
    }
    Ok(())
}

fn main() -> lb::Result<()> {
    let dev = Device::default();
    run(&dev, "tiny-100x100", &lb::generate::power_law(100, 100, 4.0, 3), 150)?;
        run(&dev, "giant_row-1M-3M", &giant_row(1_000_000, 3_000_000), 60)?;
    run(&dev, "dense_rows-like", &giant_row(500_000, 800_000), 60)?;
    Ok(())
}
