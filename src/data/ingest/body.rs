//! Reading a receiver's request body within the limits: the declared length and the bytes on
//! the wire against `max_body_bytes`, a gzip body's decompressed size against
//! `max_decompressed_bytes` (checked while inflating, so a gzip bomb stops at the limit).

use std::io::Read;

use axum::body::Body;
use axum::http::{HeaderMap, header};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};

/// A `Content-Encoding` a receiver may accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Identity,
    Gzip,
    Snappy,
}

/// Why a body could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    #[error("the body is larger than {limit} bytes{}", if *.decompressed { " once decompressed" } else { "" })]
    TooLarge { limit: usize, decompressed: bool },
    #[error("Content-Encoding {0:?} is not supported here")]
    UnsupportedEncoding(String),
    #[error("the gzip body does not inflate: {0}")]
    Gzip(String),
    #[error("reading the request body: {0}")]
    Read(String),
}

/// The request's `Content-Encoding`, when it is one of `allowed` (absent means identity).
pub fn encoding(headers: &HeaderMap, allowed: &[Encoding]) -> Result<Encoding, BodyError> {
    let found = match headers.get(header::CONTENT_ENCODING).map(|v| v.to_str().map(str::trim)) {
        None => Encoding::Identity,
        Some(Ok(text)) if text.is_empty() || text.eq_ignore_ascii_case("identity") => Encoding::Identity,
        Some(Ok(text)) if text.eq_ignore_ascii_case("gzip") || text.eq_ignore_ascii_case("x-gzip") => Encoding::Gzip,
        Some(Ok(text)) if text.eq_ignore_ascii_case("snappy") => Encoding::Snappy,
        Some(other) => return Err(BodyError::UnsupportedEncoding(other.unwrap_or("(not text)").to_owned())),
    };
    if allowed.contains(&found) {
        Ok(found)
    } else {
        let text = headers.get(header::CONTENT_ENCODING).and_then(|v| v.to_str().ok()).unwrap_or("identity");
        Err(BodyError::UnsupportedEncoding(text.to_owned()))
    }
}

/// The body as sent, at most `limit` bytes (a larger declared length is refused before reading).
pub async fn read(headers: &HeaderMap, body: Body, limit: usize) -> Result<Bytes, BodyError> {
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit as u64) {
        return Err(BodyError::TooLarge { limit, decompressed: false });
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(BodyError::TooLarge { limit, decompressed: false }),
        Err(e) => Err(BodyError::Read(e.to_string())),
    }
}

/// Inflates a gzip body, refusing one that inflates beyond `limit` bytes.
pub fn gunzip(compressed: &[u8], limit: usize) -> Result<Vec<u8>, BodyError> {
    let mut out = Vec::new();
    let decoder = flate2::read::GzDecoder::new(compressed);
    decoder
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| BodyError::Gzip(e.to_string()))?;
    if out.len() > limit {
        return Err(BodyError::TooLarge { limit, decompressed: true });
    }
    Ok(out)
}

/// The body decoded per `encoding` (snappy is left to its receiver).
pub fn decoded(raw: Bytes, encoding: Encoding, limit: usize) -> Result<Bytes, BodyError> {
    match encoding {
        Encoding::Gzip => gunzip(&raw, limit).map(Bytes::from),
        Encoding::Identity | Encoding::Snappy if raw.len() > limit => Err(BodyError::TooLarge { limit, decompressed: true }),
        Encoding::Identity | Encoding::Snappy => Ok(raw),
    }
}
