//! `--fit-rule FILE…`: refits the thresholds of `auto`'s cold-start rule
//! (`lb::heuristic::Rule`) on lb-bench's own JSON-lines results, and says how well a rule fitted
//! without a family does on that family (leave one family out), next to the built-in rule.
//!
//! A rule is scored on a set of (op, matrix) problems by the geometric mean over them of the
//! time of the schedule it picks over the best schedule's time (1 = always the best). The
//! thresholds are searched on a grid around the built-in ones; the rule code is lb's own, so the
//! fitted numbers can be pasted into `DEFAULT_RULE` as they are.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use lb::heuristic::{Rule, DEFAULT_RULE};
use lb::{Schedule, TileStats};

/// One (op, matrix): its statistics, lane count, family and each schedule's median time.
struct Problem {
    family: String,
    name: String,
    stats: TileStats,
    lanes: u64,
    times: HashMap<Schedule, f64>,
}

impl Problem {
    fn best(&self) -> f64 {
        self.times.values().copied().fold(f64::INFINITY, f64::min)
    }

    /// The picked schedule's time over the best time.
    fn loss(&self, rule: &Rule) -> f64 {
        let generated: Vec<Schedule> = self.times.keys().copied().collect();
        let pick = rule.choose(&generated, &self.stats, self.lanes);
        pick.and_then(|s| self.times.get(&s))
            .map_or(f64::INFINITY, |t| t / self.best())
    }
}

/// The SpMV and SpMM runs of `files` with a time, grouped per (op, matrix); a later file's run
/// of the same (op, matrix, schedule) replaces an earlier one.
fn read(files: &[PathBuf]) -> Result<Vec<Problem>, String> {
    let mut problems: BTreeMap<(String, String), Problem> = BTreeMap::new();
    for v in crate::report::read_json_lines(files)? {
        if v["record"] != "run" || v["status"] != "ok" {
            continue;
        }
        let (Some(op), Some(matrix), Some(schedule), Some(ms)) = (
            v["op"].as_str(),
            v["matrix"].as_str(),
            v["schedule"].as_str().and_then(Schedule::from_name),
            v["median_ms"].as_f64(),
        ) else {
            continue;
        };
        if !op.starts_with("spm") {
            continue;
        }
        let num = |key: &str| v[key].as_u64().unwrap_or(0);
        let p = problems
            .entry((op.to_string(), matrix.to_string()))
            .or_insert_with(|| Problem {
                family: v["family"].as_str().unwrap_or("?").to_string(),
                name: format!("{op} {matrix}"),
                stats: TileStats::new(num("rows"), num("cols"), num("nnz"), num("max_row")),
                lanes: v["k"].as_u64().unwrap_or(1),
                times: HashMap::new(),
            });
        p.times.insert(schedule, ms);
    }
    Ok(problems.into_values().collect())
}

fn geomean(losses: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = losses.fold((0.0, 0usize), |(s, n), l| (s + l.ln(), n + 1));
    (sum / n.max(1) as f64).exp()
}

fn score(rule: &Rule, problems: &[&Problem]) -> f64 {
    geomean(problems.iter().map(|p| p.loss(rule)))
}

/// The rules of the search grid, the built-in one first (it wins ties).
fn grid() -> Vec<Rule> {
    let mut rules = vec![DEFAULT_RULE];
    for small_dim in [100, 300, 500, 1_000, 3_000] {
        for small_atoms in [3_000, 10_000, 30_000, 100_000] {
            for heavy_imbalance in [8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 1024.0] {
                for warp_mean_atoms in [4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0] {
                    for block_mean_atoms in [64.0, 128.0, 256.0, 512.0, 1024.0] {
                        for narrow_mean_atoms in [0.0, 4.0, 6.0, 7.5, 10.0, 16.0] {
                            rules.push(Rule {
                                small_dim,
                                small_atoms,
                                heavy_imbalance,
                                warp_mean_atoms,
                                block_mean_atoms,
                                narrow_mean_atoms,
                                ..DEFAULT_RULE
                            });
                        }
                    }
                }
            }
        }
    }
    rules
}

/// The grid's rule with the lowest score on `problems`.
fn fit(rules: &[Rule], problems: &[&Problem]) -> (Rule, f64) {
    rules.iter().map(|r| (*r, score(r, problems))).fold(
        (DEFAULT_RULE, f64::INFINITY),
        |best, cand| {
            if cand.1 < best.1 - 1e-12 {
                cand
            } else {
                best
            }
        },
    )
}

/// Prints the leave-one-family-out table and the rule fitted on everything; fails on no data.
pub fn run(files: &[PathBuf]) -> Result<(), String> {
    let problems = read(files)?;
    if problems.is_empty() {
        return Err("no SpMV or SpMM runs with a time in the files".into());
    }
    let rules = grid();
    let families: Vec<String> = {
        let mut f: Vec<String> = problems.iter().map(|p| p.family.clone()).collect();
        f.sort();
        f.dedup();
        f
    };
    println!(
        "{} problems, {} families, {} rules searched; loss = picked time / best time (geomean)",
        problems.len(),
        families.len(),
        rules.len()
    );
    println!(
        "{:<12} {:>9} {:>14} {:>14}",
        "held out", "problems", "built-in rule", "fitted without"
    );
    let (mut held_default, mut held_fitted) = (Vec::new(), Vec::new());
    for family in &families {
        let (train, test): (Vec<&Problem>, Vec<&Problem>) =
            problems.iter().partition(|p| &p.family != family);
        let (rule, _) = fit(&rules, &train);
        let (d, f) = (score(&DEFAULT_RULE, &test), score(&rule, &test));
        held_default.extend(test.iter().map(|p| p.loss(&DEFAULT_RULE)));
        held_fitted.extend(test.iter().map(|p| p.loss(&rule)));
        println!("{family:<12} {:>9} {d:>14.3} {f:>14.3}", test.len());
    }
    println!(
        "{:<12} {:>9} {:>14.3} {:>14.3}",
        "all, held out",
        held_default.len(),
        geomean(held_default.into_iter()),
        geomean(held_fitted.into_iter())
    );
    let all: Vec<&Problem> = problems.iter().collect();
    let (rule, fitted) = fit(&rules, &all);
    println!(
        "fitted on every family: {rule:?}: in-sample {fitted:.3} (built-in {:.3})",
        score(&DEFAULT_RULE, &all)
    );
    for p in &problems {
        println!(
            "  {:<48} built-in {:.3}  fitted {:.3}",
            p.name,
            p.loss(&DEFAULT_RULE),
            p.loss(&rule)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows of 20 atoms: the built-in rule says `warp_mapped` (mean ≥ 12), but here
    /// `thread_mapped` is faster, so the fit must raise the warp threshold above 20 and lose
    /// nothing; and held out, a family is scored by a rule fitted on the others.
    #[test]
    fn the_fit_moves_a_threshold_the_data_contradicts() {
        let problem = |family: &str, rows: u64| Problem {
            family: family.into(),
            name: format!("{family}-{rows}"),
            stats: TileStats::new(rows, rows, 20 * rows, 20),
            lanes: 1,
            times: HashMap::from([
                (Schedule::ThreadMapped, 1.0),
                (Schedule::WarpMapped, 2.0),
                (Schedule::MergePath, 3.0),
            ]),
        };
        let problems = [problem("a", 100_000), problem("b", 200_000)];
        let all: Vec<&Problem> = problems.iter().collect();
        assert_eq!(score(&DEFAULT_RULE, &all), 2.0);
        let (rule, loss) = fit(&grid(), &all);
        assert_eq!(loss, 1.0);
        assert!(rule.warp_mean_atoms > 20.0, "{rule:?}");
        let (held_out, _) = fit(&grid(), &all[..1]);
        assert_eq!(score(&held_out, &all[1..]), 1.0);
    }
}
