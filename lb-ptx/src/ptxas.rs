//! Finds `ptxas` and assembles PTX text with it, for the tests that check every generated module
//! is valid PTX and does not spill.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// The resource report of one entry, from `ptxas -v`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryReport {
    pub name: String,
    pub registers: u32,
    pub spill_stores: u32,
    pub spill_loads: u32,
}

/// The result of a successful `ptxas -v` run.
#[derive(Clone, Debug)]
pub struct Report {
    /// Everything ptxas printed.
    pub log: String,
    pub entries: Vec<EntryReport>,
}

/// `ptxas` from `$LB_PTXAS`, else the one `scripts/install-ptxas.sh` put under
/// `<workspace>/.tools/cuda`.
pub fn locate() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("LB_PTXAS") {
        return Some(PathBuf::from(p));
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
    find_in(&workspace.join(".tools").join("cuda"))
}

fn find_in(dir: &Path) -> Option<PathBuf> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in &entries {
        let path = e.path();
        if path.file_name().is_some_and(|n| n == "ptxas")
            && dir.file_name().is_some_and(|n| n == "bin")
        {
            return Some(path);
        }
    }
    entries
        .iter()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .find_map(|e| find_in(&e.path()))
}

/// `ptxas` for tests: found, or `None` after a loud skip message. Panics when `CI` is set,
/// because CI must not skip the check.
pub fn for_tests() -> Option<PathBuf> {
    let found = locate();
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "ptxas not found: run ./scripts/install-ptxas.sh or set LB_PTXAS"
        );
        eprintln!(
            "!!! SKIPPED: ptxas not found (run ./scripts/install-ptxas.sh or set LB_PTXAS) !!!"
        );
    }
    found
}

/// Whether `ptx` calls external functions (the CUDA device runtime, for device-side launches):
/// such a module is relocatable code, complete only once linked against libcudadevrt.
pub fn needs_link(ptx: &str) -> bool {
    ptx.contains(".extern .func")
}

/// Assembles `ptx` for `arch` (e.g. `"sm_80"`) with `-v`; `Err` holds ptxas's messages. A module
/// that [`needs_link`] is assembled as relocatable code (`--compile-only`), the form the driver's
/// linker takes with libcudadevrt.
pub fn assemble(ptxas: &Path, ptx: &str, arch: &str) -> Result<Report, String> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let file = std::env::temp_dir().join(format!("lb-ptxas-{}-{n}-{arch}.ptx", std::process::id()));
    std::fs::write(&file, ptx).map_err(|e| format!("writing {}: {e}", file.display()))?;
    let mut command = Command::new(ptxas);
    command.arg(format!("-arch={arch}")).arg("-v");
    if needs_link(ptx) {
        command.arg("--compile-only");
    }
    let out = command.arg(&file).arg("-o").arg("/dev/null").output();
    // Best effort: a leftover file in the temp dir is harmless.
    let _ = std::fs::remove_file(&file);
    let out = out.map_err(|e| format!("running {}: {e}", ptxas.display()))?;
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        return Err(log);
    }
    let entries = parse_report(&log);
    Ok(Report { log, entries })
}

fn number_before(line: &str, what: &str) -> Option<u32> {
    let i = line.find(what)?;
    line[..i].split_whitespace().last()?.parse().ok()
}

fn parse_report(log: &str) -> Vec<EntryReport> {
    let mut entries: Vec<EntryReport> = Vec::new();
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_string();
            entries.push(EntryReport {
                name,
                registers: 0,
                spill_stores: 0,
                spill_loads: 0,
            });
        } else if let Some(e) = entries.last_mut() {
            if let Some(n) = number_before(line, "bytes spill stores") {
                e.spill_stores = n;
            }
            if let Some(n) = number_before(line, "bytes spill loads") {
                e.spill_loads = n;
            }
            if let Some(n) = number_before(line, "registers") {
                e.registers = n;
            }
        }
    }
    entries
}

/// The architectures every generated module must assemble for.
pub const ARCHS: [&str; 3] = ["sm_75", "sm_80", "sm_90"];

/// Assembles `ptx` (named `name` in messages) for each of [`ARCHS`] and panics unless ptxas
/// accepts it and no entry spills. Returns the reports, or nothing after a loud skip when ptxas
/// is missing outside CI (see [`for_tests`]).
pub fn assert_assembles(name: &str, ptx: &str) -> Vec<Report> {
    let Some(ptxas) = for_tests() else {
        return Vec::new();
    };
    ARCHS
        .iter()
        .map(|arch| {
            let report = assemble(&ptxas, ptx, arch)
                .unwrap_or_else(|log| panic!("ptxas rejected `{name}` for {arch}:\n{log}\n{ptx}"));
            assert!(
                !report.entries.is_empty(),
                "`{name}`: no entries in\n{}",
                report.log
            );
            for e in &report.entries {
                assert_eq!(
                    (e.spill_stores, e.spill_loads),
                    (0, 0),
                    "`{name}`: {} spills on {arch}:\n{}",
                    e.name,
                    report.log
                );
            }
            report
        })
        .collect()
}
