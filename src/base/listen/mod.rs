//! Serving HTTP/1.1 on an already-bound listener with bounded resources. The admin, bus and
//! data listeners all go through [`serve`]; the limits are one [`ListenLimits`] in the node's
//! configuration (`limits:` section, see `docs/security.md`).
//!
//! - **Connections**: at most `max_connections` at once per listener, so a flood cannot take the
//!   process to its file limit. At the limit a new connection is admitted by closing the one
//!   that has waited longest without a request in flight (an idle keep-alive, or a client that
//!   never finished a request head), as nginx resets its timed-out connections under load: slow
//!   or idle clients cannot lock an operator out for a whole header timeout. Only when every
//!   connection has a request in flight is the new one closed at once (the peer sees a reset or
//!   EOF); refusals are counted and logged at most once per interval.
//! - **Header read**: hyper's `header_read_timeout` (a `TokioTimer` drives it). It runs from the
//!   moment the connection starts waiting for a request head, so it also covers the wait
//!   between keep-alive requests.
//! - **Idle keep-alive**: a connection with no request in flight for `idle_timeout` is shut
//!   down gracefully (a response being written is finished first).
//! - **Body read**: a request's body must arrive within `body_read_timeout` of its head; after
//!   that, reading it fails and the handler answers its usual "unreadable body" error.
//! - **Declared length**: a `Content-Length` above the listener's `max_body_bytes` is answered
//!   `413` without handing the request to a route. Routes with a smaller limit check their own
//!   (and answer in their own error format) before reading.
//! - **Lingering read**: a client still sending a body the server will not use (an early 413, a
//!   route that answered without reading) would see a reset instead of the answer if the
//!   connection closed under it. So, as nginx's lingering close, the rest of such a body is read
//!   and dropped before the answer goes out — at most [`LINGER_BYTES`] within [`LINGER_TIME`];
//!   a body beyond that (or one behind `Expect: 100-continue`, which the client has not sent)
//!   is not read, and the answer closes the connection.
//!
//! Shutdown: `stop` ends accepting and shuts every connection down gracefully; [`serve`] returns
//! when the last one has closed.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, Request, Response, StatusCode, header};
use bytes::Bytes;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// The shortest `idle_timeout` a configuration may set: above [`CLIENT_POOL_IDLE_TIMEOUT`] with
/// room to spare, so that the node's own clients never reuse a connection the server is closing.
pub const MIN_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the node's HTTP clients (bus, admin fan-outs, CLI) keep an idle pooled connection.
/// It must stay below every server's idle timeout: a request sent on a connection the server
/// closes at that moment fails (and a POST is not retried).
pub const CLIENT_POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(5);

/// The most of an unused request body read (and dropped) so that the client gets its answer.
pub const LINGER_BYTES: u64 = 16 << 20;

/// The longest a lingering read of an unused body may take.
pub const LINGER_TIME: Duration = Duration::from_secs(5);

/// At most one "connection refused" warning per listener per this interval; the rest are counted.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// The limits shared by the node's listeners (the `limits:` configuration section).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenLimits {
    pub header_read_timeout: Duration,
    pub body_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub admin_connections: usize,
    pub bus_connections: usize,
    pub data_connections: usize,
}

pub fn default_header_read_timeout() -> Duration {
    Duration::from_secs(30)
}
pub fn default_body_read_timeout() -> Duration {
    Duration::from_secs(60)
}
/// Above the agents' usual 10 s heartbeat interval, so an agent that keeps its connection open
/// between heartbeats is not cut just as it sends the next one.
pub fn default_idle_timeout() -> Duration {
    Duration::from_secs(30)
}
pub fn default_admin_connections() -> usize {
    256
}
pub fn default_bus_connections() -> usize {
    256
}
pub fn default_data_connections() -> usize {
    1024
}

impl Default for ListenLimits {
    fn default() -> Self {
        ListenLimits {
            header_read_timeout: default_header_read_timeout(),
            body_read_timeout: default_body_read_timeout(),
            idle_timeout: default_idle_timeout(),
            admin_connections: default_admin_connections(),
            bus_connections: default_bus_connections(),
            data_connections: default_data_connections(),
        }
    }
}

impl ListenLimits {
    /// The limits of one listener with `max_connections` and `max_body_bytes`.
    pub fn listener(&self, max_connections: usize, max_body_bytes: u64) -> Limits {
        Limits {
            header_read_timeout: self.header_read_timeout,
            body_read_timeout: self.body_read_timeout,
            idle_timeout: self.idle_timeout,
            max_connections,
            max_body_bytes,
            http2: false,
            grpc_stream_timeout: self.body_read_timeout,
        }
    }
}

/// The limits one listener is served with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub header_read_timeout: Duration,
    pub body_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
    /// The largest body any route of the listener reads; a larger declared length is a 413.
    pub max_body_bytes: u64,
    /// Whether the listener speaks HTTP/2 beside HTTP/1.1 (the data listener: gRPC).
    pub http2: bool,
    /// How long a gRPC call's request stream may take, in place of `body_read_timeout` (its
    /// service bounds it first, with a status; this is the listener's backstop).
    pub grpc_stream_timeout: Duration,
}

impl Limits {
    /// These limits with HTTP/2 beside HTTP/1.1, a gRPC request stream bounded by `stream_timeout`.
    pub fn with_grpc(self, stream_timeout: Duration) -> Limits {
        Limits { http2: true, grpc_stream_timeout: stream_timeout, ..self }
    }
}

/// The declared `Content-Length`, when there is a readable one.
pub fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(header::CONTENT_LENGTH)?.to_str().ok()?.trim().parse().ok()
}

/// True when the request declares a body longer than `limit` (decided before reading anything).
pub fn declares_more_than(headers: &HeaderMap, limit: u64) -> bool {
    declared_length(headers).is_some_and(|length| length > limit)
}

/// Serves `app` on `listener` with `limits` until `stop` is cancelled and every connection has
/// closed. Handlers can read the peer address as `ConnectInfo<SocketAddr>`.
pub async fn serve<L>(mut listener: L, app: Router, limits: Limits, stop: CancellationToken, what: &'static str)
where
    L: axum::serve::Listener<Addr = SocketAddr>,
{
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let connections = TaskTracker::new();
    let refusals = RefusalLog::default();
    let open = Arc::new(OpenConnections::default());
    loop {
        let (io, peer) = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => Some(slot),
            // At the limit: close the connection that has waited longest without a request,
            // and take its slot once it is released.
            Err(_) if open.evict_longest_waiting() => {
                tokio::time::timeout(EVICTION_WAIT, slots.clone().acquire_owned()).await.ok().and_then(Result::ok)
            }
            Err(_) => None,
        };
        let Some(slot) = slot else {
            // Dropping the stream closes it: at the limit a connection costs one accept.
            drop(io);
            refusals.note(what, peer, limits.max_connections);
            continue;
        };
        let app = app.clone();
        let stop = stop.clone();
        let open = open.clone();
        connections.spawn(async move {
            let _slot = slot;
            let (id, activity, evicted) = open.add();
            serve_connection(io, peer, app, limits, stop, activity, evicted).await;
            open.remove(id);
        });
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

/// How long an accept at the limit waits for an evicted connection to release its slot.
const EVICTION_WAIT: Duration = Duration::from_secs(1);

/// The open connections of one listener: each one's activity, and how to close it.
#[derive(Default)]
struct OpenConnections {
    next: AtomicU64,
    by_id: std::sync::Mutex<std::collections::HashMap<u64, (Arc<Activity>, CancellationToken)>>,
}

impl OpenConnections {
    fn add(&self) -> (u64, Arc<Activity>, CancellationToken) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let activity = Arc::new(Activity {
            in_flight: AtomicUsize::new(0),
            last: std::sync::Mutex::new(Instant::now()),
            ended: tokio::sync::Notify::new(),
        });
        let evicted = CancellationToken::new();
        self.lock().insert(id, (activity.clone(), evicted.clone()));
        (id, activity, evicted)
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Closes the connection that has waited longest without a request in flight (not one
    /// already being closed); whether there was one.
    fn evict_longest_waiting(&self) -> bool {
        let open = self.lock();
        let victim = open
            .values()
            .filter(|(activity, evicted)| activity.in_flight.load(Ordering::SeqCst) == 0 && !evicted.is_cancelled())
            .min_by_key(|(activity, _)| *activity.last.lock().unwrap_or_else(|p| p.into_inner()));
        match victim {
            Some((_, evicted)) => {
                evicted.cancel();
                true
            }
            None => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<u64, (Arc<Activity>, CancellationToken)>> {
        self.by_id.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What a connection's idle watch reads: requests in flight and when the last one started or
/// ended.
struct Activity {
    in_flight: AtomicUsize,
    last: std::sync::Mutex<Instant>,
    /// Signalled when a request ends, so the idle clock restarts then, not a period later.
    ended: tokio::sync::Notify,
}

impl Activity {
    fn touch(&self) {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    /// How long until the connection counts as idle (zero when it already is); `None` while a
    /// request is in flight.
    fn idle_in(&self, idle_timeout: Duration) -> Option<Duration> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let last = *self.last.lock().unwrap_or_else(|p| p.into_inner());
        Some(idle_timeout.saturating_sub(last.elapsed()))
    }
}

/// Counts a request in flight for as long as it lives (also when hyper drops it half-way).
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: &Arc<Activity>) -> InFlight {
        activity.in_flight.fetch_add(1, Ordering::SeqCst);
        activity.touch();
        InFlight(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.0.ended.notify_one();
    }
}

async fn serve_connection<I>(
    io: I,
    peer: SocketAddr,
    app: Router,
    limits: Limits,
    stop: CancellationToken,
    activity: Arc<Activity>,
    evicted: CancellationToken,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service_activity = activity.clone();
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let in_flight = InFlight::start(&service_activity);
        let app = app.clone();
        async move {
            let response = handle(app, request, peer, limits).await;
            drop(in_flight);
            Ok::<_, Infallible>(response)
        }
    });
    if limits.http2 {
        // HTTP/2 (cleartext by prior knowledge, or TLS with ALPN `h2`) beside HTTP/1.1: gRPC's
        // agents and the HTTP routes share the data listener.
        let mut builder = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
        builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout).keep_alive(true);
        builder.http2().timer(TokioTimer::new()).max_concurrent_streams(HTTP2_MAX_STREAMS);
        let connection = builder.serve_connection(TokioIo::new(io), service);
        drive(connection, peer, limits, stop, activity, evicted).await;
    } else {
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout).keep_alive(true);
        let connection = builder.serve_connection(TokioIo::new(io), service);
        drive(connection, peer, limits, stop, activity, evicted).await;
    }
}

/// The most concurrent HTTP/2 streams one connection may open (an agent opens a few: heartbeat,
/// meters, logs).
const HTTP2_MAX_STREAMS: u32 = 128;

/// Runs a connection to its end: shut down gracefully once idle for the idle timeout, when the
/// listener stops, or when evicted to admit another at the limit.
async fn drive<C>(connection: C, peer: SocketAddr, limits: Limits, stop: CancellationToken, activity: Arc<Activity>, evicted: CancellationToken)
where
    C: hyper_util::server::graceful::GracefulConnection,
    C::Error: std::fmt::Display,
{
    tokio::pin!(connection);
    let mut closing = false;
    loop {
        let idle_in = activity.idle_in(limits.idle_timeout);
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "connection ended");
                }
                return;
            }
            // A request ended (or had ended before this wait): recompute the idle deadline.
            () = activity.ended.notified(), if idle_in.is_none() && !closing => {}
            () = tokio::time::sleep(idle_in.unwrap_or_default()), if idle_in.is_some() && !closing => {
                if activity.idle_in(limits.idle_timeout).is_some_and(|left| left.is_zero()) {
                    closing = true;
                    connection.as_mut().graceful_shutdown();
                }
            }
            () = stop.cancelled(), if !closing => {
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
            // Closed to admit a new connection at the limit: it had no request in flight.
            () = evicted.cancelled(), if !closing => {
                tracing::debug!(%peer, "connection closed to admit a new one at the listener's limit");
                if activity.in_flight.load(Ordering::SeqCst) == 0 {
                    return;
                }
                // A request began after it was picked: let that one finish.
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}

/// One request: the declared length checked, the body put under its deadline, the peer address
/// attached, then the router; what the answer left of the body is read and dropped (bounded).
async fn handle(app: Router, request: Request<Incoming>, peer: SocketAddr, limits: Limits) -> Response<Body> {
    let declared = declared_length(request.headers());
    let expects_continue = request
        .headers()
        .get(header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let grpc = is_grpc(request.headers());
    let http2 = request.version() == axum::http::Version::HTTP_2;
    let (mut parts, body) = request.into_parts();
    let body_timeout = if grpc { limits.grpc_stream_timeout } else { limits.body_read_timeout };
    let body = SharedBody(Arc::new(std::sync::Mutex::new(TimedBody::new(body, body_timeout))));
    let mut response = match declared.filter(|length| *length > limits.max_body_bytes) {
        Some(length) => {
            too_large(format!("request body of {length} bytes declared; this listener accepts at most {}\n", limits.max_body_bytes))
        }
        None => {
            parts.extensions.insert(ConnectInfo(peer));
            match app.oneshot(Request::from_parts(parts, Body::new(body.clone()))).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
    };
    // An HTTP/2 stream's unread body is reset with the stream, not left on the connection.
    if http2 || hyper::body::Body::is_end_stream(&body) {
        return response;
    }
    // Unread body bytes are left on the connection: it cannot carry another request. The answer
    // goes out now; the rest of the body is read and dropped meanwhile, so that a client still
    // sending reads the answer instead of a reset (nginx's lingering close).
    response.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
    if !expects_continue && declared.is_none_or(|length| length <= LINGER_BYTES) {
        tokio::spawn(async move { body.drain(LINGER_BYTES, LINGER_TIME).await });
    }
    response
}

/// Whether a request is a gRPC call (`Content-Type: application/grpc[+proto]`).
pub fn is_grpc(headers: &HeaderMap) -> bool {
    headers.get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// The early 413, in the admin API's error shape (`applyStatus` + `message`): the admin listener
/// is the only one whose routes all share one error format; the bus and the data listener
/// declare no limit here and answer oversized bodies from their own handlers.
fn too_large(message: String) -> Response<Body> {
    let body = serde_json::json!({ "applyStatus": "payload_too_large", "message": message.trim_end() });
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    response
}

/// A request body the route reads while [`handle`] keeps a handle on it, to read what the route
/// left once it has answered.
#[derive(Clone)]
struct SharedBody(Arc<std::sync::Mutex<TimedBody>>);

impl SharedBody {
    fn lock(&self) -> std::sync::MutexGuard<'_, TimedBody> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads and drops the rest of the body: whether it ended within `max_bytes` and `within`
    /// (and the body deadline). A failed read ends it too, as not ended.
    async fn drain(&self, max_bytes: u64, within: Duration) -> bool {
        let mut read = 0u64;
        let reading = async {
            loop {
                if hyper::body::Body::is_end_stream(&*self.lock()) {
                    return true;
                }
                let next = std::future::poll_fn(|cx| hyper::body::Body::poll_frame(Pin::new(&mut *self.lock()), cx)).await;
                match next {
                    None => return true,
                    Some(Ok(frame)) => {
                        read += frame.data_ref().map_or(0, |d| d.len() as u64);
                        if read > max_bytes {
                            return false;
                        }
                    }
                    Some(Err(_)) => return false,
                }
            }
        };
        let ended = tokio::time::timeout(within, reading).await.unwrap_or(false);
        if read > 0 {
            tracing::debug!(bytes = read, ended, "read and dropped the unused rest of a request body");
        }
        ended
    }
}

impl hyper::body::Body for SharedBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        hyper::body::Body::poll_frame(Pin::new(&mut *self.lock()), cx)
    }

    fn is_end_stream(&self) -> bool {
        self.lock().is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.lock().size_hint()
    }
}

/// The body did not arrive within the listener's body-read timeout.
#[derive(Debug, thiserror::Error)]
#[error("request body not received within {0:?}")]
pub struct BodyTimeout(Duration);

/// A request body that fails once its deadline passes.
struct TimedBody {
    inner: Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
    limit: Duration,
}

impl TimedBody {
    fn new(inner: Incoming, limit: Duration) -> TimedBody {
        TimedBody { inner, deadline: Box::pin(tokio::time::sleep(limit)), limit }
    }
}

impl hyper::body::Body for TimedBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => Poll::Ready(frame.map(|result| result.map_err(Into::into))),
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(BodyTimeout(this.limit).into()))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Rate-limited warnings for connections refused at the limit.
#[derive(Default)]
struct RefusalLog {
    last_ms: AtomicU64,
    suppressed: AtomicU64,
    total: AtomicU64,
}

impl RefusalLog {
    fn note(&self, what: &str, peer: SocketAddr, limit: usize) {
        let total = self.total.fetch_add(1, Ordering::Relaxed) + 1;
        let now_ms = crate::base::clock::now_ms();
        let last = self.last_ms.load(Ordering::Relaxed);
        if now_ms.saturating_sub(last) >= REFUSAL_LOG_INTERVAL.as_millis() as u64
            && self.last_ms.compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            let suppressed = self.suppressed.swap(0, Ordering::Relaxed);
            tracing::warn!(listener = what, %peer, limit, suppressed, total, "connection refused: listener at its connection limit");
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests;
