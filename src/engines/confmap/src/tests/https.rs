//! The https provider against one-shot TLS servers on 127.0.0.1:0, with a CA and a server
//! certificate for `localhost` made at test time (rcgen, ring): trust, host name checks, statuses,
//! size limits and the handshake timeout.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use serde_json::json;

use super::{TempDir, resolve};
use crate::{HttpError, HttpProvider, Provider, ProviderError, Retrieved, Uri};

/// A test CA and a server configuration whose certificate it issued, for `localhost` only.
struct TestPki {
    ca_pem: String,
    server: Arc<ServerConfig>,
}

fn pki() -> &'static TestPki {
    static PKI: OnceLock<TestPki> = OnceLock::new();
    PKI.get_or_init(|| {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "hotrule-confmap test CA");
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("CA key"))
            .expect("self-signed CA");

        let mut leaf_params =
            CertificateParams::new(vec!["localhost".to_owned()]).expect("server params");
        leaf_params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        leaf_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let leaf_key = KeyPair::generate().expect("server key");
        let leaf = leaf_params
            .signed_by(&leaf_key, &ca)
            .expect("server certificate");

        let key = PrivateKeyDer::from(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
        let server =
            ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .expect("protocol versions")
                .with_no_client_auth()
                .with_single_cert(vec![leaf.der().clone(), ca.der().clone()], key)
                .expect("server config");
        TestPki {
            ca_pem: ca.pem(),
            server: Arc::new(server),
        }
    })
}

/// Serves one TLS connection: reads the request, sends `reply`, closes with close_notify. Returns
/// the port and the server thread, which yields whether a whole request arrived (it does not
/// when the client rejects the handshake).
fn serve_tls_once(reply: String) -> (u16, JoinHandle<bool>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    let port = listener.local_addr().expect("local address").port();
    let config = Arc::clone(&pki().server);
    let server = std::thread::spawn(move || {
        let Ok((tcp, _)) = listener.accept() else {
            return false;
        };
        let _ = tcp.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = tcp.set_write_timeout(Some(Duration::from_secs(5)));
        let Ok(connection) = ServerConnection::new(config) else {
            return false;
        };
        let mut tls = StreamOwned::new(connection, tcp);
        let mut request = Vec::new();
        let mut byte = [0u8; 1];
        while !request.ends_with(b"\r\n\r\n") {
            match tls.read(&mut byte) {
                Ok(1) => request.push(byte[0]),
                _ => return false,
            }
        }
        let _ = tls.write_all(reply.as_bytes());
        tls.conn.send_close_notify();
        let _ = tls.flush();
        true
    });
    (port, server)
}

/// Accepts one connection and answers nothing (optionally sends `greeting` first), until the client
/// hangs up or 5 s pass.
fn serve_plain_once(greeting: &'static [u8]) -> (u16, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    let port = listener.local_addr().expect("local address").port();
    let server = std::thread::spawn(move || {
        let Ok((mut stream, _)) = listener.accept() else {
            return;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = stream.write_all(greeting);
        drain(&mut stream);
    });
    (port, server)
}

fn drain(stream: &mut TcpStream) {
    let mut buffer = [0u8; 1024];
    while matches!(stream.read(&mut buffer), Ok(read) if read > 0) {}
}

fn response(status: &str, headers: &str, body: &str) -> String {
    format!("HTTP/1.1 {status}\r\n{headers}\r\n{body}")
}

fn trusting_provider() -> HttpProvider {
    HttpProvider::https_with_roots(pki().ca_pem.clone().into_bytes())
}

fn fetch(provider: &HttpProvider, url: &str) -> Result<Retrieved, ProviderError> {
    provider.retrieve(&Uri::parse(url).expect("valid uri"))
}

fn http_error(result: Result<Retrieved, ProviderError>) -> HttpError {
    match result {
        Err(ProviderError::Http(error)) => error,
        other => panic!("expected an http error, got {other:?}"),
    }
}

#[test]
fn a_trusted_server_serves_yaml_over_https() {
    let body = "server:\n  port: 8443\n";
    let (port, server) = serve_tls_once(response(
        "200 OK",
        &format!("Content-Length: {}\r\n", body.len()),
        body,
    ));
    let url = format!("https://localhost:{port}/node.yaml");
    let retrieved = fetch(&trusting_provider(), &url).expect("fetches");
    assert_eq!(retrieved.text(), Some(body));
    assert_eq!(
        retrieved.value().to_json(),
        json!({"server": {"port": 8443}})
    );
    assert!(server.join().expect("server thread"));
}

#[test]
fn the_standard_provider_trusts_the_ca_file_from_the_environment() {
    let dir = TempDir::new("https-ca");
    let ca_file = dir.write("ca.pem", &pki().ca_pem);
    let ca_file = ca_file.to_str().expect("utf-8 temp path");
    let env = [(HttpProvider::CA_FILE_VAR, ca_file)];

    // Chunked, and close-delimited (ended by the server's close_notify).
    let (port, server) = serve_tls_once(response(
        "200 OK",
        "Transfer-Encoding: chunked\r\n",
        "8\r\nserver:\n\r\n7\r\n  a: 1\n\r\n0\r\n\r\n",
    ));
    let resolved =
        resolve(&[&format!("https://localhost:{port}/a.yaml")], &env, []).expect("resolves");
    assert_eq!(resolved.value.to_json(), json!({"server": {"a": 1}}));
    assert!(server.join().expect("server thread"));

    let (port, server) = serve_tls_once(response("200 OK", "Connection: close\r\n", "b: 2\n"));
    let document = format!("x: ${{https://localhost:{port}/b.yaml}}\n");
    let resolved = resolve(&["mem:doc"], &env, [("doc", document.as_str())]).expect("resolves");
    assert_eq!(resolved.value.to_json(), json!({"x": {"b": 2}}));
    assert!(server.join().expect("server thread"));

    // Without the variable the same server is not trusted.
    let (port, server) = serve_tls_once(response("200 OK", "Content-Length: 0\r\n", ""));
    let error = resolve(&[&format!("https://localhost:{port}/a.yaml")], &[], [])
        .expect_err("untrusted without the CA file");
    assert!(
        error.to_string().contains("certificate not trusted"),
        "{error}"
    );
    assert!(!server.join().expect("server thread"));
}

#[test]
fn an_untrusted_certificate_is_a_clear_error() {
    let (port, server) = serve_tls_once(response("200 OK", "Content-Length: 0\r\n", ""));
    let url = format!("https://localhost:{port}/node.yaml");
    // The public roots only: the test CA is not among them.
    let error = http_error(fetch(&HttpProvider::https(), &url));
    let message = error.to_string();
    assert!(
        matches!(error, HttpError::Certificate { .. })
            && message.starts_with(&format!("{url}: server certificate rejected: "))
            && message.contains("certificate not trusted")
            && message.contains(HttpProvider::CA_FILE_VAR),
        "{message}"
    );
    assert!(
        !server.join().expect("server thread"),
        "no request may be sent over an unverified connection"
    );
}

#[test]
fn a_certificate_for_another_host_name_is_refused() {
    // The certificate names only `localhost`; the URL's host is the address.
    let (port, server) = serve_tls_once(response("200 OK", "Content-Length: 0\r\n", ""));
    let url = format!("https://127.0.0.1:{port}/node.yaml");
    let error = http_error(fetch(&trusting_provider(), &url));
    let message = error.to_string();
    assert!(
        matches!(error, HttpError::Certificate { .. })
            && message.starts_with(&url)
            && message.contains("hostname mismatch")
            && message.contains("127.0.0.1"),
        "{message}"
    );
    assert!(!server.join().expect("server thread"));
}

#[test]
fn a_non_2xx_status_over_https_is_a_status_error() {
    let (port, server) = serve_tls_once(response(
        "503 Service Unavailable",
        "Content-Length: 4\r\n",
        "busy",
    ));
    let url = format!("https://localhost:{port}/node.yaml");
    let error = http_error(fetch(&trusting_provider(), &url));
    assert!(
        matches!(error, HttpError::Status { status: 503, .. }),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        format!("{url}: server answered 503 Service Unavailable")
    );
    assert!(server.join().expect("server thread"));
}

#[test]
fn oversized_https_bodies_are_refused_however_they_are_framed() {
    let provider = trusting_provider().with_max_body_bytes(16);
    let big = "x".repeat(64);
    for headers in [
        format!("Content-Length: {}\r\n", big.len()),
        "Connection: close\r\n".to_owned(),
        "Transfer-Encoding: chunked\r\n".to_owned(),
    ] {
        let body = if headers.contains("chunked") {
            format!("40\r\n{big}\r\n0\r\n\r\n")
        } else {
            big.clone()
        };
        let (port, server) = serve_tls_once(response("200 OK", &headers, &body));
        let error = http_error(fetch(
            &provider,
            &format!("https://localhost:{port}/big.yaml"),
        ));
        assert!(
            matches!(error, HttpError::BodyTooLarge { limit: 16, .. }),
            "{headers}: {error}"
        );
        assert!(server.join().expect("server thread"));
    }
}

#[test]
fn a_server_that_never_answers_the_handshake_times_out() {
    let (port, server) = serve_plain_once(b"");
    let provider = trusting_provider().with_timeout(Duration::from_millis(300));
    let started = Instant::now();
    let error = http_error(fetch(
        &provider,
        &format!("https://localhost:{port}/slow.yaml"),
    ));
    assert!(matches!(error, HttpError::Timeout { .. }), "{error}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    server.join().expect("server thread");
}

#[test]
fn a_plain_http_server_behind_an_https_url_is_a_tls_error() {
    let (port, server) = serve_plain_once(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    let url = format!("https://localhost:{port}/node.yaml");
    let error = http_error(fetch(&trusting_provider(), &url));
    let message = error.to_string();
    assert!(
        matches!(error, HttpError::Tls { .. }) && message.starts_with(&url),
        "{message}"
    );
    assert!(message.contains("is the server speaking TLS?"), "{message}");
    server.join().expect("server thread");
}
