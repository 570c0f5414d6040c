//! The device on a machine without a GPU: the simulator, its buffers, and plan execution on
//! hand-written PTX.

mod common;

use common::{size, DOUBLE_PLAN, DOUBLE_PTX, MISSING_PLAN, RAISE_PLAN};
use lb_runtime::{ArgValue, Csr, Device, DeviceCsr, Element, Error, KernelArg, Launch};

fn sim() -> Device {
    Device::simulator()
}

fn round_trip<T: Element + PartialEq + std::fmt::Debug>(dev: &Device, data: &[T]) {
    let buf = dev.upload(data).unwrap();
    assert_eq!(buf.len(), data.len());
    assert_eq!(buf.is_empty(), data.is_empty());
    assert_eq!(dev.download(&buf).unwrap(), data);
    assert_eq!(buf.download().unwrap(), data);
}

#[test]
fn default_device_here_is_the_simulator() {
    // This machine has no GPU; CI neither. On a GPU machine the test checks the other branch.
    let dev = Device::default();
    if dev.is_gpu() {
        assert!(dev.fallback_reason().is_none());
        assert!(dev.name().contains("sm_"));
    } else {
        assert_eq!(dev.name(), "simulator");
        assert!(dev.fallback_reason().is_some());
    }
    assert!(Device::simulator().fallback_reason().is_none());
    assert!(!Device::simulator().is_gpu());
}

#[test]
fn upload_download_every_element_type() {
    let dev = sim();
    round_trip(&dev, &[1.5f32, -0.0, f32::MAX, f32::MIN_POSITIVE]);
    round_trip(&dev, &[1.5f64, -2.25, f64::EPSILON]);
    round_trip(&dev, &[i32::MIN, -1, 0, i32::MAX]);
    round_trip(&dev, &[0u32, 7, u32::MAX]);
    round_trip(&dev, &[i64::MIN, -1, i64::MAX]);
    round_trip(&dev, &[0u64, 1 << 40, u64::MAX]);
    round_trip(&dev, &[0u8, 1, 255]);
    round_trip(&dev, &[true, false, true]);
    round_trip::<f32>(&dev, &[]);
    let z = dev.zeros::<u64>(5).unwrap();
    assert_eq!(z.download().unwrap(), vec![0; 5]);
    assert!(dev.zeros::<f32>(0).unwrap().is_empty());
    dev.synchronize().unwrap();
}

#[test]
fn filled_buffers_and_writes_at_an_offset() {
    common::check_fill_and_write_at(&sim(), 0x5eed ^ std::process::id() as u64);
}

#[test]
fn upload_into_overwrites_in_place() {
    let dev = sim();
    let mut b = dev.upload(&[1u32, 2, 3, 4]).unwrap();
    let addr = b.device_addr();
    b.upload_into(&[9, 8, 7, 6]).unwrap();
    assert_eq!(b.download().unwrap(), [9, 8, 7, 6]);
    assert_eq!(b.device_addr(), addr);
    // A length mismatch writes nothing.
    for wrong in [&[1u32, 2, 3][..], &[1, 2, 3, 4, 5], &[]] {
        match b.upload_into(wrong) {
            Err(Error::Shape(m)) => assert!(m.contains("into a buffer of 4"), "{m}"),
            other => panic!("expected a shape error, got {other:?}"),
        }
    }
    assert_eq!(b.download().unwrap(), [9, 8, 7, 6]);
    let mut flags = dev.upload(&[true, false]).unwrap();
    flags.upload_into(&[false, true]).unwrap();
    assert_eq!(flags.download().unwrap(), [false, true]);
    let mut empty = dev.upload::<f64>(&[]).unwrap();
    empty.upload_into(&[]).unwrap();
    assert!(empty.download().unwrap().is_empty());
}

#[test]
fn buffers_of_another_device_are_refused() {
    let (a, b) = (sim(), sim());
    let buf = a.upload(&[1u32]).unwrap();
    assert!(matches!(
        b.download(&buf),
        Err(Error::DeviceMismatch { .. })
    ));
}

#[test]
fn device_csr_round_trip() {
    let dev = sim();
    let m = lb_runtime::generate::power_law(200, 150, 6.0, 11);
    let d = DeviceCsr::upload(&dev, &m).unwrap();
    assert_eq!((d.num_rows(), d.num_cols(), d.nnz()), (200, 150, m.nnz()));
    assert_eq!(d.download().unwrap(), m);
    let empty = Csr::<f64>::empty(0, 0).unwrap();
    assert_eq!(
        DeviceCsr::upload(&dev, &empty).unwrap().download().unwrap(),
        empty
    );
    let bad = Csr {
        num_rows: 1,
        num_cols: 1,
        row_offsets: vec![0, 1],
        col_indices: vec![3],
        values: vec![1.0f32],
    };
    assert!(matches!(
        DeviceCsr::upload(&dev, &bad),
        Err(Error::InvalidMatrix(_))
    ));
}

/// Takes the argument by value, as generated code does with `&DeviceBuffer` and `&mut DeviceBuffer`.
fn push<A: KernelArg>(a: A, out: &mut Vec<ArgValue>) {
    a.push_args(out);
}

#[test]
fn kernel_args_follow_the_contract() {
    let dev = sim();
    let buf = dev.upload(&[1.0f32, 2.0, 3.0]).unwrap();
    let m = DeviceCsr::upload(
        &dev,
        &Csr::new(2, 3, vec![0, 1, 2], vec![0, 2], vec![1.0f32, 2.0]).unwrap(),
    )
    .unwrap();
    let mut out = Vec::new();
    push(&buf, &mut out);
    m.push_args(&mut out);
    2.5f32.push_args(&mut out);
    (-3i32).push_args(&mut out);
    7usize.push_args(&mut out);
    true.push_args(&mut out);
    assert_eq!(
        out[..2],
        [ArgValue::U64(buf.device_addr()), ArgValue::U64(3)]
    );
    assert_eq!(
        out[5..8],
        [ArgValue::U64(2), ArgValue::U64(3), ArgValue::U64(2)]
    );
    assert_eq!(
        out[8..],
        [
            ArgValue::F32(2.5),
            ArgValue::I32(-3),
            ArgValue::U64(7),
            ArgValue::U32(1)
        ]
    );
    assert_eq!(ArgValue::I32(-1).bits(), 0xFFFF_FFFF);
    assert_eq!(ArgValue::F32(1.0).bits(), 0x3F80_0000);
}

/// `lb_runtime::execute` on the simulator, which checks the parameter list and every address
/// itself: arguments that do not match the PTX are an `Error::Sim` there, which these tests
/// provoke on purpose.
fn execute_sim(
    dev: &Device,
    ptx: &'static str,
    plan: &lb_ptx::plan::Plan,
    names: &'static [&'static str],
    args: Vec<ArgValue>,
    size: lb_ptx::plan::ProblemSize,
) -> lb_runtime::Result<Launch> {
    assert!(!dev.is_gpu(), "only the simulator checks the arguments");
    // SAFETY: on the simulator a parameter list that does not match the entry and an address
    // outside a live allocation are errors, never memory corruption.
    unsafe { lb_runtime::execute(dev, ptx, plan, names, args, size) }
}

#[test]
fn execute_runs_a_grid_stride_kernel() {
    let dev = sim();
    let n = 1000;
    let xs: Vec<f32> = (0..n).map(|i| i as f32 - 3.5).collect();
    let x = dev.upload(&xs).unwrap();
    let y = dev.zeros::<f32>(n).unwrap();
    let mut args = Vec::new();
    x.push_args(&mut args);
    y.push_args(&mut args);
    let launch = execute_sim(
        &dev,
        DOUBLE_PTX,
        &DOUBLE_PLAN,
        &["x", "y"],
        args,
        size(n as u64),
    )
    .unwrap();
    assert_eq!(
        y.download().unwrap(),
        xs.iter().map(|v| 2.0 * v).collect::<Vec<_>>()
    );
    // 1000 items need 32 blocks of 32, but the simulated machine holds 2 SMs × 2 blocks.
    assert_eq!(launch.kernels.len(), 1);
    assert_eq!((launch.kernels[0].grid, launch.kernels[0].block), (4, 32));
    assert_eq!(launch.schedule, "thread_mapped");
    assert_eq!(&*launch.device, "simulator");
    assert!(launch.elapsed_ms.is_none());
    let stats = launch.sim.expect("simulator statistics");
    assert_eq!(stats.threads, 128);

    // The module is cached: a second launch on a small problem uses one block.
    let mut args = Vec::new();
    x.push_args(&mut args);
    y.push_args(&mut args);
    let again = execute_sim(&dev, DOUBLE_PTX, &DOUBLE_PLAN, &["x", "y"], args, size(10)).unwrap();
    assert_eq!(again.kernels[0].grid, 1);
}

#[test]
fn error_flag_becomes_out_of_bounds() {
    let dev = sim();
    let x = dev.upload(&[1.0f32]).unwrap();
    let mut args = Vec::new();
    x.push_args(&mut args);
    match execute_sim(&dev, DOUBLE_PTX, &RAISE_PLAN, &["a", "x"], args, size(1)) {
        Err(Error::OutOfBounds { param, index }) => assert_eq!((param.as_str(), index), ("x", 7)),
        other => panic!("expected OutOfBounds, got {other:?}"),
    }
}

#[test]
fn execute_reports_simulator_errors() {
    let dev = sim();
    // Too few arguments for `double`.
    let r = execute_sim(
        &dev,
        DOUBLE_PTX,
        &DOUBLE_PLAN,
        &["x", "y"],
        vec![ArgValue::U64(0)],
        size(1),
    );
    assert!(matches!(r, Err(Error::Sim(_))), "{r:?}");
    // PTX the simulator cannot parse.
    let r = execute_sim(&dev, "not ptx", &DOUBLE_PLAN, &[], vec![], size(1));
    assert!(matches!(r, Err(Error::Parse(_))), "{r:?}");
    let r = execute_sim(&dev, DOUBLE_PTX, &MISSING_PLAN, &[], vec![], size(1));
    assert!(
        matches!(&r, Err(Error::MissingKernel(k)) if k == "nope"),
        "{r:?}"
    );
}
