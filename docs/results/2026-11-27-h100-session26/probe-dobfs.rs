//! Probe: where a DO-BFS search's wall time goes beyond its kernels, and pinned vs pageable downloads.
use lb::algorithms::{bfs_direction_optimizing_into, Direction, DoBfsGraph, DoBfsResult};
use lb::prelude::*;
use std::time::Instant;

fn med(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn main() -> lb::Result<()> {
    let dev = Device::default();
    let n = 6_500_000usize;
    let g = lb::generate::power_law(n, n, 16.0, 7);
    let dg = DoBfsGraph::upload(&dev, &g)?;
    let mut r = DoBfsResult::default();
    for s in [Schedule::MergePath, Schedule::Lrb] {
        let (mut wall, mut kern) = (vec![], vec![]);
        for _ in 0..7 {
            bfs_direction_optimizing_into(&dev, &dg, 0, s, Direction::default(), &mut r)?;
            wall.push(r.run.wall_ms);
            kern.push(r.levels.iter().map(|l| f64::from(l.kernel_ms.unwrap_or(0.0))).sum::<f64>());
        }
        println!("dobfs {:?}: wall {:.3} ms, sum of level kernels {:.3} ms, steps {}", s, med(wall), med(kern), r.levels.len());
        for l in &r.levels {
            println!("   {:?}", l);
        }
    }
    let mut depth = dev.filled(n, u32::MAX)?;
    let mut marks = dev.zeros::<bool>(n)?;
    let mut small = dev.zeros::<u64>(1024)?;
    let mut host = Vec::new();
    let (mut fill, mut fillm, mut fills, mut write, mut down, mut read8) = (vec![], vec![], vec![], vec![], vec![], vec![]);
    for _ in 0..9 {
        dev.synchronize()?;
        let t = Instant::now();
        dev.fill(&mut depth, u32::MAX)?;
        dev.synchronize()?;
        fill.push(ms(t));
        let t = Instant::now();
        dev.fill(&mut marks, false)?;
        dev.synchronize()?;
        fillm.push(ms(t));
        let t = Instant::now();
        dev.fill(&mut small, 0)?;
        dev.synchronize()?;
        fills.push(ms(t));
        let t = Instant::now();
        dev.write_at(&mut depth, 5, &[0])?;
        dev.synchronize()?;
        write.push(ms(t));
        let t = Instant::now();
        depth.download_into(&mut host)?;
        down.push(ms(t));
        let b = dev.zeros::<u64>(1)?;
        dev.synchronize()?;
        let t = Instant::now();
        let _ = b.download()?;
        read8.push(ms(t));
    }
    println!("fill 26 MB {:.3} ms, fill 6.5 MB {:.3}, fill 8 KB {:.3}, write_at {:.3}, download_into warm 26 MB {:.3} ({:.1} GB/s), 8-byte read {:.3}",
        med(fill), med(fillm), med(fills), med(write), med(down.clone()), (n * 4) as f64 / med(down) / 1e6, med(read8));
    // Pinned vs pageable through cudarc directly.
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.default_stream();
    let src = stream.alloc_zeros::<u32>(n).unwrap();
    // SAFETY: probe; the pinned buffer is written by the copy before it is read.
    let mut pinned = unsafe { ctx.alloc_pinned::<u32>(n).unwrap() };
    let mut pageable = vec![0u32; n];
    let (mut p, mut q) = (vec![], vec![]);
    for _ in 0..9 {
        let t = Instant::now();
        stream.memcpy_dtoh(&src, &mut pinned).unwrap();
        stream.synchronize().unwrap();
        p.push(ms(t));
        let t = Instant::now();
        stream.memcpy_dtoh(&src, &mut pageable).unwrap();
        stream.synchronize().unwrap();
        q.push(ms(t));
    }
    println!("cudarc 26 MB: pinned {:.3} ms ({:.1} GB/s), pageable warm {:.3} ms ({:.1} GB/s)",
        med(p.clone()), (n * 4) as f64 / med(p) / 1e6, med(q.clone()), (n * 4) as f64 / med(q) / 1e6);
    Ok(())
}
