//! Time as runs store it: microseconds since the Unix epoch (point timestamps, the Delta
//! log's modification times) and RFC 3339 text (manifests). The writer and the Delta
//! table both read the clock here.

pub fn now_micros() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

pub fn rfc3339(micros: i64) -> String {
    chrono::DateTime::from_timestamp_micros(micros)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// Microseconds since the epoch of RFC 3339 text; `None` for text that is not RFC 3339.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.timestamp_micros())
}
