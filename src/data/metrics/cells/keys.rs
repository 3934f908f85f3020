//! The key layout of the metric series key space, in one place.
//!
//! - `c | len(u16) metric | granularity(u8) | bucket(u64) | entity | group`: one cell (the
//!   accumulated value of one metric, entity and label group in one time bucket). Time comes
//!   before the entity, so one metric's cells for a time range at one granularity are one
//!   contiguous key range (one range scan for a read, one delete-range for retention).
//! - `i | metric`: the metric index record ([`super::codec::encode_info`]).
//!
//! Integers are big-endian; the bucket has its sign bit flipped so byte order is numeric order.
//! The entity is written field by field, each string length-prefixed (`u32`), so it decodes
//! back exactly (see [`encode_entity`]). The group is the histogram label group (empty for single
//! and labeled values), also length-prefixed.

use std::collections::BTreeMap;

use hotrule_mal_engine::{DetectPoint, Entity, ScopeType};

use super::codec::{scope_code, scope_from};
use crate::data::series_store::{Reader, ValueError, put_str};
use crate::data::metrics::Granularity;

pub const CELL_PREFIX: u8 = b'c';
pub const INDEX_PREFIX: u8 = b'i';

/// Why a stored key does not decode.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct KeyError(pub String);

impl From<ValueError> for KeyError {
    fn from(error: ValueError) -> KeyError {
        KeyError(error.to_string())
    }
}

fn granularity_code(granularity: Granularity) -> u8 {
    match granularity {
        Granularity::Minute => 0,
        Granularity::Hour => 1,
        Granularity::Day => 2,
    }
}

/// `c | metric | granularity`: every cell of one metric at one granularity starts with it.
pub fn series_prefix(metric: &str, granularity: Granularity) -> Vec<u8> {
    let name = metric.as_bytes();
    // Metric names are short identifiers; a longer name is cut to the u16 length, consistently
    // in every key that names it.
    let len = name.len().min(usize::from(u16::MAX));
    let mut out = Vec::with_capacity(4 + len + 9 + 64);
    out.push(CELL_PREFIX);
    out.extend_from_slice(&(len as u16).to_be_bytes());
    out.extend_from_slice(&name[..len]);
    out.push(granularity_code(granularity));
    out
}

/// `c | metric` for every granularity: the whole metric (reshape deletes it).
pub fn metric_range(metric: &str) -> (Vec<u8>, Vec<u8>) {
    let mut start = series_prefix(metric, Granularity::Minute);
    start.pop();
    let mut end = start.clone();
    end.push(0xff);
    (start, end)
}

fn bucket_bytes(bucket: i64) -> [u8; 8] {
    ((bucket as u64) ^ (1 << 63)).to_be_bytes()
}

/// The first key of `bucket` in a series: scans start here (inclusive) and stop at the next
/// bucket's (exclusive).
pub fn bucket_key(metric: &str, granularity: Granularity, bucket: i64) -> Vec<u8> {
    let mut out = series_prefix(metric, granularity);
    out.extend_from_slice(&bucket_bytes(bucket));
    out
}

/// The key of one cell.
pub fn cell_key(metric: &str, granularity: Granularity, bucket: i64, entity: &Entity, group: &str) -> Vec<u8> {
    cell_key_with(metric, granularity, bucket, &cell_suffix(entity, group))
}

/// The part of a cell key after the bucket: entity and group (encoded once per value, used for
/// its three granularities).
pub fn cell_suffix(entity: &Entity, group: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(96);
    encode_entity(entity, &mut out);
    put_str(&mut out, group);
    out
}

pub fn cell_key_with(metric: &str, granularity: Granularity, bucket: i64, suffix: &[u8]) -> Vec<u8> {
    let mut out = bucket_key(metric, granularity, bucket);
    out.extend_from_slice(suffix);
    out
}

/// What a cell key names after the series prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellName {
    pub bucket: i64,
    pub entity: Entity,
    pub group: String,
}

/// Decodes the part of a cell key after `series_prefix`.
pub fn decode_cell_key(key: &[u8], prefix_len: usize) -> Result<CellName, KeyError> {
    let rest = key.get(prefix_len..).ok_or_else(|| KeyError("cell key shorter than its prefix".into()))?;
    let mut reader = Reader::new(rest);
    let raw = reader.u64()?;
    let bucket = (raw ^ (1 << 63)) as i64;
    let entity = decode_entity(&mut reader)?;
    let group = reader.string()?;
    reader.finish()?;
    Ok(CellName { bucket, entity, group })
}

/// The start of every entity key of `scope` whose service name is `service` (the first two
/// fields of the entity encoding): a read for one service seeks to it within each bucket.
pub fn service_start(scope: ScopeType, service: &str) -> Vec<u8> {
    let mut out = vec![scope_code(scope)];
    put_str(&mut out, service);
    out
}

/// The bucket of a cell key.
pub fn decode_bucket(key: &[u8], prefix_len: usize) -> Result<i64, KeyError> {
    let raw = key.get(prefix_len..prefix_len + 8).ok_or_else(|| KeyError("cell key without a bucket".into()))?;
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(raw);
    Ok((u64::from_be_bytes(bytes) ^ (1 << 63)) as i64)
}

/// The service, instance and endpoint names of a cell key, read in place (no allocation): reads
/// filter on them before decoding the whole entity. None when the key is too short.
pub fn entity_names(key: &[u8], prefix_len: usize) -> Option<[&[u8]; 3]> {
    // bucket (8), scope (1), then the names, each u32 length + bytes.
    let mut rest = key.get(prefix_len + 9..)?;
    let mut names: [&[u8]; 3] = [&[]; 3];
    for name in names.iter_mut() {
        let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        *name = rest.get(4..4 + len)?;
        rest = &rest[4 + len..];
    }
    Some(names)
}

/// What a whole cell key names: metric, granularity, and the rest ([`decode_cell_key`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellKey {
    pub metric: String,
    pub granularity: Granularity,
    pub name: CellName,
}

/// Decodes a whole cell key (one from a peer, in a handoff record: checked, never trusted).
pub fn decode_full_cell_key(key: &[u8]) -> Result<CellKey, KeyError> {
    if key.first() != Some(&CELL_PREFIX) {
        return Err(KeyError("not a cell key".into()));
    }
    let len_bytes = key.get(1..3).ok_or_else(|| KeyError("cell key cut short".into()))?;
    let len = usize::from(u16::from_be_bytes([len_bytes[0], len_bytes[1]]));
    let metric = key.get(3..3 + len).ok_or_else(|| KeyError("cell key cut short".into()))?;
    let metric = std::str::from_utf8(metric).map_err(|_| KeyError("metric name is not UTF-8".into()))?.to_string();
    let granularity = match key.get(3 + len) {
        Some(0) => Granularity::Minute,
        Some(1) => Granularity::Hour,
        Some(2) => Granularity::Day,
        _ => return Err(KeyError("unknown granularity in a cell key".into())),
    };
    let name = decode_cell_key(key, 4 + len)?;
    Ok(CellKey { metric, granularity, name })
}

/// The bytes an entity's owner is chosen by (`base::owner`): the entity alone, as keys encode
/// it, without metric, time bucket or group, so every metric of one entity, in every minute,
/// has the same owner (SkyWalking routes by the entity id the same way).
pub fn owner_key(entity: &Entity) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    encode_entity(entity, &mut out);
    out
}

pub fn index_key(metric: &str) -> Vec<u8> {
    let mut out = vec![INDEX_PREFIX];
    out.extend_from_slice(metric.as_bytes());
    out
}

/// `[i, j)`: every index record.
pub fn index_range() -> (Vec<u8>, Vec<u8>) {
    (vec![INDEX_PREFIX], vec![INDEX_PREFIX + 1])
}

/// Every field of `entity`, in declaration order: scope, the eleven names, detect point,
/// component id, layer, instance properties, attrs. Lossless: [`decode_entity`] gives it back.
pub fn encode_entity(entity: &Entity, out: &mut Vec<u8>) {
    out.push(scope_code(entity.scope));
    for name in [
        &entity.service_name,
        &entity.instance_name,
        &entity.endpoint_name,
        &entity.process_name,
        &entity.source_service_name,
        &entity.dest_service_name,
        &entity.source_instance_name,
        &entity.dest_instance_name,
        &entity.source_process_id,
        &entity.dest_process_id,
    ] {
        put_str(out, name);
    }
    out.push(match entity.detect_point {
        None => 0,
        Some(DetectPoint::Client) => 1,
        Some(DetectPoint::Server) => 2,
        Some(DetectPoint::Proxy) => 3,
    });
    out.extend_from_slice(&entity.component_id.to_be_bytes());
    put_str(out, &entity.layer);
    match &entity.instance_properties {
        None => out.push(0),
        Some(properties) => {
            out.push(1);
            out.extend_from_slice(&(properties.len() as u32).to_be_bytes());
            for (name, value) in properties {
                put_str(out, name);
                put_str(out, value);
            }
        }
    }
    for attr in &entity.attrs {
        match attr {
            None => out.push(0),
            Some(text) => {
                out.push(1);
                put_str(out, text);
            }
        }
    }
}

pub fn decode_entity(reader: &mut Reader<'_>) -> Result<Entity, ValueError> {
    let scope: ScopeType = scope_from(reader.u8()?)?;
    let mut entity = Entity::new(scope);
    for name in [
        &mut entity.service_name,
        &mut entity.instance_name,
        &mut entity.endpoint_name,
        &mut entity.process_name,
        &mut entity.source_service_name,
        &mut entity.dest_service_name,
        &mut entity.source_instance_name,
        &mut entity.dest_instance_name,
        &mut entity.source_process_id,
        &mut entity.dest_process_id,
    ] {
        *name = reader.string()?;
    }
    entity.detect_point = match reader.u8()? {
        0 => None,
        1 => Some(DetectPoint::Client),
        2 => Some(DetectPoint::Server),
        3 => Some(DetectPoint::Proxy),
        code => return Err(ValueError::UnknownCode { what: "detect point code", code }),
    };
    entity.component_id = reader.i32()?;
    entity.layer = reader.string()?;
    entity.instance_properties = match reader.u8()? {
        0 => None,
        1 => {
            let count = reader.u32()?;
            let mut properties = BTreeMap::new();
            for _ in 0..count {
                let name = reader.string()?;
                let value = reader.string()?;
                properties.insert(name, value);
            }
            Some(properties)
        }
        code => return Err(ValueError::UnknownCode { what: "properties marker", code }),
    };
    for attr in entity.attrs.iter_mut() {
        *attr = match reader.u8()? {
            0 => None,
            1 => Some(reader.string()?),
            code => return Err(ValueError::UnknownCode { what: "attr marker", code }),
        };
    }
    Ok(entity)
}

/// The start, epoch milliseconds (UTC), of `bucket` at `granularity`.
pub fn bucket_start_ms(granularity: Granularity, bucket: i64) -> i64 {
    let (day_part, hour, minute) = match granularity {
        Granularity::Minute => (bucket / 10_000, bucket / 100 % 100, bucket % 100),
        Granularity::Hour => (bucket / 100, bucket % 100, 0),
        Granularity::Day => (bucket, 0, 0),
    };
    let days = hotrule_mal_engine::days_from_civil(day_part / 10_000, day_part / 100 % 100, day_part % 100);
    // Saturating: a bucket far outside any real date (from a bogus sample timestamp) must not
    // overflow.
    days.saturating_mul(24).saturating_add(hour).saturating_mul(60).saturating_add(minute).saturating_mul(60_000)
}

/// The bucket at `granularity` holding the instant `ms`.
pub fn bucket_of(granularity: Granularity, ms: i64) -> i64 {
    granularity.bucket_of(ms)
}

/// The bucket after `bucket` at `granularity`.
pub fn next_bucket(granularity: Granularity, bucket: i64) -> i64 {
    bucket_of(granularity, bucket_start_ms(granularity, bucket).saturating_add(granularity.millis()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rich_entity() -> Entity {
        let mut entity = Entity::new(ScopeType::ServiceInstanceRelation);
        entity.service_name = "svc|with,odd=chars".into();
        entity.source_instance_name = "ä-instance".into();
        entity.detect_point = Some(DetectPoint::Server);
        entity.component_id = -7;
        entity.layer = "GENERAL".into();
        entity.instance_properties = Some(BTreeMap::from([("pod".to_string(), "p-1".to_string())]));
        entity.attrs[2] = Some(String::new());
        entity
    }

    #[test]
    fn cell_keys_decode_back_exactly() {
        let entity = rich_entity();
        let key = cell_key("meter_x", Granularity::Hour, 2026112513, &entity, "le_group=a");
        let prefix = series_prefix("meter_x", Granularity::Hour);
        assert!(key.starts_with(&prefix));
        let name = decode_cell_key(&key, prefix.len()).expect("decode");
        assert_eq!(name, CellName { bucket: 2026112513, entity, group: "le_group=a".into() });
        assert!(decode_cell_key(&key[..key.len() - 1], prefix.len()).is_err(), "truncated key");
        let names = entity_names(&key, prefix.len()).expect("names");
        assert_eq!(names, [b"svc|with,odd=chars".as_slice(), b"".as_slice(), b"".as_slice()]);
        assert_eq!(entity_names(&key[..prefix.len() + 12], prefix.len()), None);
    }

    #[test]
    fn keys_order_by_bucket_within_a_series_and_never_across_metrics() {
        let entity = Entity::new(ScopeType::Service);
        let early = cell_key("m", Granularity::Minute, 202611251259, &entity, "");
        let late = cell_key("m", Granularity::Minute, 202611251300, &entity, "");
        assert!(early < late);
        assert!(bucket_key("m", Granularity::Minute, 202611251300) <= late);
        assert!(late < bucket_key("m", Granularity::Minute, 202611251301));
        // "m" and "m2" never interleave: the length prefix separates them.
        let (start, end) = metric_range("m");
        let other = cell_key("m2", Granularity::Minute, 202611251300, &entity, "");
        assert!(!(start <= other && other < end));
        assert!(start <= late && late < end);
    }

    #[test]
    fn bucket_arithmetic_in_utc() {
        // 2024-02-29T23:59:00Z
        let ms = 1_709_251_140_000;
        assert_eq!(bucket_of(Granularity::Minute, ms), 202402292359);
        assert_eq!(bucket_start_ms(Granularity::Minute, 202402292359), ms);
        assert_eq!(bucket_start_ms(Granularity::Hour, 2024022923), ms - 59 * 60_000);
        assert_eq!(bucket_start_ms(Granularity::Day, 20240229), ms - (23 * 60 + 59) * 60_000);
        assert_eq!(next_bucket(Granularity::Minute, 202402292359), 202403010000);
        assert_eq!(next_bucket(Granularity::Hour, 2024022923), 2024030100);
        assert_eq!(next_bucket(Granularity::Day, 20231231), 20240101);
        // Absurd buckets saturate instead of overflowing.
        for granularity in Granularity::ALL {
            for bucket in [i64::MAX, i64::MIN, 0, -1] {
                let _ = next_bucket(granularity, bucket_of(granularity, bucket_start_ms(granularity, bucket)));
            }
        }
    }
}
