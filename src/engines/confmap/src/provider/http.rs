//! The `http` and `https` providers: one HTTP/1.1 GET whose body is parsed as YAML.
//!
//! The exchange is hyper's HTTP/1.1 client over a tokio TCP stream, inside a TLS session
//! (tokio-rustls with the ring provider) for `https:`. [`Provider`] is synchronous, so each fetch
//! runs on its own current-thread tokio runtime; a caller that is itself on a tokio runtime (which
//! must not block there, but might) gets the fetch run on a scoped helper thread instead of a panic.
//! One overall deadline covers name resolution, connecting, the TLS handshake, sending and reading
//! (default 5 s); the body is capped (default 1 MiB) whether it is sized by `Content-Length`,
//! chunked, or read to the end, and the response head by 64 KiB. Any status outside 2xx is an
//! error; redirects are not followed; credentials in the URL are refused.
//!
//! For `https:` the server name sent (SNI) and verified is the URL's host. The server certificate is
//! always verified, against the public web CA roots (compiled in from `webpki-roots`) plus, for the
//! standard provider, the PEM certificates in the file named by `HOTRULE_CONFIG_CA_FILE` (read
//! through the injected [`Env`] at every fetch, so a private CA is added with e.g.
//! `HOTRULE_CONFIG_CA_FILE=/etc/hotrule/ca.pem`). [`HttpProvider::https_with_roots`] adds CA
//! certificates given directly. There is no way to turn verification off: an untrusted or
//! mismatching certificate is [`HttpError::Certificate`].

mod failure;
mod target;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty, LengthLimitError, Limited};
use hyper::body::{Body, Bytes};
use hyper::header::{ACCEPT, CONNECTION, HOST, USER_AGENT};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject;
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::CertificateDer;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::{Env, Provider, ProviderError, Retrieved};
use crate::uri::Uri;
use target::Target;

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

/// What one fetch needs once everything that can fail without the network has been checked.
struct Prepared {
    target: Target,
    request: Request<Empty<Bytes>>,
    /// The TLS client and the server name to verify, for `https:`.
    tls: Option<(TlsConnector, ServerName<'static>)>,
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
        let prepared = self.prepare(uri, &url)?;
        let fetch = || -> Result<String, HttpError> {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .enable_time()
                .build()
                .map_err(|source| HttpError::Io {
                    uri: url.clone(),
                    source,
                })?;
            // The timer is made inside the runtime (`timeout` needs its time driver).
            let outcome = runtime.block_on(async {
                tokio::time::timeout(self.timeout, self.fetch(prepared, &url)).await
            });
            // A name lookup still running on tokio's blocking pool is not waited for.
            runtime.shutdown_background();
            outcome.map_err(|_elapsed| HttpError::Timeout {
                uri: url.clone(),
                timeout: self.timeout,
            })?
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return fetch();
        }
        // A runtime cannot be started inside another one; block a helper thread instead.
        tracing::debug!(
            url,
            "fetching on a helper thread: called from inside a tokio runtime"
        );
        std::thread::scope(|scope| {
            scope
                .spawn(fetch)
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    /// Everything that can fail without the network fails here, before connecting.
    fn prepare(&self, uri: &Uri, url: &str) -> Result<Prepared, HttpError> {
        let tls = self.scheme == "https";
        let bad_url = |reason| HttpError::BadUrl {
            uri: url.to_owned(),
            reason,
        };
        let target = Target::parse(uri.opaque(), if tls { 443 } else { 80 }).map_err(bad_url)?;
        let request = Request::get(target.path.as_str())
            .header(HOST, target.authority.as_str())
            .header(USER_AGENT, "hotrule-confmap")
            .header(ACCEPT, "*/*")
            .header(CONNECTION, "close")
            .body(Empty::new())
            .map_err(|_| bad_url("the path or the host is not valid in an HTTP request"))?;
        let tls = if tls {
            let server_name = ServerName::try_from(target.host.as_str())
                .map_err(|_| bad_url("the host is not a valid TLS server name"))?
                .to_owned();
            Some((self.tls_connector(url)?, server_name))
        } else {
            None
        };
        Ok(Prepared {
            target,
            request,
            tls,
        })
    }

    /// Connects, runs the TLS handshake for `https:`, and makes the exchange.
    async fn fetch(&self, prepared: Prepared, url: &str) -> Result<String, HttpError> {
        let Prepared {
            target,
            request,
            tls,
        } = prepared;
        let tcp = TcpStream::connect((target.host.as_str(), target.port))
            .await
            .map_err(|source| HttpError::Connect {
                uri: url.to_owned(),
                source,
            })?;
        match tls {
            None => self.exchange(tcp, request, url).await,
            Some((connector, server_name)) => {
                let stream = connector
                    .connect(server_name, tcp)
                    .await
                    .map_err(|error| failure::handshake(url, error))?;
                self.exchange(stream, request, url).await
            }
        }
    }

    /// Sends the request over a plain or TLS stream and reads the response.
    async fn exchange<S>(
        &self,
        stream: S,
        request: Request<Empty<Bytes>>,
        url: &str,
    ) -> Result<String, HttpError>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
            .max_header_size(MAX_HEAD_BYTES)
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|error| failure::exchange(url, error))?;
        // Drives the connection; its failures also reach the response and the body below.
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "http provider connection ended with an error");
            }
        });
        let response = sender
            .send_request(request)
            .await
            .map_err(|error| failure::exchange(url, error))?;
        let body = self.read_body(response, url).await?;
        String::from_utf8(body).map_err(|_| HttpError::NotUtf8 {
            uri: url.to_owned(),
        })
    }

    /// The body of a 2xx response, within the size limit.
    async fn read_body(
        &self,
        response: Response<hyper::body::Incoming>,
        url: &str,
    ) -> Result<Vec<u8>, HttpError> {
        let status = response.status();
        if !status.is_success() {
            let reason = match response.extensions().get::<hyper::ext::ReasonPhrase>() {
                Some(phrase) => String::from_utf8_lossy(phrase.as_bytes()).into_owned(),
                None => status.canonical_reason().unwrap_or_default().to_owned(),
            };
            return Err(HttpError::Status {
                uri: url.to_owned(),
                status: status.as_u16(),
                reason,
            });
        }
        let too_large = || HttpError::BodyTooLarge {
            uri: url.to_owned(),
            limit: self.max_body_bytes,
        };
        // A Content-Length over the limit is refused without reading the body.
        let declared = response.body().size_hint().lower();
        if usize::try_from(declared).map_or(true, |length| length > self.max_body_bytes) {
            return Err(too_large());
        }
        match Limited::new(response.into_body(), self.max_body_bytes)
            .collect()
            .await
        {
            Ok(collected) => Ok(collected.to_bytes().to_vec()),
            Err(error) if error.is::<LengthLimitError>() => Err(too_large()),
            Err(error) => Err(match error.downcast::<hyper::Error>() {
                Ok(error) => failure::exchange(url, *error),
                Err(other) => failure::other(url, &*other),
            }),
        }
    }

    /// A TLS client trusting the public web roots plus the extra CA certificates, if any.
    fn tls_connector(&self, url: &str) -> Result<TlsConnector, HttpError> {
        let roots = self.root_store(url)?;
        let config =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(|error| HttpError::Tls {
                    uri: url.to_owned(),
                    reason: error.to_string(),
                })?
                .with_root_certificates(roots)
                .with_no_client_auth();
        Ok(TlsConnector::from(Arc::new(config)))
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

#[cfg(test)]
mod tests {
    use super::*;

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
