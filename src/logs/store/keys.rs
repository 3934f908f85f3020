//! The key layout of the `logs` key space, in one place.
//!
//! - `l | timestamp(u64) | sequence(u64)`: one kept log. Time first, so a time range is one
//!   contiguous key range (one scan for a read, one delete-range for retention); the sequence
//!   orders logs of one millisecond by arrival and makes every key unique.
//! - `s`: the sequence record ([`super::codec::encode_sequence`]): the next sequence this node
//!   assigns, written in the same synced batch as the logs that used the ones before it, so a
//!   restarted node never assigns a sequence twice.
//!
//! Integers are big-endian; the timestamp has its sign bit flipped so byte order is numeric
//! order (logs before 1970 sort first).

use crate::logs::LogCursor;

pub const LOG_PREFIX: u8 = b'l';
pub const SEQUENCE_KEY: &[u8] = b"s";

/// The length of a log key.
pub const LOG_KEY_LEN: usize = 17;

/// The key of the log at `cursor`.
pub fn log_key(cursor: LogCursor) -> Vec<u8> {
    let mut out = Vec::with_capacity(LOG_KEY_LEN);
    out.push(LOG_PREFIX);
    out.extend_from_slice(&((cursor.timestamp_ms as u64) ^ (1 << 63)).to_be_bytes());
    out.extend_from_slice(&cursor.sequence.to_be_bytes());
    out
}

/// The position a log key names, if it is one.
pub fn decode_log_key(key: &[u8]) -> Option<LogCursor> {
    if key.len() != LOG_KEY_LEN || key[0] != LOG_PREFIX {
        return None;
    }
    let mut ts = [0u8; 8];
    ts.copy_from_slice(&key[1..9]);
    let mut seq = [0u8; 8];
    seq.copy_from_slice(&key[9..17]);
    Some(LogCursor { timestamp_ms: (u64::from_be_bytes(ts) ^ (1 << 63)) as i64, sequence: u64::from_be_bytes(seq) })
}

/// The first position at or after every log of millisecond `ms`.
pub fn first_of(ms: i64) -> LogCursor {
    LogCursor { timestamp_ms: ms, sequence: 0 }
}

/// The position right after `cursor` (the smallest one greater than it), saturating at the last
/// position.
pub fn successor(cursor: LogCursor) -> LogCursor {
    match cursor.sequence.checked_add(1) {
        Some(sequence) => LogCursor { sequence, ..cursor },
        None => match cursor.timestamp_ms.checked_add(1) {
            Some(ms) => first_of(ms),
            None => cursor,
        },
    }
}

/// The exclusive upper key of every log key: `l` + 1.
pub fn logs_end() -> Vec<u8> {
    vec![LOG_PREFIX + 1]
}

/// The first key of the log range.
pub fn logs_start() -> Vec<u8> {
    vec![LOG_PREFIX]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_order_by_timestamp_then_sequence_and_decode_back() {
        let positions = [
            LogCursor { timestamp_ms: i64::MIN, sequence: 0 },
            LogCursor { timestamp_ms: -1, sequence: 9 },
            LogCursor { timestamp_ms: 0, sequence: 0 },
            LogCursor { timestamp_ms: 0, sequence: 1 },
            LogCursor { timestamp_ms: 1, sequence: 0 },
            LogCursor { timestamp_ms: 1_700_000_000_000, sequence: u64::MAX },
            LogCursor { timestamp_ms: 1_700_000_000_001, sequence: 0 },
            LogCursor { timestamp_ms: i64::MAX, sequence: u64::MAX },
        ];
        let keys: Vec<Vec<u8>> = positions.iter().map(|p| log_key(*p)).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "keys are in position order");
        for (key, position) in keys.iter().zip(positions) {
            assert_eq!(decode_log_key(key), Some(position));
            assert!(key.as_slice() > logs_start().as_slice() && key.as_slice() < logs_end().as_slice());
        }
        assert!(SEQUENCE_KEY > logs_end().as_slice(), "the sequence record is outside the log range");
        assert_eq!(decode_log_key(b"l123"), None);
        assert_eq!(decode_log_key(SEQUENCE_KEY), None);
    }

    #[test]
    fn successor_is_the_next_position() {
        assert_eq!(successor(LogCursor { timestamp_ms: 5, sequence: 7 }), LogCursor { timestamp_ms: 5, sequence: 8 });
        assert_eq!(successor(LogCursor { timestamp_ms: 5, sequence: u64::MAX }), first_of(6));
        let last = LogCursor { timestamp_ms: i64::MAX, sequence: u64::MAX };
        assert_eq!(successor(last), last);
    }
}
