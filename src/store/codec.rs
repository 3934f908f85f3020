//! Encoding of stored values: one format-version byte, then bincode (2.x, serde mode).
//!
//! Every value in management storage goes through here, so moving to another encoding, or
//! reading an older format, touches this file only.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The version byte written in front of every stored value.
pub const FORMAT_VERSION: u8 = 1;

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("stored value is empty")]
    Empty,
    #[error("stored value has format version {found}, this build reads version {FORMAT_VERSION}")]
    UnknownVersion { found: u8 },
    #[error("stored value does not decode: {0}")]
    Decode(String),
    #[error("value does not encode: {0}")]
    Encode(String),
}

pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, CodecError> {
    let body = bincode::serde::encode_to_vec(value, bincode::config::standard())
        .map_err(|e| CodecError::Encode(e.to_string()))?;
    let mut out = Vec::with_capacity(body.len() + 1);
    out.push(FORMAT_VERSION);
    out.extend_from_slice(&body);
    Ok(out)
}

pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    let (&version, body) = bytes.split_first().ok_or(CodecError::Empty)?;
    if version != FORMAT_VERSION {
        return Err(CodecError::UnknownVersion { found: version });
    }
    let (value, _read) = bincode::serde::decode_from_slice(body, bincode::config::standard())
        .map_err(|e| CodecError::Decode(e.to_string()))?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_with_a_version_prefix() {
        let bytes = encode(&("a".to_string(), 7u64)).expect("encode");
        assert_eq!(bytes[0], FORMAT_VERSION);
        let back: (String, u64) = decode(&bytes).expect("decode");
        assert_eq!(back, ("a".to_string(), 7));
    }

    #[test]
    fn unknown_versions_and_garbage_are_errors_not_panics() {
        assert!(matches!(decode::<u64>(&[]), Err(CodecError::Empty)));
        assert!(matches!(decode::<u64>(&[9, 1]), Err(CodecError::UnknownVersion { found: 9 })));
        assert!(decode::<String>(&[FORMAT_VERSION, 0xff, 0xff, 0xff]).is_err());
    }
}
