//! The gRPC services of SkyWalking's native agent protocol, served on the data listener beside
//! the HTTP routes and on `ingest.grpc_listen`. Thin like the HTTP receivers: read the stream
//! within the limits, map with the pure [`meters`], [`logs`] and [`management`], hand over to
//! the sinks, and answer with a status that says why in one place ([`Handler::answered`]).
//!
//! | call | taken | refused |
//! |---|---|---|
//! | `MeterReportService/collect` | at half-close, the stream is one batch; empty `Commands` | INVALID_ARGUMENT: a batch without service, instance or timestamp (nothing taken), or messages refused (the rest taken) |
//! | `MeterReportService/collectBatch` | each collection is a batch, taken as it arrives | INVALID_ARGUMENT as above, per collection |
//! | `LogReportService/collect` | in chunks as they arrive (the first named service carried over) | UNAVAILABLE when the node has no log pipeline |
//! | `ManagementService/*` | the instance and its properties recorded as `instance_traffic` | INVALID_ARGUMENT without service or instance |
//! | every call | | PERMISSION_DENIED without the `authentication` token; RESOURCE_EXHAUSTED over a message, stream or duration limit; UNAVAILABLE when dispatch stays full or the node stops |
//!
//! A stream the client cancels is taken as far as it was read (SkyWalking analyses it too); a
//! stream over a limit is refused whole (a meter batch) or from that point on (logs). The
//! package-less services older agents call (`/MeterReportService/collect`,
//! `/ManagementService/*`) are served by the same handlers.
//!
//! Counted in `grpc_calls{service,method,code}`, and the data in `samples_received` /
//! `samples_rejected` (`protocol="skywalking_meter"`) and `logs_received` / `logs_rejected`
//! (`protocol="skywalking_grpc"`).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use futures_util::FutureExt;
use tokio::time::Instant;
use tonic::codec::CompressionEncoding;
use tonic::service::interceptor::InterceptedService;
use tonic::{Code, Request, Response, Status, Streaming};

use super::config::GrpcSettings;
use super::logs::StreamService;
use super::meters::MeterBatch;
use super::wire::{self, Commands, InstancePingPkg, InstanceProperties, MeterData, MeterDataCollection};
use super::{compat, management};
use crate::base::clock::wall_clock_ms;
use crate::base::self_metrics::labels;
use crate::data::ingest::logs_http::LogReason;
use crate::data::ingest::{Ingest, Reason};
use crate::data::seam::{Batch, Catalog, InstanceSink, LogBatch, LogProtocol, LogSink, Protocol, SubmitError};

/// Logs handed to the sink at most this many at a time (fewer when the stream pauses).
const LOG_CHUNK: usize = 512;
/// How long a batch that meets a full queue waits for room before the call is refused.
const ROOM_WAIT: Duration = Duration::from_secs(5);
/// How often logs a full log sink refused are offered again.
const ROOM_RETRY: Duration = Duration::from_millis(5);

/// The receivers of the native protocol.
pub struct SkyWalkingReceiver {
    ingest: Arc<Ingest>,
    settings: GrpcSettings,
    /// Where management calls record instance traffic; none: they are answered, not recorded
    /// (a test's wiring).
    instances: Option<Arc<dyn InstanceSink>>,
}

impl SkyWalkingReceiver {
    pub fn new(ingest: Arc<Ingest>, settings: GrpcSettings, instances: Option<Arc<dyn InstanceSink>>) -> Arc<SkyWalkingReceiver> {
        Arc::new(SkyWalkingReceiver { ingest, settings, instances })
    }

    pub fn settings(&self) -> &GrpcSettings {
        &self.settings
    }
}

/// The gRPC routes, to merge with the data listener's (no fallback).
pub fn routes(receiver: &Arc<SkyWalkingReceiver>) -> Router {
    let handler = Handler(receiver.clone());
    let limit = receiver.settings.max_message_bytes;
    // Each service takes messages up to the limit, gzip-compressed or not, behind the token check.
    macro_rules! served {
        ($server:expr, $service:expr) => {
            InterceptedService::new(
                $server.max_decoding_message_size(limit).accept_compressed(CompressionEncoding::Gzip),
                Guard { service: $service, receiver: receiver.clone() },
            )
        };
    }
    let meter = served!(wire::meter_report_service_server::MeterReportServiceServer::new(handler.clone()), METER);
    let logs = served!(wire::log_report_service_server::LogReportServiceServer::new(handler.clone()), LOGS);
    let management = served!(wire::management_service_server::ManagementServiceServer::new(handler.clone()), MANAGEMENT);
    let meter_compat = served!(compat::meter_report_service_server::MeterReportServiceServer::new(handler.clone()), METER);
    let management_compat = served!(compat::management_service_server::ManagementServiceServer::new(handler), MANAGEMENT);
    Router::new()
        .route_service("/skywalking.v3.MeterReportService/{*method}", meter)
        .route_service("/skywalking.v3.LogReportService/{*method}", logs)
        .route_service("/skywalking.v3.ManagementService/{*method}", management)
        .route_service("/MeterReportService/{*method}", meter_compat)
        .route_service("/ManagementService/{*method}", management_compat)
}

/// The routes alone, for the dedicated gRPC port: any other path is UNIMPLEMENTED.
pub fn grpc_only_router(receiver: &Arc<SkyWalkingReceiver>) -> Router {
    routes(receiver).fallback(|uri: axum::http::Uri| async move { unimplemented(uri.path()) })
}

/// The answer to a gRPC call of a service this node does not serve.
pub fn unimplemented(path: &str) -> axum::response::Response {
    Status::unimplemented(format!(
        "{path} is not served here; hotrule serves skywalking.v3.MeterReportService, LogReportService and ManagementService"
    ))
    .into_http()
}

const METER: &str = "MeterReportService";
const LOGS: &str = "LogReportService";
const MANAGEMENT: &str = "ManagementService";

/// Checks the `authentication` token (when one is configured) before a call reaches its service.
#[derive(Clone)]
struct Guard {
    service: &'static str,
    receiver: Arc<SkyWalkingReceiver>,
}

impl tonic::service::Interceptor for Guard {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let Some(expected) = &self.receiver.settings.authentication else { return Ok(request) };
        let presented = request.metadata().get("authentication").map(|v| v.as_bytes());
        if presented.is_some_and(|p| crate::base::secret::constant_time_eq(p, expected.as_bytes())) {
            return Ok(request);
        }
        let status = Status::permission_denied(match presented {
            None => "no authentication token: set the agent's authentication (SW_AGENT_AUTHENTICATION) to the node's ingest.grpc.authentication",
            Some(_) => "the authentication token does not match the node's ingest.grpc.authentication",
        });
        self.receiver.count_call(self.service, "*", status.code());
        Err(status)
    }
}

/// The services' implementation (cheap to clone).
#[derive(Clone)]
struct Handler(Arc<SkyWalkingReceiver>);

impl Handler {
    /// Counts the call and turns its outcome into tonic's answer.
    fn answered(&self, service: &'static str, method: &'static str, outcome: Result<(), Status>) -> Result<Response<Commands>, Status> {
        let code = match &outcome {
            Ok(()) => Code::Ok,
            Err(status) => status.code(),
        };
        self.0.count_call(service, method, code);
        if let Err(status) = &outcome {
            tracing::debug!(service, method, code = ?code, message = status.message(), "gRPC call refused");
        }
        outcome.map(|()| Response::new(Commands::default()))
    }
}

impl SkyWalkingReceiver {
    fn count_call(&self, service: &str, method: &str, code: Code) {
        self.ingest
            .telemetry()
            .grpc_calls
            .get_or_create(&labels([("service", service), ("method", method), ("code", code_name(code))]))
            .inc();
    }

    /// The stream's next message within the stream's limits; `None` at half-close. A client
    /// that cancels or breaks the stream ends it too ([`Ended::Broken`]).
    async fn next<T>(&self, stream: &mut Streaming<T>, limits: &mut StreamLimits) -> Result<Option<T>, Ended> {
        match self.ready(stream, limits) {
            Some(next) => next,
            None => self.wait(stream, limits).await,
        }
    }

    /// The next message if it is already here; none if the stream has to be waited for.
    fn ready<T>(&self, stream: &mut Streaming<T>, limits: &mut StreamLimits) -> Option<Result<Option<T>, Ended>> {
        stream.message().now_or_never().map(|next| self.checked(next, limits))
    }

    /// Waits for the next message until the stream's deadline.
    async fn wait<T>(&self, stream: &mut Streaming<T>, limits: &mut StreamLimits) -> Result<Option<T>, Ended> {
        match tokio::time::timeout_at(limits.deadline, stream.message()).await {
            Ok(next) => self.checked(next, limits),
            Err(_) => Err(Ended::Limit(Status::resource_exhausted(format!(
                "the stream stayed open longer than ingest.grpc.max_stream_duration ({:?})",
                self.settings.max_stream_duration
            )))),
        }
    }

    /// A message read, counted against the stream's limits; a read error as how it ended.
    fn checked<T>(&self, next: Result<Option<T>, Status>, limits: &mut StreamLimits) -> Result<Option<T>, Ended> {
        match next {
            Ok(Some(message)) => {
                limits.messages += 1;
                if limits.messages > self.settings.max_stream_messages {
                    return Err(Ended::Limit(Status::resource_exhausted(format!(
                        "the stream sent more than ingest.grpc.max_stream_messages ({}) messages",
                        self.settings.max_stream_messages
                    ))));
                }
                Ok(Some(message))
            }
            Ok(None) => Ok(None),
            Err(status) => Err(match status.code() {
                // An oversized message: tonic's own RESOURCE_EXHAUSTED, naming the limit.
                Code::ResourceExhausted | Code::OutOfRange => Ended::Limit(Status::resource_exhausted(format!(
                    "message {}: {} (ingest.grpc.max_message_bytes is {})",
                    limits.messages + 1,
                    status.message(),
                    self.settings.max_message_bytes
                ))),
                // tonic reports an undecodable message as INTERNAL: it is the client's.
                Code::Internal if status.message().contains("decode") => {
                    Ended::Limit(Status::invalid_argument(format!("message {}: {}", limits.messages + 1, status.message())))
                }
                _ => Ended::Broken(status),
            }),
        }
    }

    /// Hands a meter batch to dispatch, waiting a while for room in a full queue. Samples no
    /// loaded file reads are counted and left out, as the HTTP receivers leave them out.
    async fn take_meters(&self, batch: Batch) -> Result<(), Status> {
        let (batch, unread) = match self.ingest.reads(Catalog::Meter) {
            Some(reads) => {
                let before = batch.samples.len();
                let samples: Vec<_> = batch.samples.into_iter().filter(|s| reads.contains(&s.name)).collect();
                let unread = before - samples.len();
                (Batch { samples, ..batch }, unread)
            }
            None => (batch, 0),
        };
        // The submit that follows is refused, and counted, if there is still no room.
        self.ingest.room_within(ROOM_WAIT).await;
        let batches = if batch.samples.is_empty() { Vec::new() } else { vec![batch] };
        self.ingest.submit_read(Protocol::SkyWalkingMeter, batches, unread).map_err(submit_status)
    }

    /// Hands logs to the log sink, retrying a full one for up to [`ROOM_WAIT`]: counted once,
    /// as received, and as refused when not taken (`Ingest::hand_over`).
    async fn take_logs(&self, sink: &dyn LogSink, logs: Vec<crate::data::seam::LogData>) -> Result<(), Status> {
        if logs.is_empty() {
            return Ok(());
        }
        let count = logs.len();
        let batch = LogBatch { protocol: LogProtocol::SkyWalkingGrpc, logs, received_ms: wall_clock_ms() };
        let deadline = Instant::now() + ROOM_WAIT;
        let outcome = loop {
            match sink.submit_logs(vec![batch.clone()]) {
                Err(SubmitError::QueueFull { .. }) if Instant::now() < deadline => tokio::time::sleep(ROOM_RETRY).await,
                outcome => break outcome,
            }
        };
        self.ingest.hand_over::<LogReason>(LogProtocol::SkyWalkingGrpc, count, || outcome).map_err(submit_status)
    }

    /// Records a management call's instance traffic.
    async fn record_instance(&self, value: Result<hotrule_mal_engine::MetricValue, management::ManagementError>) -> Result<(), Status> {
        let value = value.map_err(|e| Status::invalid_argument(e.to_string()))?;
        let Some(sink) = self.instances.clone() else { return Ok(()) };
        match tokio::task::spawn_blocking(move || sink.record(value)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Status::unavailable(format!("recording the instance failed: {e}"))),
            Err(e) => Err(Status::internal(format!("recording the instance failed: {e}"))),
        }
    }

    /// Reads one message into `batch`: a refused meter noted at `at`; a batch over the sample
    /// limit refused with the rest of its stream.
    fn read_meter(&self, batch: &mut MeterBatch, data: &MeterData, refusals: &mut Refusals, at: impl FnOnce() -> String) -> Result<(), Status> {
        if let Err(e) = batch.read(data) {
            refusals.note_at(at(), e);
            self.ingest.rejected(Protocol::SkyWalkingMeter, Reason::InvalidSample, 1);
        }
        if batch.samples() > self.settings.max_stream_samples {
            self.ingest.rejected(Protocol::SkyWalkingMeter, Reason::TooLarge, batch.samples());
            return Err(Status::resource_exhausted(format!(
                "a batch holds more than ingest.grpc.max_stream_samples ({}) samples; it and the rest of the stream were not taken",
                self.settings.max_stream_samples
            )));
        }
        Ok(())
    }

    /// Hands a read batch over; an incomplete one is counted, and why is returned.
    async fn take_batch(&self, batch: MeterBatch) -> Result<Option<String>, Status> {
        let read = batch.samples();
        match batch.finish(wall_clock_ms()) {
            Ok(Some(batch)) => self.take_meters(batch).await.map(|()| None),
            Ok(None) => Ok(None),
            Err(incomplete) => {
                self.ingest.rejected(Protocol::SkyWalkingMeter, Reason::BadRequest, read);
                Ok(Some(format!("{incomplete}: none of its {read} samples were taken")))
            }
        }
    }

    /// `MeterReportService/collect`: the stream is one batch.
    async fn meter_stream(&self, mut stream: Streaming<MeterData>) -> Result<(), Status> {
        let mut limits = StreamLimits::new(&self.settings);
        let mut batch = MeterBatch::default();
        let mut refusals = Refusals::default();
        loop {
            let data = match self.next(&mut stream, &mut limits).await {
                Ok(Some(data)) => data,
                Ok(None) => break,
                // A cancelled or broken stream is analysed as far as it was read (as upstream).
                Err(Ended::Broken(status)) => {
                    tracing::debug!(message = status.message(), "a meter stream ended early; taking what it sent");
                    break;
                }
                Err(Ended::Limit(status)) => {
                    self.ingest.rejected(Protocol::SkyWalkingMeter, Reason::TooLarge, batch.samples().max(1));
                    return Err(with_nothing_taken(status));
                }
            };
            let message = limits.messages;
            self.read_meter(&mut batch, &data, &mut refusals, || format!("message {message}"))?;
        }
        if let Some(incomplete) = self.take_batch(batch).await? {
            return Err(Status::invalid_argument(incomplete));
        }
        refusals.answer("messages")
    }

    /// `MeterReportService/collectBatch`: each collection is a batch of its own.
    async fn meter_collections(&self, mut stream: Streaming<MeterDataCollection>) -> Result<(), Status> {
        let mut limits = StreamLimits::new(&self.settings);
        let mut refusals = Refusals::default();
        let mut incomplete = Refusals::default();
        loop {
            let collection = match self.next(&mut stream, &mut limits).await {
                Ok(Some(collection)) => collection,
                Ok(None) | Err(Ended::Broken(_)) => break,
                Err(Ended::Limit(status)) => return Err(status),
            };
            let number = limits.messages;
            let mut batch = MeterBatch::default();
            for (index, data) in collection.meter_data.iter().enumerate() {
                self.read_meter(&mut batch, data, &mut refusals, || format!("collection {number} message {}", index + 1))?;
            }
            if let Some(why) = self.take_batch(batch).await? {
                incomplete.note_at(format!("collection {number}"), why);
            }
        }
        incomplete.answer("collections")?;
        refusals.answer("messages")
    }

    /// `LogReportService/collect`: logs are handed over in chunks as they arrive.
    async fn log_stream(&self, mut stream: Streaming<wire::LogData>) -> Result<(), Status> {
        let Some(sink) = self.ingest.log_sink.clone() else {
            self.ingest.logs_rejected(LogProtocol::SkyWalkingGrpc, LogReason::Unavailable, 1);
            return Err(Status::unavailable(crate::data::ingest::logs_http::LOGS_UNAVAILABLE));
        };
        let mut limits = StreamLimits::new(&self.settings);
        let mut service = StreamService::default();
        let mut pending = Vec::new();
        let mut taken = 0usize;
        loop {
            let next = match self.ready(&mut stream, &mut limits) {
                Some(next) => next,
                None => {
                    // Hand over what arrived before waiting for more.
                    let count = pending.len();
                    self.take_logs(sink.as_ref(), std::mem::take(&mut pending)).await.map_err(|status| after_logs(status, taken))?;
                    taken += count;
                    self.wait(&mut stream, &mut limits).await
                }
            };
            match next {
                Ok(Some(log)) => {
                    pending.push(service.map(log));
                    if pending.len() >= LOG_CHUNK {
                        let count = pending.len();
                        self.take_logs(sink.as_ref(), std::mem::take(&mut pending)).await.map_err(|status| after_logs(status, taken))?;
                        taken += count;
                    }
                }
                Ok(None) | Err(Ended::Broken(_)) => break,
                Err(Ended::Limit(status)) => {
                    self.ingest.logs_rejected(LogProtocol::SkyWalkingGrpc, LogReason::TooLarge, pending.len().max(1));
                    return Err(after_logs(status, taken));
                }
            }
        }
        self.take_logs(sink.as_ref(), pending).await.map_err(|status| after_logs(status, taken))
    }
}

/// How a stream ended other than by half-close.
enum Ended {
    /// Over a limit, or a message that does not decode: refused.
    Limit(Status),
    /// The client cancelled or the connection broke.
    Broken(Status),
}

/// One stream's running count and deadline.
struct StreamLimits {
    deadline: Instant,
    messages: usize,
}

impl StreamLimits {
    fn new(settings: &GrpcSettings) -> StreamLimits {
        StreamLimits { deadline: Instant::now() + settings.max_stream_duration, messages: 0 }
    }
}

/// The refused parts of a stream: how many, and the first one's reason.
#[derive(Default)]
struct Refusals {
    count: usize,
    first: Option<String>,
}

impl Refusals {
    fn note_at(&mut self, at: String, error: impl std::fmt::Display) {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some(format!("{at}: {error}"));
        }
    }

    /// INVALID_ARGUMENT naming the refused parts, when there were any.
    fn answer(self, what: &str) -> Result<(), Status> {
        match self.first {
            None => Ok(()),
            Some(first) => Err(Status::invalid_argument(format!(
                "{} {what} refused (the first: {first}); the rest were taken",
                self.count
            ))),
        }
    }
}

/// A limit's status, saying that the meter batch was not taken.
fn with_nothing_taken(status: Status) -> Status {
    Status::new(status.code(), format!("{}; nothing of the stream was taken", status.message()))
}

/// A refusal part-way through a log stream, saying how many of its logs were taken before.
fn after_logs(status: Status, taken: usize) -> Status {
    Status::new(status.code(), format!("{}; {taken} logs of the stream were taken before", status.message()))
}

/// A sink's refusal as a status: the agent may retry later.
fn submit_status(error: SubmitError) -> Status {
    Status::unavailable(error.to_string())
}

/// The `code` label of `grpc_calls`.
fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "ok",
        Code::Cancelled => "cancelled",
        Code::Unknown => "unknown",
        Code::InvalidArgument => "invalid_argument",
        Code::DeadlineExceeded => "deadline_exceeded",
        Code::NotFound => "not_found",
        Code::AlreadyExists => "already_exists",
        Code::PermissionDenied => "permission_denied",
        Code::ResourceExhausted => "resource_exhausted",
        Code::FailedPrecondition => "failed_precondition",
        Code::Aborted => "aborted",
        Code::OutOfRange => "out_of_range",
        Code::Unimplemented => "unimplemented",
        Code::Internal => "internal",
        Code::Unavailable => "unavailable",
        Code::DataLoss => "data_loss",
        Code::Unauthenticated => "unauthenticated",
    }
}

#[tonic::async_trait]
impl wire::meter_report_service_server::MeterReportService for Handler {
    async fn collect(&self, request: Request<Streaming<MeterData>>) -> Result<Response<Commands>, Status> {
        let outcome = self.0.meter_stream(request.into_inner()).await;
        self.answered(METER, "collect", outcome)
    }

    async fn collect_batch(&self, request: Request<Streaming<MeterDataCollection>>) -> Result<Response<Commands>, Status> {
        let outcome = self.0.meter_collections(request.into_inner()).await;
        self.answered(METER, "collectBatch", outcome)
    }
}

#[tonic::async_trait]
impl compat::meter_report_service_server::MeterReportService for Handler {
    async fn collect(&self, request: Request<Streaming<MeterData>>) -> Result<Response<Commands>, Status> {
        wire::meter_report_service_server::MeterReportService::collect(self, request).await
    }
}

#[tonic::async_trait]
impl wire::log_report_service_server::LogReportService for Handler {
    async fn collect(&self, request: Request<Streaming<wire::LogData>>) -> Result<Response<Commands>, Status> {
        let outcome = self.0.log_stream(request.into_inner()).await;
        self.answered(LOGS, "collect", outcome)
    }
}

#[tonic::async_trait]
impl wire::management_service_server::ManagementService for Handler {
    async fn report_instance_properties(&self, request: Request<InstanceProperties>) -> Result<Response<Commands>, Status> {
        let outcome = self.0.record_instance(management::reported(request.get_ref(), wall_clock_ms())).await;
        self.answered(MANAGEMENT, "reportInstanceProperties", outcome)
    }

    async fn keep_alive(&self, request: Request<InstancePingPkg>) -> Result<Response<Commands>, Status> {
        let outcome = self.0.record_instance(management::pinged(request.get_ref(), wall_clock_ms())).await;
        self.answered(MANAGEMENT, "keepAlive", outcome)
    }
}

#[tonic::async_trait]
impl compat::management_service_server::ManagementService for Handler {
    async fn report_instance_properties(&self, request: Request<InstanceProperties>) -> Result<Response<Commands>, Status> {
        wire::management_service_server::ManagementService::report_instance_properties(self, request).await
    }

    async fn keep_alive(&self, request: Request<InstancePingPkg>) -> Result<Response<Commands>, Status> {
        wire::management_service_server::ManagementService::keep_alive(self, request).await
    }
}
