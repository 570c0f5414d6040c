//! Streams, asynchronous launches, workspaces, graphs and cudarc interop. Every check runs on
//! the simulator here and, in the `gpu_*` twins (ignored without `--include-ignored`, which
//! `scripts/gpu-run.sh` passes), on CUDA GPU 0. Inputs are fresh random per run (the seed is
//! printed).

mod capture;
mod common;

use capture::{alone, shared};
use common::{assert_spmv_close, random_csr, random_vec, spmv, spmv_checked, Shape};
use lb::prelude::*;
use lb::{Error, Stream, Workspace};

#[load_balanced(schedule = "auto")]
fn gather_push(g: &Csr<f32>, out: &mut Queue, #[atom] e: usize) {
    out.push(g.col_indices[e]);
}

/// Pushes each tile of the tile list once per atom.
#[load_balanced(schedule = "thread_mapped", tiles = "tiles")]
fn frontier_push(
    _g: &Csr<f32>,
    tiles: &[u32],
    out: &mut Queue,
    #[tile] u: usize,
    #[atom] _e: usize,
) {
    out.push(u as u32);
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

/// An asynchronous launch returns before anything is read; `wait` gives the launch, the output
/// is right, and the schedule is the one asked for.
fn async_launch_waits(dev: &Device) {
    let s = seed();
    let a = random_csr(Shape::Random, 300, 200, s);
    let x = random_vec(a.num_cols, s ^ 1);
    let da = DeviceCsr::upload(dev, &a).unwrap();
    let dx = dev.upload(&x).unwrap();
    let stream = dev.stream();
    stream.set_timing(true);
    for &sched in spmv::SCHEDULES {
        let mut dy = dev.upload(&vec![f32::NAN; a.num_rows]).unwrap();
        let pending = spmv::launch_with_async(&stream, sched, &da, &dx, &mut dy).unwrap();
        assert_eq!(pending.launch().schedule, sched.name());
        let launch = pending.wait().unwrap();
        assert_eq!(launch.elapsed_ms.is_some(), dev.is_gpu(), "{launch:?}");
        assert_spmv_close(&a, &x, &dy.download().unwrap(), sched.name());
    }
}

/// A checked kernel that reads out of bounds: the launch is accepted, `wait` is the `Err`; a
/// dropped `Pending` leaves the report for the stream's next synchronization, which reports it
/// once; the stream then runs clean launches again.
fn error_flag_after_wait(dev: &Device) {
    let s = seed();
    let a = random_csr(Shape::Random, 200, 150, s);
    let short = random_vec(a.num_cols / 2, s ^ 2);
    let full = random_vec(a.num_cols, s ^ 3);
    let da = DeviceCsr::upload(dev, &a).unwrap();
    let (dshort, dfull) = (dev.upload(&short).unwrap(), dev.upload(&full).unwrap());
    let stream = dev.new_stream().unwrap();
    stream.wait_for(&dev.stream()).unwrap();
    let mut dy = dev.zeros::<f32>(a.num_rows).unwrap();
    let out_of_bounds = |r: lb::Result<Launch>| match r {
        Err(Error::OutOfBounds { param, index }) => {
            assert_eq!(param, "x");
            assert!(index as usize >= short.len(), "index {index}");
        }
        other => panic!("expected OutOfBounds for x, got {other:?}"),
    };
    let pending = spmv_checked::launch_async(&stream, &da, &dshort, &mut dy).unwrap();
    out_of_bounds(pending.wait());
    // Dropped unread: the next synchronization reports it, once.
    drop(spmv_checked::launch_async(&stream, &da, &dshort, &mut dy).unwrap());
    match stream.synchronize() {
        Err(Error::OutOfBounds { param, .. }) => assert_eq!(param, "x"),
        other => panic!("expected the dropped launch's OutOfBounds, got {other:?}"),
    }
    stream.synchronize().unwrap();
    // A bad launch followed by a good one: waiting on the good one still reports the bad one.
    drop(spmv_checked::launch_async(&stream, &da, &dshort, &mut dy).unwrap());
    let good = spmv_checked::launch_async(&stream, &da, &dfull, &mut dy).unwrap();
    out_of_bounds(good.wait());
    spmv_checked::launch_async(&stream, &da, &dfull, &mut dy)
        .unwrap()
        .wait()
        .unwrap();
    dev.synchronize().unwrap();
    assert_spmv_close(&a, &full, &dy.download().unwrap(), "after the errors");
}

/// 1000 launches on one stream, rotating over every schedule (their scratch, zeroed or not,
/// shares one workspace), each on a fresh x and checked: the workspace is allocated once.
fn workspace_reused(dev: &Device, launches: usize) {
    let s = seed();
    let a = random_csr(Shape::Alternating, 120, 90, s);
    let da = DeviceCsr::upload(dev, &a).unwrap();
    let stream = dev.stream();
    let mut dy = dev.zeros::<f32>(a.num_rows).unwrap();
    let mut size = None;
    for i in 0..launches {
        let x = random_vec(a.num_cols, s.wrapping_add(i as u64));
        let dx = dev.upload(&x).unwrap();
        let sched = spmv::SCHEDULES[i % spmv::SCHEDULES.len()];
        spmv::launch_with_async(&stream, sched, &da, &dx, &mut dy)
            .unwrap()
            .wait()
            .unwrap();
        assert_spmv_close(&a, &x, &dy.download().unwrap(), &format!("launch {i}"));
        if i == spmv::SCHEDULES.len() {
            size = Some(stream.workspace_len());
        }
        if let Some(n) = size {
            assert_eq!(stream.workspace_len(), n, "launch {i} grew the workspace");
        }
    }
}

/// Two tile sets of one size (the same row lengths, other columns and values) and a third of
/// another size, launched in turn on one stream under every schedule: a launch's sized plan
/// (grids, temporaries' places) is shared by problems of the same size, and a schedule's cached
/// temporaries stay each tile set's own.
fn same_size_tile_sets(dev: &Device) {
    let s = seed();
    let a = random_csr(Shape::Alternating, 120, 90, s);
    let mut b = a.clone();
    let other = random_csr(Shape::Alternating, 120, 90, s.wrapping_add(1));
    for (i, (c, v)) in b.col_indices.iter_mut().zip(&mut b.values).enumerate() {
        *c = other.col_indices[i % other.col_indices.len().max(1)] % a.num_cols as u32;
        *v = -*v * 0.5 + 1.0;
    }
    let c = random_csr(Shape::Random, 77, 90, s.wrapping_add(2));
    let uploads: Vec<_> = [&a, &b, &c]
        .iter()
        .map(|m| DeviceCsr::upload(dev, m).unwrap())
        .collect();
    let stream = dev.new_stream().unwrap();
    for (round, &sched) in spmv::SCHEDULES
        .iter()
        .cycle()
        .take(3 * spmv::SCHEDULES.len())
        .enumerate()
    {
        for (k, (m, dm)) in [&a, &b, &c].into_iter().zip(&uploads).enumerate() {
            let x = random_vec(m.num_cols, s.wrapping_add((10 * round + k) as u64));
            let dx = dev.upload(&x).unwrap();
            let mut dy = dev.zeros::<f32>(m.num_rows).unwrap();
            spmv::launch_with_async(&stream, sched, dm, &dx, &mut dy)
                .unwrap()
                .wait()
                .unwrap();
            let what = format!("{sched}, round {round}, tile set {k}");
            assert_spmv_close(m, &x, &dy.download().unwrap(), &what);
        }
    }
}

/// The cuSPARSE bufferSize pattern: ask the size, make it, hand it over; one too small is an
/// error naming the size; one of another device is refused.
fn user_workspace(dev: &Device) {
    let s = seed();
    let a = random_csr(Shape::OneGiantRow, 80, 60, s);
    let x = random_vec(a.num_cols, s ^ 5);
    let da = DeviceCsr::upload(dev, &a).unwrap();
    let dx = dev.upload(&x).unwrap();
    let mut dy = dev.zeros::<f32>(a.num_rows).unwrap();
    let stream = dev.new_stream().unwrap();
    let mut need = 0;
    for &sched in spmv::SCHEDULES {
        need = need.max(spmv::workspace_size(dev, sched, &da, &dx, &mut dy).unwrap());
    }
    assert!(need >= 256, "{need}");
    stream
        .set_workspace(Workspace::new(dev, need).unwrap())
        .unwrap();
    for &sched in spmv::SCHEDULES {
        let pending = spmv::launch_with_async(&stream, sched, &da, &dx, &mut dy).unwrap();
        assert!(pending.workspace_bytes() <= need);
        pending.wait().unwrap();
        assert_spmv_close(&a, &x, &dy.download().unwrap(), sched.name());
    }
    assert_eq!(stream.workspace_len(), need);
    assert_eq!(
        stream.take_workspace().unwrap().map(|w| w.len()),
        Some(need)
    );

    let merge = lb::Schedule::MergePath;
    let want = spmv::workspace_size(dev, merge, &da, &dx, &mut dy).unwrap();
    stream
        .set_workspace(Workspace::new(dev, 16).unwrap())
        .unwrap();
    match spmv::launch_with_async(&stream, merge, &da, &dx, &mut dy) {
        Err(Error::Shape(m)) => assert!(m.contains(&want.to_string()), "{m}"),
        other => panic!("expected a too-small workspace error, got {other:?}"),
    }
    let other = Device::simulator();
    let foreign = Workspace::new(&other, need).unwrap();
    assert!(matches!(
        stream.set_workspace(foreign),
        Err(Error::DeviceMismatch { .. })
    ));
}

/// Two streams, each with its own launches and workspace, each right.
fn two_streams(dev: &Device) {
    let s = seed();
    let a = random_csr(Shape::Random, 500, 400, s);
    let b = random_csr(Shape::Alternating, 300, 400, s ^ 9);
    let x = random_vec(400, s ^ 4);
    let (da, db) = (
        DeviceCsr::upload(dev, &a).unwrap(),
        DeviceCsr::upload(dev, &b).unwrap(),
    );
    let dx = dev.upload(&x).unwrap();
    let (s1, s2) = (dev.new_stream().unwrap(), dev.new_stream().unwrap());
    s1.wait_for(&dev.stream()).unwrap();
    s2.wait_for(&dev.stream()).unwrap();
    let mut ya = dev.zeros::<f32>(a.num_rows).unwrap();
    let mut yb = dev.zeros::<f32>(b.num_rows).unwrap();
    for &sched in spmv::SCHEDULES {
        let p1 = spmv::launch_with_async(&s1, sched, &da, &dx, &mut ya).unwrap();
        let p2 = spmv::launch_with_async(&s2, sched, &db, &dx, &mut yb).unwrap();
        p2.wait().unwrap();
        p1.wait().unwrap();
        assert_spmv_close(&a, &x, &ya.download().unwrap(), sched.name());
        assert_spmv_close(&b, &x, &yb.download().unwrap(), sched.name());
    }
    assert!(s1.workspace_len() > 0 && s2.workspace_len() > 0);
}

/// y = A·x then z = A·y captured once and replayed on new x: each replay gives A·A·x; a
/// capture that would allocate, or a synchronization inside a capture, is an error.
fn graph_replays(dev: &Device) {
    let s = seed();
    let n = 150;
    let a = random_csr(Shape::Random, n, n, s);
    let da = DeviceCsr::upload(dev, &a).unwrap();
    let mut dx = dev.zeros::<f32>(n).unwrap();
    let mut dy = dev.zeros::<f32>(n).unwrap();
    let mut dz = dev.zeros::<f32>(n).unwrap();
    let stream = dev.new_stream().unwrap();
    let sched = lb::Schedule::MergePath;

    stream.begin_capture().unwrap();
    assert!(matches!(stream.synchronize(), Err(Error::Capture(_))));
    assert!(matches!(
        spmv::launch_with_async(&stream, sched, &da, &dx, &mut dy),
        Err(Error::Capture(_))
    ));
    stream.end_capture().unwrap();

    // Warm: modules, cached temporaries and the workspace exist before the capture.
    spmv::launch_with_async(&stream, sched, &da, &dx, &mut dy)
        .unwrap()
        .wait()
        .unwrap();
    spmv::launch_with_async(&stream, sched, &da, &dy, &mut dz)
        .unwrap()
        .wait()
        .unwrap();
    stream.begin_capture().unwrap();
    drop(spmv::launch_with_async(&stream, sched, &da, &dx, &mut dy).unwrap());
    drop(spmv::launch_with_async(&stream, sched, &da, &dy, &mut dz).unwrap());
    let graph = stream.end_capture().unwrap();
    for rep in 0..5u64 {
        let x = random_vec(n, s.wrapping_add(rep));
        dev.copy(&dev.upload(&x).unwrap(), &mut dx).unwrap();
        dev.synchronize().unwrap();
        stream.wait_for(&dev.stream()).unwrap();
        // SAFETY: `da`, `dx`, `dy` and `dz` outlive the replay, which is synchronized here.
        unsafe { graph.launch() }.unwrap();
        stream.synchronize().unwrap();
        let y = dy.download().unwrap();
        assert_spmv_close(&a, &x, &y, &format!("replay {rep}, y"));
        assert_spmv_close(&a, &y, &dz.download().unwrap(), &format!("replay {rep}, z"));
    }
}

/// A queue overflow of an asynchronous launch is the `Err` of its `wait`.
fn queue_overflow_after_wait(dev: &Device) {
    let s = seed();
    let a = random_csr(Shape::Random, 100, 50, s);
    let da = DeviceCsr::upload(dev, &a).unwrap();
    let mut q = DeviceQueue::new(dev, a.nnz() / 2).unwrap();
    let stream = dev.stream();
    let pending = gather_push::launch_async(&stream, &da, &mut q).unwrap();
    match pending.wait() {
        Err(Error::QueueOverflow {
            needed, capacity, ..
        }) => {
            assert_eq!(needed, a.nnz() as u64);
            assert_eq!(capacity, (a.nnz() / 2) as u64);
        }
        other => panic!("expected a queue overflow, got {other:?}"),
    }
    q.clear().unwrap();
    q.grow(a.nnz()).unwrap();
    gather_push::launch_async(&stream, &da, &mut q)
        .unwrap()
        .wait()
        .unwrap();
    let mut got = q.download().unwrap();
    got.sort_unstable();
    let mut want = a.col_indices.clone();
    want.sort_unstable();
    assert_eq!(got, want);
}

/// A launch that pushes reports the queue's counter in `Launch::pushed`, read once (8 bytes);
/// the stored items serve as the next launch's tile list through `slots`, without a copy;
/// `clear` is a fill on the device, no transfer; and `Device::transferred` counts uploads and
/// downloads byte for byte.
fn queue_counter_reaches_the_launch(dev: &Device) {
    let s = seed();
    let a = random_csr(Shape::Random, 120, 120, s);
    let da = DeviceCsr::upload(dev, &a).unwrap();
    let mut q = DeviceQueue::new(dev, a.nnz() + 3).unwrap();
    let mut again = DeviceQueue::new(dev, a.nnz()).unwrap();
    let before = dev.transferred();
    q.clear().unwrap();
    assert_eq!(dev.transferred(), before, "clearing a queue copies nothing");
    let launch = gather_push::launch_with(dev, Schedule::ThreadMapped, &da, &mut q).unwrap();
    assert_eq!(launch.pushed, vec![("out", a.nnz() as u64)]);
    let moved = dev.transferred().since(before);
    assert_eq!(moved.to_device, 0);
    assert!(
        (8..=16).contains(&moved.to_host),
        "the counter (8) and at most an error flag (8): {moved:?}"
    );
    let items = q.slots(launch.pushed[0].1);
    assert_eq!(items.len(), a.nnz());
    let mut want = a.col_indices.clone();
    want.sort_unstable();
    let before = dev.transferred();
    let mut got = items.download().unwrap();
    let moved = dev.transferred().since(before);
    assert_eq!(
        moved.to_host,
        4 * a.nnz() as u64,
        "a download counts its bytes"
    );
    got.sort_unstable();
    assert_eq!(got, want);
    // The first three stored items as a tile list: the launch reads those three only.
    let prefix = q.download().unwrap()[..3].to_vec();
    again.clear().unwrap();
    let launch =
        frontier_push::launch_with(dev, Schedule::ThreadMapped, &da, q.slots(3), &mut again)
            .unwrap();
    let mut want: Vec<u32> = prefix
        .iter()
        .flat_map(|&t| std::iter::repeat_n(t, a.row(t as usize).len()))
        .collect();
    want.sort_unstable();
    let mut got = again.download().unwrap();
    got.sort_unstable();
    assert_eq!(launch.pushed[0].1, want.len() as u64);
    assert_eq!(got, want);
    let up = dev.transferred();
    let _ = dev.upload(&[1u32, 2, 3]).unwrap();
    assert_eq!(dev.transferred().since(up).to_device, 12);
}

#[test]
fn sim_async_launch_waits() {
    async_launch_waits(&Device::simulator());
}

#[test]
fn sim_error_flag_after_wait() {
    error_flag_after_wait(&Device::simulator());
}

#[test]
fn sim_workspace_reused_1000_times() {
    workspace_reused(&Device::simulator(), 1000);
}

#[test]
fn sim_same_size_tile_sets() {
    same_size_tile_sets(&Device::simulator());
}

#[test]
#[ignore = "needs a CUDA GPU: run with --include-ignored on a GPU machine"]
fn gpu_same_size_tile_sets() {
    let _gpu = shared();
    same_size_tile_sets(&gpu());
}

#[test]
fn sim_user_workspace() {
    user_workspace(&Device::simulator());
}

#[test]
fn sim_two_streams() {
    two_streams(&Device::simulator());
}

#[test]
fn sim_graph_replays() {
    graph_replays(&Device::simulator());
}

#[test]
fn sim_queue_counter_reaches_the_launch() {
    queue_counter_reaches_the_launch(&Device::simulator());
}

#[test]
#[ignore = "needs a CUDA GPU: run with --include-ignored on a GPU machine"]
fn gpu_queue_counter_reaches_the_launch() {
    let _gpu = shared();
    queue_counter_reaches_the_launch(&gpu());
}

#[test]
fn sim_queue_overflow_after_wait() {
    queue_overflow_after_wait(&Device::simulator());
}

#[test]
fn sim_has_no_cudarc_side() {
    let dev = Device::simulator();
    assert!(dev.stream().cudarc().is_none());
    let buf = dev.upload(&[1.0f32, 2.0]).unwrap();
    assert!(matches!(
        buf.into_cudarc(),
        Err(Error::DeviceMismatch { .. })
    ));
}

#[test]
#[ignore = "needs a CUDA GPU: run with --include-ignored on a GPU machine"]
fn gpu_async_launch_waits() {
    let _gpu = shared();
    async_launch_waits(&gpu());
}

#[test]
#[ignore = "needs a CUDA GPU: run with --include-ignored on a GPU machine"]
fn gpu_error_flag_after_wait() {
    let _gpu = shared();
    error_flag_after_wait(&gpu());
}

#[test]
#[ignore = "needs a CUDA GPU: run with --include-ignored on a GPU machine"]
fn gpu_workspace_reused_1000_times() {
    let _gpu = shared();
    workspace_reused(&gpu(), 1000);
}

#[test]
#[ignore = "needs a CUDA GPU: run with --include-ignored on a GPU machine"]
fn gpu_user_workspace() {
    let _gpu = shared();
    user_workspace(&gpu());
}

#[test]
#[ignore = "needs a CUDA GPU: run with --include-ignored on a GPU machine"]
fn gpu_two_streams() {
    let _gpu = shared();
    two_streams(&gpu());
}

#[test]
#[ignore = "needs a CUDA GPU: run with --include-ignored on a GPU machine"]
fn gpu_graph_replays() {
    let _gpu = alone();
    graph_replays(&gpu());
}

#[test]
#[ignore = "needs a CUDA GPU: run with --include-ignored on a GPU machine"]
fn gpu_queue_overflow_after_wait() {
    let _gpu = shared();
    queue_overflow_after_wait(&gpu());
}

/// A bool buffer whose bytes the user's own code set to values other than 0 and 1 reads back as
/// valid `bool`s (any nonzero byte is `true`) into every host destination.
#[test]
#[ignore = "needs a CUDA GPU: run with --include-ignored on a GPU machine"]
fn gpu_bool_bytes_read_back_as_bools() {
    let _gpu = shared();
    let ctx = lb::cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.new_stream().unwrap();
    let dev = Device::from_cudarc(stream.clone()).unwrap();
    let bytes = stream.clone_htod(&[0u8, 1, 2, 255, 0, 7]).unwrap();
    // SAFETY: the six bytes are read back only through lb, which never reads them as `bool`
    // before mapping each to 0 or 1.
    let bools = unsafe { stream.upgrade_device_ptr::<bool>(bytes.leak(), 6) };
    let b = lb::DeviceBuffer::from_cudarc(&dev, bools).unwrap();
    let want = [false, true, true, true, false, true];
    assert_eq!(b.download().unwrap(), want);
    let mut v = Vec::new();
    b.download_into(&mut v).unwrap();
    assert_eq!(v, want);
    let mut h = dev.host_buffer::<bool>(6).unwrap();
    dev.download_to(&b, &mut h).unwrap();
    assert_eq!(&h[..], want);
}

/// The user's cudarc context, stream and slices: lb runs on them without a copy, the slice
/// comes back with lb's results, and a slice of another context is refused.
#[test]
#[ignore = "needs a CUDA GPU: run with --include-ignored on a GPU machine"]
fn gpu_cudarc_interop() {
    let _gpu = shared();
    let ctx = lb::cudarc::driver::CudaContext::new(0).unwrap();
    let user_stream = ctx.new_stream().unwrap();
    let dev = Device::from_cudarc(user_stream.clone()).unwrap();
    let s = seed();
    let a = random_csr(Shape::Random, 400, 300, s);
    let x = random_vec(a.num_cols, s ^ 6);
    let xs = user_stream.clone_htod(&x).unwrap();
    let ys = user_stream.alloc_zeros::<f32>(a.num_rows).unwrap();
    let da = DeviceCsr::upload(&dev, &a).unwrap();
    let dx = lb::DeviceBuffer::from_cudarc(&dev, xs).unwrap();
    let mut dy = lb::DeviceBuffer::from_cudarc(&dev, ys).unwrap();
    assert_eq!(dx.download().unwrap(), x);
    let stream = Stream::from_cudarc(&dev, user_stream.clone()).unwrap();
    spmv::launch_async(&stream, &da, &dx, &mut dy)
        .unwrap()
        .wait()
        .unwrap();
    let back = dy.into_cudarc().unwrap();
    let got = user_stream.clone_dtoh(&back).unwrap();
    user_stream.synchronize().unwrap();
    assert_spmv_close(&a, &x, &got, "through cudarc");

    let other = lb::cudarc::driver::CudaContext::new(0).unwrap();
    let foreign = other.default_stream().alloc_zeros::<f32>(4).unwrap();
    assert!(matches!(
        lb::DeviceBuffer::from_cudarc(&dev, foreign),
        Err(Error::DeviceMismatch { .. })
    ));
    let lb_dev = gpu();
    assert!(matches!(
        Stream::from_cudarc(&lb_dev, user_stream),
        Err(Error::DeviceMismatch { .. })
    ));
}
