//! Parsers for option values.

use std::time::Duration;

/// `300` (seconds), `90s`, `10m`, `1h 30m` or ISO 8601 `PT10M`.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    if let Ok(seconds) = text.trim().parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    let bad = || format!("{text:?} is not a duration; try 300, 90s, 10m, 1h or 7d");
    let span: jiff::Span = text.parse().map_err(|_| bad())?;
    let d = span
        .to_duration(jiff::SpanRelativeTo::days_are_24_hours())
        .map_err(|_| bad())?;
    Duration::try_from(d).map_err(|_| format!("{text:?} must not be negative"))
}

/// A point in time: RFC 3339 (`2026-11-20T10:00:00Z`) or a duration ago
/// (`1h`, `7d`).
pub(crate) fn since(text: &str) -> Result<jiff::Timestamp, String> {
    if let Ok(t) = text.parse::<jiff::Timestamp>() {
        return Ok(t);
    }
    let ago =
        duration(text).map_err(|_| format!("{text:?} is neither an RFC 3339 time nor a duration like 1h or 7d"))?;
    let ago = jiff::SignedDuration::try_from(ago).map_err(|e| e.to_string())?;
    jiff::Timestamp::now().checked_sub(ago).map_err(|e| e.to_string())
}

/// A count of workers or GPUs: a whole number, 0 or more (a negative
/// one is refused here, not taken for an option by the argument parser).
pub(crate) fn count(text: &str) -> Result<u32, String> {
    match text.trim().parse::<i64>() {
        Ok(n) if n < 0 => Err(format!("{n} is negative; a count is 0 or more")),
        Ok(n) => u32::try_from(n).map_err(|_| format!("{n} is too large")),
        Err(_) => Err(format!("{text:?} is not a whole number")),
    }
}

/// `key=value` with a non-empty key.
pub(crate) fn assignment(text: &str) -> Result<String, String> {
    match text.split_once('=') {
        Some((key, _)) if !key.trim().is_empty() => Ok(text.to_owned()),
        _ => Err(format!("{text:?}: expected KEY=VALUE, e.g. head.cpus=4")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_whole_and_not_negative() {
        assert_eq!(count("3"), Ok(3));
        assert_eq!(count("0"), Ok(0));
        assert!(count("-1").unwrap_err().contains("negative"));
        assert!(count("1.5").unwrap_err().contains("whole number"));
        assert!(count("99999999999").unwrap_err().contains("too large"));
    }

    #[test]
    fn durations_in_every_spelling() {
        assert_eq!(duration("300").unwrap(), Duration::from_secs(300));
        assert_eq!(duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(duration("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(duration("1h 30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(duration("PT2M").unwrap(), Duration::from_secs(120));
        assert_eq!(duration("7d").unwrap(), Duration::from_secs(7 * 86_400));
        assert!(duration("soon").unwrap_err().contains("not a duration"));
        assert!(duration("-5s").is_err());
    }

    #[test]
    fn since_takes_times_and_ages() {
        assert_eq!(
            since("2026-11-20T10:00:00Z").unwrap().to_string(),
            "2026-11-20T10:00:00Z"
        );
        let hour_ago = since("1h").unwrap();
        let delta = jiff::Timestamp::now().duration_since(hour_ago).as_secs();
        assert!((3599..=3601).contains(&delta), "{delta}");
        assert!(since("yesterday").is_err());
    }

    #[test]
    fn assignments_need_a_key() {
        assert!(assignment("head.cpus=4").is_ok());
        assert!(assignment("head.image=").is_ok());
        assert!(assignment("=4").is_err());
        assert!(assignment("head.cpus").is_err());
    }
}
