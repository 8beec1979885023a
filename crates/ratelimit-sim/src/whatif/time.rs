//! Log timestamps: nginx's `$time_local`, ISO 8601 (ALB, Envoy, JSON) and
//! Unix seconds, to nanoseconds since the epoch; and minutes back to text.

const NS: i64 = 1_000_000_000;

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day since 1970-01-01: `(year, month, day)`.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn num(s: &str) -> Option<i64> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// Seconds and nanoseconds since the epoch, as an unsigned nanosecond count.
fn to_ns(secs: i64, nanos: i64) -> Option<u64> {
    u64::try_from(secs.checked_mul(NS)?.checked_add(nanos)?).ok()
}

/// `+0200`, `-07:00`, `Z`: the offset east of UTC, in seconds.
fn offset(s: &str) -> Option<i64> {
    if s.is_empty() || s == "Z" || s == "z" {
        return Some(0);
    }
    let sign = match s.as_bytes()[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits: String = s[1..].chars().filter(|c| *c != ':').collect();
    if digits.len() != 4 {
        return None;
    }
    Some(sign * (num(&digits[..2])? * 3600 + num(&digits[2..])? * 60))
}

/// `.186641` after the seconds: nanoseconds.
fn fraction(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('.').or_else(|| s.strip_prefix(','))?;
    let digits = &digits[..digits.len().min(9)];
    let n = num(digits)?;
    Some(n * 10i64.pow(9 - digits.len() as u32))
}

thread_local! {
    /// The last `$time_local` parsed and its value: a log has many lines
    /// a second.
    static LAST: std::cell::RefCell<(String, Option<u64>)> = const {
        std::cell::RefCell::new((String::new(), None))
    };
}

/// nginx's `$time_local`: `10/Oct/2000:13:55:36 -0700`.
pub fn parse_nginx(s: &str) -> Option<u64> {
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if last.0 != s {
            last.0.clear();
            last.0.push_str(s);
            last.1 = parse_nginx_uncached(s);
        }
        last.1
    })
}

fn parse_nginx_uncached(s: &str) -> Option<u64> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (stamp, zone) = s.split_once(' ').unwrap_or((s, ""));
    let mut it = stamp.splitn(3, '/');
    let (d, mon, rest) = (it.next()?, it.next()?, it.next()?);
    let m = MONTHS.iter().position(|x| *x == mon)? as i64 + 1;
    let mut it = rest.split(':');
    let (y, hh, mm, ss) = (it.next()?, it.next()?, it.next()?, it.next()?);
    let (ss, frac) = ss.split_at(ss.find('.').unwrap_or(ss.len()));
    let secs =
        days_from_civil(num(y)?, m, num(d)?) * 86_400 + num(hh)? * 3600 + num(mm)? * 60 + num(ss)?
            - offset(zone.trim())?;
    to_ns(secs, if frac.is_empty() { 0 } else { fraction(frac)? })
}

/// ISO 8601 / RFC 3339: `2018-07-02T22:23:00.186641Z`, `...+02:00`.
pub fn parse_iso(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.len() < 19 || !s.is_char_boundary(19) {
        return None;
    }
    let (date, rest) = s.split_at(10);
    let mut it = date.split('-');
    let (y, m, d) = (num(it.next()?)?, num(it.next()?)?, num(it.next()?)?);
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    let (hh, mm, ss) = (num(&rest[0..2])?, num(&rest[3..5])?, num(&rest[6..8])?);
    let tail = &rest[8..];
    let frac_len = tail
        .find(|c: char| c != '.' && c != ',' && !c.is_ascii_digit())
        .unwrap_or(tail.len());
    let nanos = match &tail[..frac_len] {
        "" => 0,
        f => fraction(f)?,
    };
    let secs =
        days_from_civil(y, m, d) * 86_400 + hh * 3600 + mm * 60 + ss - offset(&tail[frac_len..])?;
    to_ns(secs, nanos)
}

/// Unix time as a number: seconds (`1700000000.123`, nginx's `$msec`), or
/// milliseconds when above 10^11 (a JSON logger's `Date.now()`).
pub fn parse_epoch(x: f64) -> Option<u64> {
    if !x.is_finite() || x < 0.0 {
        return None;
    }
    let ns = if x > 1e11 { x * 1e6 } else { x * 1e9 };
    Some(ns as u64)
}

/// Any of the forms above.
pub fn parse_any(s: &str) -> Option<u64> {
    let s = s.trim().trim_start_matches('[').trim_end_matches(']');
    parse_iso(s)
        .or_else(|| parse_nginx(s))
        .or_else(|| s.parse::<f64>().ok().and_then(parse_epoch))
}

/// A minute (minutes since the epoch) as `2026-12-02 13:55` (UTC).
pub fn minute_text(minute: u64) -> String {
    let secs = minute as i64 * 60;
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let of_day = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        of_day / 3600,
        of_day % 3600 / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_agree() {
        let t = 971_211_336 * 1_000_000_000; // 2000-10-10T20:55:36Z
        assert_eq!(parse_nginx("10/Oct/2000:13:55:36 -0700"), Some(t));
        assert_eq!(parse_iso("2000-10-10T20:55:36Z"), Some(t));
        assert_eq!(parse_iso("2000-10-10T22:55:36+02:00"), Some(t));
        assert_eq!(parse_iso("2000-10-10T20:55:36.5Z"), Some(t + 500_000_000));
        assert_eq!(parse_any("971211336.250"), Some(t + 250_000_000));
        assert_eq!(parse_any("[2000-10-10T20:55:36.000Z]"), Some(t));
        assert_eq!(minute_text(t / 60_000_000_000), "2000-10-10 20:55");
        assert_eq!(parse_nginx("10/Foo/2000:13:55:36 -0700"), None);
    }
}
