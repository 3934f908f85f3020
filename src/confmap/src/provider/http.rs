//! The `http` and `https` providers: a plain blocking HTTP/1.1 GET whose body is parsed as YAML.
//!
//! Written on `std::net::TcpStream` to avoid an HTTP client dependency. One overall deadline covers
//! connecting, sending and reading (default 5 s; name resolution itself is not bounded by it); the
//! body is capped (default 1 MiB) whether it is sized by `Content-Length`, chunked, or read to the
//! end. Any status outside 2xx is an error; redirects are not followed; credentials in the URL are
//! refused. This build has no TLS, so `https:` always fails with [`HttpError::TlsUnsupported`].

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::{Provider, ProviderError, Retrieved};
use crate::uri::Uri;

/// Limit on the status line plus headers.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Why an `http:`/`https:` URI could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{uri}: https provider requires TLS support, which this build does not include")]
    TlsUnsupported { uri: String },
    #[error("{uri}: invalid URL: {reason}")]
    BadUrl { uri: String, reason: &'static str },
    #[error("{uri}: cannot connect: {source}")]
    Connect { uri: String, source: std::io::Error },
    #[error("{uri}: timed out after {timeout:?}")]
    Timeout { uri: String, timeout: Duration },
    #[error("{uri}: {source}")]
    Io { uri: String, source: std::io::Error },
    #[error("{uri}: server answered {status} {reason}")]
    Status {
        uri: String,
        status: u16,
        reason: String,
    },
    #[error("{uri}: response body exceeds the limit of {limit} bytes")]
    BodyTooLarge { uri: String, limit: usize },
    #[error("{uri}: malformed HTTP response: {reason}")]
    BadResponse { uri: String, reason: &'static str },
    #[error("{uri}: response body is not valid UTF-8")]
    NotUtf8 { uri: String },
}

/// Serves `http:` (and, without TLS, refuses `https:`) URIs.
#[derive(Debug, Clone)]
pub struct HttpProvider {
    scheme: &'static str,
    timeout: Duration,
    max_body_bytes: usize,
}

impl HttpProvider {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
    pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

    pub fn http() -> HttpProvider {
        HttpProvider {
            scheme: "http",
            timeout: Self::DEFAULT_TIMEOUT,
            max_body_bytes: Self::DEFAULT_MAX_BODY_BYTES,
        }
    }

    pub fn https() -> HttpProvider {
        HttpProvider {
            scheme: "https",
            ..HttpProvider::http()
        }
    }

    pub fn with_timeout(self, timeout: Duration) -> HttpProvider {
        HttpProvider { timeout, ..self }
    }

    pub fn with_max_body_bytes(self, max_body_bytes: usize) -> HttpProvider {
        HttpProvider {
            max_body_bytes,
            ..self
        }
    }

    fn get(&self, uri: &Uri) -> Result<String, HttpError> {
        let url = uri.to_string();
        if self.scheme == "https" {
            return Err(HttpError::TlsUnsupported { uri: url });
        }
        let target = Target::parse(uri.opaque()).map_err(|reason| HttpError::BadUrl {
            uri: url.clone(),
            reason,
        })?;
        let mut connection = Connection::open(&target, &url, self.timeout)?;
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: hotrule-confmap\r\nAccept: */*\r\nConnection: close\r\n\r\n",
            target.path, target.authority
        );
        connection.write_all(request.as_bytes())?;
        let head = connection.read_head()?;
        if !(200..300).contains(&head.status) {
            return Err(HttpError::Status {
                uri: url,
                status: head.status,
                reason: head.reason,
            });
        }
        let body = if head.chunked {
            connection.read_chunked(self.max_body_bytes)?
        } else if let Some(length) = head.content_length {
            if length > self.max_body_bytes {
                return Err(HttpError::BodyTooLarge {
                    uri: url,
                    limit: self.max_body_bytes,
                });
            }
            connection.read_exact_bytes(length)?
        } else {
            connection.read_to_end(self.max_body_bytes)?
        };
        String::from_utf8(body).map_err(|_| HttpError::NotUtf8 { uri: url })
    }
}

impl Provider for HttpProvider {
    fn scheme(&self) -> &str {
        self.scheme
    }

    fn retrieve(&self, uri: &Uri) -> Result<Retrieved, ProviderError> {
        Ok(Retrieved::from_yaml(self.get(uri)?))
    }
}

/// Where to connect and what to ask for.
struct Target {
    host: String,
    port: u16,
    authority: String,
    path: String,
}

impl Target {
    /// Parses the opaque part of `http://host[:port][/path][?query]`, i.e. `//host...`.
    fn parse(opaque: &str) -> Result<Target, &'static str> {
        let rest = opaque
            .strip_prefix("//")
            .ok_or("expected http://host[:port]/path")?;
        let rest = rest.split('#').next().unwrap_or_default();
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(authority_end);
        if authority.contains('@') {
            return Err("credentials in the URL are not supported");
        }
        let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
            let (host, after) = bracketed
                .split_once(']')
                .ok_or("unterminated IPv6 address")?;
            (host, after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err("missing host");
        }
        let port = match port {
            Some(port) => port.parse::<u16>().map_err(|_| "invalid port")?,
            None => 80,
        };
        let path = match path {
            "" => "/".to_owned(),
            query if query.starts_with('?') => format!("/{query}"),
            path => path.to_owned(),
        };
        if path.chars().any(|c| c.is_ascii_control() || c == ' ') {
            return Err("the path contains spaces or control characters");
        }
        Ok(Target {
            host: host.to_owned(),
            port,
            authority: authority.to_owned(),
            path,
        })
    }
}

struct Head {
    status: u16,
    reason: String,
    content_length: Option<usize>,
    chunked: bool,
}

/// One request's connection: everything it does is bounded by one deadline.
struct Connection<'a> {
    stream: TcpStream,
    url: &'a str,
    timeout: Duration,
    deadline: Instant,
    buffer: Vec<u8>,
    eof: bool,
}

impl<'a> Connection<'a> {
    fn open(target: &Target, url: &'a str, timeout: Duration) -> Result<Connection<'a>, HttpError> {
        let deadline = Instant::now() + timeout;
        let addresses = (target.host.as_str(), target.port)
            .to_socket_addrs()
            .map_err(|source| HttpError::Connect {
                uri: url.to_owned(),
                source,
            })?;
        let mut last_error =
            std::io::Error::new(ErrorKind::NotFound, "host resolved to no address");
        for address in addresses {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(HttpError::Timeout {
                    uri: url.to_owned(),
                    timeout,
                });
            }
            match TcpStream::connect_timeout(&address, remaining) {
                Ok(stream) => {
                    return Ok(Connection {
                        stream,
                        url,
                        timeout,
                        deadline,
                        buffer: Vec::new(),
                        eof: false,
                    });
                }
                Err(error) if error.kind() == ErrorKind::TimedOut => {
                    return Err(HttpError::Timeout {
                        uri: url.to_owned(),
                        timeout,
                    });
                }
                Err(error) => last_error = error,
            }
        }
        Err(HttpError::Connect {
            uri: url.to_owned(),
            source: last_error,
        })
    }

    fn remaining(&self) -> Result<Duration, HttpError> {
        let remaining = self.deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(self.timed_out());
        }
        Ok(remaining)
    }

    fn timed_out(&self) -> HttpError {
        HttpError::Timeout {
            uri: self.url.to_owned(),
            timeout: self.timeout,
        }
    }

    fn io_error(&self, source: std::io::Error) -> HttpError {
        match source.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => self.timed_out(),
            _ => HttpError::Io {
                uri: self.url.to_owned(),
                source,
            },
        }
    }

    fn bad(&self, reason: &'static str) -> HttpError {
        HttpError::BadResponse {
            uri: self.url.to_owned(),
            reason,
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> Result<(), HttpError> {
        let remaining = self.remaining()?;
        self.stream
            .set_write_timeout(Some(remaining))
            .map_err(|error| self.io_error(error))?;
        self.stream
            .write_all(bytes)
            .map_err(|error| self.io_error(error))
    }

    /// Reads more bytes into the buffer; false at end of stream.
    fn fill(&mut self) -> Result<bool, HttpError> {
        if self.eof {
            return Ok(false);
        }
        let remaining = self.remaining()?;
        self.stream
            .set_read_timeout(Some(remaining))
            .map_err(|error| self.io_error(error))?;
        let mut chunk = [0u8; 8192];
        match self.stream.read(&mut chunk) {
            Ok(0) => {
                self.eof = true;
                Ok(false)
            }
            Ok(read) => {
                self.buffer.extend_from_slice(&chunk[..read]);
                Ok(true)
            }
            Err(error) if error.kind() == ErrorKind::Interrupted => Ok(true),
            Err(error) => Err(self.io_error(error)),
        }
    }

    /// Takes one CRLF-terminated line (without the CRLF) of at most `max` bytes.
    fn read_line(&mut self, max: usize) -> Result<Vec<u8>, HttpError> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|pair| pair == b"\r\n") {
                let line = self.buffer[..end].to_vec();
                self.buffer.drain(..end + 2);
                return Ok(line);
            }
            if self.buffer.len() > max {
                return Err(self.bad("line too long"));
            }
            if !self.fill()? {
                return Err(self.bad("connection closed mid-line"));
            }
        }
    }

    fn read_head(&mut self) -> Result<Head, HttpError> {
        let status_line = self.read_line(MAX_HEAD_BYTES)?;
        let status_line = String::from_utf8_lossy(&status_line).into_owned();
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or_default();
        let status = parts.next().and_then(|code| code.parse::<u16>().ok());
        let (true, Some(status)) = (version.starts_with("HTTP/1."), status) else {
            return Err(self.bad("invalid status line"));
        };
        let reason = parts.next().unwrap_or_default().to_owned();
        let mut head = Head {
            status,
            reason,
            content_length: None,
            chunked: false,
        };
        let mut head_bytes = status_line.len();
        loop {
            let line = self.read_line(MAX_HEAD_BYTES)?;
            head_bytes += line.len() + 2;
            if head_bytes > MAX_HEAD_BYTES {
                return Err(self.bad("headers too large"));
            }
            if line.is_empty() {
                return Ok(head);
            }
            let line = String::from_utf8_lossy(&line);
            let Some((name, value)) = line.split_once(':') else {
                return Err(self.bad("invalid header line"));
            };
            let (name, value) = (name.trim(), value.trim());
            if name.eq_ignore_ascii_case("content-length") {
                head.content_length = Some(
                    value
                        .parse()
                        .map_err(|_| self.bad("invalid Content-Length"))?,
                );
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                head.chunked = value
                    .to_ascii_lowercase()
                    .split(',')
                    .any(|coding| coding.trim() == "chunked");
            }
        }
    }

    fn read_exact_bytes(&mut self, length: usize) -> Result<Vec<u8>, HttpError> {
        while self.buffer.len() < length {
            if !self.fill()? {
                return Err(self.bad("connection closed before the end of the body"));
            }
        }
        Ok(self.buffer.drain(..length).collect())
    }

    fn read_to_end(&mut self, limit: usize) -> Result<Vec<u8>, HttpError> {
        loop {
            // The head's last read may already hold (part of) the body.
            if self.buffer.len() > limit {
                return Err(HttpError::BodyTooLarge {
                    uri: self.url.to_owned(),
                    limit,
                });
            }
            if !self.fill()? {
                return Ok(std::mem::take(&mut self.buffer));
            }
        }
    }

    fn read_chunked(&mut self, limit: usize) -> Result<Vec<u8>, HttpError> {
        let mut body = Vec::new();
        loop {
            let size_line = self.read_line(1024)?;
            let size_text = String::from_utf8_lossy(&size_line);
            let size_text = size_text.split(';').next().unwrap_or_default().trim();
            let size =
                usize::from_str_radix(size_text, 16).map_err(|_| self.bad("invalid chunk size"))?;
            if size == 0 {
                // Trailers, if any, end with an empty line.
                while !self.read_line(MAX_HEAD_BYTES)?.is_empty() {}
                return Ok(body);
            }
            if size > limit.saturating_sub(body.len()) {
                return Err(HttpError::BodyTooLarge {
                    uri: self.url.to_owned(),
                    limit,
                });
            }
            body.extend(self.read_exact_bytes(size)?);
            if !self.read_line(2)?.is_empty() {
                return Err(self.bad("chunk not followed by CRLF"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_parsing() {
        let target = Target::parse("//127.0.0.1:8080/conf/node.yaml?v=1#frag").expect("valid");
        assert_eq!(
            (target.host.as_str(), target.port, target.path.as_str()),
            ("127.0.0.1", 8080, "/conf/node.yaml?v=1")
        );
        let target = Target::parse("//[::1]:9/").expect("ipv6");
        assert_eq!(
            (target.host.as_str(), target.port, target.authority.as_str()),
            ("::1", 9, "[::1]:9")
        );
        let target = Target::parse("//example.org").expect("no path");
        assert_eq!((target.port, target.path.as_str()), (80, "/"));
        assert!(Target::parse("example.org/x").is_err());
        assert!(Target::parse("//user:pw@host/").is_err());
        assert!(Target::parse("//host:99999/").is_err());
        assert!(Target::parse("///path").is_err());
    }

    #[test]
    fn https_is_refused_without_tls() {
        let uri = Uri::parse("https://example.org/x.yaml").expect("valid uri");
        let error = HttpProvider::https().retrieve(&uri).expect_err("no tls");
        assert!(
            error
                .to_string()
                .contains("https provider requires TLS support, which this build does not include")
        );
    }
}
