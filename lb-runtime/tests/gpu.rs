//! The CUDA path, on a machine with a GPU (`Device::cuda(0)`). Ignored by default, so a machine
//! without a GPU reports them as ignored rather than passed; `scripts/gpu-run.sh` runs them with
//! `--include-ignored`.

mod common;

use common::{size, DOUBLE_PLAN, DOUBLE_PTX, MISSING_PLAN, RAISE_PLAN};
use lb_runtime::{ArgValue, Csr, Device, DeviceCsr, Error, KernelArg, Launch};

/// `lb_runtime::execute` for the plans of `common`: each test passes the parameters their PTX
/// declares (the buffers of `double` and `raise`, nothing where the launch fails before any
/// kernel: a JIT error, a missing kernel).
fn execute_known(
    dev: &Device,
    ptx: &'static str,
    plan: &lb_ptx::plan::Plan,
    names: &'static [&'static str],
    args: Vec<ArgValue>,
    size: lb_ptx::plan::ProblemSize,
) -> lb_runtime::Result<Launch> {
    // SAFETY: the callers pass the addresses and lengths of live buffers of `dev` as the
    // entries' parameters, in order, and the kernels index them within those lengths.
    unsafe { lb_runtime::execute(dev, ptx, plan, names, args, size) }
}

fn gpu() -> Device {
    Device::cuda(0).expect("these tests need a CUDA GPU")
}

#[test]
#[ignore = "needs a CUDA GPU: run with --include-ignored on a GPU machine"]
fn filled_buffers_and_writes_at_an_offset() {
    common::check_fill_and_write_at(&gpu(), 0x5eed ^ std::process::id() as u64);
}

#[test]
#[ignore = "needs a CUDA GPU: run with --include-ignored on a GPU machine"]
fn buffers_and_csr_round_trip() {
    let dev = gpu();
    assert!(dev.is_gpu());
    assert!(dev.name().contains("(sm_"), "{}", dev.name());
    let data = [1.5f64, -2.0, 3.25];
    assert_eq!(dev.upload(&data).unwrap().download().unwrap(), data);
    assert_eq!(
        dev.upload(&[true, false]).unwrap().download().unwrap(),
        [true, false]
    );
    assert!(dev
        .upload::<u32>(&[])
        .unwrap()
        .download()
        .unwrap()
        .is_empty());
    assert_eq!(dev.zeros::<i64>(3).unwrap().download().unwrap(), [0, 0, 0]);
    let mut refreshed = dev.upload(&[1.0f32, 2.0]).unwrap();
    let addr = refreshed.device_addr();
    refreshed.upload_into(&[3.0, 4.0]).unwrap();
    assert_eq!(refreshed.download().unwrap(), [3.0, 4.0]);
    assert_eq!(refreshed.device_addr(), addr);
    assert!(matches!(
        refreshed.upload_into(&[1.0]),
        Err(Error::Shape(_))
    ));
    let m = lb_runtime::generate::power_law(1000, 800, 8.0, 3);
    assert_eq!(DeviceCsr::upload(&dev, &m).unwrap().download().unwrap(), m);
    let empty = Csr::<f32>::empty(0, 0).unwrap();
    assert_eq!(
        DeviceCsr::upload(&dev, &empty).unwrap().download().unwrap(),
        empty
    );
    dev.synchronize().unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU: run with --include-ignored on a GPU machine"]
fn execute_times_and_strides() {
    let dev = gpu();
    let n = 1 << 20;
    let xs = lb_runtime::generate::random_vector(n, 1);
    let x = dev.upload(&xs).unwrap();
    let y = dev.zeros::<f32>(n).unwrap();
    let mut args = Vec::new();
    x.push_args(&mut args);
    y.push_args(&mut args);
    let launch = execute_known(
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
    let grid = launch.kernels[0].grid;
    // 32768 blocks wanted; capped at the resident blocks (SMs × occupancy).
    assert!(grid > 1 && grid < 32768, "grid {grid}");
    assert!(
        launch.elapsed_ms.is_some_and(|ms| ms > 0.0),
        "{:?}",
        launch.elapsed_ms
    );
    assert!(launch.sim.is_none());
    eprintln!("{}: grid {grid}, {:?} ms", launch.device, launch.elapsed_ms);
}

#[test]
#[ignore = "needs a CUDA GPU: run with --include-ignored on a GPU machine"]
fn error_flag_jit_log_and_missing_kernel() {
    let dev = gpu();
    let x = dev.upload(&[1.0f32]).unwrap();
    let mut args = Vec::new();
    x.push_args(&mut args);
    match execute_known(&dev, DOUBLE_PTX, &RAISE_PLAN, &["a", "x"], args, size(1)) {
        Err(Error::OutOfBounds { param, index }) => assert_eq!((param.as_str(), index), ("x", 7)),
        other => panic!("expected OutOfBounds, got {other:?}"),
    }
    match execute_known(
        &dev,
        ".version 7.8\n.target sm_75\nthis is not ptx\n",
        &DOUBLE_PLAN,
        &[],
        vec![],
        size(1),
    ) {
        Err(Error::Jit { log, .. }) => assert!(!log.is_empty(), "empty ptxas log"),
        other => panic!("expected a JIT error, got {other:?}"),
    }
    let r = execute_known(&dev, DOUBLE_PTX, &MISSING_PLAN, &[], vec![], size(1));
    assert!(
        matches!(&r, Err(Error::MissingKernel(k)) if k == "nope"),
        "{r:?}"
    );
}
