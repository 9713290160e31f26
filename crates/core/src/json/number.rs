//! JavaScript `Number.prototype.toString()` for finite doubles, as `JSON.stringify` prints them.
//!
//! The control plane computes its checkpoint CRC over JavaScript's serialisation, so every
//! number must print exactly as V8 prints it: the shortest digit string that round-trips
//! (Rust's `{:e}` formatting yields the same shortest digits), laid out by ECMAScript's
//! Number::toString rules (plain notation for exponents in [-7, 21), exponent form otherwise,
//! `-0` printed as `0`).

use std::fmt::Write;

/// Appends the JSON text of `x` as JavaScript's `JSON.stringify` would write it.
/// Non-finite values (which JSON cannot carry) are written as `null`, as JavaScript does.
pub fn write_js_number(x: f64, out: &mut String) {
    if !x.is_finite() {
        out.push_str("null");
        return;
    }
    if x == 0.0 {
        // Covers -0 as well: JavaScript prints both as "0".
        out.push('0');
        return;
    }
    if x < 0.0 {
        out.push('-');
    }
    let magnitude = x.abs();

    // Small integers are by far the most common numbers in checkpoints; skip the float formatter.
    if magnitude < 1e15 && magnitude.fract() == 0.0 {
        // Exact: the value is an integer below 2^53.
        push_u64(out, magnitude as u64);
        return;
    }

    // `{:e}` yields the shortest round-trip digits; format into the stack, not the heap.
    let mut buf = StackBuf { bytes: [0; 40], len: 0 };
    let _ = write!(buf, "{magnitude:e}");
    let sci = std::str::from_utf8(&buf.bytes[..buf.len]).unwrap_or("0e0");
    let (mantissa, exponent) = match sci.split_once('e') {
        Some(parts) => parts,
        None => (sci, "0"),
    };
    // `{:e}` of a finite non-zero double always has an integer exponent; fall back to 0 rather
    // than panic if that ever changes.
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let mut digits = [0u8; 40];
    let mut n = 0;
    for b in mantissa.bytes().filter(|b| *b != b'.') {
        if n < digits.len() {
            digits[n] = b;
            n += 1;
        }
    }
    ties_to_even(&mut digits[..n], exponent, magnitude);
    layout_digits(std::str::from_utf8(&digits[..n]).unwrap_or("0"), exponent + 1, out);
}

/// V8 breaks a tie between two shortest spellings, for a double exactly halfway between them,
/// towards the even last digit (ECMAScript's Number::toString leaves the choice open and
/// recommends that); Rust's formatter takes the upper one. `1284054217024512.25` prints as
/// `1284054217024512.2` in V8 and `…512.3` in Rust. Only 16- and 17-digit spellings can tie: two
/// shorter decimals are never as close as one step of a double. `digits` (ASCII, no point,
/// `d.ddd × 10^exponent`) is changed in place when `magnitude` is such a tie.
fn ties_to_even(digits: &mut [u8], exponent: i32, magnitude: f64) {
    let Some(&last) = digits.last() else { return };
    if digits.len() < 16 || (last - b'0').is_multiple_of(2) {
        return;
    }
    for step in [-1i8, 1] {
        let Some(other) = last.checked_add_signed(step).filter(u8::is_ascii_digit) else { continue };
        let spelled = |tail: &[u8]| -> String {
            let mut s = String::with_capacity(digits.len() + tail.len() + 8);
            s.push(char::from(digits[0]));
            s.push('.');
            s.extend(digits[1..digits.len() - 1].iter().map(|&b| char::from(b)));
            s.extend(tail.iter().map(|&b| char::from(b)));
            let _ = write!(s, "e{exponent}");
            s
        };
        // The even neighbour must read back as the same double...
        if spelled(&[other]).parse::<f64>().ok() != Some(magnitude) {
            continue;
        }
        // ...and the double must be exactly halfway: its exact decimal expansion (at most 767
        // significant digits) is the lower spelling followed by a 5.
        let low = last.min(other);
        let half = spelled(&[low, b'5']);
        let (half_digits, _) = half.split_once('e').unwrap_or((&half, ""));
        let exact = format!("{magnitude:.800e}");
        let (exact_digits, _) = exact.split_once('e').unwrap_or((&exact, ""));
        let rest = exact_digits.strip_prefix(half_digits);
        if rest.is_some_and(|r| r.bytes().all(|b| b == b'0')) {
            if let Some(d) = digits.last_mut() {
                *d = other;
            }
            return;
        }
    }
}

/// A fixed buffer `write!` can target; output beyond its size is dropped (never needed: a
/// double's `{:e}` form is at most 24 bytes).
struct StackBuf {
    bytes: [u8; 40],
    len: usize,
}

impl Write for StackBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let room = self.bytes.len() - self.len;
        let take = s.len().min(room);
        self.bytes[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        Ok(())
    }
}

/// Appends the decimal digits of `v` (no `fmt` machinery on the hot path).
pub fn push_u64(out: &mut String, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    // ASCII digits only.
    out.push_str(std::str::from_utf8(&buf[i..]).unwrap_or("0"));
}

/// ECMAScript Number::toString steps 6-10: `digits` are the significant digits s (k of them),
/// and the value is s × 10^(n−k).
fn layout_digits(digits: &str, n: i32, out: &mut String) {
    let k = digits.len() as i32;
    if k <= n && n <= 21 {
        out.push_str(digits);
        push_zeros(out, n - k);
    } else if 0 < n && n <= 21 {
        let (int_part, frac_part) = digits.split_at(n as usize);
        out.push_str(int_part);
        out.push('.');
        out.push_str(frac_part);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        push_zeros(out, -n);
        out.push_str(digits);
    } else {
        let e = n - 1;
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        out.push('e');
        out.push(if e < 0 { '-' } else { '+' });
        push_u64(out, u64::from(e.unsigned_abs()));
    }
}

fn push_zeros(out: &mut String, count: i32) {
    for _ in 0..count.max(0) {
        out.push('0');
    }
}

/// Convenience for tests and callers that want an owned string.
pub fn js_number_to_string(x: f64) -> String {
    let mut s = String::new();
    write_js_number(x, &mut s);
    s
}

#[cfg(test)]
mod tests {
    use super::js_number_to_string as js;

    #[test]
    fn integers_print_without_fraction() {
        assert_eq!(js(1.0), "1");
        assert_eq!(js(0.0), "0");
        assert_eq!(js(-0.0), "0");
        assert_eq!(js(-42.0), "-42");
        assert_eq!(js(123456789012345.0), "123456789012345");
    }

    #[test]
    fn large_integers_round_to_the_nearest_double_and_print_like_v8() {
        // 12345678901234567890 is not representable; V8 prints the nearest double this way.
        assert_eq!(js(12345678901234567890u64 as f64), "12345678901234567000");
        assert_eq!(js(9007199254740993.0), "9007199254740992");
        assert_eq!(js(1e21), "1e+21");
        assert_eq!(js(1e20), "100000000000000000000");
        assert_eq!(js(1.5e21), "1.5e+21");
        assert_eq!(js(123e20), "1.23e+22");
    }

    #[test]
    fn fractions_use_shortest_round_trip_digits() {
        assert_eq!(js(0.1), "0.1");
        assert_eq!(js(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(js(1.5), "1.5");
        assert_eq!(js(-2.25), "-2.25");
        assert_eq!(js(123.456), "123.456");
        assert_eq!(js(1e15 + 0.5), "1000000000000000.5");
    }

    #[test]
    fn small_magnitudes_switch_to_exponent_below_1e_minus_6() {
        assert_eq!(js(0.000001), "0.000001");
        assert_eq!(js(1e-7), "1e-7");
        assert_eq!(js(1.5e-7), "1.5e-7");
        assert_eq!(js(0.00001234), "0.00001234");
        assert_eq!(js(5e-324), "5e-324");
        assert_eq!(js(f64::MAX), "1.7976931348623157e+308");
    }

    #[test]
    fn exact_ties_between_shortest_spellings_go_to_the_even_digit_as_in_v8() {
        // Each is exactly halfway between two 17-digit spellings that both read back as it
        // (written as integer sums: the literals themselves have more digits than a double).
        let base = 1_284_054_217_024_512.0;
        assert_eq!(js(base + 0.25), "1284054217024512.2");
        assert_eq!(js(-(base + 0.25)), "-1284054217024512.2");
        assert_eq!(js(base + 0.75), "1284054217024512.8");
        // Not ties: the shortest spelling stays as Rust gives it.
        assert_eq!(js(base + 0.5), "1284054217024512.5");
        assert_eq!(js(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(js(1.7976931348623157e308), "1.7976931348623157e+308");
        assert_eq!(js(5e-324), "5e-324");
    }

    #[test]
    fn non_finite_values_serialise_as_null() {
        assert_eq!(js(f64::INFINITY), "null");
        assert_eq!(js(f64::NEG_INFINITY), "null");
        assert_eq!(js(f64::NAN), "null");
    }
}
