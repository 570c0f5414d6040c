//! Schedules written outside lb: the trait they implement, and the embedded form of a kernel
//! (its body IR and options) from which their modules are built at run time.
//!
//! A proc macro cannot run a user's schedule code, so `#[load_balanced]` embeds the kernel it
//! lowered ([`embed`]) next to the PTX of the built-in schedules; the first launch under a
//! [`UserSchedule`] reads it back ([`unembed`]) and builds that schedule's module with
//! [`crate::generate_user`], the same code path (IR passes, register limit, safe and unchecked
//! twins) the macro takes for the built-ins at compile time.

use serde::{Deserialize, Serialize};

use crate::body::Body;
use crate::schedules::{Schedule, ScheduleTemplate};
use crate::{GenError, Options};

/// A schedule written outside lb: a [`ScheduleTemplate`] with a name.
///
/// Its plans name it ([`crate::plan::Plan::schedule`] must be [`UserSchedule::name`]) and its
/// kernels' entries start with `{kernel}_{name}` (the convention of the built-ins, which keeps
/// entries of different schedules apart). A user schedule builds its kernels from the
/// primitives lb's own schedules use ([`crate::primitives`], [`crate::builder`]); a kernel
/// names it with `launch_custom(dev, &MySchedule, …)`, and lb builds its PTX at the first such
/// launch and keeps it for the process.
///
/// # Safety
///
/// lb's safe launchers run the kernels a user schedule builds, so implementing this trait
/// promises what lb's own schedules guarantee (docs/runtime-contract.md): every kernel reads
/// its parameters as [`crate::codegen::KernelParams`] declares them for its plan; it calls the
/// body only with a tile below the number of tiles (a frontier's entries count as the frontier
/// says) and an atom of that tile (between its begin and end offsets), and a lane below the
/// lane count; it touches temporaries only within the sizes its plan declares; and it stores
/// an output only through [`crate::primitives::Layout`]'s stores, at a tile it was given. The
/// simulator's tests of the schedule (docs/custom-schedules.md) check this on adversarial tile
/// sets, but they cannot prove it.
pub unsafe trait UserSchedule: ScheduleTemplate + Send + Sync {
    /// The schedule's name: ASCII letters, digits and `_`, not the name of a built-in schedule.
    fn name(&self) -> &'static str;
}

/// `schedule`'s name, or why it cannot be one.
pub fn checked_name(schedule: &dyn UserSchedule) -> Result<&'static str, GenError> {
    let name = schedule.name();
    if !crate::codegen::is_ptx_ident(name) {
        return Err(GenError::Unsupported(format!(
            "the schedule name `{name}` cannot be used in PTX entry names: use ASCII letters, \
             digits and `_`"
        )));
    }
    if Schedule::from_name(name).is_some() {
        return Err(GenError::Unsupported(format!(
            "the schedule name `{name}` is a built-in schedule's: give yours another name"
        )));
    }
    Ok(name)
}

/// The version of the embedded form: a kernel compiled against another lb is refused, not
/// misread.
const FORMAT: u32 = 1;

#[derive(Serialize, Deserialize)]
struct Embedded {
    format: u32,
    body: Body,
    options: Options,
}

/// The text `#[load_balanced]` embeds for `body` under `options` (what [`unembed`] reads back).
pub fn embed(body: &Body, options: &Options) -> Result<String, GenError> {
    let embedded = Embedded {
        format: FORMAT,
        body: body.clone(),
        options: options.clone(),
    };
    serde_json::to_string(&embedded)
        .map_err(|e| GenError::Unsupported(format!("cannot embed the kernel `{}`: {e}", body.name)))
}

/// The body and options of an [`embed`]ded kernel.
pub fn unembed(text: &str) -> Result<(Body, Options), GenError> {
    let e: Embedded = serde_json::from_str(text).map_err(|e| {
        GenError::Unsupported(format!(
            "cannot read an embedded kernel ({e}): rebuild the crate that declares it with this \
             version of lb"
        ))
    })?;
    if e.format != FORMAT {
        return Err(GenError::Unsupported(format!(
            "the kernel `{}` was embedded in format {}, this lb reads {FORMAT}: rebuild the crate \
             that declares it with this version of lb",
            e.body.name, e.format
        )));
    }
    Ok((e.body, e.options))
}
