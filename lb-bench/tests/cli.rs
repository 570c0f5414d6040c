//! The lb-bench binary on the simulator: a tiny corpus, every schedule reported, JSON lines that
//! parse, plots written, and `--help` naming every option.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

fn bench() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lb-bench"));
    // Never touch a GPU from the test suite, even on the GPU machine.
    c.env("LB_DEVICE", "sim");
    c
}

/// The run's stdout, after checking that it exited with success (both streams in the message
/// otherwise).
fn succeeded(out: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Runs lb-bench with `args` and `--json` into a file of its own (`tag` names it), checks that
/// it succeeded, and returns the JSON lines it wrote (the file removed).
fn json_lines(tag: &str, args: &[&str]) -> String {
    json_run(tag, args).1
}

/// [`json_lines`], with the run's stderr first.
fn json_run(tag: &str, args: &[&str]) -> (String, String) {
    let json = std::env::temp_dir().join(format!("lb-bench-{tag}-{}.jsonl", std::process::id()));
    let out = bench()
        .args(args)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    succeeded(&out);
    let text = std::fs::read_to_string(&json).unwrap();
    std::fs::remove_file(&json).ok();
    (String::from_utf8_lossy(&out.stderr).into_owned(), text)
}

/// [`json_run`], the lines parsed.
fn records(tag: &str, args: &[&str]) -> (String, Vec<serde_json::Value>) {
    let (err, text) = json_run(tag, args);
    let records = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (err, records)
}

#[test]
fn simulator_run_reports_every_schedule_as_json_lines() {
    let dir = std::env::temp_dir().join(format!("lb-bench-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("runs.jsonl");
    let plots = dir.join("plots");
    let out = bench()
        .args([
            "--sim",
            "--quiet",
            "--families",
            "tiny,road",
            "--ops",
            "spmv,spmm8",
        ])
        .arg("--json")
        .arg(&json)
        .arg("--plots")
        .arg(&plots)
        .output()
        .unwrap();
    let stdout = succeeded(&out);
    assert!(
        stdout.contains("auto, spmv: picked the best schedule"),
        "{stdout}"
    );

    let text = std::fs::read_to_string(&json).unwrap();
    let mut schedules: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    let mut summaries = 0;
    for line in text.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        for key in ["gpu", "date", "command", "op"] {
            assert!(v.get(key).is_some(), "`{key}` missing in {line}");
        }
        match v["record"].as_str() {
            Some("run") => {
                assert_eq!(v["status"], "ok", "{line}");
                assert!(v["sim_warp_efficiency"].as_f64().is_some(), "{line}");
                assert!(v["sim_busiest_over_mean"].as_f64().is_some(), "{line}");
                let key = (
                    v["op"].as_str().unwrap().to_string(),
                    v["matrix"].as_str().unwrap().to_string(),
                );
                schedules
                    .entry(key)
                    .or_default()
                    .insert(v["schedule"].as_str().unwrap().to_string());
            }
            Some("auto_summary") => {
                summaries += 1;
                // Measured at the first launch by the simulator's cost, `tuned` is the oracle.
                if v["subject"] == "tuned" {
                    assert_eq!(v["auto_picked_best"], v["matrices"], "{line}");
                    assert_eq!(v["worst_loss"].as_f64(), Some(1.0), "{line}");
                }
            }
            other => panic!("unknown record kind {other:?}"),
        }
    }
    assert_eq!(summaries, 4, "one auto and one tuned summary per op");
    // tiny has 3 members, road 1; two ops.
    assert_eq!(schedules.len(), 8, "{schedules:?}");
    let mut want: BTreeSet<String> = lb::Schedule::ALL
        .iter()
        .map(|s| s.name().to_string())
        .collect();
    want.insert("auto".into());
    want.insert("tuned".into());
    for (key, got) in &schedules {
        assert_eq!(got, &want, "{key:?}");
    }
    for op in ["spmv", "spmm8"] {
        let png = plots.join(format!("landscape-{op}-sim.png"));
        let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
        assert!(
            bytes.starts_with(b"\x89PNG"),
            "{} is not a PNG",
            png.display()
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn simulator_graph_ops_pass_every_schedule() {
    graph_ops_pass_every_schedule(false);
}

/// `--unchecked` and `--host-loop` add verified `<schedule>+unchecked` and
/// `<schedule>+host_loop` rows after every graph schedule's own.
#[test]
fn simulator_graph_ops_pass_every_schedule_unchecked_too() {
    graph_ops_pass_every_schedule(true);
}

fn graph_ops_pass_every_schedule(unchecked: bool) {
    let mut args = vec![
        "--sim",
        "--quiet",
        "--ops",
        "sssp,bfs",
        "--scale",
        "small",
        "--families",
        "road,regular",
    ];
    if unchecked {
        args.extend(["--unchecked", "--host-loop"]);
    }
    let text = json_lines(&format!("graph-{unchecked}"), &args);
    let mut schedules: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for line in text.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        // The simulator's graph rows carry no cost to rank `auto` by: no `auto_summary`.
        assert_eq!(v["record"], "run", "{line}");
        assert_eq!(v["status"], "ok", "{line}");
        assert!(v["iterations"].as_u64().is_some_and(|i| i > 0), "{line}");
        assert!(v["edges"].as_u64().is_some_and(|e| e > 0), "{line}");
        let op = v["op"].as_str().unwrap().to_string();
        assert!(op == "sssp" || op == "bfs", "{line}");
        // Four distinct seeded sources (the default `--sources`), each with an out-edge.
        let sources = v["sources"].as_array().unwrap();
        assert_eq!(sources.len(), 4, "{line}");
        // The device-resident drivers move the queue counter and, checked, the error flag's
        // first word per iteration; the host loop moves the frontier and the queue. `auto`
        // reads 8 bytes for all the levels it runs in one block (`block_levels`, on the road
        // network's short rows), so its iterations average less.
        let per = v["bytes_per_iteration"].as_f64().unwrap();
        let schedule = v["schedule"].as_str().unwrap();
        let least = |bytes: f64| {
            if schedule.starts_with("auto") {
                f64::MIN_POSITIVE
            } else {
                bytes
            }
        };
        if schedule.ends_with("+unchecked") {
            assert!((least(8.0)..=8.0).contains(&per), "{line}");
        } else if schedule.ends_with("+host_loop") {
            assert!(per > 16.0, "{line}");
        } else {
            assert!((least(16.0)..=16.0).contains(&per), "{line}");
        }
        if schedule == "auto" && v["family"] == "road" {
            let picked = v["picked"].as_str().unwrap_or_default();
            assert!(picked.contains("block_levels") && per < 16.0, "{line}");
        }
        schedules
            .entry((op, v["matrix"].as_str().unwrap().to_string()))
            .or_default()
            .insert(v["schedule"].as_str().unwrap().to_string());
    }
    // road has 1 member and regular 2 in the small corpus; two ops.
    assert_eq!(schedules.len(), 6, "{schedules:?}");
    let want: BTreeSet<String> = lb::algorithms::schedules()
        .iter()
        .flat_map(|s| {
            let name = s.name().to_string();
            let twins = unchecked
                .then(|| [format!("{name}+unchecked"), format!("{name}+host_loop")])
                .into_iter()
                .flatten();
            std::iter::once(name).chain(twins)
        })
        .chain(std::iter::once("auto".to_string()))
        .chain(unchecked.then(|| "auto+unchecked".to_string()))
        .collect();
    for (key, got) in &schedules {
        assert_eq!(got, &want, "{key:?}");
    }
}

/// The opt-in graph apps (`dobfs`, `cc`, `pagerank`) on the road-grid member: every row ok,
/// DO-BFS with BFS's iterations and edges and its pull count, at most 16 bytes per iteration;
/// and none of them (nor `road-grid`) in a default run.
#[test]
fn simulator_graph_apps_pass() {
    let text = json_lines(
        "apps",
        &[
            "--sim",
            "--quiet",
            "--ops",
            "bfs,dobfs,cc,pagerank",
            "--families",
            "road-grid",
            "--schedules",
            "thread_mapped",
            "--sources",
            "2",
        ],
    );
    let rows: BTreeMap<String, serde_json::Value> = text
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .map(|v| (v["op"].as_str().unwrap().to_string(), v))
        .collect();
    assert_eq!(rows.len(), 4, "{text}");
    for (op, v) in &rows {
        assert_eq!(v["status"], "ok", "{op}: {v}");
        assert_eq!(v["family"], "road_grid", "{op}: {v}");
        assert!(v["iterations"].as_u64().is_some_and(|i| i > 0), "{op}: {v}");
        let per = v["bytes_per_iteration"].as_f64().unwrap();
        assert!(per > 0.0 && per <= 16.0, "{op}: {v}");
        assert_eq!(
            v["sources"].is_array(),
            op == "bfs" || op == "dobfs",
            "{op}: {v}"
        );
    }
    let (bfs, dobfs) = (&rows["bfs"], &rows["dobfs"]);
    assert_eq!(bfs["iterations"], dobfs["iterations"]);
    assert_eq!(bfs["edges"], dobfs["edges"]);
    assert!(dobfs["pull_iterations"].as_u64().is_some());
    assert!(bfs.get("pull_iterations").is_none());

    let help = bench().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let default_ops = help
        .lines()
        .find(|l| l.contains("[default: spmv"))
        .unwrap_or_else(|| panic!("{help}"));
    for op in ["dobfs", "cc", "pagerank"] {
        assert!(!default_ops.contains(op), "{op} is opt-in: {default_ops}");
    }
}

/// `--direction` reaches DO-BFS: α = 0 never pulls, α = β = ∞ pulls every step; a malformed
/// switch is refused by name.
#[test]
fn the_direction_switch_reaches_dobfs() {
    for (direction, all_pull) in [("0:24", false), ("inf:inf", true)] {
        let text = json_lines(
            &format!("direction-{all_pull}"),
            &[
                "--sim",
                "--quiet",
                "--ops",
                "dobfs",
                "--families",
                "road-grid",
                "--schedules",
                "thread_mapped",
                "--sources",
                "1",
                "--direction",
                direction,
            ],
        );
        let row: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(row["status"], "ok", "{row}");
        let iterations = row["iterations"].as_u64().unwrap();
        let pulls = row["pull_iterations"].as_u64().unwrap();
        assert!(iterations > 1, "{row}");
        assert_eq!(
            pulls,
            if all_pull { iterations } else { 0 },
            "{direction}: {row}"
        );
    }
    for value in ["14", "x:24", "14:0", "-1:24", "nan:24"] {
        let out = bench()
            .args(["--sim", "--ops", "dobfs", &format!("--direction={value}")])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{value}: {err}");
        assert!(
            err.contains("--direction") && !err.contains("panicked"),
            "{value}: {err}"
        );
    }
}

#[test]
fn help_documents_every_option() {
    let out = bench().arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--ops",
        "--schedules",
        "--scale",
        "--families",
        "--no-corpus",
        "--mtx",
        "--seed",
        "--sources",
        "--direction",
        "--host-loop",
        "--undirected",
        "--reps",
        "--warmup",
        "--budget-ms",
        "--energy-ms",
        "--copy-bytes",
        "--tolerance",
        "--no-cusparse",
        "--sim",
        "--json",
        "--plots",
        "--plots-from",
        "--quiet",
        "--devices",
        "--chunks",
        "--transport",
        "--oversize",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}:\n{help}");
    }
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let out = bench()
        .args(["--sim", "--no-corpus", "--mtx", "/nonexistent/m.mtx"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/nonexistent/m.mtx") && !err.contains("panicked"),
        "{err}"
    );

    let out = bench()
        .args(["--sim", "--schedules", "no_such"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown schedule `no_such`"));
}

#[test]
fn a_nan_or_negative_tolerance_or_budget_is_refused() {
    for (flag, value) in [
        ("--tolerance", "nan"),
        ("--tolerance", "-1"),
        ("--tolerance", "inf"),
        ("--budget-ms", "NaN"),
        ("--energy-ms", "-0.5"),
    ] {
        let out = bench()
            .args(["--sim", &format!("{flag}={value}")])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(
            err.contains(flag) && err.contains("at least 0") && !err.contains("panicked"),
            "{flag} {value}: {err}"
        );
    }
}

/// `--devices 2,3` on simulators: one verified line per group, chunk count and transport, in the
/// JSON lines too; bad chunk counts, transports and oversize factors are refused by name.
#[test]
fn simulated_devices_sweep_chunks_and_transports() {
    let (_, records) = records(
        "devices",
        &[
            "--sim",
            "--quiet",
            "--families",
            "giant-row",
            "--ops",
            "spmv",
            "--devices",
            "2,3",
            "--chunks",
            "1,3",
            "--transport",
            "peer,nccl",
            "--reps",
            "1",
            "--warmup",
            "0",
        ],
    );
    let mut seen = BTreeSet::new();
    for r in &records {
        assert!(r["error"].is_null(), "{r}");
        assert!(r["max_rel_error"].as_f64().unwrap() <= 1e-4, "{r}");
        seen.insert((
            r["matrix"].as_str().unwrap().to_string(),
            r["devices"].as_u64().unwrap(),
            r["chunks"].as_u64().unwrap(),
            r["transport"].as_str().unwrap().to_string(),
        ));
    }
    let matrices: BTreeSet<_> = seen.iter().map(|s| s.0.clone()).collect();
    assert!(!matrices.is_empty());
    for m in &matrices {
        for devices in [2, 3] {
            for transport in ["peer", "nccl"] {
                assert!(
                    seen.iter()
                        .any(|s| s.0 == *m && s.1 == devices && s.2 == 1 && s.3 == transport),
                    "{m} on {devices} devices, 1 chunk, {transport}: {seen:?}"
                );
                assert!(
                    seen.iter()
                        .any(|s| s.0 == *m && s.1 == devices && s.2 > 1 && s.3 == transport),
                    "{m} on {devices} devices in chunks, {transport}: {seen:?}"
                );
            }
        }
    }
    for (flag, value, says) in [
        ("--chunks", "0", "--chunks"),
        ("--transport", "carrier-pigeon", "not a transport"),
        ("--oversize", "0.5", "above 1"),
        ("--oversize", "nan", "--oversize"),
    ] {
        let out = bench()
            .args(["--sim", "--devices", "2", &format!("{flag}={value}")])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(
            err.contains(says) && !err.contains("panicked"),
            "{flag} {value}: {err}"
        );
    }
}

/// `--loop N` on the simulator: one verified row per (matrix, schedule), each loop's rounds run
/// (no error, a positive wall time), and no GPU-only column filled in.
#[test]
fn loop_rows_are_verified_per_schedule() {
    let text = json_lines(
        "loop",
        &[
            "--sim",
            "--loop",
            "3",
            "--families",
            "tiny",
            "--schedules",
            "thread_mapped,lrb",
        ],
    );
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let pairs: BTreeSet<(String, String)> = rows
        .iter()
        .map(|r| {
            assert!(r["error"].is_null(), "{r}");
            assert!(r["wall_us"].as_f64().unwrap() > 0.0, "{r}");
            assert!(r["graph_wall_us"].is_null(), "{r}");
            (
                r["matrix"].as_str().unwrap().to_string(),
                r["schedule"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected: BTreeSet<(String, String)> = ["tiny-8x8", "tiny-1x1000", "tiny-100x100"]
        .iter()
        .flat_map(|m| ["thread_mapped", "lrb"].map(|s| (m.to_string(), s.to_string())))
        .collect();
    assert_eq!(pairs, expected);
}

/// `--devices 2 --ops bfs,sssp` on simulators: a verified record per graph, op and schedule
/// (the searches across devices match the host's references, or the record carries an error
/// and the run fails), and an op that does not run across devices is said so.
#[test]
fn simulated_devices_search_graphs() {
    let (err, records) = records(
        "graphs",
        &[
            "--sim",
            "--quiet",
            "--families",
            "rmat,road",
            "--ops",
            "bfs,sssp,cc",
            "--devices",
            "2",
            "--schedules",
            "merge_path,lrb",
            "--sources",
            "2",
            "--reps",
            "1",
            "--warmup",
            "0",
            "--frontier-exchange",
            "lists,all-reduce",
        ],
    );
    assert!(err.contains("cc does not run across devices"), "{err}");
    let mut seen = BTreeSet::new();
    for r in &records {
        assert!(r["error"].is_null(), "{r}");
        assert_eq!(r["devices"].as_u64(), Some(2), "{r}");
        assert_eq!(r["sources"].as_array().map(Vec::len), Some(2), "{r}");
        let steps = r["steps"].as_u64().unwrap();
        assert!(steps >= 2, "{r}");
        assert!(r["edges_expanded"].as_u64().unwrap() > 0, "{r}");
        // The two phases are parts of the wall time, and every search has both.
        let (wall, compute, exchanged) = (
            r["wall_ms"].as_f64().unwrap(),
            r["compute_ms"].as_f64().unwrap(),
            r["exchange_ms"].as_f64().unwrap(),
        );
        assert!(compute > 0.0 && exchanged > 0.0, "{r}");
        assert!(compute + exchanged <= wall * 1.0001, "{r}");
        let exchange = r["exchange"].as_str().unwrap().to_string();
        // With lists every step of each of the two searches but its last is listed.
        let listed = if exchange == "lists" { steps - 2 } else { 0 };
        assert_eq!(r["claim_list_levels"].as_u64(), Some(listed), "{r}");
        seen.insert((
            r["op"].as_str().unwrap().to_string(),
            r["schedule"].as_str().unwrap().to_string(),
            exchange,
        ));
    }
    // Each search runs each exchange asked for.
    let mut expected = BTreeSet::new();
    for schedule in ["merge_path", "lrb"] {
        for op in ["bfs", "sssp"] {
            for exchange in ["lists", "all-reduce"] {
                expected.insert((op.to_string(), schedule.to_string(), exchange.to_string()));
            }
        }
    }
    assert_eq!(seen, expected);
}

/// A run line as a GPU run writes it, with the fields the plots read.
fn gpu_line(op: &str, matrix: &str, nnz: u64, schedule: &str, gbps: f64, speedup: f64) -> String {
    serde_json::json!({
        "record": "run", "op": op, "matrix": matrix, "nnz": nnz, "schedule": schedule,
        "status": "ok", "gbps": gbps, "speedup_vs_cusparse": speedup,
    })
    .to_string()
}

#[test]
fn plots_are_drawn_again_from_earlier_json_lines() {
    let dir = std::env::temp_dir().join(format!("lb-bench-replot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Two calls' files of one corpus, a summary line among them, as GPU runs write them.
    let first = dir.join("first.jsonl");
    let second = dir.join("second.jsonl");
    let lines = [
        gpu_line("spmm32", "road", 2_000_000, "lrb", 900.0, 2.5),
        gpu_line("spmm32", "road", 2_000_000, "auto", 880.0, 2.4),
        r#"{"record":"auto_summary","op":"spmm32"}"#.to_string(),
    ];
    std::fs::write(&first, lines.join("\n") + "\n").unwrap();
    let more = [
        gpu_line("spmm32", "rmat", 2_100_000, "lrb", 700.0, 1.3),
        gpu_line("spmm32", "rmat", 2_100_000, "auto", 690.0, 1.2),
        gpu_line("spmm128", "rmat", 2_100_000, "lrb", 800.0, 1.1),
    ];
    std::fs::write(&second, more.join("\n")).unwrap();
    let plots = dir.join("plots");
    let replot = |files: &[&std::path::Path]| {
        bench()
            .arg("--plots-from")
            .args(files)
            .arg("--plots")
            .arg(&plots)
            .output()
            .unwrap()
    };
    succeeded(&replot(&[&first, &second]));
    for name in ["landscape-spmm32", "speedup-spmm32", "landscape-spmm128"] {
        let png = std::fs::read(plots.join(format!("{name}.png"))).unwrap_or_default();
        assert!(png.starts_with(b"\x89PNG"), "{name}.png was not drawn");
    }
    // No `auto` row for spmm128: no speedup points, so no speedup plot.
    assert!(!plots.join("speedup-spmm128.png").exists());

    // A line that is not JSON names its file and line; a file without run records is refused.
    std::fs::write(&second, "{\"record\":\"run\"}\nnot json\n").unwrap();
    let out = replot(&[&second]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("second.jsonl:2") && !err.contains("panicked"),
        "{err}"
    );
    std::fs::write(&second, "{\"record\":\"auto_summary\"}\n").unwrap();
    let out = replot(&[&second]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no run records"));
    // `--plots-from` needs `--plots`.
    let out = bench().arg("--plots-from").arg(&first).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_rule_is_refitted_from_earlier_json_lines() {
    let dir = std::env::temp_dir().join(format!("lb-bench-fit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let line = |family: &str, matrix: &str, schedule: &str, ms: f64| {
        serde_json::json!({
            "record": "run", "op": "spmv", "matrix": matrix, "family": family, "rows": 1000,
            "cols": 1000, "nnz": 8000, "max_row": 40, "schedule": schedule, "status": "ok",
            "median_ms": ms,
        })
        .to_string()
    };
    let runs = dir.join("runs.jsonl");
    let lines = [
        line("road", "road-1000", "thread_mapped", 0.010),
        line("road", "road-1000", "merge_path", 0.020),
        String::new(),
        line("rmat", "rmat-10", "thread_mapped", 0.030),
        line("rmat", "rmat-10", "merge_path", 0.015),
        r#"{"record":"auto_summary","op":"spmv"}"#.to_string(),
    ];
    std::fs::write(&runs, lines.join("\n")).unwrap();
    let out = bench().arg("--fit-rule").arg(&runs).output().unwrap();
    let report = succeeded(&out);
    assert!(
        report.starts_with("2 problems, 2 families"),
        "the two (op, matrix) problems of two families:\n{report}"
    );
    std::fs::write(&runs, lines[0].clone() + "\n{not json\n").unwrap();
    let out = bench().arg("--fit-rule").arg(&runs).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("runs.jsonl:2") && !err.contains("panicked"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
