//! The roll record's stored form: one format-version byte, then bincode (2.x, serde mode), as
//! `store::codec` does for entries. The store keeps these bytes opaque (it imports nothing above
//! it), so the version of the record format is owned here.

use super::record::RollRecord;

/// The version byte written in front of every stored roll record.
pub const ROLL_FORMAT_VERSION: u8 = 1;

#[derive(Debug, thiserror::Error)]
pub enum RollCodecError {
    #[error("stored roll record is empty")]
    Empty,
    #[error("stored roll record has format version {found}, this build reads version {ROLL_FORMAT_VERSION}")]
    UnknownVersion { found: u8 },
    #[error("stored roll record does not decode: {0}")]
    Decode(String),
    #[error("roll record does not encode: {0}")]
    Encode(String),
}

pub fn encode(record: &RollRecord) -> Result<Vec<u8>, RollCodecError> {
    let body = bincode::serde::encode_to_vec(record, bincode::config::standard())
        .map_err(|e| RollCodecError::Encode(e.to_string()))?;
    let mut out = Vec::with_capacity(body.len() + 1);
    out.push(ROLL_FORMAT_VERSION);
    out.extend_from_slice(&body);
    Ok(out)
}

pub fn decode(bytes: &[u8]) -> Result<RollRecord, RollCodecError> {
    let (&version, body) = bytes.split_first().ok_or(RollCodecError::Empty)?;
    if version != ROLL_FORMAT_VERSION {
        return Err(RollCodecError::UnknownVersion { found: version });
    }
    let (record, read) = bincode::serde::decode_from_slice(body, bincode::config::standard())
        .map_err(|e| RollCodecError::Decode(e.to_string()))?;
    if read != body.len() {
        return Err(RollCodecError::Decode(format!("{} trailing bytes", body.len() - read)));
    }
    Ok(record)
}
