//! Wall-clock time as unix seconds and RFC 3339 UTC strings, for manifests and API responses.

/// Seconds since the unix epoch (0 if the clock is before it).
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The current time as RFC 3339 UTC.
pub fn now_rfc3339() -> String {
    rfc3339_from_unix(now_unix())
}

/// Formats unix seconds as `YYYY-MM-DDTHH:MM:SSZ` (the `time` crate's RFC 3339); a time past
/// what it can represent (year 9999) is shown as the epoch.
pub fn rfc3339_from_unix(secs: u64) -> String {
    use time::format_description::well_known::Rfc3339;
    let epoch = "1970-01-01T00:00:00Z";
    i64::try_from(secs)
        .ok()
        .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok())
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| epoch.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(rfc3339_from_unix(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_from_unix(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_from_unix(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339_from_unix(1_795_000_000), "2026-11-18T11:06:40Z");
        assert_eq!(rfc3339_from_unix(4_102_444_799), "2099-12-31T23:59:59Z");
        assert_eq!(rfc3339_from_unix(u64::MAX), "1970-01-01T00:00:00Z");
    }
}
