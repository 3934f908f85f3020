//! The remote-write 1.0 `WriteRequest` read straight from the protobuf wire format, borrowing
//! label names and values from the decompressed buffer.
//!
//! prost would build an owned `String` for every label of every series before the receiver can
//! look at `__name__`; a node_exporter scrape has 507 series of which the bundled rules read 43.
//! [`walk`] instead hands each series to the caller as borrowed `(name, value)` pairs and its
//! `(value, timestamp)` samples, in scratch vectors reused from series to series, so a series no
//! rule reads costs no allocation at all.
//!
//! It accepts exactly what `prompb::WriteRequest::decode` (prost 0.14) accepts and refuses what
//! it refuses (the test `wire_decoder_agrees_with_prost` holds it to that):
//! - every field is checked, whether the receiver uses it or not: label names and values, the
//!   exemplars' labels and the metadata's strings must be UTF-8, every known field must have its
//!   declared wire type, every length must fit the enclosing message;
//! - unknown fields (`TimeSeries.histograms` = 4, the reserved `WriteRequest` field 2, anything
//!   newer) are skipped by wire type, groups included, with prost's nesting limit of 100;
//! - a varint is at most 10 bytes and fits in 64 bits; a field key fits in 32 bits, its field
//!   number is not 0 and its wire type is 0–5;
//! - repeated message fields append, singular scalar fields take the last occurrence, a missing
//!   field is its zero value (an empty string, 0.0, 0).
//!
//! An error names where it happened (`timeseries[3].labels[1].value: not UTF-8`).

/// prost's recursion budget (`prost::RECURSION_LIMIT`): the nesting at which it refuses input.
const RECURSION_LIMIT: u32 = 100;

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LENGTH_DELIMITED: u8 = 2;
const START_GROUP: u8 = 3;
const END_GROUP: u8 = 4;
const FIXED32: u8 = 5;

/// What is wrong at one place of the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireProblem {
    #[error("a varint is truncated or longer than 64 bits")]
    Varint,
    #[error("field key {0} does not fit in 32 bits")]
    KeyTooLarge(u64),
    #[error("wire type {0} does not exist")]
    UnknownWireType(u8),
    #[error("field number 0 is not valid")]
    FieldZero,
    #[error("field {field} has wire type {found}, its type needs {expected}")]
    WrongWireType { field: u32, found: u8, expected: u8 },
    #[error("a length of {declared} runs past the end of the enclosing message ({left} bytes left)")]
    PastEnd { declared: u64, left: usize },
    #[error("an end-group tag that closes no group")]
    UnexpectedEndGroup,
    #[error("fields nested more than {RECURSION_LIMIT} deep")]
    TooDeep,
    #[error("not UTF-8")]
    NotUtf8,
}

/// A problem and where it is (`timeseries[3].labels[1].value`; empty at the top level).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{problem}", if at.is_empty() { String::new() } else { format!("{at}: ") })]
pub struct WireError {
    pub at: String,
    pub problem: WireProblem,
}

impl WireError {
    fn new(at: impl Into<String>, problem: WireProblem) -> WireError {
        WireError { at: at.into(), problem }
    }

    /// The same error, one level further out (`within("timeseries[3]")`).
    fn within(mut self, outer: &str) -> WireError {
        self.at = match self.at.is_empty() {
            true => outer.to_owned(),
            false => format!("{outer}.{}", self.at),
        };
        self
    }
}

impl From<WireProblem> for WireError {
    fn from(problem: WireProblem) -> WireError {
        WireError::new(String::new(), problem)
    }
}

/// A cursor over one message's bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, pos: 0 }
    }

    fn at_end(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    fn left(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn varint(&mut self) -> Result<u64, WireProblem> {
        let mut value = 0u64;
        for i in 0..10 {
            let Some(&byte) = self.bytes.get(self.pos + i) else { return Err(WireProblem::Varint) };
            // The tenth byte may only carry the 64th bit.
            if i == 9 && byte >= 0x02 {
                return Err(WireProblem::Varint);
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                self.pos += i + 1;
                return Ok(value);
            }
        }
        Err(WireProblem::Varint)
    }

    /// A field key: (field number, wire type).
    fn key(&mut self) -> Result<(u32, u8), WireProblem> {
        let key = self.varint()?;
        let key = u32::try_from(key).map_err(|_| WireProblem::KeyTooLarge(key))?;
        let wire_type = (key & 0x07) as u8;
        if wire_type > FIXED32 {
            return Err(WireProblem::UnknownWireType(wire_type));
        }
        match key >> 3 {
            0 => Err(WireProblem::FieldZero),
            field => Ok((field, wire_type)),
        }
    }

    fn take(&mut self, len: u64) -> Result<&'a [u8], WireProblem> {
        let left = self.left();
        if len > left as u64 {
            return Err(WireProblem::PastEnd { declared: len, left });
        }
        let start = self.pos;
        self.pos += len as usize;
        Ok(&self.bytes[start..self.pos])
    }

    /// A length-delimited field's bytes.
    fn delimited(&mut self) -> Result<&'a [u8], WireProblem> {
        let len = self.varint()?;
        self.take(len)
    }

    fn fixed64(&mut self) -> Result<u64, WireProblem> {
        let bytes = self.take(8)?;
        let mut word = [0u8; 8];
        word.copy_from_slice(bytes);
        Ok(u64::from_le_bytes(word))
    }

    /// Skips an unknown field, as prost's `skip_field` does with a recursion budget of `budget`.
    fn skip(&mut self, field: u32, wire_type: u8, budget: u32) -> Result<(), WireProblem> {
        if budget == 0 {
            return Err(WireProblem::TooDeep);
        }
        match wire_type {
            VARINT => self.varint().map(drop),
            FIXED64 => self.take(8).map(drop),
            FIXED32 => self.take(4).map(drop),
            LENGTH_DELIMITED => self.delimited().map(drop),
            START_GROUP => loop {
                let (inner, inner_type) = self.key()?;
                if inner_type == END_GROUP {
                    return match inner == field {
                        true => Ok(()),
                        false => Err(WireProblem::UnexpectedEndGroup),
                    };
                }
                self.skip(inner, inner_type, budget - 1)?;
            },
            _ => Err(WireProblem::UnexpectedEndGroup),
        }
    }
}

fn expect(field: u32, found: u8, expected: u8) -> Result<(), WireProblem> {
    match found == expected {
        true => Ok(()),
        false => Err(WireProblem::WrongWireType { field, found, expected }),
    }
}

/// A nested message field: its wire type checked, prost's budget checked, its bytes.
fn message<'a>(reader: &mut Reader<'a>, field: u32, wire_type: u8, budget: u32) -> Result<&'a [u8], WireProblem> {
    expect(field, wire_type, LENGTH_DELIMITED)?;
    if budget == 0 {
        return Err(WireProblem::TooDeep);
    }
    reader.delimited()
}

fn string<'a>(reader: &mut Reader<'a>, field: u32, wire_type: u8) -> Result<&'a str, WireProblem> {
    expect(field, wire_type, LENGTH_DELIMITED)?;
    std::str::from_utf8(reader.delimited()?).map_err(|_| WireProblem::NotUtf8)
}

/// `Label { string name = 1; string value = 2; }`
fn label(bytes: &[u8], budget: u32) -> Result<(&str, &str), WireError> {
    let mut reader = Reader::new(bytes);
    let (mut name, mut value) = ("", "");
    while !reader.at_end() {
        let (field, wire_type) = reader.key()?;
        match field {
            1 => name = string(&mut reader, field, wire_type).map_err(|p| WireError::new("name", p))?,
            2 => value = string(&mut reader, field, wire_type).map_err(|p| WireError::new("value", p))?,
            _ => reader.skip(field, wire_type, budget)?,
        }
    }
    Ok((name, value))
}

/// `Sample { double value = 1; int64 timestamp = 2; }` (and `Exemplar`'s own two, shifted).
fn sample(bytes: &[u8], value_field: u32, timestamp_field: u32, budget: u32) -> Result<(f64, i64), WireError> {
    let mut reader = Reader::new(bytes);
    let (mut value, mut timestamp) = (0.0, 0);
    while !reader.at_end() {
        let (field, wire_type) = reader.key()?;
        if field == value_field {
            expect(field, wire_type, FIXED64).map_err(|p| WireError::new("value", p))?;
            value = f64::from_bits(reader.fixed64().map_err(|p| WireError::new("value", p))?);
        } else if field == timestamp_field {
            expect(field, wire_type, VARINT).map_err(|p| WireError::new("timestamp", p))?;
            timestamp = reader.varint().map_err(|p| WireError::new("timestamp", p))? as i64;
        } else {
            reader.skip(field, wire_type, budget)?;
        }
    }
    Ok((value, timestamp))
}

/// `Exemplar { repeated Label labels = 1; double value = 2; int64 timestamp = 3; }`: checked,
/// not kept.
fn exemplar(bytes: &[u8], budget: u32) -> Result<(), WireError> {
    let mut reader = Reader::new(bytes);
    let mut labels = 0;
    while !reader.at_end() {
        let (field, wire_type) = reader.key()?;
        match field {
            1 => {
                let at = || format!("labels[{labels}]");
                let bytes = message(&mut reader, field, wire_type, budget).map_err(|p| WireError::new(at(), p))?;
                label(bytes, budget - 1).map_err(|e| e.within(&at()))?;
                labels += 1;
            }
            2 => {
                expect(field, wire_type, FIXED64).map_err(|p| WireError::new("value", p))?;
                reader.fixed64().map_err(|p| WireError::new("value", p))?;
            }
            3 => {
                expect(field, wire_type, VARINT).map_err(|p| WireError::new("timestamp", p))?;
                reader.varint().map_err(|p| WireError::new("timestamp", p))?;
            }
            _ => reader.skip(field, wire_type, budget)?,
        }
    }
    Ok(())
}

/// `MetricMetadata { MetricType type = 1; string metric_family_name = 2; string help = 4;
/// string unit = 5; }`: checked, not kept.
fn metadata(bytes: &[u8], budget: u32) -> Result<(), WireError> {
    let mut reader = Reader::new(bytes);
    while !reader.at_end() {
        let (field, wire_type) = reader.key()?;
        match field {
            1 => {
                expect(field, wire_type, VARINT).map_err(|p| WireError::new("type", p))?;
                reader.varint().map_err(|p| WireError::new("type", p))?;
            }
            2 | 4 | 5 => {
                let name = match field {
                    2 => "metric_family_name",
                    4 => "help",
                    _ => "unit",
                };
                string(&mut reader, field, wire_type).map_err(|p| WireError::new(name, p))?;
            }
            _ => reader.skip(field, wire_type, budget)?,
        }
    }
    Ok(())
}

/// One series' labels and samples, in scratch vectors the walk reuses.
pub struct Series<'a> {
    pub labels: Vec<(&'a str, &'a str)>,
    pub samples: Vec<(f64, i64)>,
}

/// `TimeSeries { repeated Label labels = 1; repeated Sample samples = 2; repeated Exemplar
/// exemplars = 3; }` into `series` (cleared first).
fn time_series<'a>(bytes: &'a [u8], series: &mut Series<'a>, budget: u32) -> Result<(), WireError> {
    series.labels.clear();
    series.samples.clear();
    let mut reader = Reader::new(bytes);
    let mut exemplars = 0;
    while !reader.at_end() {
        let (field, wire_type) = reader.key()?;
        match field {
            1 => {
                let at = |n: usize| format!("labels[{n}]");
                let n = series.labels.len();
                let bytes = message(&mut reader, field, wire_type, budget).map_err(|p| WireError::new(at(n), p))?;
                series.labels.push(label(bytes, budget - 1).map_err(|e| e.within(&at(n)))?);
            }
            2 => {
                let at = |n: usize| format!("samples[{n}]");
                let n = series.samples.len();
                let bytes = message(&mut reader, field, wire_type, budget).map_err(|p| WireError::new(at(n), p))?;
                series.samples.push(sample(bytes, 1, 2, budget - 1).map_err(|e| e.within(&at(n)))?);
            }
            3 => {
                let at = |n: usize| format!("exemplars[{n}]");
                let bytes = message(&mut reader, field, wire_type, budget).map_err(|p| WireError::new(at(exemplars), p))?;
                exemplar(bytes, budget - 1).map_err(|e| e.within(&at(exemplars)))?;
                exemplars += 1;
            }
            _ => reader.skip(field, wire_type, budget)?,
        }
    }
    Ok(())
}

/// Walks a `WriteRequest { repeated TimeSeries timeseries = 1; repeated MetricMetadata
/// metadata = 3; }`, calling `each(index, series)` for every series in order. The whole message
/// is checked: on an error, series before it have been handed out, and the caller drops what it
/// made of them (as prost would have refused the message before any).
pub fn walk<'a>(raw: &'a [u8], mut each: impl FnMut(usize, &Series<'a>)) -> Result<(), WireError> {
    let mut reader = Reader::new(raw);
    let mut series = Series { labels: Vec::new(), samples: Vec::new() };
    let (mut index, mut metadata_seen) = (0, 0);
    let budget = RECURSION_LIMIT;
    while !reader.at_end() {
        let (field, wire_type) = reader.key()?;
        match field {
            1 => {
                let at = || format!("timeseries[{index}]");
                let bytes = message(&mut reader, field, wire_type, budget).map_err(|p| WireError::new(at(), p))?;
                time_series(bytes, &mut series, budget - 1).map_err(|e| e.within(&at()))?;
                each(index, &series);
                index += 1;
            }
            3 => {
                let at = || format!("metadata[{metadata_seen}]");
                let bytes = message(&mut reader, field, wire_type, budget).map_err(|p| WireError::new(at(), p))?;
                metadata(bytes, budget - 1).map_err(|e| e.within(&at()))?;
                metadata_seen += 1;
            }
            _ => reader.skip(field, wire_type, budget)?,
        }
    }
    Ok(())
}
