//! `schedule = "auto"` that measures: the first launch of an `auto` kernel on a tile set runs
//! every generated schedule, keeps the fastest with the tile set, and records it on disk so that
//! another process does not measure again (docs/tuning.md).
//!
//! The cost of a candidate is its GPU time (CUDA events, the median of 3 to 21 timed runs, more
//! for shorter kernels, 101 for short kernels within 5% of the best, taken in rounds across the
//! candidates after one run of each that warms its module and caches), or on the simulator the
//! busiest thread's instructions of a run after that first one, the measure lb-bench ranks
//! simulator runs by. Only kernels whose candidate runs leave what one launch leaves are tuned:
//! a kernel without a frontier. Its `reduce` output is overwritten whole by each run (the
//! winner's run last), and its `&mut` slices and queues, and an output whose old value its
//! epilogue reads, are replaced by scratch copies for the candidates ([`scratch_copy`],
//! [`DeviceQueue::scratch_of`](crate::DeviceQueue::scratch_of)), so that only the winner's launch
//! adds into them or pushes to them. A frontier launch keeps the heuristic (`Picked::Rule`), on
//! the frontier's own statistics ([`crate::frontier_schedule`]).

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

use lb_ptx::Schedule;

use crate::buffer::{DeviceBuffer, Element};
use crate::cache::TempCache;
use crate::device::{lock, Device};
use crate::error::{Error, Result};
use crate::heuristic::choose_schedule;
use crate::launch::Launch;
use crate::stats::TileStats;
use crate::stream::{Pending, Stream};

/// How `auto` picks a schedule on a device ([`Device::set_tuning`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tuning {
    /// The heuristic alone (`lb::heuristic`), from the tile set's statistics.
    Rule,
    /// Measure every generated schedule at the first launch on a tile set and keep the fastest.
    Tune,
}

/// Why a launch ran the schedule it ran ([`crate::Launch::picked`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Picked {
    /// The caller named it (`launch_with`).
    Named,
    /// The heuristic picked it: tuning is off, or the kernel cannot be tuned (see the module
    /// documentation), or a capture is in progress, or the candidates reported a bad argument
    /// (which this launch then reports too), or no candidate could run (their scratch copies
    /// could not be allocated).
    Rule,
    /// Measured by this launch: each candidate with its cost (ms on a GPU, the busiest
    /// thread's instructions on the simulator), fastest first. A candidate that cannot run the
    /// problem is left out. On a GPU the heuristic's pick runs unless another candidate was more
    /// than 1% faster, so the schedule run may not be the first listed.
    Tuned(Vec<(Schedule, f64)>),
    /// Measured by an earlier launch on this tile set.
    Cached,
    /// Read from the tuning file, measured by an earlier process on a tile set of this shape.
    Persisted,
}

/// What the generated `auto` launchers tell the tuner about their kernel.
#[derive(Clone, Copy, Debug)]
pub struct AutoKernel {
    /// The kernel's function name.
    pub name: &'static str,
    /// The module text (its address tells kernels apart within a process; its hash across
    /// processes).
    pub ptx: &'static str,
    pub schedules: &'static [Schedule],
}

/// The buffer a tuning launch's candidate writes instead of `src`, one of the kernel's `&mut`
/// slices: `slot`'s buffer (allocated at the first candidate, on `src`'s device, `src`'s length),
/// overwritten with `src`'s contents. The generated `auto` launchers call it before every
/// candidate run, so that each run starts from what the launch was given and none of them
/// touches the caller's buffer: a kernel that adds into its `&mut` slices (a histogram's atomics)
/// can then be tuned, and the chosen schedule's launch, on the caller's buffers, is the only one
/// they see. The copy is ordered before the candidate's kernels and after the previous
/// candidate's, as every copy and launch of a device is ([`Device::new_stream`]). If the copy
/// cannot be allocated, the candidate is left out (an [`Error::Shape`] saying so): with every
/// candidate left out, the launch runs the heuristic's pick on the caller's buffers, as it did
/// before such kernels were tuned.
pub fn scratch_copy<'a, T: Element>(
    src: &DeviceBuffer<T>,
    slot: &'a mut Option<DeviceBuffer<T>>,
) -> Result<&'a mut DeviceBuffer<T>> {
    let dev = src.device().clone();
    let scratch = match slot {
        Some(buf) => buf,
        None => {
            let bytes = src.len().saturating_mul(T::SIZE);
            let buf = dev
                .zeros::<T>(src.len())
                .map_err(|e| no_room_to_tune(bytes, &e))?;
            slot.insert(buf)
        }
    };
    dev.copy(src, scratch)?;
    Ok(scratch)
}

/// What a candidate's run returns when its scratch copy of `bytes` bytes could not be allocated
/// (`e`): an [`Error::Shape`], which leaves the candidate out, as a schedule that cannot run the
/// problem is, rather than failing a launch that needs no copy.
pub(crate) fn no_room_to_tune(bytes: usize, e: &Error) -> Error {
    Error::Shape(format!(
        "no room for a tuning candidate's scratch copy of {bytes} bytes ({e}); the heuristic's \
         pick runs on the caller's buffers"
    ))
}

/// A device's tuning settings.
#[derive(Debug)]
pub(crate) struct TuneConfig {
    pub(crate) mode: Tuning,
    /// The tuning file, `None`: nothing is read or written.
    pub(crate) file: Option<PathBuf>,
    /// The file's entries once read (`None` until the first lookup).
    loaded: Option<HashMap<String, String>>,
}

impl TuneConfig {
    /// `LB_TUNE` (`rule` or `tune`) else tuning on a GPU and the rule on the simulator, whose
    /// runs cost a thousand times a GPU's; `LB_TUNE_CACHE` (a path, or `off`) else, on a GPU,
    /// `$XDG_CACHE_HOME/lb/tuning.tsv` or `~/.cache/lb/tuning.tsv`.
    pub(crate) fn from_env(gpu: bool) -> TuneConfig {
        let mode = match std::env::var("LB_TUNE").as_deref() {
            Ok("rule") => Tuning::Rule,
            Ok("tune") => Tuning::Tune,
            _ if gpu => Tuning::Tune,
            _ => Tuning::Rule,
        };
        let file = match std::env::var_os("LB_TUNE_CACHE") {
            Some(p) if p == "off" => None,
            Some(p) => Some(PathBuf::from(p)),
            None if gpu => default_file(),
            None => None,
        };
        TuneConfig {
            mode,
            file,
            loaded: None,
        }
    }

    pub(crate) fn set_file(&mut self, file: Option<PathBuf>) {
        self.file = file;
        self.loaded = None;
    }
}

fn default_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("lb").join("tuning.tsv"))
}

/// A problem trouble with the tuning file is only ever a warning, said once per process.
fn warn(message: String) {
    static WARNED: Once = Once::new();
    WARNED.call_once(|| eprintln!("lb: {message}; tuning without it"));
}

/// FNV-1a over the module text: stable across processes and builds of the same PTX.
fn ptx_hash(ptx: &str) -> u64 {
    ptx.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The tuning file's key of a kernel on a tile set of this shape on this device.
fn file_key(dev: &Device, k: &AutoKernel, stats: &TileStats, lanes: u64) -> String {
    format!(
        "{}\t{}\t{:016x}\t{}\t{lanes}\t{}\t{}\t{}\t{}\t{:.3}",
        dev.name(),
        dev.driver_version(),
        ptx_hash(k.ptx),
        k.name,
        stats.tiles,
        stats.cols,
        stats.atoms,
        stats.max_atoms,
        stats.std_atoms
    )
}

/// The entries of the tuning file at `path`: `key\tschedule` per line, where the key has the
/// fields of [`file_key`]. Unreadable lines are skipped with a warning; a missing file is empty.
fn read_file(path: &Path) -> HashMap<String, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return HashMap::new(),
        Err(e) => {
            warn(format!(
                "cannot read the tuning file {}: {e}",
                path.display()
            ));
            return HashMap::new();
        }
    };
    let mut entries = HashMap::new();
    let mut bad = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match line.rsplit_once('\t') {
            Some((key, schedule)) if key.split('\t').count() == 10 => {
                entries.insert(key.to_string(), schedule.to_string());
            }
            _ => bad += 1,
        }
    }
    if bad > 0 {
        warn(format!(
            "{bad} unreadable lines in the tuning file {} were ignored",
            path.display()
        ));
    }
    entries
}

/// Appends `key → schedule` as one line, in one write (so that processes appending at once do
/// not interleave within a line), after a newline if the file ends in a torn line (a writer
/// stopped mid-line), which would otherwise swallow this entry.
fn append_file(path: &Path, key: &str, schedule: Schedule) {
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .read(true)
                .append(true)
                .open(path)
        })
        .and_then(|mut f| {
            let torn = ends_mid_line(&mut f)?;
            let line = format!(
                "{}{key}\t{}\n",
                if torn { "\n" } else { "" },
                schedule.name()
            );
            f.write_all(line.as_bytes())
        });
    if let Err(e) = written {
        warn(format!(
            "cannot write the tuning file {}: {e}",
            path.display()
        ));
    }
}

/// Whether `f` is non-empty and its last byte is not a newline.
fn ends_mid_line(f: &mut std::fs::File) -> std::io::Result<bool> {
    if f.metadata()?.len() == 0 {
        return Ok(false);
    }
    f.seek(SeekFrom::End(-1))?;
    let mut last = [0u8; 1];
    f.read_exact(&mut last)?;
    Ok(last[0] != b'\n')
}

/// The choice the tuning file holds for `key`, if it names a schedule of the kernel.
fn persisted(cfg: &Mutex<TuneConfig>, key: &str, generated: &[Schedule]) -> Option<Schedule> {
    let mut cfg = lock(cfg);
    let path = cfg.file.clone()?;
    let entries = cfg.loaded.get_or_insert_with(|| read_file(&path));
    // A name this build does not generate (an older module, a renamed schedule) is stale.
    entries
        .get(key)
        .and_then(|name| Schedule::from_name(name))
        .filter(|s| generated.contains(s))
}

fn persist(cfg: &Mutex<TuneConfig>, key: String, schedule: Schedule) {
    let mut cfg = lock(cfg);
    if let Some(path) = cfg.file.clone() {
        append_file(&path, &key, schedule);
        cfg.loaded
            .get_or_insert_with(HashMap::new)
            .insert(key, schedule.name().to_string());
    }
}

/// What a candidate's run says about tuning.
enum Outcome {
    /// Its cost.
    Cost(f64),
    /// It cannot run this problem (no plan of the schedule admits it), or gave no measure.
    Skip,
    /// The kernels reported a bad argument (an index out of bounds, a queue too small): every
    /// candidate would, so tuning stops and the launch runs the heuristic's pick, whose own
    /// report the caller then reads as from any launch.
    Reported,
}

/// One run of candidate `s` on `tuner`, waited for: its launch, or what the run says about
/// tuning. A fault is returned as an error.
fn run_once(
    run: &mut RunFn<'_>,
    tuner: &Stream,
    s: Schedule,
) -> Result<std::result::Result<Launch, Outcome>> {
    match run(tuner, s).and_then(Pending::wait) {
        Ok(l) => Ok(Ok(l)),
        Err(Error::Shape(_)) => Ok(Err(Outcome::Skip)),
        Err(Error::OutOfBounds { .. } | Error::QueueOverflow { .. }) => Ok(Err(Outcome::Reported)),
        Err(e) => Err(e),
    }
}

/// The simulator's cost of candidate `s`: the busiest thread's instructions of a run after one
/// that fills the tile set's caches (whose producer kernels later launches skip).
fn sim_cost(run: &mut RunFn<'_>, tuner: &Stream, s: Schedule) -> Result<Outcome> {
    if let Err(outcome) = run_once(run, tuner, s)? {
        return Ok(outcome);
    }
    Ok(match run_once(run, tuner, s)? {
        Ok(l) => l
            .sim
            .and_then(|stats| stats.per_thread_instructions.iter().max().copied())
            .map_or(Outcome::Skip, |n| Outcome::Cost(n as f64)),
        Err(outcome) => outcome,
    })
}

/// The simulator's cost of every candidate in `order`; `None` if a candidate reported a bad
/// argument ([`Outcome::Reported`]), which ends tuning.
fn sim_costs(
    run: &mut RunFn<'_>,
    tuner: &Stream,
    order: impl Iterator<Item = Schedule>,
) -> Result<Option<Vec<(Schedule, f64)>>> {
    let mut costs = Vec::new();
    for s in order {
        match sim_cost(run, tuner, s)? {
            Outcome::Cost(c) => costs.push((s, c)),
            Outcome::Skip => {}
            Outcome::Reported => return Ok(None),
        }
    }
    Ok(Some(costs))
}

/// A candidate being timed on a GPU.
struct Timed {
    schedule: Schedule,
    /// Its timed runs so far, ms.
    times: Vec<f64>,
    /// How many timed runs it gets.
    runs: usize,
    /// Under [`SHORT_MS`]: its turn in a round starts with an untimed run.
    short: bool,
}

impl Timed {
    fn new(schedule: Schedule, first_ms: f64) -> Timed {
        let short = first_ms < SHORT_MS;
        let runs = match first_ms {
            _ if short => 21,
            ms if ms < 1.0 => 7,
            _ => 3,
        };
        Timed {
            schedule,
            times: vec![first_ms],
            runs,
            short,
        }
    }

    /// The median of its timed runs, ms.
    fn median(&self) -> f64 {
        let mut t = self.times.clone();
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    }

    /// The candidate's turn in a round: one timed run, or for a short kernel an untimed run and
    /// two timed ones. Right after another candidate's kernels, a kernel of a few microseconds
    /// can run measurably slower, by an amount that depends on which candidate ran before (H100:
    /// 24 → 40 µs after an 11 ms kernel); an application repeating one launch does not pay that,
    /// so the run that does is not timed. `false`: a run reported a bad argument.
    fn round(&mut self, run: &mut RunFn<'_>, tuner: &Stream) -> Result<bool> {
        if self.short && run_once(run, tuner, self.schedule)?.is_err() {
            return Ok(false);
        }
        let timed = if self.short { 2 } else { 1 };
        for _ in 0..timed {
            if self.times.len() == self.runs {
                break;
            }
            match run_once(run, tuner, self.schedule)? {
                Ok(l) => match l.elapsed_ms {
                    Some(ms) => self.times.push(f64::from(ms)),
                    None => self.runs = self.times.len(),
                },
                Err(_) => return Ok(false),
            }
        }
        Ok(true)
    }
}

/// A candidate whose first timed run took less than this (ms) is a short kernel: more timed
/// runs, whose launch-to-launch variation is a larger fraction of their time (a few percent of
/// a 10 µs kernel, under one percent of a millisecond one), each turn in a round warmed first.
const SHORT_MS: f64 = 0.1;

/// The GPU cost of every candidate in `order`, in ms; `None` if a candidate reported a bad
/// argument ([`Outcome::Reported`]), which ends tuning.
///
/// Each candidate runs once to load its module and fill the tile set's caches, then once timed.
/// A candidate whose timed run took more than [`HOPELESS`] times the best so far is not run
/// again: that run is its cost (a schedule without a huge-tile split can take seconds on a row of
/// millions of atoms). The others then take turns in rounds ([`Timed::round`]) until each has
/// its timed runs (21 for a short kernel, 7 under a millisecond, else 3; then 101 for the short
/// ones within [`PLAYOFF`] of the best), and the median counts: in rounds, a drift of the GPU's
/// clocks or of another process's load during tuning touches every candidate alike instead of
/// whichever ran then.
fn gpu_costs(
    run: &mut RunFn<'_>,
    tuner: &Stream,
    order: impl Iterator<Item = Schedule>,
) -> Result<Option<Vec<(Schedule, f64)>>> {
    let mut hopeless = Vec::new();
    let mut timed: Vec<Timed> = Vec::new();
    let mut best = f64::INFINITY;
    for s in order {
        let first = match run_once(run, tuner, s)? {
            Ok(_) => run_once(run, tuner, s)?,
            Err(outcome) => Err(outcome),
        };
        let first = match first {
            Ok(l) => l,
            Err(Outcome::Skip) => continue,
            Err(_) => return Ok(None),
        };
        let Some(ms) = first.elapsed_ms.map(f64::from) else {
            continue;
        };
        if ms > HOPELESS * best {
            hopeless.push((s, ms));
            continue;
        }
        best = best.min(ms);
        timed.push(Timed::new(s, ms));
    }
    if !rounds(&mut timed, run, tuner)? {
        return Ok(None);
    }
    let close = playoff(&timed);
    if !close.is_empty() {
        for &i in &close {
            timed[i].runs = PLAYOFF_RUNS;
        }
        if !rounds(&mut timed, run, tuner)? {
            return Ok(None);
        }
    }
    let mut costs = hopeless;
    costs.extend(timed.iter().map(|t| (t.schedule, t.median())));
    Ok(Some(costs))
}

/// The candidates that play off: the short kernels within [`PLAYOFF`] of the best median, when
/// there are at least two (their medians of 21 runs are that far apart between two measurements
/// of the same pair); none otherwise.
fn playoff(timed: &[Timed]) -> Vec<usize> {
    let best = timed
        .iter()
        .map(Timed::median)
        .fold(f64::INFINITY, f64::min);
    let close: Vec<usize> = (0..timed.len())
        .filter(|&i| timed[i].short && timed[i].median() <= PLAYOFF * best)
        .collect();
    if close.len() > 1 {
        close
    } else {
        Vec::new()
    }
}

/// Turns in rounds until every candidate has its timed runs; `false`: a run reported a bad
/// argument.
fn rounds(timed: &mut [Timed], run: &mut RunFn<'_>, tuner: &Stream) -> Result<bool> {
    while timed.iter().any(|t| t.times.len() < t.runs) {
        for t in timed.iter_mut().filter(|t| t.times.len() < t.runs) {
            if !t.round(run, tuner)? {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// Short candidates whose median is within this factor of the best play off ([`PLAYOFF_RUNS`]).
const PLAYOFF: f64 = 1.05;

/// Timed runs each candidate of a playoff reaches. Two medians of 21 runs of the same pair of
/// 8–10 µs kernels ranked them up to 5% apart in either order (H100, `tiny-100x100` SpMV: 9.06
/// against 9.5 µs in the tuner, 10.14 against 9.80 in lb-bench's rounds); the playoff spends
/// its runs where the ranking is in doubt (docs/tuning.md).
const PLAYOFF_RUNS: usize = 101;

/// A first timed run this many times slower than the best candidate so far ends the candidate.
const HOPELESS: f64 = 4.0;

/// The heuristic's pick stays unless another candidate is faster by more than this fraction:
/// below it, the difference is within what the medians of interleaved runs of one kernel vary by.
const MARGIN: f64 = 0.01;

/// Launches one candidate schedule on the given stream, timed, on the caller's arguments.
pub type RunFn<'a> = dyn FnMut(&Stream, Schedule) -> Result<Pending> + 'a;

/// The schedule an `auto` launch of `k` runs on a tile set with `stats` and `cache`, and why.
///
/// Candidates run on a stream of their own, ordered after everything enqueued on `stream` so
/// far, so that waiting on them reads only their reports: a report of an earlier launch stays
/// with `stream` for its next synchronization, as without tuning. `stream` is then ordered after
/// the candidates, whose writes the chosen launch overwrites.
pub fn pick_schedule(
    stream: &Stream,
    k: &AutoKernel,
    stats: &TileStats,
    cache: &TempCache,
    lanes: u64,
    run: &mut RunFn<'_>,
) -> Result<(Schedule, Picked)> {
    let rule = choose_schedule(k.schedules, stats, lanes);
    let dev = stream.device();
    let cfg = dev.tune_config();
    if k.schedules.len() < 2 || lock(cfg).mode == Tuning::Rule {
        return Ok((rule, Picked::Rule));
    }
    let mem_key = (k.ptx.as_ptr() as usize, k.ptx.len(), lanes);
    if let Some(s) = cache.tuned(mem_key) {
        return Ok((s, Picked::Cached));
    }
    let key = file_key(dev, k, stats, lanes);
    if let Some(s) = persisted(cfg, &key, k.schedules) {
        cache.set_tuned(mem_key, s);
        return Ok((s, Picked::Persisted));
    }
    // Measuring synchronizes, which a capture cannot: the rule picks, and a later launch
    // outside the capture tunes.
    if stream.capturing() {
        return Ok((rule, Picked::Rule));
    }
    let tuner = dev.new_stream()?;
    tuner.wait_for(stream)?;
    let gpu = dev.is_gpu();
    // The heuristic's pick first: its cost bounds how long the others are given.
    let order = std::iter::once(rule).chain(k.schedules.iter().copied().filter(|&s| s != rule));
    let measured = if gpu {
        gpu_costs(run, &tuner, order)?
    } else {
        sim_costs(run, &tuner, order)?
    };
    let Some(mut costs) = measured else {
        stream.wait_for(&tuner)?;
        return Ok((rule, Picked::Rule));
    };
    stream.wait_for(&tuner)?;
    costs.sort_by(|a, b| a.1.total_cmp(&b.1));
    let Some(&(fastest, fastest_cost)) = costs.first() else {
        // No candidate ran: the rule's schedule runs and reports why.
        return Ok((rule, Picked::Rule));
    };
    // On a GPU a measured difference within the noise does not overrule the heuristic.
    let rule_cost = costs.iter().find(|c| c.0 == rule).map(|c| c.1);
    let best = match rule_cost {
        Some(r) if gpu && fastest_cost >= r * (1.0 - MARGIN) => rule,
        _ => fastest,
    };
    cache.set_tuned(mem_key, best);
    persist(cfg, key, best);
    Ok((best, Picked::Tuned(costs)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tuning launch whose candidates cannot get their scratch copies runs the heuristic's
    /// pick (`Picked::Rule`) instead of failing, and remembers nothing for the tile set.
    #[test]
    fn candidates_without_room_for_scratch_copies_leave_the_rule() {
        let dev = Device::simulator();
        dev.set_tuning(Tuning::Tune);
        dev.set_tuning_file(None);
        let kernel = AutoKernel {
            name: "k",
            ptx: "// k",
            schedules: &[Schedule::ThreadMapped, Schedule::MergePath],
        };
        let stats = TileStats::new(100, 100, 1_000, 20);
        let cache = TempCache::default();
        let no_room = Error::Sim(lb_ptx::sim::SimError::AllocFailed { bytes: 1 << 40 });
        let mut tried = Vec::new();
        let mut run = |_: &Stream, s: Schedule| -> Result<Pending> {
            tried.push(s);
            Err(no_room_to_tune(1 << 40, &no_room))
        };
        let stream = dev.stream();
        let (s, picked) = pick_schedule(&stream, &kernel, &stats, &cache, 1, &mut run).unwrap();
        assert_eq!(picked, Picked::Rule);
        assert_eq!(s, choose_schedule(kernel.schedules, &stats, 1));
        assert_eq!(tried.len(), kernel.schedules.len(), "{tried:?}");
        assert_eq!(
            cache.tuned((kernel.ptx.as_ptr() as usize, kernel.ptx.len(), 1)),
            None
        );
    }

    #[test]
    fn a_tuning_file_skips_what_it_cannot_read() {
        let dir = std::env::temp_dir().join(format!("lb-tune-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.tsv");
        let key = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"].join("\t");
        std::fs::write(&path, format!("garbage\n{key}\tmerge_path\n\n\u{fffd}\t\n")).unwrap();
        let entries = read_file(&path);
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[&key], "merge_path");
        assert!(read_file(&dir.join("missing.tsv")).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn timed(schedule: Schedule, times: &[f64]) -> Timed {
        let mut t = Timed::new(schedule, times[0]);
        t.times = times.to_vec();
        t
    }

    #[test]
    fn short_candidates_within_five_percent_of_the_best_play_off() {
        let close = [
            timed(Schedule::ThreadMapped, &[0.0100, 0.0090, 0.0110]),
            timed(Schedule::WarpMapped, &[0.0104, 0.0104, 0.0104]),
            timed(Schedule::MergePath, &[0.0110, 0.0107, 0.0200]),
            timed(Schedule::BlockMapped, &[0.0107, 0.0103, 0.0103]),
        ];
        // Medians 10.0, 10.4, 11.0 and 10.3 µs: the first, second and fourth are within 5%.
        assert_eq!(playoff(&close), vec![0, 1, 3]);
        // The best alone within 5%: nothing to play off.
        let alone = [
            timed(Schedule::ThreadMapped, &[0.0100]),
            timed(Schedule::WarpMapped, &[0.0106]),
        ];
        assert!(playoff(&alone).is_empty());
        // Kernels of a millisecond are not short: their medians of 7 runs decide.
        let long = [
            timed(Schedule::ThreadMapped, &[1.00]),
            timed(Schedule::WarpMapped, &[1.01]),
        ];
        assert!(playoff(&long).is_empty());
    }

    #[test]
    fn the_hash_is_fnv1a() {
        // FNV-1a 64 of "" and "a", the published test vectors.
        assert_eq!(ptx_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(ptx_hash("a"), 0xaf63_dc4c_8601_ec8c);
    }
}
