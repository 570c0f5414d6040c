//! Command-line numbers for the examples: a value in the range the example can run, or an error
//! that says which range (never a silent clamp, never a panic on an absurd size); and the exit
//! status every example ends with.

use std::ops::RangeInclusive;
use std::process::ExitCode;

/// Runs an example: 2 for bad arguments (their message), 1 when `run` reports a mismatch
/// (`mismatch`) or fails, 0 when every check passed.
pub fn exit<A, E: std::fmt::Display>(
    name: &str,
    args: Result<A, String>,
    run: impl FnOnce(&A) -> Result<bool, E>,
    mismatch: &str,
) -> ExitCode {
    let args = match args {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{name}: {message}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("{name}: {mismatch}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The next argument as a whole number in `range`, for the option `name`.
pub fn number(
    it: &mut impl Iterator<Item = String>,
    name: &str,
    range: RangeInclusive<usize>,
) -> Result<usize, String> {
    let v = it.next().ok_or_else(|| format!("{name} needs a value"))?;
    let n: usize = v
        .parse()
        .map_err(|_| format!("{name} needs a whole number, got `{v}`"))?;
    if range.contains(&n) {
        Ok(n)
    } else {
        Err(format!(
            "{name} must be from {} to {}, got {n}",
            range.start(),
            range.end()
        ))
    }
}

/// The most rows or vertices a generated input may have: about 2^28, what fits a GPU's memory
/// with a few nonzeros per row.
pub const MAX_ROWS: usize = 1 << 28;

#[cfg(test)]
mod tests {
    use super::number;

    fn parse(args: &[&str], range: std::ops::RangeInclusive<usize>) -> Result<usize, String> {
        number(&mut args.iter().map(|s| s.to_string()), "--k", range)
    }

    #[test]
    fn numbers_outside_the_range_are_errors_not_clamps() {
        assert_eq!(parse(&["7"], 1..=8), Ok(7));
        for (args, says) in [
            (&["0"][..], "from 1 to 8, got 0"),
            (&["9"], "from 1 to 8, got 9"),
            (&["99999999999999999999999"], "whole number"),
            (&["-1"], "whole number"),
            (&["x"], "whole number"),
            (&[], "needs a value"),
        ] {
            let e = parse(args, 1..=8).unwrap_err();
            assert!(e.contains("--k") && e.contains(says), "{args:?}: {e}");
        }
    }
}
