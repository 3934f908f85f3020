//! The `http` and `https` providers: a plain blocking HTTP/1.1 GET whose body is parsed as YAML.
//!
//! Written on `std::net::TcpStream` to avoid an HTTP client dependency; `https:` runs the same
//! exchange inside a TLS session (rustls with the ring provider). One overall deadline covers
//! connecting, the TLS handshake, sending and reading (default 5 s; name resolution itself is not
//! bounded by it); the body is capped (default 1 MiB) whether it is sized by `Content-Length`,
//! chunked, or read to the end. Any status outside 2xx is an error; redirects are not followed;
//! credentials in the URL are refused.
//!
//! For `https:` the server name sent (SNI) and verified is the URL's host. The server certificate is
//! always verified, against the public web CA roots (compiled in from `webpki-roots`) plus, for the
//! standard provider, the PEM certificates in the file named by `HOTRULE_CONFIG_CA_FILE` (read
//! through the injected [`Env`] at every fetch, so a private CA is added with e.g.
//! `HOTRULE_CONFIG_CA_FILE=/etc/hotrule/ca.pem`). [`HttpProvider::https_with_roots`] adds CA
//! certificates given directly. There is no way to turn verification off: an untrusted or
//! mismatching certificate is [`HttpError::Certificate`].

use std::fmt;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject;
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use rustls_pki_types::CertificateDer;

use super::{Env, Provider, ProviderError, Retrieved};
use crate::uri::Uri;

/// Limit on the status line plus headers.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Why an `http:`/`https:` URI could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{uri}: invalid URL: {reason}")]
    BadUrl { uri: String, reason: &'static str },
    #[error("{uri}: cannot connect: {source}")]
    Connect { uri: String, source: std::io::Error },
    #[error("{uri}: timed out after {timeout:?}")]
    Timeout { uri: String, timeout: Duration },
    #[error("{uri}: {source}")]
    Io { uri: String, source: std::io::Error },
    /// The extra CA certificates (from `HOTRULE_CONFIG_CA_FILE` or given in code) are unusable;
    /// `reason` starts with where they came from.
    #[error("{uri}: cannot use the extra CA certificates from {reason}")]
    CaCertificates { uri: String, reason: String },
    /// The server's certificate failed verification: not trusted, wrong host name, expired, ...
    #[error("{uri}: server certificate rejected: {reason}")]
    Certificate { uri: String, reason: String },
    /// Any other TLS failure (handshake, protocol, alert from the server).
    #[error("{uri}: TLS error: {reason}")]
    Tls { uri: String, reason: String },
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

/// CA certificates trusted for `https:` on top of the public web roots.
#[derive(Clone)]
enum ExtraRoots {
    None,
    /// The PEM file named by [`HttpProvider::CA_FILE_VAR`] in this environment, read at each fetch.
    FromEnv(Arc<dyn Env>),
    /// PEM text given in code.
    Pem(Arc<[u8]>),
}

impl fmt::Debug for ExtraRoots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExtraRoots::None => f.write_str("None"),
            ExtraRoots::FromEnv(_) => write!(f, "FromEnv({})", HttpProvider::CA_FILE_VAR),
            ExtraRoots::Pem(pem) => write!(f, "Pem({} bytes)", pem.len()),
        }
    }
}

/// Serves `http:` or `https:` URIs.
#[derive(Debug, Clone)]
pub struct HttpProvider {
    scheme: &'static str,
    timeout: Duration,
    max_body_bytes: usize,
    extra_roots: ExtraRoots,
}

impl HttpProvider {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
    pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
    /// The environment variable naming a PEM file of extra CA certificates to trust for `https:`.
    pub const CA_FILE_VAR: &'static str = "HOTRULE_CONFIG_CA_FILE";

    pub fn http() -> HttpProvider {
        HttpProvider {
            scheme: "http",
            timeout: Self::DEFAULT_TIMEOUT,
            max_body_bytes: Self::DEFAULT_MAX_BODY_BYTES,
            extra_roots: ExtraRoots::None,
        }
    }

    /// `https:` trusting the public web CA roots only.
    pub fn https() -> HttpProvider {
        HttpProvider {
            scheme: "https",
            ..HttpProvider::http()
        }
    }

    /// `https:` trusting the public web CA roots plus the PEM file named by
    /// [`HttpProvider::CA_FILE_VAR`] in `env`, if set (and not empty). The file is read at each
    /// fetch; a missing or unusable file is [`HttpError::CaCertificates`].
    pub fn https_from_env(env: Arc<dyn Env>) -> HttpProvider {
        HttpProvider {
            extra_roots: ExtraRoots::FromEnv(env),
            ..HttpProvider::https()
        }
    }

    /// `https:` trusting the public web CA roots plus the CA certificates in `extra_pem` (PEM text
    /// with one or more `CERTIFICATE` blocks; other blocks are ignored). Unusable PEM is reported
    /// as [`HttpError::CaCertificates`] when fetching.
    pub fn https_with_roots(extra_pem: Vec<u8>) -> HttpProvider {
        HttpProvider {
            extra_roots: ExtraRoots::Pem(extra_pem.into()),
            ..HttpProvider::https()
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
        let tls = self.scheme == "https";
        let target = Target::parse(uri.opaque(), if tls { 443 } else { 80 }).map_err(|reason| {
            HttpError::BadUrl {
                uri: url.clone(),
                reason,
            }
        })?;
        // Everything that can fail without the network fails before connecting.
        let client = if tls {
            Some(self.tls_client(&target, &url)?)
        } else {
            None
        };
        let socket = DeadlineStream::connect(&target, &url, self.timeout)?;
        match client {
            None => self.exchange(Connection::new(socket, &url, self.timeout), &target),
            Some(client) => {
                let mut stream = StreamOwned::new(client, socket);
                handshake(&mut stream, &url, self.timeout)?;
                self.exchange(Connection::new(stream, &url, self.timeout), &target)
            }
        }
    }

    /// Sends the request and reads the response over a plain or TLS stream.
    fn exchange<S: Read + Write>(
        &self,
        mut connection: Connection<'_, S>,
        target: &Target,
    ) -> Result<String, HttpError> {
        let url = connection.url;
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: hotrule-confmap\r\nAccept: */*\r\nConnection: close\r\n\r\n",
            target.path, target.authority
        );
        connection.write_all(request.as_bytes())?;
        let head = connection.read_head()?;
        if !(200..300).contains(&head.status) {
            return Err(HttpError::Status {
                uri: url.to_owned(),
                status: head.status,
                reason: head.reason,
            });
        }
        let body = if head.chunked {
            connection.read_chunked(self.max_body_bytes)?
        } else if let Some(length) = head.content_length {
            if length > self.max_body_bytes {
                return Err(HttpError::BodyTooLarge {
                    uri: url.to_owned(),
                    limit: self.max_body_bytes,
                });
            }
            connection.read_exact_bytes(length)?
        } else {
            connection.read_to_end(self.max_body_bytes)?
        };
        String::from_utf8(body).map_err(|_| HttpError::NotUtf8 {
            uri: url.to_owned(),
        })
    }

    /// A TLS client for `target`: SNI and verification against its host, trusting the roots.
    fn tls_client(&self, target: &Target, url: &str) -> Result<ClientConnection, HttpError> {
        let server_name = ServerName::try_from(target.host.as_str())
            .map_err(|_| HttpError::BadUrl {
                uri: url.to_owned(),
                reason: "the host is not a valid TLS server name",
            })?
            .to_owned();
        let tls_error = |error: rustls::Error| HttpError::Tls {
            uri: url.to_owned(),
            reason: error.to_string(),
        };
        let roots = self.root_store(url)?;
        let config =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(tls_error)?
                .with_root_certificates(roots)
                .with_no_client_auth();
        ClientConnection::new(Arc::new(config), server_name).map_err(tls_error)
    }

    /// The public web roots plus the extra CA certificates, if any.
    fn root_store(&self, url: &str) -> Result<RootCertStore, HttpError> {
        let mut roots = RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let (origin, pem): (String, Arc<[u8]>) = match &self.extra_roots {
            ExtraRoots::None => return Ok(roots),
            ExtraRoots::Pem(pem) => (
                "the PEM given to the https provider".to_owned(),
                pem.clone(),
            ),
            ExtraRoots::FromEnv(env) => {
                let Some(path) = env.var(Self::CA_FILE_VAR).filter(|path| !path.is_empty()) else {
                    return Ok(roots);
                };
                let origin = format!("{}={path}", Self::CA_FILE_VAR);
                match std::fs::read(&path) {
                    Ok(pem) => (origin, pem.into()),
                    Err(error) => {
                        return Err(HttpError::CaCertificates {
                            uri: url.to_owned(),
                            reason: format!("{origin}: cannot read the file: {error}"),
                        });
                    }
                }
            }
        };
        let added =
            add_pem_certificates(&mut roots, &pem).map_err(|reason| HttpError::CaCertificates {
                uri: url.to_owned(),
                reason: format!("{origin}: {reason}"),
            })?;
        tracing::debug!(url, origin, added, "trusting extra CA certificates");
        Ok(roots)
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

/// Adds every `CERTIFICATE` block of `pem` to `roots`; returns how many, or why it failed.
fn add_pem_certificates(roots: &mut RootCertStore, pem: &[u8]) -> Result<usize, String> {
    let mut added = 0;
    for certificate in CertificateDer::pem_slice_iter(pem) {
        let certificate = certificate.map_err(|error| format!("invalid PEM: {error}"))?;
        roots
            .add(certificate)
            .map_err(|error| format!("certificate #{} is unusable: {error}", added + 1))?;
        added += 1;
    }
    if added == 0 {
        return Err("no CERTIFICATE block found".to_owned());
    }
    Ok(added)
}

/// Runs the TLS handshake to its end, so its failures are reported as such.
fn handshake(
    stream: &mut StreamOwned<ClientConnection, DeadlineStream>,
    url: &str,
    timeout: Duration,
) -> Result<(), HttpError> {
    while stream.conn.is_handshaking() {
        match stream.conn.complete_io(&mut stream.sock) {
            Ok((0, 0)) => {
                return Err(HttpError::Tls {
                    uri: url.to_owned(),
                    reason: "the handshake stalled".to_owned(),
                });
            }
            Ok(_) => {}
            Err(error) if error.kind() == ErrorKind::UnexpectedEof => {
                return Err(HttpError::Tls {
                    uri: url.to_owned(),
                    reason: "the server closed the connection during the handshake".to_owned(),
                });
            }
            Err(error) => {
                return Err(match classify_io_error(url, timeout, error) {
                    HttpError::Io { uri, source } => HttpError::Tls {
                        uri,
                        reason: format!("handshake failed: {source}"),
                    },
                    other => other,
                });
            }
        }
    }
    Ok(())
}

/// Maps an I/O error of a plain or TLS stream: timeouts, TLS failures, and the rest.
fn classify_io_error(url: &str, timeout: Duration, source: std::io::Error) -> HttpError {
    if matches!(source.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
        return HttpError::Timeout {
            uri: url.to_owned(),
            timeout,
        };
    }
    match source
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(tls) => tls_error(url, tls),
        None => HttpError::Io {
            uri: url.to_owned(),
            source,
        },
    }
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

/// Where to connect and what to ask for.
struct Target {
    host: String,
    port: u16,
    authority: String,
    path: String,
}

impl Target {
    /// Parses the opaque part of `http://host[:port][/path][?query]`, i.e. `//host...`; the port
    /// defaults to `default_port`.
    fn parse(opaque: &str, default_port: u16) -> Result<Target, &'static str> {
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
            None => default_port,
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

/// A TCP stream whose every read and write is bounded by one deadline; past it, reads and writes
/// fail with [`ErrorKind::TimedOut`].
struct DeadlineStream {
    tcp: TcpStream,
    deadline: Instant,
}

impl DeadlineStream {
    /// Connects to `target`; the deadline, `timeout` from now, bounds this and all later I/O.
    fn connect(target: &Target, url: &str, timeout: Duration) -> Result<DeadlineStream, HttpError> {
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
                Ok(tcp) => return Ok(DeadlineStream { tcp, deadline }),
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

    fn remaining(&self) -> std::io::Result<Duration> {
        let remaining = self.deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(ErrorKind::TimedOut.into());
        }
        Ok(remaining)
    }
}

impl Read for DeadlineStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.tcp.set_read_timeout(Some(self.remaining()?))?;
        self.tcp.read(buf)
    }
}

impl Write for DeadlineStream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.tcp.set_write_timeout(Some(self.remaining()?))?;
        self.tcp.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.tcp.flush()
    }
}

/// One request's connection over a plain or TLS stream (itself bounded by the request's deadline):
/// the response parsing shared by `http:` and `https:`.
struct Connection<'a, S> {
    stream: S,
    url: &'a str,
    timeout: Duration,
    buffer: Vec<u8>,
    eof: bool,
}

impl<'a, S: Read + Write> Connection<'a, S> {
    fn new(stream: S, url: &'a str, timeout: Duration) -> Connection<'a, S> {
        Connection {
            stream,
            url,
            timeout,
            buffer: Vec::new(),
            eof: false,
        }
    }

    fn io_error(&self, source: std::io::Error) -> HttpError {
        classify_io_error(self.url, self.timeout, source)
    }

    fn bad(&self, reason: &'static str) -> HttpError {
        HttpError::BadResponse {
            uri: self.url.to_owned(),
            reason,
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> Result<(), HttpError> {
        self.stream
            .write_all(bytes)
            .and_then(|()| self.stream.flush())
            .map_err(|error| self.io_error(error))
    }

    /// Reads more bytes into the buffer; false at end of stream.
    fn fill(&mut self) -> Result<bool, HttpError> {
        if self.eof {
            return Ok(false);
        }
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
        let target = Target::parse("//127.0.0.1:8080/conf/node.yaml?v=1#frag", 80).expect("valid");
        assert_eq!(
            (target.host.as_str(), target.port, target.path.as_str()),
            ("127.0.0.1", 8080, "/conf/node.yaml?v=1")
        );
        let target = Target::parse("//[::1]:9/", 80).expect("ipv6");
        assert_eq!(
            (target.host.as_str(), target.port, target.authority.as_str()),
            ("::1", 9, "[::1]:9")
        );
        let target = Target::parse("//example.org", 80).expect("no path");
        assert_eq!((target.port, target.path.as_str()), (80, "/"));
        let target = Target::parse("//example.org?x=1", 443).expect("https default port");
        assert_eq!((target.port, target.path.as_str()), (443, "/?x=1"));
        assert!(Target::parse("example.org/x", 80).is_err());
        assert!(Target::parse("//user:pw@host/", 80).is_err());
        assert!(Target::parse("//host:99999/", 80).is_err());
        assert!(Target::parse("///path", 80).is_err());
    }

    fn fetch(provider: &HttpProvider, url: &str) -> HttpError {
        let uri = Uri::parse(url).expect("valid uri");
        match provider.retrieve(&uri) {
            Err(ProviderError::Http(error)) => error,
            other => panic!("expected an http error, got {other:?}"),
        }
    }

    // These fail while building the TLS client, before any connection is attempted (port 1 on
    // loopback would refuse it anyway).

    #[test]
    fn unusable_extra_ca_certificates_are_reported_before_connecting() {
        let url = "https://localhost:1/node.yaml";
        for (pem, reason) in [
            (&b"not a certificate"[..], "no CERTIFICATE block found"),
            (
                &b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n"[..],
                "invalid PEM",
            ),
            (
                &b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"[..],
                "certificate #1 is unusable",
            ),
        ] {
            let error = fetch(&HttpProvider::https_with_roots(pem.to_vec()), url);
            let message = error.to_string();
            assert!(
                matches!(error, HttpError::CaCertificates { .. })
                    && message.starts_with(url)
                    && message.contains(reason),
                "{message}"
            );
        }
    }

    #[test]
    fn the_ca_file_comes_from_the_injected_environment() {
        let env =
            super::super::MapEnv::new([(HttpProvider::CA_FILE_VAR, "/nonexistent/hotrule-ca.pem")]);
        let error = fetch(
            &HttpProvider::https_from_env(Arc::new(env)),
            "https://localhost:1/x",
        );
        assert!(
            matches!(error, HttpError::CaCertificates { .. })
                && error
                    .to_string()
                    .contains("HOTRULE_CONFIG_CA_FILE=/nonexistent/hotrule-ca.pem: cannot read"),
            "{error}"
        );
        // Unset or empty: the public roots alone, so the fetch gets as far as connecting.
        for env in [
            super::super::MapEnv::default(),
            super::super::MapEnv::new([(HttpProvider::CA_FILE_VAR, "")]),
        ] {
            let error = fetch(
                &HttpProvider::https_from_env(Arc::new(env)),
                "https://127.0.0.1:1/x",
            );
            assert!(matches!(error, HttpError::Connect { .. }), "{error}");
        }
    }

    #[test]
    fn an_https_host_must_be_a_valid_server_name() {
        let error = fetch(&HttpProvider::https(), "https://bad_host!:8443/x");
        assert!(matches!(error, HttpError::BadUrl { .. }), "{error}");
    }
}
