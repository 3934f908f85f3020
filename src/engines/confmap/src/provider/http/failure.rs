//! How a failed TLS handshake or HTTP exchange is reported: certificate problems with the way to
//! fix them, other TLS failures, malformed responses, and the rest as I/O errors.
//!
//! The causes are found by walking the error's source chain and downcasting (to `rustls::Error`,
//! `hyper::Error`, `std::io::Error`), never by matching message text.

use std::error::Error as StdError;
use std::io::ErrorKind;

use super::{HttpError, HttpProvider};

/// How deep a source chain is followed; real chains are a handful of links.
const MAX_CHAIN: usize = 16;

/// A failed TLS handshake (the TCP connection was up).
pub(super) fn handshake(url: &str, error: std::io::Error) -> HttpError {
    if let Some(tls) = find::<rustls::Error>(&error) {
        return tls_error(url, tls);
    }
    let reason = if error.kind() == ErrorKind::UnexpectedEof {
        "the server closed the connection during the handshake".to_owned()
    } else {
        format!("handshake failed: {}", chain_message(&error))
    };
    HttpError::Tls {
        uri: url.to_owned(),
        reason,
    }
}

/// A failed HTTP exchange: sending the request, reading the head or the body.
pub(super) fn exchange(url: &str, error: hyper::Error) -> HttpError {
    let bad = |reason| HttpError::BadResponse {
        uri: url.to_owned(),
        reason,
    };
    if let Some(tls) = find::<rustls::Error>(&error) {
        tls_error(url, tls)
    } else if error.is_parse() {
        // Also a head over the limit (hyper tells it apart only on the server side).
        bad("invalid or oversized response head")
    } else if error.is_incomplete_message()
        || find::<std::io::Error>(&error).is_some_and(|io| io.kind() == ErrorKind::UnexpectedEof)
    {
        bad("connection closed before the end of the response")
    } else {
        other(url, &error)
    }
}

/// Any other failure, as an I/O error with the whole chain in its message.
pub(super) fn other(url: &str, error: &(dyn StdError + 'static)) -> HttpError {
    let kind = find::<std::io::Error>(error).map_or(ErrorKind::Other, std::io::Error::kind);
    HttpError::Io {
        uri: url.to_owned(),
        source: std::io::Error::new(kind, chain_message(error)),
    }
}

/// The first `T` in `error`'s source chain, looking inside `std::io::Error`s that wrap one.
fn find<'a, T: StdError + 'static>(error: &'a (dyn StdError + 'static)) -> Option<&'a T> {
    let mut current = Some(error);
    for _ in 0..MAX_CHAIN {
        let error = current?;
        if let Some(found) = error.downcast_ref::<T>() {
            return Some(found);
        }
        // An io::Error's `source()` skips the error it wraps; `get_ref()` is that error.
        current = match error.downcast_ref::<std::io::Error>() {
            Some(io) => io.get_ref().map(|inner| inner as &(dyn StdError + 'static)),
            None => error.source(),
        };
    }
    None
}

/// `error` and its sources, joined by `: ` (hyper's own message omits its cause).
fn chain_message(error: &(dyn StdError + 'static)) -> String {
    let mut message = error.to_string();
    let mut current = error.source();
    for _ in 0..MAX_CHAIN {
        let Some(source) = current else { break };
        let text = source.to_string();
        if !message.ends_with(&text) {
            message = format!("{message}: {text}");
        }
        current = source.source();
    }
    message
}

fn tls_error(url: &str, error: &rustls::Error) -> HttpError {
    use rustls::CertificateError;
    let uri = url.to_owned();
    match error {
        rustls::Error::InvalidCertificate(problem) => {
            let reason = match problem {
                CertificateError::UnknownIssuer => format!(
                    "certificate not trusted: it is not issued by a trusted CA (add the CA \
                     certificate to the PEM file named by {})",
                    HttpProvider::CA_FILE_VAR
                ),
                CertificateError::NotValidForName
                | CertificateError::NotValidForNameContext { .. } => {
                    format!("hostname mismatch: {problem}")
                }
                other => other.to_string(),
            };
            HttpError::Certificate { uri, reason }
        }
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
            HttpError::Tls {
                uri,
                reason: format!("{error} (is the server speaking TLS?)"),
            }
        }
        other => HttpError::Tls {
            uri,
            reason: other.to_string(),
        },
    }
}
