//! Probe: push BFS and DO-BFS host time on a graph whose depths are over 32 MB, and a plain
//! download of that size between searches.
use lb::algorithms::{bfs, bfs_direction_optimizing, Direction, DoBfsGraph};
use lb::prelude::*;
use std::time::Instant;

fn main() -> lb::Result<()> {
    let dev = Device::default();
    for n in [6_500_000usize, 8_388_608] {
        let g = lb::generate::power_law(n, n, 12.0, 7);
        let dg = DeviceCsr::upload(&dev, &g)?;
        let dd = DoBfsGraph::upload(&dev, &g)?;
        let buf = dev.zeros::<u32>(n)?;
        let source = (0..n).find(|&u| g.row(u).len() > 8).unwrap();
        for rep in 0..4 {
            let p = bfs(&dev, &dg, source, Schedule::MergePath)?;
            let t = Instant::now();
            let h = buf.download()?;
            let d1 = t.elapsed().as_secs_f64() * 1e3;
            drop(h);
            let d = bfs_direction_optimizing(&dev, &dd, source, Schedule::MergePath, Direction::default())?;
            let t = Instant::now();
            let h = buf.download()?;
            let d2 = t.elapsed().as_secs_f64() * 1e3;
            drop(h);
            println!(
                "n {n} rep {rep}: push wall {:.2} kernel {:.2} | dobfs wall {:.2} kernel {:.2} | plain downloads {:.2} {:.2} ms",
                p.run.wall_ms,
                p.run.elapsed_ms.unwrap_or(0.0),
                d.run.wall_ms,
                d.run.elapsed_ms.unwrap_or(0.0),
                d1,
                d2
            );
        }
    }
    Ok(())
}
