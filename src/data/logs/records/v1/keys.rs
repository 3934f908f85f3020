//! The key layout of the `logs` key space, in one place.
//!
//! - `l | timestamp(u64) | sequence(u64)`: one kept log. Time first, so a time range is one
//!   contiguous key range (one scan for a read, one delete-range for retention); the sequence
//!   orders logs of one millisecond by arrival and makes every key unique.
//! - `x | len(u16) service | timestamp(u64) | sequence(u64)`, empty value: the service index,
//!   written in the same batch as the log. A service's logs in a time range are one key range
//!   of it, so a read filtered on a quiet service among busy ones reads its logs only.
//! - `s`: the sequence record ([`super::codec::encode_sequence`]): the next sequence this node
//!   assigns, written in the same synced batch as the logs that used the ones before it, so a
//!   restarted node never assigns a sequence twice.
//!
//! Integers are big-endian; the timestamp has its sign bit flipped so byte order is numeric
//! order (logs before 1970 sort first).

use crate::data::logs::LogCursor;

pub const LOG_PREFIX: u8 = b'l';
pub const SEQUENCE_KEY: &[u8] = b"s";
pub const INDEX_PREFIX: u8 = b'x';

/// The length of a log key.
pub const LOG_KEY_LEN: usize = 17;

fn push_position(out: &mut Vec<u8>, cursor: LogCursor) {
    out.extend_from_slice(&((cursor.timestamp_ms as u64) ^ (1 << 63)).to_be_bytes());
    out.extend_from_slice(&cursor.sequence.to_be_bytes());
}

/// The key of the log at `cursor`.
pub fn log_key(cursor: LogCursor) -> Vec<u8> {
    let mut out = Vec::with_capacity(LOG_KEY_LEN);
    out.push(LOG_PREFIX);
    push_position(&mut out, cursor);
    out
}

/// `x | service`: every index key of one service starts with it.
pub fn service_prefix(service: &str) -> Vec<u8> {
    let name = service.as_bytes();
    // Service names are short; a longer one is cut to the u16 length, the same in every key.
    let len = name.len().min(usize::from(u16::MAX));
    let mut out = Vec::with_capacity(3 + len + 16);
    out.push(INDEX_PREFIX);
    out.extend_from_slice(&(len as u16).to_be_bytes());
    out.extend_from_slice(&name[..len]);
    out
}

/// The index key of `service`'s log at `cursor`.
pub fn service_key(service: &str, cursor: LogCursor) -> Vec<u8> {
    let mut out = service_prefix(service);
    push_position(&mut out, cursor);
    out
}

/// The position an index key names, and the length of its service prefix.
pub fn decode_service_key(key: &[u8]) -> Option<(LogCursor, usize)> {
    if key.len() < 3 + 16 || key[0] != INDEX_PREFIX {
        return None;
    }
    let prefix_len = 3 + usize::from(u16::from_be_bytes([key[1], key[2]]));
    if key.len() != prefix_len + 16 {
        return None;
    }
    let mut position = vec![LOG_PREFIX];
    position.extend_from_slice(&key[prefix_len..]);
    decode_log_key(&position).map(|cursor| (cursor, prefix_len))
}

/// The first key after every key starting with `prefix` (none: no such key).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The whole index: `[x, y)`.
pub fn index_range() -> (Vec<u8>, Vec<u8>) {
    (vec![INDEX_PREFIX], vec![INDEX_PREFIX + 1])
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
        let index: Vec<Vec<u8>> = positions.iter().map(|p| service_key("checkout", *p)).collect();
        assert!(index.windows(2).all(|w| w[0] < w[1]), "index keys of one service are in position order");
        for (key, position) in index.iter().zip(positions) {
            assert_eq!(decode_service_key(key), Some((position, service_prefix("checkout").len())));
            assert!(key.starts_with(&service_prefix("checkout")));
            assert!(key.as_slice() < prefix_end(&service_prefix("checkout")).expect("end").as_slice());
        }
        // "a" and "ab": one service's keys never run into another's.
        assert!(prefix_end(&service_prefix("a")).expect("end") <= service_prefix("ab"));
        let (start, end) = index_range();
        assert!(index[0] > start && index[0] < end && SEQUENCE_KEY < start.as_slice() && logs_end() <= start);
        assert_eq!(decode_service_key(b"x\0\x05ab"), None);
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff, 0xff]), None);
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
