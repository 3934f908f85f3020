//! The value encodings of the `logs` key space: one kept log, and the sequence record.
//!
//! Every value starts with a format-version byte ([`FORMAT_VERSION`]); a value of another
//! version, cut short, with trailing bytes or unknown codes does not decode (the store reports it
//! as `LogStoreError::Corrupt`, naming the key). Integers are big-endian, strings
//! `u32`-length-prefixed UTF-8, read and written by the helpers both series stores share
//! (`crate::data::series_store`).
//!
//! - log: `version | service | instance | endpoint | layer | trace id | segment id |
//!   span (0 | 1 i32) | content type (u8) | content | tags: n × (key value) |
//!   output type (0 | 1 string) | fields (a JSON object, as text) | rule | file | received ms
//!   (i64)`. The timestamp is the key's. Service, instance and endpoint come first so a read
//!   filters on them ([`names`]) without decoding the rest.
//! - sequence record: `version | next sequence (u64)`.

use std::collections::BTreeMap;

use hotrule_lal_engine::{ContentType, LogRecord};

use crate::data::logs::KeptLog;
use crate::data::series_store::{Reader, ValueError, put_len, put_str};

pub const FORMAT_VERSION: u8 = 1;

fn content_type_from(code: u8) -> Result<ContentType, ValueError> {
    Ok(match code {
        0 => ContentType::None,
        1 => ContentType::Text,
        2 => ContentType::Json,
        3 => ContentType::Yaml,
        code => return Err(ValueError::UnknownCode { what: "content type", code }),
    })
}

/// The stored value of one kept log.
pub fn encode_log(log: &KeptLog) -> Vec<u8> {
    let mut out = Vec::with_capacity(encoded_bound(log));
    encode_log_into(&mut out, log);
    out
}

/// At least the bytes [`encode_log`] makes of `log` (lengths are 4 bytes, the fixed fields
/// under 64), but for its output fields, which are rare: a buffer of this size never grows.
pub fn encoded_bound(log: &KeptLog) -> usize {
    let r = &log.record;
    let texts = [&r.service, &r.instance, &r.endpoint, &r.layer, &r.trace_id, &r.segment_id, &r.content, &log.rule, &log.file];
    let tags: usize = r.tags.iter().map(|(k, v)| 8 + k.len() + v.len()).sum();
    64 + texts.iter().map(|t| 4 + t.len()).sum::<usize>() + tags + r.output_type.as_ref().map_or(0, |o| 4 + o.len())
}

/// [`encode_log`], appended to `out`.
pub fn encode_log_into(out: &mut Vec<u8>, log: &KeptLog) {
    let r = &log.record;
    out.push(FORMAT_VERSION);
    for text in [&r.service, &r.instance, &r.endpoint, &r.layer, &r.trace_id, &r.segment_id] {
        put_str(out, text);
    }
    match r.span_id {
        None => out.push(0),
        Some(span) => {
            out.push(1);
            out.extend_from_slice(&span.to_be_bytes());
        }
    }
    out.push(r.content_type as u8);
    put_str(out, &r.content);
    put_len(out, r.tags.len());
    for (key, value) in &r.tags {
        put_str(out, key);
        put_str(out, value);
    }
    match &r.output_type {
        None => out.push(0),
        Some(kind) => {
            out.push(1);
            put_str(out, kind);
        }
    }
    let fields = if r.fields.is_empty() { String::new() } else { serde_json::to_string(&r.fields).unwrap_or_default() };
    put_str(out, &fields);
    put_str(out, &log.rule);
    put_str(out, &log.file);
    out.extend_from_slice(&log.received_ms.to_be_bytes());
}

/// The `[service, instance, endpoint]` of a stored log, without decoding the rest.
pub fn names(value: &[u8]) -> Result<[&str; 3], ValueError> {
    let mut reader = Reader::versioned(value, FORMAT_VERSION)?;
    Ok([reader.str()?, reader.str()?, reader.str()?])
}

/// The bytes a block's index is built from, read in place without checking UTF-8 (the index
/// hashes bytes): instance, endpoint, content, and the tag section (read with [`tag_pairs`]).
pub struct IndexParts<'a> {
    pub service: &'a [u8],
    pub instance: &'a [u8],
    pub endpoint: &'a [u8],
    pub content: &'a [u8],
    pub tags: &'a [u8],
    pub tag_count: usize,
}

pub fn index_parts(value: &[u8]) -> Result<IndexParts<'_>, ValueError> {
    let mut reader = Reader::versioned(value, FORMAT_VERSION)?;
    let (service, instance, endpoint) = (reader.bytes()?, reader.bytes()?, reader.bytes()?);
    for _ in 0..3 {
        reader.bytes()?;
    }
    if reader.u8()? == 1 {
        reader.i32()?;
    }
    reader.u8()?;
    let content = reader.bytes()?;
    let tag_count = reader.count(8)?;
    Ok(IndexParts { service, instance, endpoint, content, tags: reader.rest(), tag_count })
}

/// The `(key, value)` byte pairs of a tag section, `count` of them; a cut pair ends it.
pub fn tag_pairs(tags: &[u8], count: usize) -> impl Iterator<Item = (&[u8], &[u8])> {
    let mut reader = Reader::new(tags);
    (0..count).map_while(move |_| Some((reader.bytes().ok()?, reader.bytes().ok()?)))
}

/// The service of a stored log, as bytes.
pub fn service_bytes(value: &[u8]) -> Result<&[u8], ValueError> {
    Reader::versioned(value, FORMAT_VERSION)?.bytes()
}

/// A stored log read in place: strings borrowed from the value, nothing parsed that a filter
/// does not need. [`LogView::to_kept`] makes the owned log of a match.
#[derive(Debug, Clone, PartialEq)]
pub struct LogView<'a> {
    pub service: &'a str,
    pub instance: &'a str,
    pub endpoint: &'a str,
    pub layer: &'a str,
    pub trace_id: &'a str,
    pub segment_id: &'a str,
    pub span_id: Option<i32>,
    pub content_type: ContentType,
    pub content: &'a str,
    pub tags: Vec<(&'a str, &'a str)>,
    pub output_type: Option<&'a str>,
    /// The fields object as JSON text (empty: no fields).
    pub fields: &'a str,
    pub rule: &'a str,
    pub file: &'a str,
    pub received_ms: i64,
}

/// Reads a stored log in place.
pub fn view(value: &[u8]) -> Result<LogView<'_>, ValueError> {
    let mut reader = Reader::versioned(value, FORMAT_VERSION)?;
    let (service, instance, endpoint) = (reader.str()?, reader.str()?, reader.str()?);
    let (layer, trace_id, segment_id) = (reader.str()?, reader.str()?, reader.str()?);
    let span_id = match reader.u8()? {
        0 => None,
        1 => Some(reader.i32()?),
        code => return Err(ValueError::UnknownCode { what: "span flag", code }),
    };
    let content_type = content_type_from(reader.u8()?)?;
    let content = reader.str()?;
    let tag_count = reader.count(8)?;
    let mut tags = Vec::with_capacity(tag_count);
    for _ in 0..tag_count {
        tags.push((reader.str()?, reader.str()?));
    }
    let output_type = match reader.u8()? {
        0 => None,
        1 => Some(reader.str()?),
        code => return Err(ValueError::UnknownCode { what: "output type flag", code }),
    };
    let fields = reader.str()?;
    let (rule, file) = (reader.str()?, reader.str()?);
    let received_ms = reader.i64()?;
    reader.finish()?;
    Ok(LogView {
        service,
        instance,
        endpoint,
        layer,
        trace_id,
        segment_id,
        span_id,
        content_type,
        content,
        tags,
        output_type,
        fields,
        rule,
        file,
        received_ms,
    })
}

impl LogView<'_> {
    /// The owned log, with the timestamp its key carries.
    pub fn to_kept(&self, timestamp_ms: i64) -> Result<KeptLog, ValueError> {
        let fields: BTreeMap<String, serde_json::Value> = if self.fields.is_empty() {
            BTreeMap::new()
        } else {
            serde_json::from_str(self.fields).map_err(|e| ValueError::NotJson { what: "fields", detail: e.to_string() })?
        };
        Ok(KeptLog {
            rule: self.rule.to_string(),
            file: self.file.to_string(),
            record: LogRecord {
                service: self.service.to_string(),
                instance: self.instance.to_string(),
                endpoint: self.endpoint.to_string(),
                layer: self.layer.to_string(),
                timestamp_ms,
                trace_id: self.trace_id.to_string(),
                segment_id: self.segment_id.to_string(),
                span_id: self.span_id,
                content_type: self.content_type,
                content: self.content.to_string(),
                tags: self.tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
                output_type: self.output_type.map(str::to_string),
                fields,
            },
            received_ms: self.received_ms,
        })
    }
}

/// A stored log back, with the timestamp its key carries.
pub fn decode_log(value: &[u8], timestamp_ms: i64) -> Result<KeptLog, ValueError> {
    view(value)?.to_kept(timestamp_ms)
}

/// The sequence record: the next sequence to assign.
pub fn encode_sequence(next: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(9);
    out.push(FORMAT_VERSION);
    out.extend_from_slice(&next.to_be_bytes());
    out
}

pub fn decode_sequence(value: &[u8]) -> Result<u64, ValueError> {
    let mut reader = Reader::versioned(value, FORMAT_VERSION)?;
    let next = reader.u64()?;
    reader.finish()?;
    Ok(next)
}
