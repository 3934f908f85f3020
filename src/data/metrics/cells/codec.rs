//! The value encodings of the metric series key space: cells and metric index records.
//!
//! Every value starts with a format-version byte ([`FORMAT_VERSION`]); a value of another
//! version, or one that is cut short or carries unknown codes, does not decode (the store reports
//! it as `MetricStoreError::Corrupt`). Integers are big-endian, strings `u32`-length-prefixed,
//! read and written by the helpers both series stores share ([`crate::data::series_store`]).
//!
//! - cell: `version | function | kind | payload` where kind 0 = single (`value count`), 1 =
//!   labeled (`n × (key value count)`), 2 = histogram (`ranks: n × u32`, `n × (bound value count)`);
//! - index record: `version | scope | data type | function`.

use std::collections::BTreeMap;

use hotrule_mal_engine::{DataType, Downsampling, ScopeType};

use super::cell::{Acc, Cell, Data};
use crate::data::series_store::{Reader, ValueError, put_len};
use crate::data::metrics::MetricInfo;

/// Version 2: a `latest` accumulator also stores the sample time of its value (`at`), so
/// partial states merge by sample time across nodes. Version 1 values still decode (migrated on
/// read: a `latest` value of version 1 has sample time 0, so any newer sample replaces it); they
/// are rewritten as version 2 when their cell is next written.
pub const FORMAT_VERSION: u8 = 2;

/// The oldest version this build decodes.
pub const OLDEST_FORMAT_VERSION: u8 = 1;

pub fn scope_code(scope: ScopeType) -> u8 {
    match scope {
        ScopeType::Service => 0,
        ScopeType::ServiceInstance => 1,
        ScopeType::Endpoint => 2,
        ScopeType::Process => 3,
        ScopeType::ServiceRelation => 4,
        ScopeType::ServiceInstanceRelation => 5,
        ScopeType::ProcessRelation => 6,
    }
}

pub fn scope_from(code: u8) -> Result<ScopeType, ValueError> {
    Ok(match code {
        0 => ScopeType::Service,
        1 => ScopeType::ServiceInstance,
        2 => ScopeType::Endpoint,
        3 => ScopeType::Process,
        4 => ScopeType::ServiceRelation,
        5 => ScopeType::ServiceInstanceRelation,
        6 => ScopeType::ProcessRelation,
        code => return Err(ValueError::UnknownCode { what: "scope code", code }),
    })
}

fn function_code(function: Downsampling) -> u8 {
    match function {
        Downsampling::Avg => 0,
        Downsampling::Sum => 1,
        Downsampling::Latest => 2,
        Downsampling::SumPerMin => 3,
        Downsampling::Max => 4,
        Downsampling::Min => 5,
    }
}

fn function_from(code: u8) -> Result<Downsampling, ValueError> {
    Ok(match code {
        0 => Downsampling::Avg,
        1 => Downsampling::Sum,
        2 => Downsampling::Latest,
        3 => Downsampling::SumPerMin,
        4 => Downsampling::Max,
        5 => Downsampling::Min,
        code => return Err(ValueError::UnknownCode { what: "function code", code }),
    })
}

fn data_type_code(data_type: DataType) -> u8 {
    match data_type {
        DataType::Single => 0,
        DataType::Labeled => 1,
        DataType::Histogram => 2,
        DataType::HistogramPercentile => 3,
    }
}

fn data_type_from(code: u8) -> Result<DataType, ValueError> {
    Ok(match code {
        0 => DataType::Single,
        1 => DataType::Labeled,
        2 => DataType::Histogram,
        3 => DataType::HistogramPercentile,
        code => return Err(ValueError::UnknownCode { what: "data type code", code }),
    })
}

/// `value count`, and `at` for `latest`.
fn put_acc(out: &mut Vec<u8>, acc: &Acc, function: Downsampling) {
    out.extend_from_slice(&acc.value.to_be_bytes());
    out.extend_from_slice(&acc.count.to_be_bytes());
    if function == Downsampling::Latest {
        out.extend_from_slice(&acc.at.to_be_bytes());
    }
}

/// How a cell's accumulators were written: whether they carry `at`.
#[derive(Clone, Copy)]
struct AccLayout {
    timed: bool,
}

impl AccLayout {
    fn of(version: u8, function: Downsampling) -> AccLayout {
        AccLayout { timed: version >= 2 && function == Downsampling::Latest }
    }

    /// The bytes of one accumulator, for bounding counts read from storage.
    fn size(self) -> usize {
        if self.timed { 24 } else { 16 }
    }

    fn read(self, reader: &mut Reader<'_>) -> Result<Acc, ValueError> {
        let (value, count) = (reader.i64()?, reader.i64()?);
        let at = if self.timed { reader.i64()? } else { 0 };
        Ok(Acc { value, count, at })
    }
}

pub fn encode_cell(cell: &Cell) -> Vec<u8> {
    let mut out = vec![FORMAT_VERSION, function_code(cell.function)];
    match &cell.data {
        Data::Single(acc) => {
            out.push(0);
            put_acc(&mut out, acc, cell.function);
        }
        Data::Labeled(map) => {
            out.push(1);
            put_len(&mut out, map.len());
            for (key, acc) in map {
                put_len(&mut out, key.len());
                out.extend_from_slice(key.as_bytes());
                put_acc(&mut out, acc, cell.function);
            }
        }
        Data::Histogram { buckets, percentiles } => {
            out.push(2);
            put_len(&mut out, percentiles.len());
            for rank in percentiles {
                out.extend_from_slice(&rank.to_be_bytes());
            }
            put_len(&mut out, buckets.len());
            for (bound, acc) in buckets {
                out.extend_from_slice(&bound.to_be_bytes());
                put_acc(&mut out, acc, cell.function);
            }
        }
    }
    out
}

pub fn decode_cell(bytes: &[u8]) -> Result<Cell, ValueError> {
    let (mut reader, version) = Reader::versions(bytes, OLDEST_FORMAT_VERSION, FORMAT_VERSION)?;
    let function = function_from(reader.u8()?)?;
    let acc = AccLayout::of(version, function);
    let data = match reader.u8()? {
        0 => Data::Single(acc.read(&mut reader)?),
        1 => {
            let n = reader.count(4 + acc.size())?;
            let mut map = BTreeMap::new();
            for _ in 0..n {
                let key = reader.string()?;
                map.insert(key, acc.read(&mut reader)?);
            }
            Data::Labeled(map)
        }
        2 => {
            let ranks = reader.count(4)?;
            let mut percentiles = Vec::with_capacity(ranks);
            for _ in 0..ranks {
                percentiles.push(reader.u32()?);
            }
            let n = reader.count(8 + acc.size())?;
            let mut buckets = BTreeMap::new();
            for _ in 0..n {
                let bound = reader.i64()?;
                buckets.insert(bound, acc.read(&mut reader)?);
            }
            Data::Histogram { buckets, percentiles }
        }
        code => return Err(ValueError::UnknownCode { what: "cell kind", code }),
    };
    reader.finish()?;
    Ok(Cell { function, data })
}

pub fn encode_info(info: &MetricInfo) -> Vec<u8> {
    vec![FORMAT_VERSION, scope_code(info.scope), data_type_code(info.data_type), function_code(info.downsampling)]
}

pub fn decode_info(name: &str, bytes: &[u8]) -> Result<MetricInfo, ValueError> {
    // Index records are the same in versions 1 and 2.
    let (mut reader, _) = Reader::versions(bytes, OLDEST_FORMAT_VERSION, FORMAT_VERSION)?;
    let info = MetricInfo {
        name: name.to_string(),
        scope: scope_from(reader.u8()?)?,
        data_type: data_type_from(reader.u8()?)?,
        downsampling: function_from(reader.u8()?)?,
    };
    reader.finish()?;
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_round_trip_and_garbage_is_an_error() {
        let cells = [
            Cell { function: Downsampling::Avg, data: Data::Single(Acc { value: -5, count: 3, at: 0 }) },
            Cell {
                function: Downsampling::Max,
                data: Data::Labeled(BTreeMap::from([("a=1".to_string(), Acc::of(4)), (String::new(), Acc::of(-1))])),
            },
            Cell {
                function: Downsampling::Sum,
                data: Data::Histogram { buckets: BTreeMap::from([(i64::MIN, Acc::of(1)), (100, Acc::of(2))]), percentiles: vec![50, 99] },
            },
            Cell { function: Downsampling::Latest, data: Data::Single(Acc { value: 7, count: 2, at: 1_700_000_000_123 }) },
            Cell {
                function: Downsampling::Latest,
                data: Data::Labeled(BTreeMap::from([("k=v".to_string(), Acc { value: 1, count: 1, at: -4 })])),
            },
        ];
        for cell in &cells {
            let bytes = encode_cell(cell);
            assert_eq!(&decode_cell(&bytes).expect("decode"), cell);
            for cut in 0..bytes.len() {
                assert!(decode_cell(&bytes[..cut]).is_err(), "a value cut at {cut} must not decode");
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(decode_cell(&longer).is_err());
        }
        assert!(decode_cell(&[9, 0, 0]).is_err(), "another format version");
        // A huge count with nothing behind it is refused before allocating.
        assert!(decode_cell(&[FORMAT_VERSION, 0, 1, 0xff, 0xff, 0xff, 0xff]).is_err());
    }

    /// The stored bytes of a cell and an index record, byte for byte: stores written by earlier
    /// builds must read back.
    #[test]
    fn the_value_format_is_pinned() {
        let cell = Cell {
            function: Downsampling::Max,
            data: Data::Labeled(BTreeMap::from([("a=1".to_string(), Acc { value: 4, count: 1, at: 0 })])),
        };
        let mut expected = vec![FORMAT_VERSION, 4, 1, 0, 0, 0, 1, 0, 0, 0, 3, b'a', b'=', b'1'];
        expected.extend_from_slice(&4i64.to_be_bytes());
        expected.extend_from_slice(&1i64.to_be_bytes());
        assert_eq!(encode_cell(&cell), expected);
        let info =
            MetricInfo { name: "m".into(), scope: ScopeType::Endpoint, data_type: DataType::Histogram, downsampling: Downsampling::Sum };
        assert_eq!(encode_info(&info), [FORMAT_VERSION, 2, 2, 1]);
        assert_eq!(decode_cell(&[9, 0, 0]).expect_err("version").to_string(), "format version 9, this build reads 2");
        assert_eq!(decode_cell(&[FORMAT_VERSION, 0, 7]).expect_err("kind").to_string(), "unknown cell kind 7");
        assert_eq!(decode_info("m", &[FORMAT_VERSION, 9, 0, 0]).expect_err("scope").to_string(), "unknown scope code 9");
    }

    /// A version 1 store reads on: its values decode as they were written, and a `latest`
    /// value gets sample time 0 (any newer sample replaces it). A `latest` value of version 2
    /// carries its time after the count.
    #[test]
    fn version_1_values_migrate_on_read() {
        let mut v1 = vec![1, 2, 0];
        v1.extend_from_slice(&9i64.to_be_bytes());
        v1.extend_from_slice(&3i64.to_be_bytes());
        let latest = Cell { function: Downsampling::Latest, data: Data::Single(Acc { value: 9, count: 3, at: 0 }) };
        assert_eq!(decode_cell(&v1).expect("a version 1 latest cell"), latest);
        let mut v1_avg = v1.clone();
        v1_avg[1] = 0;
        assert_eq!(decode_cell(&v1_avg).expect("a version 1 avg cell").data, latest.data);
        assert_eq!(decode_info("m", &[1, 2, 2, 1]).expect("a version 1 index record").downsampling, Downsampling::Sum);

        let timed = Cell { function: Downsampling::Latest, data: Data::Single(Acc { value: 9, count: 3, at: 5 }) };
        let mut v2 = vec![2, 2, 0];
        for n in [9i64, 3, 5] {
            v2.extend_from_slice(&n.to_be_bytes());
        }
        assert_eq!(encode_cell(&timed), v2);
        assert!(decode_cell(&v1[..]).is_ok() && decode_cell(&[0, 2, 0]).is_err(), "version 0 was never written");
    }

    #[test]
    fn index_records_round_trip() {
        let info = MetricInfo {
            name: "meter_x".into(),
            scope: ScopeType::Endpoint,
            data_type: DataType::HistogramPercentile,
            downsampling: Downsampling::SumPerMin,
        };
        assert_eq!(decode_info("meter_x", &encode_info(&info)).expect("decode"), info);
        assert!(decode_info("meter_x", &[FORMAT_VERSION, 9, 0, 0]).is_err());
    }
}
