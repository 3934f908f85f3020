//! The key layout of the `logs` key space (format 2), in one place.
//!
//! Logs are grouped by **slice**: the minute ([`SLICE_MS`]) their own timestamp falls in.
//!
//! - `w | slice | first sequence`: a **pending** group, the logs of one synced write that fall
//!   in one slice, as rows ([`super::block`]). Written and synced before the write is
//!   acknowledged; deleted once its logs are in blocks.
//! - `b | slice | service | first sequence`: a **block**, one service's logs of one slice,
//!   compressed.
//! - `m | slice | service | first sequence`: the block's **meta**: its count, cursor range and
//!   index ([`super::index`]). Reads scan metas, then fetch only the blocks that may match.
//! - `s`: the sequence record (the next sequence this node assigns).
//! - `l …` and `x …`: the first format's keys ([`super::v1::keys`]), only until they are
//!   migrated at start.
//!
//! Integers are big-endian; timestamps have their sign bit flipped so byte order is numeric
//! order. Services are `u16`-length-prefixed, so one service's keys of a slice never run into
//! another's.

use crate::data::logs::LogCursor;

pub use super::v1::keys::{SEQUENCE_KEY, first_of, prefix_end, successor};

pub const PENDING_PREFIX: u8 = b'w';
pub const BLOCK_PREFIX: u8 = b'b';
pub const META_PREFIX: u8 = b'm';

/// The width of a slice: logs of one service and one minute share blocks.
pub const SLICE_MS: i64 = 60_000;

/// The start of the slice `timestamp_ms` falls in.
pub fn slice_of(timestamp_ms: i64) -> i64 {
    timestamp_ms.div_euclid(SLICE_MS).saturating_mul(SLICE_MS)
}

fn push_ms(out: &mut Vec<u8>, ms: i64) {
    out.extend_from_slice(&((ms as u64) ^ (1 << 63)).to_be_bytes());
}

fn read_ms(bytes: &[u8]) -> Option<i64> {
    let array: [u8; 8] = bytes.try_into().ok()?;
    Some((u64::from_be_bytes(array) ^ (1 << 63)) as i64)
}

fn read_u64(bytes: &[u8]) -> Option<u64> {
    bytes.try_into().ok().map(u64::from_be_bytes)
}

/// The key of the pending group of slice `slice` whose first log has sequence `first`.
pub fn pending_key(slice: i64, first: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(17);
    out.push(PENDING_PREFIX);
    push_ms(&mut out, slice);
    out.extend_from_slice(&first.to_be_bytes());
    out
}

/// `(slice, first sequence)` of a pending key.
pub fn decode_pending_key(key: &[u8]) -> Option<(i64, u64)> {
    if key.len() != 17 || key[0] != PENDING_PREFIX {
        return None;
    }
    Some((read_ms(&key[1..9])?, read_u64(&key[9..17])?))
}

/// The first key of `prefix`'s keys of slice `slice` (and later slices follow it).
pub fn slice_start(prefix: u8, slice: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(9);
    out.push(prefix);
    push_ms(&mut out, slice);
    out
}

/// `prefix | slice | service`: every block or meta key of one service in one slice starts with it.
pub fn service_start(prefix: u8, slice: i64, service: &str) -> Vec<u8> {
    let name = service.as_bytes();
    let len = name.len().min(usize::from(u16::MAX));
    let mut out = slice_start(prefix, slice);
    out.extend_from_slice(&(len as u16).to_be_bytes());
    out.extend_from_slice(&name[..len]);
    out
}

/// The key of a block (`BLOCK_PREFIX`) or its meta (`META_PREFIX`).
pub fn block_key(prefix: u8, slice: i64, service: &str, first: u64) -> Vec<u8> {
    let mut out = service_start(prefix, slice, service);
    out.extend_from_slice(&first.to_be_bytes());
    out
}

/// A block or meta key's parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockKey<'a> {
    pub prefix: u8,
    pub slice: i64,
    pub service: &'a str,
    pub first: u64,
}

pub fn decode_block_key(key: &[u8]) -> Option<BlockKey<'_>> {
    let (&prefix, rest) = key.split_first()?;
    if rest.len() < 8 + 2 + 8 {
        return None;
    }
    let slice = read_ms(&rest[..8])?;
    let len = usize::from(u16::from_be_bytes([rest[8], rest[9]]));
    if rest.len() != 10 + len + 8 {
        return None;
    }
    let service = std::str::from_utf8(&rest[10..10 + len]).ok()?;
    Some(BlockKey { prefix, slice, service, first: read_u64(&rest[10 + len..])? })
}

/// The same key with another prefix (a meta key's block key).
pub fn with_prefix(key: &[u8], prefix: u8) -> Vec<u8> {
    let mut out = key.to_vec();
    if let Some(first) = out.first_mut() {
        *first = prefix;
    }
    out
}

/// `[prefix, prefix + 1)`: every key of one kind.
pub fn all_of(prefix: u8) -> (Vec<u8>, Vec<u8>) {
    (vec![prefix], vec![prefix + 1])
}

/// The last position of millisecond `ms`.
pub fn last_of(ms: i64) -> LogCursor {
    LogCursor { timestamp_ms: ms, sequence: u64::MAX }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_order_by_slice_then_service_then_sequence_and_decode_back() {
        assert_eq!(slice_of(0), 0);
        assert_eq!(slice_of(59_999), 0);
        assert_eq!(slice_of(60_000), 60_000);
        assert_eq!(slice_of(-1), -60_000);
        assert_eq!(slice_of(i64::MIN), i64::MIN, "saturates at the first slice");
        let keys = [
            block_key(META_PREFIX, -60_000, "z", 9),
            block_key(META_PREFIX, 0, "a", 5),
            block_key(META_PREFIX, 0, "a", 6),
            block_key(META_PREFIX, 0, "b", 0),
            block_key(META_PREFIX, 0, "ab", 1),
            block_key(META_PREFIX, 60_000, "a", 0),
        ];
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "slice, then service (length first), then sequence");
        let decoded = decode_block_key(&keys[4]).expect("decodes");
        assert_eq!(decoded, BlockKey { prefix: META_PREFIX, slice: 0, service: "ab", first: 1 });
        assert!(keys[1].starts_with(&service_start(META_PREFIX, 0, "a")));
        assert!(!keys[4].starts_with(&service_start(META_PREFIX, 0, "a")), "\"a\" is not a prefix of \"ab\"'s keys");
        assert!(keys[4] < slice_start(META_PREFIX, 60_000) && keys[5] >= slice_start(META_PREFIX, 60_000));
        assert_eq!(with_prefix(&keys[0], BLOCK_PREFIX), block_key(BLOCK_PREFIX, -60_000, "z", 9));
        assert_eq!(decode_block_key(b"m123"), None);
        let pending = pending_key(120_000, 77);
        assert_eq!(decode_pending_key(&pending), Some((120_000, 77)));
        assert!(pending_key(60_000, u64::MAX) < pending_key(120_000, 0));
        assert_eq!(decode_pending_key(&keys[0]), None);
        let (start, end) = all_of(PENDING_PREFIX);
        assert!(pending > start && pending < end);
        for prefix in [PENDING_PREFIX, BLOCK_PREFIX, META_PREFIX] {
            let (start, end) = all_of(prefix);
            assert!(SEQUENCE_KEY < start.as_slice() || SEQUENCE_KEY >= end.as_slice());
        }
    }
}
