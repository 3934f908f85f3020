//! The value encodings of format 2: rows, pending groups, blocks and metas. Pure: no IO.
//!
//! - **row**: `timestamp (i64) | sequence (u64) | length (u32) | log value` where the log value
//!   is [`super::codec::encode_log`]'s (the same bytes a peer sends over the bus).
//! - **pending group** (`w` keys): `version | rows`, in sequence order.
//! - **block** (`b` keys): `version | codec (1 = zstd) | raw length (u32) | compressed rows`,
//!   the rows of one service and slice in cursor order.
//! - **meta** (`m` keys): `version | count (u32) | first cursor | last cursor | raw length (u32)
//!   | index` ([`super::index`]), a cursor being `timestamp (i64) | sequence (u64)`.
//!
//! Every decode checks lengths, versions and codes and fails with a [`ValueError`] (the store
//! reports it as `Corrupt`, naming the key); a decompressed block larger than its stated
//! length, or a stated length over [`MAX_RAW_BYTES`], is refused before any allocation.

use crate::data::logs::LogCursor;
use crate::data::series_store::{Reader, ValueError, put_len};

use super::index::{BlockIndex, IndexView};

pub const FORMAT_VERSION: u8 = 2;
/// The one compression codec of format 2.
pub const CODEC_ZSTD: u8 = 1;
/// zstd's level for blocks: its fastest positive level (logs compress 5 to 10 times at it).
pub const ZSTD_LEVEL: i32 = 1;
/// The most raw bytes a stored block may claim.
pub const MAX_RAW_BYTES: usize = 256 << 20;
/// The bytes of a row before its value.
pub const ROW_HEADER: usize = 20;

/// Appends one row.
pub fn push_row(out: &mut Vec<u8>, cursor: LogCursor, value: &[u8]) {
    out.extend_from_slice(&cursor.timestamp_ms.to_be_bytes());
    out.extend_from_slice(&cursor.sequence.to_be_bytes());
    put_len(out, value.len());
    out.extend_from_slice(value);
}

/// One row read in place: its position, value and where it starts in the rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row<'a> {
    pub cursor: LogCursor,
    pub value: &'a [u8],
}

/// The rows of `bytes`, in stored order; a cut-short row ends the iteration with an error.
pub fn rows(bytes: &[u8]) -> Rows<'_> {
    Rows { reader: Reader::new(bytes), failed: false }
}

pub struct Rows<'a> {
    reader: Reader<'a>,
    failed: bool,
}

impl<'a> Iterator for Rows<'a> {
    type Item = Result<Row<'a>, ValueError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.reader.finish().is_ok() {
            return None;
        }
        let row = (|| {
            let timestamp_ms = self.reader.i64()?;
            let sequence = self.reader.u64()?;
            let value = self.reader.bytes()?;
            Ok(Row { cursor: LogCursor { timestamp_ms, sequence }, value })
        })();
        self.failed = row.is_err();
        Some(row)
    }
}

/// A pending group's value: the version, then the rows.
pub fn encode_pending(rows: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + rows.len());
    out.push(FORMAT_VERSION);
    out.extend_from_slice(rows);
    out
}

/// A pending group's rows.
pub fn pending_rows(value: &[u8]) -> Result<&[u8], ValueError> {
    Reader::versioned(value, FORMAT_VERSION)?;
    Ok(value.get(1..).unwrap_or_default())
}

/// A stored block of `rows` (already in cursor order).
pub fn encode_block(compressor: &mut zstd::bulk::Compressor<'_>, rows: &[u8]) -> Result<Vec<u8>, std::io::Error> {
    let compressed = compressor.compress(rows)?;
    let mut out = Vec::with_capacity(6 + compressed.len());
    out.push(FORMAT_VERSION);
    out.push(CODEC_ZSTD);
    put_len(&mut out, rows.len());
    out.extend_from_slice(&compressed);
    Ok(out)
}

/// A stored block's rows, decompressed.
pub fn decode_block(value: &[u8]) -> Result<Vec<u8>, ValueError> {
    let mut reader = Reader::versioned(value, FORMAT_VERSION)?;
    match reader.u8()? {
        CODEC_ZSTD => {}
        code => return Err(ValueError::UnknownCode { what: "block codec", code }),
    }
    let raw = reader.u32()? as usize;
    if raw > MAX_RAW_BYTES {
        return Err(ValueError::Count { count: raw, left: MAX_RAW_BYTES });
    }
    let compressed = &value[6..];
    let rows = zstd::bulk::decompress(compressed, raw).map_err(|_| ValueError::UnknownCode { what: "zstd frame", code: 0 })?;
    if rows.len() != raw {
        return Err(ValueError::CutShort { wanted: raw, left: rows.len() });
    }
    Ok(rows)
}

/// A block's meta as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub count: u32,
    pub first: LogCursor,
    pub last: LogCursor,
    pub raw_bytes: u32,
    pub index: BlockIndex,
}

fn put_cursor(out: &mut Vec<u8>, cursor: LogCursor) {
    out.extend_from_slice(&cursor.timestamp_ms.to_be_bytes());
    out.extend_from_slice(&cursor.sequence.to_be_bytes());
}

fn read_cursor(reader: &mut Reader<'_>) -> Result<LogCursor, ValueError> {
    Ok(LogCursor { timestamp_ms: reader.i64()?, sequence: reader.u64()? })
}

impl Meta {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(48 + self.index.trigrams.len() + self.index.terms.len());
        out.push(FORMAT_VERSION);
        out.extend_from_slice(&self.count.to_be_bytes());
        put_cursor(&mut out, self.first);
        put_cursor(&mut out, self.last);
        out.extend_from_slice(&self.raw_bytes.to_be_bytes());
        self.index.encode(&mut out);
        out
    }
}

/// A stored meta read in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetaView<'a> {
    pub count: u32,
    pub first: LogCursor,
    pub last: LogCursor,
    pub raw_bytes: u32,
    pub index: IndexView<'a>,
}

pub fn view_meta(value: &[u8]) -> Result<MetaView<'_>, ValueError> {
    let mut reader = Reader::versioned(value, FORMAT_VERSION)?;
    let count = reader.u32()?;
    let (first, last) = (read_cursor(&mut reader)?, read_cursor(&mut reader)?);
    let raw_bytes = reader.u32()?;
    let index = IndexView::read(&mut reader)?;
    reader.finish()?;
    Ok(MetaView { count, first, last, raw_bytes, index })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::logs::records::index::{IndexBuilder, Probe};

    fn cursor(timestamp_ms: i64, sequence: u64) -> LogCursor {
        LogCursor { timestamp_ms, sequence }
    }

    #[test]
    fn rows_round_trip_and_a_cut_row_is_an_error() {
        let mut out = Vec::new();
        push_row(&mut out, cursor(-5, 1), b"one");
        push_row(&mut out, cursor(7, u64::MAX), b"");
        let read: Vec<Row<'_>> = rows(&out).collect::<Result<_, _>>().expect("reads");
        assert_eq!(read, vec![Row { cursor: cursor(-5, 1), value: b"one" }, Row { cursor: cursor(7, u64::MAX), value: b"" }]);
        for len in 1..out.len() {
            let cut: Vec<_> = rows(&out[..len]).collect();
            assert!(cut.last().is_some_and(Result::is_err) || len == ROW_HEADER + 3, "cut at {len}");
        }
        assert_eq!(rows(&[]).count(), 0);
        assert_eq!(pending_rows(&encode_pending(&out)).expect("pending"), out.as_slice());
        assert!(pending_rows(&[1]).is_err(), "another version");
    }

    #[test]
    fn blocks_and_metas_round_trip_and_bad_values_are_errors() {
        let mut rows_bytes = Vec::new();
        for i in 0..1000 {
            push_row(&mut rows_bytes, cursor(i, i as u64), format!("GET /orders/{i} 200").as_bytes());
        }
        let mut compressor = zstd::bulk::Compressor::new(ZSTD_LEVEL).expect("compressor");
        let block = encode_block(&mut compressor, &rows_bytes).expect("compresses");
        assert!(block.len() < rows_bytes.len() / 3, "{} of {}", block.len(), rows_bytes.len());
        assert_eq!(decode_block(&block).expect("decodes"), rows_bytes);
        for len in 0..block.len().min(64) {
            assert!(decode_block(&block[..len]).is_err(), "cut at {len}");
        }
        let mut wrong_length = block.clone();
        wrong_length[5] ^= 1;
        assert!(decode_block(&wrong_length).is_err());
        let mut huge = block.clone();
        huge[2..6].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(decode_block(&huge).is_err(), "a huge stated length is refused");
        let mut codec = block.clone();
        codec[1] = 9;
        assert!(decode_block(&codec).is_err());

        let mut builder = IndexBuilder::default();
        builder.add_content(b"GET /orders/1 200");
        let meta = Meta { count: 1000, first: cursor(0, 0), last: cursor(999, 999), raw_bytes: rows_bytes.len() as u32, index: builder.finish() };
        let encoded = meta.encode();
        let view = view_meta(&encoded).expect("reads");
        assert_eq!((view.count, view.first, view.last, view.raw_bytes), (1000, cursor(0, 0), cursor(999, 999), rows_bytes.len() as u32));
        assert!(view.index.may_match(&Probe::new(Some("orders"), &[])));
        for len in 0..encoded.len() {
            assert!(view_meta(&encoded[..len]).is_err(), "cut at {len}");
        }
        let mut trailing = encoded.clone();
        trailing.push(0);
        assert!(view_meta(&trailing).is_err());
    }
}
