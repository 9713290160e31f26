//! Event timestamps: ISO 8601 / RFC 3339 text to microseconds since the Unix epoch. Pure.
//!
//! Accepted: `YYYY-MM-DD`, optionally `T` (or a space) and `HH:MM[:SS[.fraction]]`, optionally
//! `Z` or an offset `±HH[:MM]`. Without an offset the time is read as UTC (writers here log
//! UTC). Anything else is not a timestamp: the event keeps a NULL `ts` and its line is still an
//! event (the control plane only requires the key).

/// Days from 1970-01-01 to the given civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn digits(&mut self, n: usize) -> Option<i64> {
        let s = self.b.get(self.i..self.i + n)?;
        if !s.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.i += n;
        Some(s.iter().fold(0, |v, d| v * 10 + i64::from(d - b'0')))
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }
}

/// Microseconds since 1970-01-01T00:00:00Z, or `None` if `s` is not a timestamp.
pub fn parse_timestamp(s: &str) -> Option<i64> {
    let mut c = Cursor { b: s.as_bytes(), i: 0 };
    let y = c.digits(4)?;
    if !c.eat(b'-') {
        return None;
    }
    let mo = c.digits(2)?;
    if !c.eat(b'-') {
        return None;
    }
    let d = c.digits(2)?;
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || y < 1 {
        return None;
    }
    let mut micros = days_from_civil(y, mo, d) * 86_400_000_000;
    if c.peek().is_none() {
        return Some(micros);
    }
    if !(c.eat(b'T') || c.eat(b't') || c.eat(b' ')) {
        return None;
    }
    let h = c.digits(2)?;
    if !c.eat(b':') {
        return None;
    }
    let mi = c.digits(2)?;
    let mut sec = 0;
    let mut frac_us = 0;
    if c.eat(b':') {
        sec = c.digits(2)?;
        if c.eat(b'.') || c.eat(b',') {
            let start = c.i;
            let mut scale = 100_000;
            while let Some(dg) = c.peek().filter(u8::is_ascii_digit) {
                frac_us += i64::from(dg - b'0') * scale;
                scale /= 10;
                c.i += 1;
            }
            if c.i == start {
                return None;
            }
        }
    }
    // 24:00:00 and leap seconds are not timestamps writers produce.
    if h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    micros += ((h * 60 + mi) * 60 + sec) * 1_000_000 + frac_us;
    match c.peek() {
        None => Some(micros),
        Some(b'Z' | b'z') => {
            c.i += 1;
            (c.peek().is_none()).then_some(micros)
        }
        Some(sign @ (b'+' | b'-')) => {
            c.i += 1;
            let oh = c.digits(2)?;
            let om = if c.eat(b':') { c.digits(2)? } else { c.digits(2).unwrap_or(0) };
            if c.peek().is_some() || oh > 23 || om > 59 {
                return None;
            }
            let offset = (oh * 60 + om) * 60_000_000;
            Some(if sign == b'+' { micros - offset } else { micros + offset })
        }
        _ => None,
    }
}

/// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01).
pub const POSTGRES_EPOCH_OFFSET_US: i64 = 946_684_800_000_000;

/// The civil date of a day number (inverse of `days_from_civil`).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Microseconds since the Unix epoch as RFC 3339 UTC with microseconds
/// (`2026-02-23T14:30:26.100000Z`), the form `timestamptz` output and JavaScript both read.
pub fn format_timestamp(us: i64) -> String {
    let secs = us.div_euclid(1_000_000);
    let micros = us.rem_euclid(1_000_000);
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        return format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}Z", sod / 3600, (sod % 3600) / 60, sod % 60);
    }
    // Plans carry a timestamp per call and event: written digit by digit, not through fmt.
    let mut out = String::with_capacity(27);
    push_digits(&mut out, y, 4);
    for (sep, v) in [('-', m), ('-', d), ('T', sod / 3600), (':', (sod % 3600) / 60), (':', sod % 60)] {
        out.push(sep);
        push_digits(&mut out, v, 2);
    }
    out.push('.');
    push_digits(&mut out, micros, 6);
    out.push('Z');
    out
}

/// The last `n` decimal digits of `v` (non-negative), zero-padded.
fn push_digits(out: &mut String, v: i64, n: u32) {
    for k in (0..n).rev() {
        let digit = (v / 10i64.pow(k)) % 10;
        out.push(char::from(b'0' + u8::try_from(digit).unwrap_or(0)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rfc_3339_as_writers_produce_it() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_timestamp("2026-02-23T14:30:22.101Z"), Some(1_771_857_022_101_000));
        assert_eq!(parse_timestamp("2026-02-23T14:30:22.101123456Z"), Some(1_771_857_022_101_123));
        assert_eq!(parse_timestamp("2026-02-23T15:30:22.101+01:00"), Some(1_771_857_022_101_000));
        assert_eq!(parse_timestamp("2026-02-23 14:30:22.101+0000"), Some(1_771_857_022_101_000));
        assert_eq!(parse_timestamp("2026-02-23T14:30:22"), Some(1_771_857_022_000_000));
        assert_eq!(parse_timestamp("2026-02-23T14:30Z"), Some(1_771_857_000_000_000));
        assert_eq!(parse_timestamp("2000-01-01"), Some(POSTGRES_EPOCH_OFFSET_US));
        assert_eq!(parse_timestamp("2024-02-29T00:00:00Z"), Some(1_709_164_800_000_000));
        assert_eq!(parse_timestamp("1969-12-31T23:59:59Z"), Some(-1_000_000));
    }

    #[test]
    fn refuses_what_is_not_a_timestamp() {
        for bad in [
            "",
            "yesterday",
            "2026-02-30T00:00:00Z",
            "2023-02-29",
            "2026-13-01",
            "2026-02-23T24:00:00Z",
            "2026-02-23T14:30:60Z",
            "2026-02-23T14:30:22.Z",
            "2026-02-23T14:30:22Zjunk",
            "2026-02-23X14:30",
            "0000-01-01",
            "26-02-23",
            "1771857022",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad}");
        }
    }

    #[test]
    fn formats_round_trip() {
        for t in [
            "2026-02-23T14:30:26.100000Z",
            "1970-01-01T00:00:00.000000Z",
            "1969-12-31T23:59:59.999999Z",
            "2000-02-29T12:00:00.000001Z",
        ] {
            let us = parse_timestamp(t).unwrap_or_else(|| panic!("{t}"));
            assert_eq!(format_timestamp(us), t);
        }
    }
}
