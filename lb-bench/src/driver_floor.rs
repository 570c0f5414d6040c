//! The driver's own cost of enqueueing a kernel: `cuLaunchKernel` of an empty kernel with as
//! many parameters as an lb SpMV kernel takes, called back to back on the device's stream. The
//! loop benchmark subtracts it to show what lb adds per launch on top of the driver.

use std::ffi::{c_void, CString};
use std::time::Instant;

use cudarc::driver::sys;
use lb::Device;

/// Parameters of the empty kernel: at least as many as an SpMV kernel of lb takes (the tile
/// set's fields, `x`, `y` and the temporaries' addresses).
const PARAMS: usize = 16;

/// The empty kernel's PTX.
fn ptx() -> String {
    let params: Vec<String> = (0..PARAMS).map(|i| format!(".param .u64 p{i}")).collect();
    format!(
        ".version 7.0\n.target sm_75\n.address_size 64\n.visible .entry lb_empty({}) {{ ret; }}\n",
        params.join(", ")
    )
}

fn check(what: &str, r: sys::CUresult) -> Result<(), String> {
    r.result().map_err(|e| format!("{what}: {e:?}"))
}

/// Host µs per `cuLaunchKernel` of the empty kernel over `calls` launches on `dev`'s stream;
/// `None` on the simulator.
pub fn launch_us(dev: &Device, calls: usize) -> Result<Option<f64>, String> {
    let Some(stream) = dev.stream().cudarc().cloned() else {
        return Ok(None);
    };
    stream
        .context()
        .bind_to_thread()
        .map_err(|e| format!("binding the context: {e:?}"))?;
    let text = CString::new(ptx()).map_err(|e| e.to_string())?;
    let name = CString::new("lb_empty").map_err(|e| e.to_string())?;
    let mut module: sys::CUmodule = std::ptr::null_mut();
    // SAFETY: `text` is a NUL-terminated PTX module that outlives the call; the context is bound.
    check("loading the empty kernel", unsafe {
        sys::cuModuleLoadData(&mut module, text.as_ptr().cast())
    })?;
    let mut function: sys::CUfunction = std::ptr::null_mut();
    // SAFETY: `module` was loaded above and `name` is NUL-terminated.
    let found = check("finding the empty kernel", unsafe {
        sys::cuModuleGetFunction(&mut function, module, name.as_ptr())
    });
    let timed = found.and_then(|()| {
        let mut values = [0u64; PARAMS];
        let mut ptrs: Vec<*mut c_void> = values
            .iter_mut()
            .map(|v| (v as *mut u64).cast::<c_void>())
            .collect();
        let mut launch = || {
            // SAFETY: `function` takes PARAMS u64 parameters, each pointer in `ptrs` points at
            // one u64 that lives until the launch returns (the driver copies the values), and
            // the kernel touches no memory.
            check("launching the empty kernel", unsafe {
                sys::cuLaunchKernel(
                    function,
                    1,
                    1,
                    1,
                    32,
                    1,
                    1,
                    0,
                    stream.cu_stream(),
                    ptrs.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            })
        };
        launch()?;
        stream
            .synchronize()
            .map_err(|e| format!("synchronizing: {e:?}"))?;
        let start = Instant::now();
        for _ in 0..calls.max(1) {
            launch()?;
        }
        let us = start.elapsed().as_secs_f64() * 1e6 / calls.max(1) as f64;
        stream
            .synchronize()
            .map_err(|e| format!("synchronizing: {e:?}"))?;
        Ok(us)
    });
    // Whatever happened above, no launch of the kernel may still be pending when it is unloaded.
    let drained = stream
        .synchronize()
        .map_err(|e| format!("synchronizing: {e:?}"));
    // SAFETY: every launch of the module's kernel has finished (synchronized just above) and
    // nothing else refers to the module.
    let unloaded = check("unloading the empty kernel", unsafe {
        sys::cuModuleUnload(module)
    });
    let us = timed?;
    drained?;
    unloaded?;
    Ok(Some(us))
}
