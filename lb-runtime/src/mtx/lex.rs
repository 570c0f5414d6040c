//! Byte-level lexing of Matrix Market text: lines, whitespace-separated tokens, and the integers
//! and decimals that fill them, parsed by hand in their common forms and by `str::parse` in the
//! rest, so every value is bit-identical to what `str::parse` gives.

/// The whitespace that separates tokens: ASCII space, tab, carriage return, vertical tab and
/// form feed (a Matrix Market file is ASCII; `\r` makes CRLF files read like LF ones).
pub(crate) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | 0x0b | 0x0c)
}

/// The 1-based lines of `text` from `pos` on, numbered from `line`: the text of each without
/// its `\n`. Like `str::lines`, a final `\n` ends the last line rather than starting an empty one.
pub(crate) struct Lines<'a> {
    text: &'a [u8],
    pos: usize,
    line: usize,
}

impl<'a> Lines<'a> {
    pub(crate) fn new(text: &'a [u8], line: usize) -> Lines<'a> {
        Lines { text, pos: 0, line }
    }

    /// The offset in the text where the next line starts.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// The number the next line will have.
    pub(crate) fn line(&self) -> usize {
        self.line
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = (usize, &'a [u8]);

    fn next(&mut self) -> Option<(usize, &'a [u8])> {
        if self.pos >= self.text.len() {
            return None;
        }
        let rest = &self.text[self.pos..];
        let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        self.pos += (end + 1).min(rest.len());
        let line = self.line;
        self.line += 1;
        Some((line, &rest[..end]))
    }
}

/// The number of lines `str::lines` would count in `text`.
pub(crate) fn count_lines(text: &[u8]) -> usize {
    let newlines = memchr::memchr_iter(b'\n', text).count();
    newlines + usize::from(text.last().is_some_and(|&b| b != b'\n'))
}

/// A line that holds data: not blank and not a `%` comment.
pub(crate) fn is_content(line: &[u8]) -> bool {
    line.iter()
        .find(|&&b| !is_space(b))
        .is_some_and(|&b| b != b'%')
}

/// The whitespace-separated tokens of a line.
pub(crate) fn tokens(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|&b| is_space(b)).filter(|t| !t.is_empty())
}

/// A token as text for a message: lossy where it is not UTF-8.
pub(crate) fn show(token: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(token)
}

/// A non-negative integer as `usize::from_str` reads it (an optional `+`, then digits, no
/// overflow); `None` for anything else.
pub(crate) fn parse_usize(token: &[u8]) -> Option<usize> {
    // Up to 19 digits cannot overflow a u64; longer or signed tokens take the library's path.
    if !token.is_empty() && token.len() <= 19 && token.iter().all(u8::is_ascii_digit) {
        let n = token
            .iter()
            .fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'));
        return usize::try_from(n).ok();
    }
    std::str::from_utf8(token).ok()?.parse().ok()
}

/// Whether a token is an integer that fits an i64 or a u64 (the `integer` field admits both:
/// 64-bit counts and identifiers are common).
pub(crate) fn is_integer(token: &[u8]) -> bool {
    let digits = match token.first() {
        Some(b'+' | b'-') => &token[1..],
        _ => token,
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return false;
    }
    if digits.len() <= 18 {
        return true;
    }
    let Ok(text) = std::str::from_utf8(token) else {
        return false;
    };
    text.parse::<i64>().is_ok() || text.parse::<u64>().is_ok()
}

/// Exact powers of ten in f64: 10^22 is the largest with a 53-bit significand.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// A decimal `[+-]digits[.digits][(e|E)[+-]digits]` whose significand fits 53 bits and whose
/// power of ten is at most 22 in magnitude, correctly rounded to f64: both the significand and
/// the power are exact f64s, so one IEEE multiplication or division rounds the exact value once
/// (Clinger's fast path). `None` for any other token, which the caller hands to `str::parse`.
pub(crate) fn fast_decimal(token: &[u8]) -> Option<f64> {
    let (negative, rest) = match token.first() {
        Some(b'-') => (true, &token[1..]),
        Some(b'+') => (false, &token[1..]),
        _ => (false, token),
    };
    // Wrapping arithmetic: a significand of more than 19 digits may wrap, and is refused below.
    let mut significand = 0u64;
    let mut digits = 0usize;
    for &b in rest {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        significand = significand.wrapping_mul(10).wrapping_add(u64::from(d));
        digits += 1;
    }
    let mut rest = &rest[digits..];
    let mut scale = 0i64;
    if let Some((b'.', tail)) = rest.split_first() {
        let mut fraction = 0usize;
        for &b in tail {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            significand = significand.wrapping_mul(10).wrapping_add(u64::from(d));
            fraction += 1;
        }
        digits += fraction;
        scale = -(fraction as i64);
        rest = &tail[fraction..];
    }
    if digits == 0 || digits > 19 {
        return None;
    }
    if let Some((&(b'e' | b'E'), tail)) = rest.split_first() {
        let (sign, exp_digits) = match tail.first() {
            Some(b'-') => (-1, &tail[1..]),
            Some(b'+') => (1, &tail[1..]),
            _ => (1, tail),
        };
        if exp_digits.is_empty() || exp_digits.len() > 4 {
            return None;
        }
        let mut exp = 0i64;
        for &d in exp_digits {
            if !d.is_ascii_digit() {
                return None;
            }
            exp = exp * 10 + i64::from(d - b'0');
        }
        scale += sign * exp;
        rest = &[];
    }
    if !rest.is_empty() || significand > 1 << 53 {
        return None;
    }
    let m = significand as f64;
    let magnitude = if significand == 0 {
        0.0
    } else if (0..=22).contains(&scale) {
        m * POW10[scale as usize]
    } else if (-22..0).contains(&scale) {
        m / POW10[(-scale) as usize]
    } else {
        return None;
    };
    Some(if negative { -magnitude } else { magnitude })
}

/// [`fast_decimal`] rounded to f32, or `None` where rounding twice could differ from rounding
/// once. The f64 `y` is the nearest f64 to the exact value `x`; every f32 midpoint is an f64, so
/// none lies strictly between `x` and `y`, and rounding `y` to f32 gives what rounding `x` does
/// unless `y` is itself a midpoint (then the tie may break the wrong way). Fast-path values lie
/// in [1e-22, 2^53·1e22], inside f32's normal range, where a midpoint is an f64 whose 29
/// significand bits below f32's 24 read exactly `1000…0`.
pub(crate) fn fast_decimal_f32(token: &[u8]) -> Option<f32> {
    let y = fast_decimal(token)?;
    const LOW: u64 = (1 << 29) - 1;
    if y.to_bits() & LOW == 1 << 28 {
        return None;
    }
    Some(y as f32)
}
