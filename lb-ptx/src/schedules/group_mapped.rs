//! `group_mapped(N)`, `warp_mapped` (N = 32) and `block_mapped` (N = block size): a group of N
//! threads shares N tiles; for N < 32 a virtual warp of N threads takes one tile at a time
//! (Busato & Bombieri §2.2.2). The kernel is the cooperative group walk of
//! [`crate::primitives::group`] (thesis `seeds/001_ea7a499d193f2b3c.txt` §3.3.2, §4.4.2.2,
//! §4.4.2.3); this file names the sizes.

use super::{Schedule, ScheduleTemplate, GROUP_SIZES};
use crate::body::Body;
use crate::ir::Kernel;
use crate::plan::Plan;
use crate::primitives::group::{build_group, group_plan};
use crate::{GenError, Options};

/// The `group_mapped` template for one schedule name.
#[derive(Clone, Copy, Debug)]
pub struct GroupMapped {
    schedule: Schedule,
}

static FIXED: [GroupMapped; GROUP_SIZES.len()] = {
    let mut out = [GroupMapped {
        schedule: Schedule::GroupMapped(0),
    }; GROUP_SIZES.len()];
    let mut i = 0;
    while i < GROUP_SIZES.len() {
        out[i] = GroupMapped {
            schedule: Schedule::GroupMapped(GROUP_SIZES[i].0),
        };
        i += 1;
    }
    out
};

/// A group size outside [`GROUP_SIZES`]: planning it fails with a clear error.
static INVALID: GroupMapped = GroupMapped {
    schedule: Schedule::GroupMapped(0),
};

impl GroupMapped {
    pub const WARP: GroupMapped = GroupMapped {
        schedule: Schedule::WarpMapped,
    };
    pub const BLOCK: GroupMapped = GroupMapped {
        schedule: Schedule::BlockMapped,
    };

    /// The template of `group_mapped(n)`.
    pub fn fixed(n: u32) -> &'static GroupMapped {
        GROUP_SIZES
            .iter()
            .position(|&(size, _)| size == n)
            .map_or(&INVALID, |i| &FIXED[i])
    }

    fn group_size(&self, opts: &Options) -> Result<u32, GenError> {
        match self.schedule {
            Schedule::WarpMapped => Ok(32),
            Schedule::BlockMapped => Ok(opts.block),
            Schedule::GroupMapped(n) if GROUP_SIZES.iter().any(|&(s, _)| s == n) => Ok(n),
            _ => Err(GenError::Unsupported(
                "group_mapped(N) needs N a power of two from 2 to 1024".into(),
            )),
        }
    }

    fn entry(&self, body: &Body, n: u32) -> String {
        match self.schedule {
            Schedule::WarpMapped => format!("{}_warp_mapped", body.name),
            Schedule::BlockMapped => format!("{}_block_mapped", body.name),
            _ => format!("{}_group_mapped_{n}", body.name),
        }
    }
}

impl ScheduleTemplate for GroupMapped {
    fn plan(&self, body: &Body, opts: &Options) -> Result<Plan, GenError> {
        let n = self.group_size(opts)?;
        group_plan(body, opts, self.schedule, n, self.entry(body, n), None)
    }

    fn build(&self, body: &Body, opts: &Options, plan: &Plan) -> Result<Vec<Kernel>, GenError> {
        build_group(body, opts, plan, self.group_size(opts)?)
    }
}
