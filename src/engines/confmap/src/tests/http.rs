//! The http provider against a one-shot server on 127.0.0.1:0 started by each test.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::json;

use super::resolve;
use crate::{HttpError, HttpProvider, Provider, ProviderError, Uri};

/// What the one-shot server does with its single connection.
enum Reply {
    Send(Vec<u8>),
    /// Read the request, answer nothing, and wait for the client to give up.
    Hang,
}

/// Serves one connection; returns `http://127.0.0.1:PORT` and the server thread.
fn serve_once(reply: Reply) -> (String, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    let address = listener.local_addr().expect("local address");
    let server = std::thread::spawn(move || {
        let Ok((mut stream, _)) = listener.accept() else {
            return;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        read_request(&mut stream);
        match reply {
            Reply::Send(bytes) => {
                let _ = stream.write_all(&bytes);
            }
            Reply::Hang => {
                // Returns when the client closes the connection (or after the read timeout).
                let _ = stream.read(&mut [0u8; 1]);
            }
        }
    });
    (format!("http://{address}"), server)
}

fn read_request(stream: &mut TcpStream) {
    let mut request = Vec::new();
    let mut byte = [0u8; 1];
    while !request.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => request.push(byte[0]),
            _ => return,
        }
    }
}

fn response(status: &str, headers: &str, body: &str) -> Reply {
    Reply::Send(format!("HTTP/1.1 {status}\r\n{headers}\r\n{body}").into_bytes())
}

fn fetch(provider: &HttpProvider, url: &str) -> Result<crate::Retrieved, ProviderError> {
    provider.retrieve(&Uri::parse(url).expect("valid uri"))
}

#[test]
fn a_2xx_body_is_parsed_as_yaml() {
    let body = "server:\n  port: 8080\n";
    let (base, server) = serve_once(response(
        "200 OK",
        &format!("Content-Length: {}\r\n", body.len()),
        body,
    ));
    let resolved = resolve(&[&format!("{base}/node.yaml")], &[], []).expect("resolves");
    assert_eq!(resolved.value.to_json(), json!({"server": {"port": 8080}}));
    assert!(resolved.watched_files.is_empty());
    server.join().expect("server thread");
}

#[test]
fn chunked_and_close_delimited_bodies_work_in_references() {
    let chunked = "Transfer-Encoding: chunked\r\n";
    let (base, server) = serve_once(response(
        "200 OK",
        chunked,
        "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n",
    ));
    let document = format!("greeting: \"<${{{base}/greeting}}>\"\n");
    let resolved = resolve(&["mem:doc"], &[], [("doc", document.as_str())]).expect("resolves");
    assert_eq!(
        resolved.value.to_json(),
        json!({"greeting": "<hello world>"})
    );
    server.join().expect("server thread");

    let (base, server) = serve_once(response("204 No Content", "Connection: close\r\n", ""));
    let resolved =
        resolve(&[&format!("{base}/empty")], &[], []).expect("an empty body is an empty config");
    assert_eq!(resolved.value.to_json(), json!({}));
    server.join().expect("server thread");
}

#[test]
fn a_non_2xx_status_is_an_error_with_the_status() {
    let (base, server) = serve_once(response(
        "404 Not Found",
        "Content-Length: 9\r\n",
        "not found",
    ));
    let url = format!("{base}/missing.yaml");
    let error = fetch(&HttpProvider::http(), &url).expect_err("404");
    assert!(matches!(
        error,
        ProviderError::Http(HttpError::Status { status: 404, .. })
    ));
    assert_eq!(
        error.to_string(),
        format!("{url}: server answered 404 Not Found")
    );
    server.join().expect("server thread");
}

#[test]
fn a_silent_server_times_out() {
    let (base, server) = serve_once(Reply::Hang);
    let provider = HttpProvider::http().with_timeout(Duration::from_millis(300));
    let started = Instant::now();
    let error = fetch(&provider, &format!("{base}/slow.yaml")).expect_err("times out");
    assert!(
        matches!(error, ProviderError::Http(HttpError::Timeout { .. })),
        "{error}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    server.join().expect("server thread");
}

#[test]
fn oversized_bodies_are_refused_however_they_are_framed() {
    let provider = HttpProvider::http().with_max_body_bytes(16);
    let big = "x".repeat(64);
    let framings = [
        format!("Content-Length: {}\r\n", big.len()),
        "Connection: close\r\n".to_owned(),
        "Transfer-Encoding: chunked\r\n".to_owned(),
    ];
    for headers in framings {
        let body = if headers.contains("chunked") {
            format!("40\r\n{big}\r\n0\r\n\r\n")
        } else {
            big.clone()
        };
        let (base, server) = serve_once(response("200 OK", &headers, &body));
        let error = fetch(&provider, &format!("{base}/big.yaml")).expect_err("too large");
        assert!(
            matches!(
                error,
                ProviderError::Http(HttpError::BodyTooLarge { limit: 16, .. })
            ),
            "{headers}: {error}"
        );
        server.join().expect("server thread");
    }
}

#[test]
fn a_closed_port_and_a_garbled_reply_are_errors() {
    let closed = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address");
    let error = fetch(&HttpProvider::http(), &format!("http://{closed}/x")).expect_err("refused");
    assert!(
        matches!(error, ProviderError::Http(HttpError::Connect { .. })),
        "{error}"
    );

    let (base, server) = serve_once(Reply::Send(b"SMTP ready\r\n\r\n".to_vec()));
    let error = fetch(&HttpProvider::http(), &format!("{base}/x")).expect_err("not http");
    assert!(
        matches!(error, ProviderError::Http(HttpError::BadResponse { .. })),
        "{error}"
    );
    server.join().expect("server thread");
}

#[test]
fn redirects_are_not_followed() {
    let (base, server) = serve_once(response(
        "301 Moved Permanently",
        "Location: /elsewhere.yaml\r\nContent-Length: 0\r\n",
        "",
    ));
    let url = format!("{base}/moved.yaml");
    let error = fetch(&HttpProvider::http(), &url).expect_err("301");
    assert_eq!(
        error.to_string(),
        format!("{url}: server answered 301 Moved Permanently")
    );
    server.join().expect("server thread");
}

#[test]
fn a_non_standard_reason_phrase_is_reported_as_sent() {
    let (base, server) = serve_once(response("418 Out Of Coffee", "Content-Length: 0\r\n", ""));
    let url = format!("{base}/x");
    let error = fetch(&HttpProvider::http(), &url).expect_err("418");
    assert_eq!(
        error.to_string(),
        format!("{url}: server answered 418 Out Of Coffee")
    );
    server.join().expect("server thread");
}

#[test]
fn a_truncated_body_an_oversized_head_and_non_utf8_are_errors() {
    let (base, server) = serve_once(response("200 OK", "Content-Length: 100\r\n", "a: 1\n"));
    let error = fetch(&HttpProvider::http(), &format!("{base}/short")).expect_err("truncated");
    assert!(
        matches!(error, ProviderError::Http(HttpError::BadResponse { .. })),
        "{error}"
    );
    server.join().expect("server thread");

    let padding = format!("X-Padding: {}\r\n", "p".repeat(70 * 1024));
    let (base, server) = serve_once(response("200 OK", &padding, ""));
    let error = fetch(&HttpProvider::http(), &format!("{base}/big-head")).expect_err("big head");
    assert!(
        matches!(error, ProviderError::Http(HttpError::BadResponse { .. })),
        "{error}"
    );
    server.join().expect("server thread");

    let latin1 = b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nk: \xe9t\xe9".to_vec();
    let (base, server) = serve_once(Reply::Send(latin1));
    let error = fetch(&HttpProvider::http(), &format!("{base}/latin1")).expect_err("not utf-8");
    assert!(
        matches!(error, ProviderError::Http(HttpError::NotUtf8 { .. })),
        "{error}"
    );
    server.join().expect("server thread");
}

/// The node resolves its configuration from async code (startup, reload); the synchronous
/// provider must work there too instead of panicking on a nested runtime.
#[test]
fn a_fetch_from_inside_a_tokio_runtime_works() {
    let runtimes = [
        tokio::runtime::Builder::new_current_thread().build(),
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build(),
    ];
    for runtime in runtimes {
        let runtime = runtime.expect("runtime");
        let (base, server) = serve_once(response("200 OK", "Content-Length: 5\r\n", "a: 1\n"));
        let retrieved = runtime
            .block_on(async { fetch(&HttpProvider::http(), &format!("{base}/in-runtime")) })
            .expect("fetches");
        assert_eq!(retrieved.value().to_json(), json!({"a": 1}));
        server.join().expect("server thread");
    }
}
