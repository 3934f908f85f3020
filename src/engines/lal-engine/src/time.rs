//! `timestamp v, "pattern"`: the subset of Java's `SimpleDateFormat` that log timestamps use,
//! parsed in UTC (SkyWalking uses the JVM's zone; hotrule pins UTC so a result never depends on
//! the host). Letters: `y`, `M` (numeric, or `MMM` month names), `d`, `H`, `h` with `a`, `m`,
//! `s`, `S` (milliseconds), `Z` / `X` (zone offsets); `'...'` quotes literals. As in Java, text
//! after the pattern is ignored.

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    Field(char, usize),
    Literal(String),
}

fn tokenize(pattern: &str) -> Result<Vec<Item>, String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut items = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            let mut literal = String::new();
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                literal.push(chars[i]);
                i += 1;
            }
            i += 1;
            items.push(Item::Literal(if literal.is_empty() {
                "'".into()
            } else {
                literal
            }));
        } else if c.is_ascii_alphabetic() {
            if !"yMdHhmsSaZXE".contains(c) {
                return Err(format!("pattern letter '{c}' is not supported"));
            }
            let start = i;
            while i < chars.len() && chars[i] == c {
                i += 1;
            }
            items.push(Item::Field(c, i - start));
        } else {
            items.push(Item::Literal(c.to_string()));
            i += 1;
        }
    }
    Ok(items)
}

/// Parses `text` with `pattern`; epoch milliseconds in UTC.
pub fn parse(text: &str, pattern: &str) -> Result<i64, String> {
    let items = tokenize(pattern)?;
    let bytes = text.as_bytes();
    let mut pos = 0;
    let (mut year, mut month, mut day) = (1970_i64, 1_i64, 1_i64);
    let (mut hour, mut minute, mut second, mut millis) = (0_i64, 0_i64, 0_i64, 0_i64);
    let mut pm: Option<bool> = None;
    let mut offset_minutes = 0_i64;
    for (index, item) in items.iter().enumerate() {
        match item {
            Item::Literal(literal) => {
                if !text[pos..].starts_with(literal.as_str()) {
                    return Err(format!("expected '{literal}' at offset {pos}"));
                }
                pos += literal.len();
            }
            Item::Field('M', count) if *count >= 3 => {
                let rest = text[pos..].to_ascii_lowercase();
                let found = MONTHS
                    .iter()
                    .position(|m| rest.starts_with(m))
                    .ok_or_else(|| format!("expected a month name at offset {pos}"))?;
                month = found as i64 + 1;
                pos += 3;
                // A full month name ("January") is consumed whole.
                while pos < bytes.len() && bytes[pos].is_ascii_alphabetic() {
                    pos += 1;
                }
            }
            Item::Field('E', _) => {
                while pos < bytes.len() && bytes[pos].is_ascii_alphabetic() {
                    pos += 1;
                }
            }
            Item::Field('a', _) => {
                let rest = text[pos..].to_ascii_lowercase();
                pm = Some(if rest.starts_with("pm") {
                    true
                } else if rest.starts_with("am") {
                    false
                } else {
                    return Err(format!("expected AM or PM at offset {pos}"));
                });
                pos += 2;
            }
            Item::Field('Z' | 'X', _) => {
                if text[pos..].starts_with('Z') {
                    pos += 1;
                    continue;
                }
                let sign = match bytes.get(pos) {
                    Some(b'+') => 1,
                    Some(b'-') => -1,
                    _ => return Err(format!("expected a zone offset at offset {pos}")),
                };
                pos += 1;
                let hours = digits(bytes, &mut pos, Some(2))?;
                if bytes.get(pos) == Some(&b':') {
                    pos += 1;
                }
                let minutes = if bytes.get(pos).is_some_and(u8::is_ascii_digit) {
                    digits(bytes, &mut pos, Some(2))?
                } else {
                    0
                };
                offset_minutes = sign * (hours * 60 + minutes);
            }
            Item::Field(letter, count) => {
                // Adjacent numeric fields (`yyyyMMdd`) take exactly their width.
                let adjacent = matches!(items.get(index + 1), Some(Item::Field(..)));
                let width = adjacent.then_some(*count);
                let value = digits(bytes, &mut pos, width)?;
                match letter {
                    'y' => year = if *count == 2 { 2000 + value } else { value },
                    'M' => month = value,
                    'd' => day = value,
                    'H' | 'h' => hour = value,
                    'm' => minute = value,
                    's' => second = value,
                    'S' => millis = value,
                    _ => {}
                }
            }
        }
    }
    if pm == Some(true) && hour < 12 {
        hour += 12;
    } else if pm == Some(false) && hour == 12 {
        hour = 0;
    }
    // SimpleDateFormat is lenient: out-of-range fields roll over, which the day arithmetic does.
    // Fields are at most 9 digits, so this fits in i128; the result must fit in i64.
    let days = days_from_civil(year.into(), month.into(), 1) + i128::from(day) - 1;
    let minutes =
        (days * 24 + i128::from(hour)) * 60 + i128::from(minute) - i128::from(offset_minutes);
    let millis = minutes * 60_000 + i128::from(second) * 1000 + i128::from(millis);
    i64::try_from(millis).map_err(|_| "the date is out of range".to_owned())
}

fn digits(bytes: &[u8], pos: &mut usize, width: Option<usize>) -> Result<i64, String> {
    let start = *pos;
    // At most 9 digits per field, so the date arithmetic cannot overflow.
    let limit = (start + width.unwrap_or(9).min(9)).min(bytes.len());
    while *pos < limit && bytes[*pos].is_ascii_digit() {
        *pos += 1;
    }
    if *pos == start {
        return Err(format!("expected digits at offset {start}"));
    }
    std::str::from_utf8(&bytes[start..*pos])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("number too large at offset {start}"))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (months may overflow; Howard Hinnant).
fn days_from_civil(year: i128, month: i128, day: i128) -> i128 {
    let year = year + (month - 1).div_euclid(12);
    let month = (month - 1).rem_euclid(12) + 1;
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn common_log_patterns() {
        assert_eq!(
            parse("2021/01/01 00:00:00", "yyyy/MM/dd HH:mm:ss"),
            Ok(1_609_459_200_000)
        );
        assert_eq!(
            parse("2024-02-29T12:34:56.789Z", "yyyy-MM-dd'T'HH:mm:ss.SSSX"),
            Ok(1_709_210_096_789)
        );
        assert_eq!(
            parse("01/Jan/2021:01:00:00 +0100", "dd/MMM/yyyy:HH:mm:ss Z"),
            Ok(1_609_459_200_000)
        );
        assert_eq!(parse("20210101", "yyyyMMdd"), Ok(1_609_459_200_000));
        assert_eq!(
            parse("2021/01/01 00:00:00 trailing", "yyyy/MM/dd HH:mm:ss"),
            Ok(1_609_459_200_000)
        );
        assert!(parse("yesterday", "yyyy/MM/dd").is_err());
        // Huge fields neither overflow nor panic.
        assert!(parse("999999999999/99/99", "yyyy/MM/dd").is_err());
        assert!(parse("9999999/999999999/999999999", "yyyy/MM/dd").is_ok());
    }
}
