//! `thread_mapped`: one tile per thread, grid-stride over the work items; the thread walks its
//! tile's atoms in order and reduces them sequentially.
//!
//! Thesis `seeds/001_ea7a499d193f2b3c.txt` §3.3.1 ("Assign a fixed, constant number of work tiles
//! to each thread. Resultant work items from each work tile are processed sequentially within the
//! thread"; static, approximate, flat) and Listing 4.2 (tiles strided by the grid size, atoms
//! `atoms_per_tile[tile] .. atoms_per_tile[tile + 1]`). Because one thread combines a tile's
//! contributions left to right in the body's type, starting from the identity, the result is
//! bitwise the sequential CPU loop's (with `Options::fma` off; with it on, the loop that fuses
//! each product into the sum). The walk takes two atoms per trip (`Walker`).
//!
//! With `lanes`, a thread owns R lanes of its tile (register blocking, one plan per R picked at
//! launch by the lane count: [`crate::primitives::layout::lanes_per_thread`]) on the grid of
//! (tile, lane group) pairs of [`crate::primitives::layout::LaneStride`]: consecutive threads take
//! consecutive lanes, the atom's loads are shared by the R lanes, and each lane's sum is still
//! the sequential loop's.

use std::borrow::Cow;

use super::{common_temps, entry_name, with_offsets32_twins, Schedule, ScheduleTemplate};
use crate::body::{Body, IndexRole};
use crate::builder::KernelBuilder;
use crate::codegen::{reduce_combine, reduce_identity, KernelParams};
use crate::ir::{Kernel, Operand, Type};
use crate::plan::{Grid, KernelPlan, OffsetWidth, Plan, Select};
use crate::primitives::layout::LANE_BLOCKING;
use crate::primitives::walker::{own_tiles, TileSource, Walker};
use crate::primitives::Layout;
use crate::{GenError, Options};

/// The `thread_mapped` template.
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadMapped;

impl ScheduleTemplate for ThreadMapped {
    fn plan(&self, body: &Body, opts: &Options) -> Result<Plan, GenError> {
        Ok(Plan {
            schedule: Cow::Borrowed(Schedule::ThreadMapped.name()),
            kernels: Cow::Owned(vec![KernelPlan {
                entry: Cow::Owned(entry_name(body, Schedule::ThreadMapped)),
                block: opts.block,
                grid: Grid::CoverItems { per_thread: 1 },
                dynamic_shared: 0,
                min_tile_atoms: None,
                min_grid: None,
                lanes: None,
                track: 0,
            }]),
            temps: Cow::Owned(common_temps(opts)),
            index_limit: None,
            offsets: OffsetWidth::U64,
            select: None,
        })
    }

    /// Without `lanes`, [`ScheduleTemplate::plan`]'s; with `lanes`, one per register-blocking
    /// variant of [`LANE_BLOCKING`], R lanes per thread being the grid's `per_thread`.
    fn plans(&self, body: &Body, opts: &Options) -> Result<Vec<Plan>, GenError> {
        let plan = self.plan(body, opts)?;
        if opts.lanes.is_none() {
            return Ok(with_offsets32_twins(vec![plan]));
        }
        let plans = LANE_BLOCKING
            .iter()
            .map(|&(r, min, max)| {
                let mut kernel = plan.kernels[0].clone();
                if r > 1 {
                    kernel.entry = Cow::Owned(format!("{}_x{r}", kernel.entry));
                }
                kernel.grid = Grid::CoverItems { per_thread: r };
                Plan {
                    kernels: Cow::Owned(vec![kernel]),
                    select: Some(Select::Lanes { min, max }),
                    ..plan.clone()
                }
            })
            .collect();
        Ok(with_offsets32_twins(plans))
    }

    fn build(&self, body: &Body, opts: &Options, plan: &Plan) -> Result<Vec<Kernel>, GenError> {
        let mut b = KernelBuilder::new(plan.kernels[0].entry.as_ref());
        let params = KernelParams::declare(&mut b, body, plan)?;
        let layout = Layout::new(&mut b, body, opts, &params)?;
        if layout.lanes.is_some() {
            let per_thread = match plan.kernels[0].grid {
                Grid::CoverItems { per_thread } => per_thread.max(1),
                _ => 1,
            };
            layout.adjacent_or_strided(&mut b, (body, &params), per_thread, |b, r| {
                own_tiles(
                    b,
                    body,
                    opts,
                    (&params, &layout),
                    TileSource::Layout,
                    (r, None),
                    None,
                )
            })?;
            return Ok(vec![b.finish()]);
        }

        let gs = b.grid_stride_begin(layout.items);
        let work = layout.work_item(&mut b, gs.item);
        let tile = layout.tile(&mut b, &params, work.position, opts.checked, gs.next);
        let (begin, end) = layout.atoms(&mut b, tile);
        let acc = body
            .reduce
            .map(|(ty, r)| reduce_identity(&mut b, ty, r))
            .transpose()?;
        let lane = match work.lane {
            Some(l) => Some(l),
            None if body.roles.contains(&IndexRole::Lane) => {
                Some(b.mov(Type::U64, Operand::Imm(0)))
            }
            None => None,
        };

        let walker = Walker {
            body,
            params: &params,
            checked: opts.checked,
            lane,
        };
        walker.walk(&mut b, Some(tile), (begin, begin, end), 1, |b, x| {
            if let (Some(acc), Some(x), Some((ty, r))) = (acc, x, body.reduce) {
                reduce_combine(b, ty, r, acc, x)?;
            }
            Ok(())
        })?;

        if let (Some(acc), Some((ty, _))) = (acc, body.reduce) {
            layout.store_output(
                &mut b,
                body,
                &params,
                (tile, work.lane),
                (acc, ty),
                opts.checked,
            )?;
        }
        b.grid_stride_end(gs);
        Ok(vec![b.finish()])
    }
}
