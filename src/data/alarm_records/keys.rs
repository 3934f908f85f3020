//! The key layout of the `alarms` key space, in one place.
//!
//! - `r | start time(u64) | uuid`: one alarm record. Time first, so a time range is one
//!   contiguous key range (one scan for a read, one delete-range for retention); the uuid (a
//!   fresh one per fire) makes every key unique and orders the fires of one millisecond.
//! - `v | start time(u64) | uuid`: the recovery of that record (its value: the recovery time).
//!   The same position as the record under another prefix: joined by one point lookup, expired
//!   by the same cutoff.
//!
//! - `s | n`: the alarm states this node held at its last check that are not NORMAL (one key
//!   per state, numbered; the set is replaced whole), read back at start.
//!
//! The start time is big-endian with its sign bit flipped, so byte order is numeric order.

pub const RECORD_PREFIX: u8 = b'r';
pub const RECOVERY_PREFIX: u8 = b'v';
pub const STATE_PREFIX: u8 = b's';

/// The key of the `n`-th held state.
pub fn state_key(n: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(9);
    out.push(STATE_PREFIX);
    out.extend_from_slice(&n.to_be_bytes());
    out
}

fn key(prefix: u8, start_ms: i64, uuid: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + uuid.len());
    out.push(prefix);
    out.extend_from_slice(&((start_ms as u64) ^ (1 << 63)).to_be_bytes());
    out.extend_from_slice(uuid.as_bytes());
    out
}

/// The key of the record fired at `start_ms` with `uuid`.
pub fn record_key(start_ms: i64, uuid: &str) -> Vec<u8> {
    key(RECORD_PREFIX, start_ms, uuid)
}

/// The key of that record's recovery.
pub fn recovery_key(start_ms: i64, uuid: &str) -> Vec<u8> {
    key(RECOVERY_PREFIX, start_ms, uuid)
}

/// The first key of `prefix` at or after millisecond `ms` (every uuid sorts after it).
pub fn first_of(prefix: u8, ms: i64) -> Vec<u8> {
    key(prefix, ms, "")
}

/// The first key past every key of millisecond `ms` and before (`ms` = `i64::MAX`: the end of
/// the prefix).
pub fn after_ms(prefix: u8, ms: i64) -> Vec<u8> {
    match ms.checked_add(1) {
        Some(next) => first_of(prefix, next),
        None => vec![prefix + 1],
    }
}

/// The start time and uuid a record or recovery key names, if it is one of `prefix`.
pub fn decode(prefix: u8, key: &[u8]) -> Option<(i64, &str)> {
    if key.len() < 9 || key[0] != prefix {
        return None;
    }
    let mut ts = [0u8; 8];
    ts.copy_from_slice(&key[1..9]);
    let uuid = std::str::from_utf8(&key[9..]).ok()?;
    Some(((u64::from_be_bytes(ts) ^ (1 << 63)) as i64, uuid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_order_by_time_then_uuid_and_decode_back() {
        let positions = [(i64::MIN, "a"), (-1, "z"), (0, ""), (0, "a"), (0, "b"), (1_795_608_000_000, "0b5c"), (i64::MAX, "ff")];
        let keys: Vec<Vec<u8>> = positions.iter().map(|(ms, uuid)| record_key(*ms, uuid)).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "keys are in (time, uuid) order");
        for (key, (ms, uuid)) in keys.iter().zip(positions) {
            assert_eq!(decode(RECORD_PREFIX, key), Some((ms, uuid)));
            assert_eq!(decode(RECOVERY_PREFIX, key), None, "a record key is not a recovery key");
            assert!(key.as_slice() >= first_of(RECORD_PREFIX, ms).as_slice() && key.as_slice() < after_ms(RECORD_PREFIX, ms).as_slice());
        }
        assert_eq!(decode(RECOVERY_PREFIX, &recovery_key(7, "u")), Some((7, "u")));
        assert_eq!(decode(RECORD_PREFIX, b"r123"), None);
        assert_eq!(decode(RECORD_PREFIX, &[b'r', 0, 0, 0, 0, 0, 0, 0, 0, 0xff]), None, "a uuid that is not UTF-8");
        assert_eq!(after_ms(RECORD_PREFIX, i64::MAX), vec![RECORD_PREFIX + 1]);
    }
}
