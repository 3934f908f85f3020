//! Optional TLS for the agent data listener.
//!
//! - [`load`] reads a PEM certificate chain and private key and checks that they belong together.
//!   Configuration validation calls it, so `hotrule config validate` reports a bad pair.
//! - [`server_config`] builds the rustls server configuration around [`RotatingCert`], which
//!   re-reads the files when their modification times change (checked at most once per
//!   `recheck`), so a rotated certificate is served without a restart. A pair that fails to load
//!   is logged and the previous one is kept.
//! - [`TlsListener`] is an `axum` listener that runs handshakes concurrently (bounded in number
//!   and time) so that one slow or silent client never holds up the others.
//!
//! The real 3.x agent speaks plain HTTP only; TLS is for agents (or proxies) that can use it.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How long a client has to finish its handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes in flight at once; further connections wait in the kernel's accept queue.
const MAX_HANDSHAKES: usize = 1024;
/// Default interval between checks of the certificate files' modification times.
pub const DEFAULT_RECHECK: Duration = Duration::from_secs(5);
/// At most one handshake-failure warning per this interval; the rest are counted.
const FAILURE_LOG_INTERVAL_MS: u64 = 10_000;

/// A certificate chain and its private key, as PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read certificate file {path}: {reason}")]
    Cert { path: PathBuf, reason: String },
    #[error("certificate file {path} holds no PEM certificate")]
    NoCert { path: PathBuf },
    #[error("cannot read a PEM private key from {path}: {reason}")]
    Key { path: PathBuf, reason: String },
    #[error("the private key in {key} does not fit the certificate in {cert}: {reason}")]
    Mismatch { cert: PathBuf, key: PathBuf, reason: String },
    #[error("TLS setup failed: {0}")]
    Setup(String),
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The PEM certificates in `path`, at least one.
fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let cert_error = |e: rustls_pki_types::pem::Error| TlsError::Cert { path: path.to_path_buf(), reason: e.to_string() };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(cert_error)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(cert_error)?;
    if certs.is_empty() {
        return Err(TlsError::NoCert { path: path.to_path_buf() });
    }
    Ok(certs)
}

/// Reads and checks the pair: at least one certificate, a key rustls can use, and the key
/// matching the first (end-entity) certificate.
pub fn load(files: &TlsFiles) -> Result<CertifiedKey, TlsError> {
    load_with(files, &provider())
}

fn load_with(files: &TlsFiles, provider: &CryptoProvider) -> Result<CertifiedKey, TlsError> {
    let chain = read_certs(&files.cert_file)?;
    let key = PrivateKeyDer::from_pem_file(&files.key_file)
        .map_err(|e| TlsError::Key { path: files.key_file.clone(), reason: e.to_string() })?;
    CertifiedKey::from_der(chain, key, provider).map_err(|e| TlsError::Mismatch {
        cert: files.cert_file.clone(),
        key: files.key_file.clone(),
        reason: e.to_string(),
    })
}

/// The rustls server configuration for `files`: HTTP/1.1 only (ALPN), TLS 1.2 and 1.3, the
/// certificate re-read when its files change.
pub fn server_config(files: &TlsFiles, recheck: Duration) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = provider();
    let resolver = RotatingCert::new(files.clone(), recheck, provider.clone())?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Setup(e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    // The data listener speaks HTTP/2 (gRPC agents) beside HTTP/1.1.
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The node's outbound HTTP(S) client for bodies it builds whole (remote-write export, alarm
/// hooks): `http://` or `https://` trusting the public web roots, HTTP/1.1, no Nagle, idle
/// connections dropped after [`crate::base::listen::CLIENT_POOL_IDLE_TIMEOUT`].
pub type OutboundClient = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    http_body_util::Full<bytes::Bytes>,
>;

pub fn outbound_client() -> Result<OutboundClient, TlsError> {
    let tls = client_config(None)?;
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.set_nodelay(true);
    http.enforce_http(false);
    let connector = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls).https_or_http().enable_http1().wrap_connector(http);
    Ok(hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_idle_timeout(crate::base::listen::CLIENT_POOL_IDLE_TIMEOUT)
        .build(connector))
}

/// A client configuration that trusts the CA certificates in `ca_file` (PEM), or, without one,
/// the public web roots. Used by the protocol client for `https://` servers.
pub fn client_config(ca_file: Option<&Path>) -> Result<rustls::ClientConfig, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    match ca_file {
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        Some(path) => {
            for cert in read_certs(path)? {
                roots.add(cert).map_err(|e| TlsError::Cert { path: path.to_path_buf(), reason: e.to_string() })?;
            }
        }
    }
    // No ALPN here: the HTTP connector sets it for the protocols it enables.
    Ok(rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Setup(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// Modification times of the two files; `None` where a file cannot be read.
type Stamp = (Option<SystemTime>, Option<SystemTime>);

fn stamp(files: &TlsFiles) -> Stamp {
    let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    (modified(&files.cert_file), modified(&files.key_file))
}

/// Serves the current pair, and reloads it when the files' modification times change.
#[derive(Debug)]
pub struct RotatingCert {
    files: TlsFiles,
    recheck: Duration,
    provider: Arc<CryptoProvider>,
    state: Mutex<RotationState>,
}

#[derive(Debug)]
struct RotationState {
    current: Arc<CertifiedKey>,
    stamp: Stamp,
    checked: Instant,
}

impl RotatingCert {
    pub fn new(files: TlsFiles, recheck: Duration, provider: Arc<CryptoProvider>) -> Result<RotatingCert, TlsError> {
        let stamp = stamp(&files);
        let current = Arc::new(load_with(&files, &provider)?);
        Ok(RotatingCert {
            files,
            recheck,
            provider,
            state: Mutex::new(RotationState { current, stamp, checked: Instant::now() }),
        })
    }

    /// The pair to serve now, reloading first if it is time to look and the files changed.
    fn current(&self) -> Arc<CertifiedKey> {
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if state.checked.elapsed() >= self.recheck {
            state.checked = Instant::now();
            let now = stamp(&self.files);
            if now != state.stamp {
                // Remember the new stamp even on failure: a pair caught half-written is retried
                // when its second file lands (which changes the stamp again).
                state.stamp = now;
                match load_with(&self.files, &self.provider) {
                    Ok(key) => {
                        tracing::info!(cert = %self.files.cert_file.display(), "agent TLS certificate reloaded");
                        state.current = Arc::new(key);
                    }
                    Err(e) => tracing::warn!(error = %e, "agent TLS certificate changed but cannot be loaded; keeping the previous one"),
                }
            }
        }
        state.current.clone()
    }
}

impl ResolvesServerCert for RotatingCert {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// A TLS listener for `axum::serve`: accepted connections are handshaken on their own tasks and
/// handed over once secure. Dropping it stops accepting.
pub struct TlsListener {
    incoming: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    acceptor: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, config: Arc<rustls::ServerConfig>) -> io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let (sender, incoming) = mpsc::channel(64);
        let acceptor = tokio::spawn(accept_loop(tcp, TlsAcceptor::from(config), sender));
        Ok(TlsListener { incoming, local, acceptor })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.incoming.recv().await {
            Some(accepted) => accepted,
            // The accept loop only ends when this listener is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}

async fn accept_loop(
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    secured: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    let slots = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    let failures = Arc::new(FailureLog::default());
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else { return };
        let (stream, peer) = tokio::select! {
            _ = secured.closed() => return,
            accepted = tcp.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "agent TLS listener: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let acceptor = acceptor.clone();
        let secured = secured.clone();
        let failures = failures.clone();
        tokio::spawn(async move {
            let _slot = slot;
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let _ = secured.send((tls, peer)).await;
                }
                Ok(Err(e)) => failures.note(peer, &e.to_string()),
                Err(_) => failures.note(peer, "handshake timed out"),
            }
        });
    }
}

/// Rate-limited warnings for failed handshakes (a plain-HTTP agent pointed at a TLS port fails
/// every heartbeat; one line per interval, with a count, is what an operator needs).
#[derive(Default)]
struct FailureLog {
    last_ms: AtomicU64,
    suppressed: AtomicU64,
}

impl FailureLog {
    fn note(&self, peer: SocketAddr, reason: &str) {
        let now_ms = crate::base::clock::now_ms();
        let last = self.last_ms.load(Ordering::Relaxed);
        if now_ms.saturating_sub(last) >= FAILURE_LOG_INTERVAL_MS
            && self.last_ms.compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            let suppressed = self.suppressed.swap(0, Ordering::Relaxed);
            tracing::warn!(%peer, reason, suppressed, "agent TLS handshake failed");
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path, name: &str) -> TlsFiles {
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        let files = TlsFiles { cert_file: dir.join(format!("{name}.crt")), key_file: dir.join(format!("{name}.key")) };
        std::fs::write(&files.cert_file, cert.pem()).expect("write cert");
        std::fs::write(&files.key_file, key.serialize_pem()).expect("write key");
        files
    }

    #[test]
    fn a_matching_pair_loads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = write_pair(dir.path(), "a");
        let key = load(&files).expect("loads");
        assert_eq!(key.cert.len(), 1);
    }

    #[test]
    fn each_bad_pair_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = write_pair(dir.path(), "a");
        let b = write_pair(dir.path(), "b");
        let missing = TlsFiles { cert_file: dir.path().join("nope.crt"), key_file: a.key_file.clone() };
        assert!(matches!(load(&missing), Err(TlsError::Cert { .. })), "{:?}", load(&missing).err());
        let not_pem = dir.path().join("junk.crt");
        std::fs::write(&not_pem, "not a certificate").expect("write");
        let junk = TlsFiles { cert_file: not_pem, key_file: a.key_file.clone() };
        assert!(matches!(load(&junk), Err(TlsError::NoCert { .. })), "{:?}", load(&junk).err());
        let no_key = TlsFiles { cert_file: a.cert_file.clone(), key_file: a.cert_file.clone() };
        assert!(matches!(load(&no_key), Err(TlsError::Key { .. })), "{:?}", load(&no_key).err());
        let crossed = TlsFiles { cert_file: a.cert_file.clone(), key_file: b.key_file.clone() };
        let error = load(&crossed).expect_err("a mismatch");
        assert!(matches!(error, TlsError::Mismatch { .. }), "{error:?}");
        assert!(error.to_string().contains("b.key"), "{error}");
    }

    #[test]
    fn a_rotated_pair_is_served_and_a_broken_one_is_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = write_pair(dir.path(), "live");
        let rotating = RotatingCert::new(files.clone(), Duration::ZERO, provider()).expect("loads");
        let first = rotating.current().cert[0].clone();
        assert_eq!(rotating.current().cert[0], first, "unchanged files keep the pair");

        // A broken certificate is not served; the previous pair stays.
        std::fs::write(&files.cert_file, "garbage").expect("write");
        bump_mtime(&files.cert_file);
        assert_eq!(rotating.current().cert[0], first);

        // A new valid pair replaces it.
        let next = write_pair(dir.path(), "next");
        std::fs::copy(&next.cert_file, &files.cert_file).expect("copy");
        std::fs::copy(&next.key_file, &files.key_file).expect("copy");
        bump_mtime(&files.cert_file);
        bump_mtime(&files.key_file);
        let served = rotating.current().cert[0].clone();
        assert_ne!(served, first);
        let expected = CertificateDer::pem_file_iter(&next.cert_file).expect("read").next().expect("one").expect("pem");
        assert_eq!(served, expected);
    }

    /// Moves a file's modification time forward so a change is seen even within the
    /// filesystem's timestamp granularity.
    fn bump_mtime(path: &Path) {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let file = std::fs::OpenOptions::new().write(true).open(path).expect("open");
        let later = SystemTime::now() + Duration::from_secs(NEXT.fetch_add(1, Ordering::Relaxed) * 10);
        file.set_modified(later).expect("set mtime");
    }
}
