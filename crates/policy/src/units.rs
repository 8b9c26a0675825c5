//! Durations (`30s`, `30m`, `1h30m`, `250ms`) and sizes (`4GiB`, `16MiB`, `512k`, `100`) as people write them.

use std::time::Duration;

/// Parses `250ms`, `30s`, `30m`, `2h`, `1d` and sums like `1h30m`; a bare number is seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration".into());
    }
    if let Ok(secs) = text.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!(
                "'{text}' is not a duration; write e.g. 30s, 5m, 1h30m"
            ));
        }
        let (number, tail) = rest.split_at(digits);
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let n: u64 = number
            .parse()
            .map_err(|_| format!("'{number}' is too large"))?;
        let part = match unit {
            "ms" => Duration::from_millis(n),
            "s" | "sec" => Duration::from_secs(n),
            "m" | "min" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            "d" => Duration::from_secs(n.saturating_mul(86_400)),
            _ => {
                return Err(format!(
                    "unknown unit '{unit}' in '{text}'; use ms, s, m, h or d"
                ));
            }
        };
        total = total.saturating_add(part);
        rest = tail;
    }
    Ok(total)
}

/// Parses `4GiB`, `512MiB`, `16MB`, `64k`, `100`: binary (`KiB`) and decimal (`KB`) units; `k`/`m`/`g` alone are binary.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    if digits == 0 {
        return Err(format!(
            "'{text}' is not a size; write e.g. 4GiB, 512MiB, 64KiB"
        ));
    }
    let (number, unit) = text.split_at(digits);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("'{number}' is too large"))?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => {
            return Err(format!(
                "unknown unit '{unit}' in '{text}'; use B, KiB, MiB, GiB (or KB, MB, GB)"
            ));
        }
    };
    n.checked_mul(factor)
        .ok_or_else(|| format!("'{text}' is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("m").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        assert_eq!(parse_size("16MiB"), Ok(16 << 20));
        assert_eq!(parse_size("1MB"), Ok(1_000_000));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("100"), Ok(100));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("1ZiB").is_err());
    }
}
