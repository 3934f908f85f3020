//! The listener limits over real sockets on 127.0.0.1: every wait is bounded.

use std::time::{Duration, Instant};

use axum::routing::{get, post};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

fn limits(max_connections: usize) -> Limits {
    Limits {
        header_read_timeout: Duration::from_millis(600),
        body_read_timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_millis(300),
        max_connections,
        max_body_bytes: 1024,
        http2: false,
        grpc_stream_timeout: Duration::from_millis(300),
    }
}

/// How many `/held` requests have reached their handler (one test uses the route).
static HELD_STARTED: AtomicUsize = AtomicUsize::new(0);

fn app() -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .route("/refuse", post(|| async { (StatusCode::PAYLOAD_TOO_LARGE, "refused unread") }))
        .route("/held", get(|| async {
            HELD_STARTED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(900)).await;
            "held"
        }))
        .route("/slow", get(|| async {
            tokio::time::sleep(Duration::from_millis(900)).await;
            "slow"
        }))
        .route(
        "/echo",
        post(|body: Body| async move {
            match axum::body::to_bytes(body, 1024).await {
                Ok(bytes) => (StatusCode::OK, format!("{}", bytes.len())),
                Err(e) => (StatusCode::BAD_REQUEST, format!("unreadable body: {e}")),
            }
        }),
    )
}

async fn start(limits: Limits) -> (SocketAddr, CancellationToken, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let stop = CancellationToken::new();
    let task = tokio::spawn(serve(listener, app(), limits, stop.clone(), "test"));
    (addr, stop, task)
}

/// Everything the server sends until it closes the connection or `within` passes.
async fn read_until_close(stream: &mut TcpStream, within: Duration) -> Option<String> {
    let mut out = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    read.ok().map(|()| String::from_utf8_lossy(&out).into_owned())
}

async fn get_root(addr: SocketAddr) -> Option<String> {
    let mut stream = TcpStream::connect(addr).await.ok()?;
    stream.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").await.ok()?;
    read_until_close(&mut stream, Duration::from_secs(5)).await
}

#[tokio::test]
async fn at_the_limit_the_longest_waiting_idle_connection_makes_room() {
    let (addr, stop, task) = start(limits(4)).await;
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(TcpStream::connect(addr).await.expect("connect"));
    }
    // Four connections that never send a request fill the listener. A fifth with a request is
    // served at once: the one that has waited longest is closed to make room.
    let started = Instant::now();
    let answer = get_root(addr).await.expect("answered");
    assert!(answer.starts_with("HTTP/1.1 200"), "served, not refused: {answer}");
    assert!(started.elapsed() < limits(4).header_read_timeout, "before any idle one timed out");
    let first = read_until_close(&mut idle[0], Duration::from_millis(200)).await;
    assert_eq!(first.as_deref(), Some(""), "the first idle connection was closed for it");
    // A flood of new idle connections keeps evicting the oldest; a request still gets through.
    for _ in 0..20 {
        idle.push(TcpStream::connect(addr).await.expect("connect"));
    }
    let answer = get_root(addr).await.expect("answered during the flood");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(5), task).await.expect("stops").expect("joins");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_limit_with_every_connection_busy_a_new_one_is_refused() {
    let (addr, stop, _task) = start(limits(2)).await;
    let before = HELD_STARTED.load(std::sync::atomic::Ordering::SeqCst);
    let mut busy = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream.write_all(b"GET /held HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").await.expect("write");
        busy.push(stream);
    }
    // Both requests are in flight (the handler sleeps 900 ms): nothing may be cut.
    let deadline = Instant::now() + Duration::from_secs(5);
    while HELD_STARTED.load(std::sync::atomic::Ordering::SeqCst) < before + 2 {
        assert!(Instant::now() < deadline, "the held requests did not start");
        tokio::task::yield_now().await;
    }
    let mut extra = TcpStream::connect(addr).await.expect("connect");
    let _ = extra.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").await;
    let answer = read_until_close(&mut extra, Duration::from_secs(3)).await.unwrap_or_default();
    assert!(!answer.contains("200 OK"), "refused, not served: {answer}");
    for stream in &mut busy {
        let answer = read_until_close(stream, Duration::from_secs(5)).await.expect("answered");
        assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("held"), "the busy ones finish: {answer}");
    }
    stop.cancel();
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed() {
    let (addr, stop, _task) = start(limits(8)).await;
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").await.expect("write");
    let started = Instant::now();
    let answer = read_until_close(&mut stream, Duration::from_secs(5)).await.expect("closed when idle");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(5));
    stop.cancel();
}

#[tokio::test]
async fn a_request_longer_than_the_idle_timeout_is_not_cut_and_the_connection_is_reused() {
    let (addr, stop, _task) = start(limits(8)).await;
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(b"GET /slow HTTP/1.1\r\nHost: t\r\n\r\n").await.expect("write");
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await.expect("answered").expect("read");
    let answer = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("slow"), "{answer}");
    // Still open right after: a second request on it is served.
    stream.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").await.expect("write");
    let answer = read_until_close(&mut stream, Duration::from_secs(5)).await.expect("answered");
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("ok"), "{answer}");
    stop.cancel();
}

#[tokio::test]
async fn a_huge_declared_length_is_413_at_once() {
    let (addr, stop, _task) = start(limits(8)).await;
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 99999999999\r\n\r\n")
        .await
        .expect("write");
    let started = Instant::now();
    let answer = read_until_close(&mut stream, Duration::from_secs(2)).await.expect("answered within 2 s");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("99999999999"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(2));
    stop.cancel();
}

#[tokio::test]
async fn a_body_that_stalls_fails_after_the_body_timeout() {
    let (addr, stop, _task) = start(limits(8)).await;
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc").await.expect("write");
    let answer = read_until_close(&mut stream, Duration::from_secs(3)).await.expect("answered within 3 s");
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("not received within"), "{answer}");
    // A whole body is read as usual.
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(b"POST /echo HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: 3\r\n\r\nabc")
        .await
        .expect("write");
    let answer = read_until_close(&mut stream, Duration::from_secs(3)).await.expect("answered");
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("3"), "{answer}");
    stop.cancel();
}

#[test]
fn declared_lengths_are_read_leniently() {
    let mut headers = HeaderMap::new();
    assert_eq!(declared_length(&headers), None);
    headers.insert(header::CONTENT_LENGTH, header::HeaderValue::from_static("99999999999"));
    assert!(declares_more_than(&headers, 1024));
    headers.insert(header::CONTENT_LENGTH, header::HeaderValue::from_static("12"));
    assert!(!declares_more_than(&headers, 1024));
}

/// Sends a request head and `body_bytes` of body, then reads the answer, as a client that writes
/// its whole upload before reading does (Python's `urllib`): what it read, or why the upload
/// failed (such a client gives up on a reset or broken pipe and never sees the answer).
async fn upload(addr: SocketAddr, path: &str, body_bytes: usize) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let head = format!("POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {body_bytes}\r\n\r\n");
    let sent = tokio::time::timeout(Duration::from_secs(10), async {
        stream.write_all(head.as_bytes()).await?;
        let chunk = vec![b'x'; 64 * 1024];
        let mut left = body_bytes;
        while left > 0 {
            let n = left.min(chunk.len());
            stream.write_all(&chunk[..n]).await?;
            left -= n;
        }
        Ok::<_, std::io::Error>(())
    })
    .await;
    match sent {
        Ok(Ok(())) => read_until_close(&mut stream, Duration::from_secs(10)).await.unwrap_or_default(),
        Ok(Err(e)) => format!("the upload failed: {e}"),
        Err(_) => "the upload did not finish within 10 s".to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_still_sending_an_oversized_body_reads_its_413() {
    let (addr, stop, _task) = start(limits(8)).await;
    // 12 MiB against a 1 KiB limit: more than the loopback socket buffers hold, so the client
    // is still writing when the 413 is ready. Closing then (without the lingering read) resets
    // the connection under it: its write fails and it never reads the answer.
    for attempt in 0..5 {
        let answer = upload(addr, "/echo", 12 << 20).await;
        assert!(answer.starts_with("HTTP/1.1 413"), "attempt {attempt}: {answer:?}");
        assert!(answer.contains("payload_too_large"), "attempt {attempt}: {answer}");
    }
    stop.cancel();
    // A route that answers without reading the body (the listener itself takes any length): the same.
    let (addr, stop, _task) = start(Limits { max_body_bytes: u64::MAX, ..limits(8) }).await;
    for attempt in 0..5 {
        let answer = upload(addr, "/refuse", 12 << 20).await;
        assert!(answer.starts_with("HTTP/1.1 413") && answer.ends_with("refused unread"), "attempt {attempt}: {answer:?}");
    }
    stop.cancel();
}

#[tokio::test]
async fn a_body_past_the_lingering_bound_is_not_read_and_the_connection_closes() {
    let (addr, stop, _task) = start(limits(8)).await;
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let head = format!("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n", LINGER_BYTES + 1);
    stream.write_all(head.as_bytes()).await.expect("write");
    let answer = read_until_close(&mut stream, Duration::from_secs(2)).await.expect("answered at once");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");
    // `Expect: 100-continue`: the client waits for the answer; nothing is read.
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(b"POST /refuse HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n")
        .await
        .expect("write");
    let answer = read_until_close(&mut stream, Duration::from_secs(2)).await.expect("answered at once");
    assert!(answer.starts_with("HTTP/1.1 413") && !answer.contains("100 Continue"), "{answer}");
    stop.cancel();
}
