//! Probe: what a BFS driver's host time is made of on a GPU (allocation, fill, download, free).
use lb::prelude::*;
use std::time::Instant;

fn med(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> lb::Result<()> {
    let dev = Device::default();
    for n in [6_500_000usize, 8_388_608] {
        let (mut fill, mut queues, mut down, mut drop_t, mut zero) = (vec![], vec![], vec![], vec![], vec![]);
        for _ in 0..7 {
            dev.synchronize()?;
            let t = Instant::now();
            let mut depth = dev.filled(n, u32::MAX)?;
            dev.synchronize()?;
            fill.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            let q1 = DeviceQueue::new(&dev, n)?;
            let q2 = DeviceQueue::new(&dev, n)?;
            dev.synchronize()?;
            queues.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            dev.zero(&mut depth)?;
            dev.synchronize()?;
            zero.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            let h = depth.download()?;
            down.push(t.elapsed().as_secs_f64() * 1e3);
            assert_eq!(h.len(), n);
            let t = Instant::now();
            drop((depth, q1, q2));
            dev.synchronize()?;
            drop_t.push(t.elapsed().as_secs_f64() * 1e3);
        }
        println!(
            "n {n}: fill {:.3} ms, two queues {:.3}, zero {:.3}, download {:.3} ({:.1} GB/s), drop {:.3}",
            med(fill),
            med(queues),
            med(zero),
            med(down.clone()),
            (n * 4) as f64 / med(down) / 1e6,
            med(drop_t)
        );
    }
    // One synchronous 8-byte read after nothing: the floor of a round trip.
    let b = dev.zeros::<u64>(1)?;
    let mut rt = vec![];
    for _ in 0..200 {
        let t = Instant::now();
        let _ = b.download()?;
        rt.push(t.elapsed().as_secs_f64() * 1e6);
    }
    println!("8-byte download: {:.1} us", med(rt));
    Ok(())
}
