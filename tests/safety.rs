//! Safety of the launch path: launches on another stream wait for the device's stream (no race
//! from safe code), a failed launch leaves a tile set's cached temporaries cold, launches that
//! push to a queue allocate nothing once a stream is warm, and they can be captured in a graph.
//! Each check runs on the simulator here and, in the `gpu_*` twins (ignored without
//! `--include-ignored`), on CUDA GPU 0. Inputs are fresh random per run (the seed is printed).

mod capture;

use capture::{alone, shared};
use lb::prelude::*;
use lb::{Error, KernelArg};

/// y = A·x under two schedules; `merge_path` caches its partition with the tile set.
#[load_balanced(schedule = "thread_mapped, merge_path", reduce = "sum", output = "y")]
fn spmv(a: &Csr<f32>, x: &[f32], #[tile] row: usize, #[atom] nz: usize) -> f32 {
    a.values[nz] * x[a.col_indices[nz] as usize]
}

/// Pushes every atom's column.
#[load_balanced(schedule = "thread_mapped")]
fn columns(g: &Csr<f32>, out: &mut Queue, #[atom] e: usize) {
    out.push(g.col_indices[e]);
}

fn seed() -> u64 {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64);
    eprintln!("seed {s}");
    s
}

fn gpu() -> Device {
    Device::cuda(0).expect("these tests need a CUDA GPU")
}

/// A·x row by row in f64, the reference every SpMV here is compared with.
fn reference(a: &Csr<f32>, x: &[f32]) -> Vec<f64> {
    (0..a.num_rows)
        .map(|r| {
            a.row(r)
                .map(|nz| f64::from(a.values[nz]) * f64::from(x[a.col_indices[nz] as usize]))
                .sum()
        })
        .collect()
}

fn assert_close(a: &Csr<f32>, x: &[f32], got: &[f32], what: &str) {
    let want = reference(a, x);
    assert_eq!(got.len(), want.len(), "{what}");
    for (r, (&g, &w)) in got.iter().zip(&want).enumerate() {
        let scale: f64 = a
            .row(r)
            .map(|nz| (f64::from(a.values[nz]) * f64::from(x[a.col_indices[nz] as usize])).abs())
            .sum();
        assert!(
            (f64::from(g) - w).abs() <= 1e-5 * scale.max(1.0),
            "{what}: row {r}: {g} against {w}"
        );
    }
}

fn sorted(mut v: Vec<u32>) -> Vec<u32> {
    v.sort_unstable();
    v
}

/// A launch on a new stream without `wait_for` waits for the uploads before it (once: a second
/// launch with nothing new on the device's stream waits for nothing), for an `upload_into`
/// between two launches, and for another stream's launch whose output it reads; launches on the
/// device's stream never wait, and a stream under `order_manually` neither.
fn streams_wait_for_the_device(dev: &Device) {
    let s = seed();
    let a = lb::generate::power_law(400, 300, 6.0, s);
    let x = lb::generate::random_vector(300, s ^ 1);
    let sched = Schedule::ThreadMapped;
    let da = DeviceCsr::upload(dev, &a).unwrap();
    let mut dx = dev.upload(&x).unwrap();
    let mut dy = dev.zeros::<f32>(a.num_rows).unwrap();
    let stream = dev.new_stream().unwrap();
    assert_eq!(stream.device_waits(), 0);
    let p = spmv::launch_with_async(&stream, sched, &da, &dx, &mut dy).unwrap();
    assert_eq!(
        stream.device_waits(),
        1,
        "the first launch waits for the uploads"
    );
    p.wait().unwrap();
    assert_close(&a, &x, &dy.download().unwrap(), "after the uploads");
    spmv::launch_with_async(&stream, sched, &da, &dx, &mut dy)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(
        stream.device_waits(),
        1,
        "nothing new on the device's stream"
    );

    let x2 = lb::generate::random_vector(300, s ^ 2);
    dx.upload_into(&x2).unwrap();
    spmv::launch_with_async(&stream, sched, &da, &dx, &mut dy)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(stream.device_waits(), 2, "an upload_into in between");
    assert_close(&a, &x2, &dy.download().unwrap(), "after upload_into");

    // z = A·y on a second stream, right after y = A·x on the first: the second launch waits
    // (through the device's stream, which waits for the first).
    let square = lb::generate::power_law(300, 300, 5.0, s ^ 3);
    let dsq = DeviceCsr::upload(dev, &square).unwrap();
    let other = dev.new_stream().unwrap();
    let mut dy300 = dev.zeros::<f32>(300).unwrap();
    let mut dz = dev.zeros::<f32>(300).unwrap();
    let waits = other.device_waits();
    drop(spmv::launch_with_async(&stream, sched, &dsq, &dx, &mut dy300).unwrap());
    let p = spmv::launch_with_async(&other, sched, &dsq, &dy300, &mut dz).unwrap();
    assert_eq!(
        other.device_waits(),
        waits + 1,
        "reads another stream's output"
    );
    p.wait().unwrap();
    stream.synchronize().unwrap();
    let y300 = dy300.download().unwrap();
    assert_close(&square, &x2, &y300, "first stream");
    assert_close(&square, &y300, &dz.download().unwrap(), "second stream");

    spmv::launch_with(dev, sched, &da, &dx, &mut dy).unwrap();
    assert_eq!(
        dev.stream().device_waits(),
        0,
        "the device's stream never waits"
    );

    let manual = dev.new_stream().unwrap();
    // SAFETY: the launch below reads `da` and `dx` and writes `dy`, whose writes on the
    // device's stream are waited for just before it.
    unsafe { manual.order_manually() };
    manual.wait_for(&dev.stream()).unwrap();
    spmv::launch_with_async(&manual, sched, &da, &dx, &mut dy)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(manual.device_waits(), 0);
    assert_close(&a, &x2, &dy.download().unwrap(), "ordered by hand");
}

/// A launch whose consumer kernel fails after the producer of `merge_path`'s cached partition
/// ran (here: an `x` already freed, through the unsafe `submit`) stores nothing with the tile
/// set: the next launch runs the producer again and is right; the one after reuses the cache.
#[test]
fn sim_failed_launch_leaves_the_cache_cold() {
    let dev = Device::simulator();
    let s = seed();
    let a = lb::generate::power_law(300, 200, 8.0, s);
    let x = lb::generate::random_vector(200, s ^ 1);
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let dx = dev.upload(&x).unwrap();
    let mut dy = dev.zeros::<f32>(a.num_rows).unwrap();
    let freed = dev.upload(&x).unwrap();
    let mut args = Vec::new();
    da.push_args(&mut args);
    freed.push_args(&mut args);
    dy.push_args(&mut args);
    drop(freed);
    let plan = spmv::PLANS
        .iter()
        .find(|p| p.schedule == "merge_path" && p.offsets == da.offset_width())
        .expect("a merge_path plan for this tile set");
    let producers = plan.cache_producers();
    assert!(producers > 0, "merge_path caches its partition");
    let job = lb::__private::Job {
        ptx: spmv::PTX,
        plan,
        param_names: &["a", "x"],
        size: lb::__private::ProblemSize {
            tiles: a.num_rows as u64,
            atoms: a.nnz() as u64,
            lanes: 1,
            max_tile_atoms: da.stats().max_atoms,
            offsets: da.offset_width(),
        },
        cache: Some(lb::DeviceTileSet::temp_cache(&da)),
    };
    // SAFETY: on the simulator an access to freed memory is an error, not corruption: the
    // consumer kernel reads `x` at a freed address on purpose.
    let r = unsafe { lb::__private::submit(&dev.stream(), &job, args, lb::Submit::Timed) }
        .and_then(|p| p.wait());
    assert!(matches!(r, Err(Error::Sim(_))), "{r:?}");

    let cold = spmv::launch_with(&dev, Schedule::MergePath, &da, &dx, &mut dy).unwrap();
    assert_close(&a, &x, &dy.download().unwrap(), "after the failed launch");
    let warm = spmv::launch_with(&dev, Schedule::MergePath, &da, &dx, &mut dy).unwrap();
    assert_eq!(
        cold.kernels.len(),
        warm.kernels.len() + producers,
        "cold {:?}, warm {:?}",
        cold.kernels,
        warm.kernels
    );
    assert_close(&a, &x, &dy.download().unwrap(), "from the cache");
}

/// The simulator numbers allocations in its addresses (`id << 40`) and never reuses an id, so
/// the id of a fresh buffer counts every allocation made before it.
fn next_allocation(dev: &Device) -> u64 {
    dev.zeros::<u8>(1).unwrap().device_addr() >> 40
}

/// 150 launches that push to a queue, none waited for, then one synchronization, twice: the
/// second round allocates nothing (the counter copies reuse the stream's slots), and every
/// launch's count is right.
#[test]
fn sim_queue_launches_allocate_nothing_once_warm() {
    let dev = Device::simulator();
    let s = seed();
    let g = lb::generate::power_law(120, 90, 4.0, s);
    let dg = DeviceCsr::upload(&dev, &g).unwrap();
    let mut q = DeviceQueue::new(&dev, g.nnz()).unwrap();
    let stream = dev.new_stream().unwrap();
    let mut probes = Vec::new();
    for _ in 0..2 {
        probes.push(next_allocation(&dev));
        for _ in 0..150 {
            q.clear().unwrap();
            drop(columns::launch_async(&stream, &dg, &mut q).unwrap());
        }
        q.clear().unwrap();
        let launch = columns::launch_async(&stream, &dg, &mut q)
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(launch.pushed, vec![("out", g.nnz() as u64)]);
        assert_eq!(sorted(q.download().unwrap()), sorted(g.col_indices.clone()));
    }
    probes.push(next_allocation(&dev));
    // Only the probe itself between the last two readings.
    assert_eq!(probes[2], probes[1] + 1, "allocation ids {probes:?}");

    // A queue of another device is refused before anything is copied.
    let foreign = DeviceQueue::new(&Device::simulator(), 4).unwrap();
    q.clear().unwrap();
    let mut pending = columns::launch_async(&stream, &dg, &mut q).unwrap();
    match pending.watch_queue(&foreign, "foreign") {
        Err(Error::DeviceMismatch { what }) => assert!(what.contains("foreign"), "{what}"),
        other => panic!("expected a device mismatch, got {other:?}"),
    }
    pending.wait().unwrap();
}

/// Launches that push to queues, captured and replayed: each replay fills the queue again
/// (cleared on the device's stream in between) and its count is checked at the stream's
/// synchronization, an overflow included; a capture of more queue launches than it has slots
/// for is `Error::Capture` saying how many.
fn queue_launches_in_a_graph(dev: &Device) {
    let s = seed();
    let g = lb::generate::power_law(150, 100, 5.0, s);
    let dg = DeviceCsr::upload(dev, &g).unwrap();
    let mut q = DeviceQueue::new(dev, g.nnz()).unwrap();
    let mut small = DeviceQueue::new(dev, g.nnz() / 2).unwrap();
    let stream = dev.new_stream().unwrap();
    columns::launch_async(&stream, &dg, &mut q)
        .unwrap()
        .wait()
        .unwrap();
    stream.begin_capture().unwrap();
    drop(columns::launch_async(&stream, &dg, &mut q).unwrap());
    let graph = stream.end_capture().unwrap();
    for rep in 0..3 {
        q.clear().unwrap();
        // SAFETY: `dg` and `q` outlive the replay, which is synchronized right after.
        unsafe { graph.launch() }.unwrap();
        stream.synchronize().unwrap();
        assert_eq!(
            sorted(q.download().unwrap()),
            sorted(g.col_indices.clone()),
            "replay {rep}"
        );
    }

    stream.begin_capture().unwrap();
    drop(columns::launch_async(&stream, &dg, &mut small).unwrap());
    let overflowing = stream.end_capture().unwrap();
    small.clear().unwrap();
    // SAFETY: `dg` and `small` outlive the replay, synchronized below.
    unsafe { overflowing.launch() }.unwrap();
    match stream.synchronize() {
        Err(Error::QueueOverflow {
            param,
            needed,
            capacity,
        }) => {
            assert_eq!(param, "out");
            assert_eq!((needed, capacity), (g.nnz() as u64, (g.nnz() / 2) as u64));
        }
        other => panic!("expected the replay's overflow, got {other:?}"),
    }
    stream.synchronize().unwrap();

    stream.begin_capture().unwrap();
    let mut refused = None;
    for _ in 0..65 {
        match columns::launch_async(&stream, &dg, &mut q) {
            Ok(p) => drop(p),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    // The capture must end whatever happened, so that the stream works again.
    let _ = stream.end_capture();
    match refused {
        Some(Error::Capture(m)) => assert!(m.contains("at most 64"), "{m}"),
        other => panic!("expected the 65th queue launch to be refused, got {other:?}"),
    }
}

#[test]
fn sim_streams_wait_for_the_device() {
    streams_wait_for_the_device(&Device::simulator());
}

#[test]
fn sim_queue_launches_in_a_graph() {
    queue_launches_in_a_graph(&Device::simulator());
}

#[test]
#[ignore = "needs a CUDA GPU: run with --include-ignored on a GPU machine"]
fn gpu_streams_wait_for_the_device() {
    let _gpu = shared();
    streams_wait_for_the_device(&gpu());
}

#[test]
#[ignore = "needs a CUDA GPU: run with --include-ignored on a GPU machine"]
fn gpu_queue_launches_in_a_graph() {
    let _gpu = alone();
    queue_launches_in_a_graph(&gpu());
}

/// A module dropped with its device right after an asynchronous launch: the unload waits for
/// the kernel, and a new device on the same GPU computes correctly afterwards.
#[test]
#[ignore = "needs a CUDA GPU: run with --include-ignored on a GPU machine"]
fn gpu_device_dropped_after_an_async_launch() {
    let _gpu = shared();
    let s = seed();
    let a = lb::generate::power_law(20_000, 20_000, 16.0, s);
    let x = lb::generate::random_vector(20_000, s ^ 1);
    for _ in 0..3 {
        let dev = gpu();
        let da = DeviceCsr::upload(&dev, &a).unwrap();
        let dx = dev.upload(&x).unwrap();
        let mut dy = dev.zeros::<f32>(a.num_rows).unwrap();
        let stream = dev.new_stream().unwrap();
        for _ in 0..20 {
            drop(spmv::launch_with_async(&stream, Schedule::MergePath, &da, &dx, &mut dy).unwrap());
        }
    }
    let dev = gpu();
    let (da, dx) = (
        DeviceCsr::upload(&dev, &a).unwrap(),
        dev.upload(&x).unwrap(),
    );
    let mut dy = dev.zeros::<f32>(a.num_rows).unwrap();
    spmv::launch_with(&dev, Schedule::MergePath, &da, &dx, &mut dy).unwrap();
    assert_close(&a, &x, &dy.download().unwrap(), "after dropped devices");
}
