//! `consolidate` at every level: the host-fallback plan (parent, then child) on the simulator
//! against sequential CPU loops on adversarial tile sets; the device-launch twin's PTX (parser
//! round trip, ptxas as relocatable code, snapshot).

mod codegen_common;
mod support;

use codegen_common::*;
use lb_ptx::body::*;
use lb_ptx::ir::Module;
use lb_ptx::plan::{DeviceLimits, OffsetWidth, Plan, ProblemSize};
use lb_ptx::primitives::huge;
use lb_ptx::schedules::consolidate::{Consolidate, Level, COUNT_TEMP, DEFAULT_THRESHOLD};
use lb_ptx::sim::{self, LaunchConfig, Memory, SimError};
use lb_ptx::{generate, Options, Schedule, ScheduleTemplate, Tuning};
use proptest::prelude::*;
use support::*;

const BLOCK: u32 = 64;

const LEVELS: [Level; 3] = [Level::Warp, Level::Block, Level::Grid];

/// The adversarial tile sets, by name.
fn tile_sets() -> Vec<(&'static str, Vec<usize>)> {
    let t = DEFAULT_THRESHOLD as usize;
    vec![
        ("all below", (0..150).map(|i| (i * 7) % t).collect()),
        ("all above", (0..70).map(|i| t + (i * 11) % 90).collect()),
        ("one giant", {
            let mut v = vec![1; 40];
            v[17] = 5000;
            v
        }),
        ("empty tiles", vec![0; 130]),
        ("zero tiles", vec![]),
        (
            "mixed",
            (0..300)
                .map(|i| match i % 9 {
                    0 => t,
                    1 => t - 1,
                    2 => 0,
                    3 => 3 * t + i % 5,
                    _ => i % 13,
                })
                .collect(),
        ),
    ]
}

fn opts(level: Level) -> Options {
    Options {
        schedules: vec![level.schedule()],
        block: BLOCK,
        ..Options::default()
    }
}

/// The generated module and the schedule's plan.
fn generated(body: &Body, o: &Options) -> (Module, Plan) {
    let g = generate(body, o).unwrap();
    assert_eq!(g.plans.len(), 2);
    assert_eq!(g.plans[1], g.plans[0].offsets32_twin());
    (sim::parse(&g.ptx).unwrap(), g.plans[0].clone())
}

/// Runs the host-fallback plan (every kernel in order) with its temporaries, the grids from the
/// plan's rule under `limits`. Returns the buffered tile count the parent left, read before the
/// child runs (the child's last block resets the counters, checked here too).
fn run(
    module: &Module,
    plan: &Plan,
    args: Vec<u64>,
    size: ProblemSize,
    limits: DeviceLimits,
    mem: &mut Memory,
) -> u64 {
    // The huge-tile split's partials are per block of the first kernel (the parent), which the
    // runner sizes from the same limits.
    let runner = Runner {
        limits,
        garbage: 0xEE,
        zero_error_flags: true,
        upto: 1,
    };
    let (temps, _) = runner.run(module, plan, args.clone(), size, mem);
    let count = plan
        .temps
        .iter()
        .position(|t| t.name == COUNT_TEMP)
        .map(|i| temps[i])
        .expect("the plan has its counters");
    let buffered = u64::from_le_bytes(read_words::<8>(mem, count, 1)[0]);
    // No output mirrors: table and count 0 after the temporaries.
    let args: Vec<u64> = args.into_iter().chain(temps).chain([0, 0]).collect();
    for k in &plan.kernels[1..] {
        let grid = k.grid.blocks(&size, k.block, &limits);
        launch_kernel(module, k, grid, &args, mem);
    }
    let left = read_words::<8>(mem, count, 2);
    assert_eq!(left, [[0; 8]; 2], "the child leaves the counters zero");
    buffered
}

/// Two grids per test: the rule's (up to 4 resident blocks) and a single block that strides.
const LIMITS: [DeviceLimits; 2] = [
    DeviceLimits {
        sm_count: 2,
        blocks_per_sm: 2,
    },
    DeviceLimits {
        sm_count: 1,
        blocks_per_sm: 1,
    },
];

fn size(t: &Tiles, tiles: usize, lanes: u64) -> ProblemSize {
    ProblemSize {
        tiles: tiles as u64,
        atoms: t.values.len() as u64,
        lanes,
        max_tile_atoms: u64::MAX,
        offsets: OffsetWidth::U64,
    }
}

/// The child's order for a large tile: 32 strided partials, then the butterfly; the sequential
/// order for a small one.
fn model_sum(contribs: &[f32]) -> f32 {
    if (contribs.len() as u64) < DEFAULT_THRESHOLD {
        return contribs.iter().fold(0f32, |a, &x| a + x);
    }
    butterfly_sum(contribs)
}

/// The huge-tile split's order: per chunk of `CHUNK` atoms the child's order (32 strided
/// partials and a butterfly), then 32 strided folds of the chunk partials and a butterfly.
fn model_huge(contribs: &[f32]) -> f32 {
    let chunks: Vec<f32> = contribs
        .chunks(huge::CHUNK as usize)
        .map(butterfly_sum)
        .collect();
    butterfly_sum(&chunks)
}

/// 32 strided partials of `xs` in order, then the butterfly.
fn butterfly_sum(xs: &[f32]) -> f32 {
    let mut parts = [0f32; 32];
    for (i, &x) in xs.iter().enumerate() {
        parts[i % 32] += x;
    }
    let mut d = 1;
    while d < 32 {
        let before = parts;
        for (l, p) in parts.iter_mut().enumerate() {
            *p = before[l] + before[l ^ d];
        }
        d *= 2;
    }
    parts[0]
}

/// SpMV; returns the output bits. Exact tile sets must match the sequential loop, others the
/// model of the schedule's order, bitwise in both cases.
///
/// The order models sum separately rounded products, so they run the kernel under `fma: false`;
/// the exact case keeps the default fused multiply-adds.
fn check_spmv(t: &Tiles, level: Level, limits: DeviceLimits, exact: bool) -> Vec<u32> {
    let o = Options {
        fma: exact,
        ..opts(level)
    };
    let (module, plan) = generated(&spmv(), &o);
    let x = xvec(t.ncols);
    let mut mem = Memory::new();
    let mut args = t.upload(&mut mem);
    args.extend([
        upload(&mut mem, &bytes_of(&x, f32::to_le_bytes)),
        x.len() as u64,
    ]);
    let y = upload(
        &mut mem,
        &bytes_of(&vec![f32::NAN; t.rows()], f32::to_le_bytes),
    );
    args.extend([y, t.rows() as u64]);
    let buffered = run(&module, &plan, args, size(t, t.rows(), 1), limits, &mut mem);
    let large = (0..t.rows())
        .filter(|&r| {
            (DEFAULT_THRESHOLD..huge::threshold(BLOCK, false)).contains(&(t.atoms(r).len() as u64))
        })
        .count();
    assert_eq!(buffered, large as u64, "{level:?}: buffered tiles");
    let got: Vec<u32> = read_words::<4>(&mem, y, t.rows())
        .into_iter()
        .map(u32::from_le_bytes)
        .collect();
    for (r, &got) in got.iter().enumerate() {
        let contribs: Vec<f32> = t
            .atoms(r)
            .map(|nz| t.values[nz] * x[t.cols[nz] as usize])
            .collect();
        let want = if exact {
            // One thread sums the tile in atom order, each product fused into the sum.
            t.atoms(r).fold(0f32, |a, nz| {
                t.values[nz].mul_add(x[t.cols[nz] as usize], a)
            })
        } else if contribs.len() as u64 >= huge::threshold(BLOCK, false) {
            model_huge(&contribs)
        } else {
            model_sum(&contribs)
        };
        assert_eq!(got, want.to_bits(), "{level:?}: row {r} of {}", t.rows());
    }
    got
}

#[test]
fn spmv_matches_the_cpu_on_every_tile_set_and_level() {
    for (name, sizes) in tile_sets() {
        let t = Tiles::with_exact(&sizes, true);
        for level in LEVELS {
            for limits in LIMITS {
                eprintln!("{name} {level:?} {limits:?}");
                check_spmv(&t, level, limits, true);
            }
        }
    }
}

#[test]
fn float_sums_are_deterministic_and_in_the_documented_order() {
    for (name, sizes) in tile_sets() {
        let t = Tiles::with_exact(&sizes, false);
        for level in LEVELS {
            let a = check_spmv(&t, level, LIMITS[0], false);
            let b = check_spmv(&t, level, LIMITS[1], false);
            assert_eq!(a, b, "{name} {level:?}: two launches differ");
        }
    }
}

#[test]
fn min_and_max_match_the_cpu() {
    for (name, sizes) in tile_sets() {
        let t = Tiles::with_exact(&sizes, false);
        for level in LEVELS {
            for (reduce, body) in [(Reduce::Min, "vmin"), (Reduce::Max, "vmax")] {
                let (module, plan) = generated(&values_body(body, reduce), &opts(level));
                let mut mem = Memory::new();
                let mut args = t.upload(&mut mem);
                let y = upload(
                    &mut mem,
                    &bytes_of(&vec![f32::NAN; t.rows()], f32::to_le_bytes),
                );
                args.extend([y, t.rows() as u64]);
                run(
                    &module,
                    &plan,
                    args,
                    size(&t, t.rows(), 1),
                    LIMITS[0],
                    &mut mem,
                );
                for (r, got) in read_words::<4>(&mem, y, t.rows()).into_iter().enumerate() {
                    let want = t.atoms(r).fold(
                        if reduce == Reduce::Min {
                            f32::INFINITY
                        } else {
                            f32::NEG_INFINITY
                        },
                        |a, nz| {
                            if reduce == Reduce::Min {
                                a.min(t.values[nz])
                            } else {
                                a.max(t.values[nz])
                            }
                        },
                    );
                    assert_eq!(
                        f32::from_le_bytes(got),
                        want,
                        "{name} {body} {level:?} row {r}"
                    );
                }
            }
        }
    }
}

#[test]
fn i64_sums_with_ranks_match_the_cpu() {
    for (name, sizes) in tile_sets() {
        let t = Tiles::with_exact(&sizes, true);
        for level in LEVELS {
            let (module, plan) = generated(&isum(), &opts(level));
            let mut mem = Memory::new();
            let mut args = t.upload(&mut mem);
            let y = upload(&mut mem, &vec![0xAB; 8 * t.rows()]);
            args.extend([y, t.rows() as u64]);
            run(
                &module,
                &plan,
                args,
                size(&t, t.rows(), 1),
                LIMITS[1],
                &mut mem,
            );
            for (r, got) in read_words::<8>(&mem, y, t.rows()).into_iter().enumerate() {
                let begin = t.offsets[r] as i64;
                let want: i64 = t
                    .atoms(r)
                    .map(|nz| nz as i64 * 7 - (nz as i64 - begin))
                    .sum();
                assert_eq!(i64::from_le_bytes(got), want, "{name} {level:?} row {r}");
            }
        }
    }
}

/// Every atom of the active tiles is visited once per occurrence of its tile, with the right
/// tile and rank.
fn check_visit(t: &Tiles, frontier: Option<&[u32]>, level: Level, limits: DeviceLimits) {
    let o = Options {
        tiles: frontier.map(|_| 1),
        ..opts(level)
    };
    let (module, plan) = generated(&visit(frontier.is_some()), &o);
    let mut mem = Memory::new();
    let (args, outs) = visit_args(&mut mem, t, frontier);
    let tiles = frontier.map_or(t.rows(), <[u32]>::len);
    run(&module, &plan, args, size(t, tiles, 1), limits, &mut mem);
    check_visit_outputs(&mem, t, frontier, outs, &level);
}

#[test]
fn every_atom_is_visited_exactly_once_with_its_tile_and_rank() {
    for (name, sizes) in tile_sets() {
        let t = Tiles::with_exact(&sizes, true);
        for level in LEVELS {
            for limits in LIMITS {
                eprintln!("{name} {level:?} {limits:?}");
                check_visit(&t, None, level, limits);
            }
        }
    }
}

#[test]
fn a_frontier_with_repeats_visits_each_occurrence() {
    let sizes: Vec<usize> = (0..60)
        .map(|i| if i % 4 == 0 { 70 + i } else { i % 9 })
        .collect();
    let t = Tiles::with_exact(&sizes, true);
    let frontier: Vec<u32> = (0..90).map(|i| (i * 7 % 60) as u32).collect();
    for level in LEVELS {
        for limits in LIMITS {
            check_visit(&t, Some(&frontier), level, limits);
            check_visit(&t, Some(&[]), level, limits);
        }
    }
}

#[test]
fn lanes_match_the_cpu() {
    let k = 3;
    for (name, sizes) in tile_sets() {
        let t = Tiles::with_exact(&sizes, true);
        for level in LEVELS {
            let o = Options {
                lanes: Some(2),
                ..opts(level)
            };
            let (module, plan) = generated(&spmm(), &o);
            let b: Vec<f32> = (0..t.ncols * k).map(|i| (i % 7) as f32 - 3.0).collect();
            let mut mem = Memory::new();
            let mut args = t.upload(&mut mem);
            args.extend([
                upload(&mut mem, &bytes_of(&b, f32::to_le_bytes)),
                b.len() as u64,
            ]);
            args.push(k as u64);
            let c = upload(
                &mut mem,
                &bytes_of(&vec![f32::NAN; t.rows() * k], f32::to_le_bytes),
            );
            args.extend([c, (t.rows() * k) as u64]);
            run(
                &module,
                &plan,
                args,
                size(&t, t.rows(), k as u64),
                LIMITS[0],
                &mut mem,
            );
            let got = read_words::<4>(&mem, c, t.rows() * k);
            for r in 0..t.rows() {
                for j in 0..k {
                    let mut acc = 0f32;
                    for nz in t.atoms(r) {
                        acc += t.values[nz] * b[t.cols[nz] as usize * k + j];
                    }
                    assert_eq!(
                        f32::from_le_bytes(got[r * k + j]),
                        acc,
                        "{name} {level:?} row {r} lane {j}"
                    );
                }
            }
        }
    }
}

/// The plan of a template with a custom threshold, and its module.
fn with_threshold(level: Level, threshold: u64) -> (Module, Plan) {
    let template = Consolidate::with_threshold(level, threshold);
    let o = opts(level);
    let plan = template.plan(&spmv(), &o).unwrap();
    let kernels = template.kernels(&spmv(), &o, &plan).unwrap();
    let module = Module {
        version: (7, 8),
        target: o.target.clone(),
        kernels,
    };
    (sim::parse(&module.to_string()).unwrap(), plan)
}

#[test]
fn the_threshold_decides_what_is_buffered() {
    let sizes: Vec<usize> = (0..100).map(|i| i % 12).collect();
    let t = Tiles::with_exact(&sizes, true);
    let x = xvec(t.ncols);
    for level in LEVELS {
        for (threshold, buffered) in [(0u64, 100u64), (5, 7 * 8), (u64::MAX, 0)] {
            let (module, plan) = with_threshold(level, threshold);
            let mut mem = Memory::new();
            let mut args = t.upload(&mut mem);
            args.extend([
                upload(&mut mem, &bytes_of(&x, f32::to_le_bytes)),
                x.len() as u64,
            ]);
            let y = upload(
                &mut mem,
                &bytes_of(&vec![f32::NAN; t.rows()], f32::to_le_bytes),
            );
            args.extend([y, t.rows() as u64]);
            let got = run(
                &module,
                &plan,
                args,
                size(&t, t.rows(), 1),
                LIMITS[0],
                &mut mem,
            );
            assert_eq!(got, buffered, "{level:?} threshold {threshold}");
            for (r, got) in read_words::<4>(&mem, y, t.rows()).into_iter().enumerate() {
                let want = t
                    .atoms(r)
                    .fold(0f32, |a, nz| a + t.values[nz] * x[t.cols[nz] as usize]);
                assert_eq!(f32::from_le_bytes(got), want, "{level:?} row {r}");
            }
        }
    }
}

/// `opts(level)` with the threshold set through `Options::tuning` (the attribute's route).
fn tuned(level: Level, threshold: u64) -> Options {
    Options {
        tuning: Tuning {
            consolidate_threshold: Some(threshold),
            ..Tuning::default()
        },
        ..opts(level)
    }
}

/// The module text of `template` built by hand, as `generate` assembles it.
fn template_ptx(template: &Consolidate, o: &Options) -> String {
    // Every plan, as `generate` emits them: the plan and its 32-bit-offsets twin.
    let kernels = template
        .plans(&spmv(), o)
        .unwrap()
        .iter()
        .flat_map(|p| template.kernels(&spmv(), o, p).unwrap())
        .collect();
    Module {
        version: (7, 8),
        target: o.target.clone(),
        kernels,
    }
    .to_string()
}

/// Tile sizes at, just below and just above `threshold`, empty ones and random ones.
fn around_threshold(threshold: u64, picks: &[(usize, usize)]) -> Vec<usize> {
    let t = threshold as usize;
    let near = [0, t.saturating_sub(1), t, t + 1];
    picks
        .iter()
        .map(|&(kind, noise)| near.get(kind).copied().unwrap_or(noise))
        .collect()
}

/// A threshold from `Options::tuning`: in the parent's comparison, the kernel
/// `Consolidate::with_threshold` builds, winning over the template's own; on the simulator it
/// buffers exactly the tiles of at least `threshold` atoms, and every row sums as the CPU does.
fn check_tuned(level: Level, threshold: u64, sizes: &[usize], limits: DeviceLimits) {
    let o = tuned(level, threshold);
    let g = generate(&spmv(), &o).unwrap();
    let compare = format!(", {threshold};");
    assert!(
        g.ptx
            .lines()
            .any(|l| l.trim_start().starts_with("setp.ge.u64") && l.ends_with(&compare)),
        "{level:?}: no comparison with {threshold}"
    );
    let by_template = template_ptx(&Consolidate::with_threshold(level, threshold), &opts(level));
    assert_eq!(g.ptx, by_template, "{level:?}: tuning vs with_threshold");
    let other = Consolidate::with_threshold(level, threshold + 9);
    assert_eq!(
        g.ptx,
        template_ptx(&other, &o),
        "{level:?}: Options::tuning wins over the template"
    );

    let t = Tiles::with_exact(sizes, true);
    let module = sim::parse(&g.ptx).unwrap();
    let x = xvec(t.ncols);
    let mut mem = Memory::new();
    let mut args = t.upload(&mut mem);
    args.extend([
        upload(&mut mem, &bytes_of(&x, f32::to_le_bytes)),
        x.len() as u64,
    ]);
    let y = upload(&mut mem, &nan_f32(t.rows()));
    args.extend([y, t.rows() as u64]);
    let plan = &g.plans[0];
    let buffered = run(&module, plan, args, size(&t, t.rows(), 1), limits, &mut mem);
    let large = sizes.iter().filter(|&&n| n as u64 >= threshold).count();
    assert_eq!(buffered, large as u64, "{level:?} threshold {threshold}");
    for (r, got) in read_words::<4>(&mem, y, t.rows()).into_iter().enumerate() {
        let want = t
            .atoms(r)
            .fold(0f32, |a, nz| a + t.values[nz] * x[t.cols[nz] as usize]);
        assert_eq!(f32::from_le_bytes(got), want, "{level:?} row {r}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn threshold_from_options_tuning_buffers_what_it_says(
        threshold in prop_oneof![1 => Just(0u64), 4 => 1u64..100],
        picks in prop::collection::vec((0usize..6, 0usize..300), 0..200),
        level in 0..LEVELS.len(),
        limits in 0..LIMITS.len(),
    ) {
        let sizes = around_threshold(threshold, &picks);
        check_tuned(LEVELS[level], threshold, &sizes, LIMITS[limits]);
    }
}

#[test]
fn names_round_trip() {
    for level in LEVELS {
        let s = level.schedule();
        assert_eq!(Schedule::from_name(s.name()), Some(s));
    }
    assert_eq!(Schedule::Consolidate.name(), "consolidate");
    assert_eq!(
        Schedule::from_name("consolidate(grid)"),
        Some(Schedule::Consolidate)
    );
    assert_eq!(Schedule::from_name("consolidate(thread)"), None);
    assert!(Schedule::ALL.contains(&Schedule::Consolidate));
}

#[test]
fn the_device_launch_twin_parses_and_the_simulator_refuses_it() {
    for level in LEVELS {
        let g = generate(&spmv(), &opts(level)).unwrap();
        let module = sim::parse(&g.ptx).unwrap();
        assert_eq!(module.to_string(), g.ptx, "{level:?}: round trip");
        let plan = &g.plans[0];
        let twin = plan.device_launch_entry();
        assert!(module.kernel(&twin).is_some(), "{twin}");
        assert!(module
            .kernel(&format!("{}_dl", plan.kernels[1].entry))
            .is_some());
        let host_only = module.without_device_launches();
        assert!(host_only.kernel(&twin).is_none());
        assert!(!host_only.to_string().contains(".extern"));
        for k in plan.kernels.iter() {
            assert!(host_only.kernel(&k.entry).is_some(), "{}", k.entry);
        }
        let mut mem = Memory::new();
        let args = vec![0u64; module.kernel(&twin).unwrap().params.len()];
        let cfg = LaunchConfig {
            grid: 1,
            block: BLOCK,
            dynamic_shared: 0,
        };
        match sim::launch(&module, &twin, cfg, &args, &mut mem) {
            Err(SimError::Unsupported(m)) => assert_eq!(m, "device-side launch"),
            other => panic!("{level:?}: {other:?}"),
        }
    }
}

#[test]
fn the_modules_assemble_without_spills() {
    for level in LEVELS {
        for (name, body) in [("spmv", spmv()), ("isum", isum()), ("visit", visit(true))] {
            let o = Options {
                tiles: (name == "visit").then_some(1),
                checked: name == "spmv",
                ..opts(level)
            };
            let g = generate(&body, &o).unwrap();
            assert!(lb_ptx::ptxas::needs_link(&g.ptx));
            lb_ptx::ptxas::assert_assembles(&format!("{name} {level:?}"), &g.ptx);
            let host_only = sim::parse(&g.ptx)
                .unwrap()
                .without_device_launches()
                .to_string();
            assert!(!lb_ptx::ptxas::needs_link(&host_only));
            lb_ptx::ptxas::assert_assembles(&format!("{name} {level:?} host only"), &host_only);
        }
    }
}

#[test]
fn snapshot_of_the_grid_level_device_launch() {
    let g = generate(&spmv(), &opts(Level::Grid)).unwrap();
    insta::assert_snapshot!("spmv_consolidate_grid", g.ptx);
}

/// With `LB_CUDADEVRT` pointing at libcudadevrt.a, the device-launch module links for every
/// architecture: nvlink (next to ptxas) resolves `cudaGetParameterBuffer` and
/// `cudaLaunchDevice` in the library, as the driver's linker does at load time.
#[test]
fn the_device_launch_module_links_against_the_device_runtime() {
    let (Some(ptxas), Some(library)) = (
        lb_ptx::ptxas::locate(),
        std::env::var_os("LB_CUDADEVRT").map(std::path::PathBuf::from),
    ) else {
        eprintln!("!!! SKIPPED: set LB_CUDADEVRT to libcudadevrt.a (and have ptxas) to link !!!");
        return;
    };
    let nvlink = ptxas.with_file_name("nvlink");
    let g = generate(&spmv(), &opts(Level::Warp)).unwrap();
    let dir = std::env::temp_dir().join(format!("lb-consolidate-link-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ptx = dir.join("dp.ptx");
    std::fs::write(&ptx, &g.ptx).unwrap();
    for arch in lb_ptx::ptxas::ARCHS {
        let object = dir.join(format!("dp_{arch}.cubin"));
        let run = |cmd: &mut std::process::Command| {
            let out = cmd.output().unwrap();
            assert!(
                out.status.success(),
                "{arch}: {:?}\n{}",
                cmd,
                String::from_utf8_lossy(&out.stderr)
            );
        };
        run(std::process::Command::new(&ptxas)
            .arg(format!("-arch={arch}"))
            .arg("--compile-only")
            .arg(&ptx)
            .arg("-o")
            .arg(&object));
        run(std::process::Command::new(&nvlink)
            .arg(format!("-arch={arch}"))
            .arg(&object)
            .arg(&library)
            .arg("-o")
            .arg(dir.join(format!("linked_{arch}.cubin"))));
    }
    // Best effort: leftovers in the temp dir are harmless.
    let _ = std::fs::remove_dir_all(&dir);
}

/// Tiles of at least the huge-tile threshold skip the buffer and are split over the grid, at
/// every level.
#[test]
fn huge_tiles_are_split_across_the_grid() {
    for s in [
        Schedule::Consolidate,
        Schedule::ConsolidateBlock,
        Schedule::ConsolidateWarp,
    ] {
        check_huge_tiles(s, 32);
    }
}

/// On one giant row among one-atom rows, the busiest thread's path stays within a small factor
/// of merge path's instead of one child warp walking the row.
#[test]
fn a_giant_row_has_no_cliff() {
    check_no_cliff(Schedule::Consolidate, 4);
}
