//! The modules of schedules written outside lb: built from a kernel's embedded IR at the first
//! launch under each schedule, then kept for the life of the process.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use lb_ptx::plan::Plan;
use lb_ptx::user::UserSchedule;

use crate::error::{Error, Result};

/// One kernel's module under one user schedule: the PTX and the plans of the safe and the
/// unchecked entry points, as the macro emits them for the built-in schedules (`PTX`, `PLANS`,
/// `UNCHECKED_PLANS`).
#[derive(Debug)]
pub struct UserKernels {
    pub ptx: &'static str,
    pub plans: &'static [Plan],
    pub unchecked_plans: &'static [Plan],
}

/// Built modules by (embedded text's address and length, schedule name). They are leaked on
/// purpose: a launch hands the driver's module cache `'static` PTX and plans, whose addresses
/// key the loaded modules (as the macro's constants do), and a process builds each pair once.
type Built = HashMap<(usize, usize, &'static str), &'static UserKernels>;

fn built() -> &'static Mutex<Built> {
    static BUILT: OnceLock<Mutex<Built>> = OnceLock::new();
    BUILT.get_or_init(Mutex::default)
}

/// The module of the kernel embedded as `ir` (the generated module's `IR`) under `schedule`:
/// built with `lb_ptx::generate_user` at the first call for this pair, then the same one.
///
/// The schedule's name stands for it in the process: two schedules that build different
/// kernels must have different names.
pub fn user_kernels(ir: &'static str, schedule: &dyn UserSchedule) -> Result<&'static UserKernels> {
    let name = schedule.name();
    let key = (ir.as_ptr() as usize, ir.len(), name);
    // A poisoned lock only means another thread panicked while building: the map holds
    // finished entries only, so it is still consistent.
    if let Some(k) = built().lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(k);
    }
    // Built outside the lock: a slow build of one kernel does not hold up launches of others.
    // Two threads racing on the same pair both build; the first insert wins.
    let error = |kernel: &str, e: lb_ptx::GenError| Error::UserSchedule {
        schedule: name.to_string(),
        kernel: kernel.to_string(),
        message: e.to_string(),
    };
    let (body, options) = lb_ptx::user::unembed(ir).map_err(|e| error("?", e))?;
    let g = lb_ptx::generate_user(&body, &options, schedule).map_err(|e| error(&body.name, e))?;
    let plans: &'static [Plan] = Vec::leak(g.plans);
    let kernels = UserKernels {
        ptx: String::leak(g.ptx),
        plans,
        unchecked_plans: match g.unchecked {
            Some(u) => Vec::leak(u),
            None => plans,
        },
    };
    let mut map = built().lock().unwrap_or_else(|e| e.into_inner());
    Ok(*map
        .entry(key)
        .or_insert_with(|| Box::leak(Box::new(kernels))))
}

/// The distinct schedule names of `plans`, in order, joined by `, `: what an error lists as the
/// schedules a module holds.
pub fn plan_names(plans: &[Plan]) -> String {
    let mut names: Vec<&str> = Vec::new();
    for p in plans {
        if !names.contains(&p.schedule.as_ref()) {
            names.push(&p.schedule);
        }
    }
    names.join(", ")
}
