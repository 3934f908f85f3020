//! The node's listeners: bound by the caller (port 0 in tests), made TLS where configured, and
//! served once the node has booted.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::api::admin::{self, AdminState};
use crate::api::agents::AgentService;
use crate::base::listen::{Limits, ListenLimits};
use crate::data::ingest::Ingest;
use crate::data::ingest::skywalking::SkyWalkingReceiver;

use super::NodeError;

/// The listeners a node serves on, bound by the caller (port 0 in tests).
pub struct Listeners {
    pub admin: TcpListener,
    /// The agent config server (`agents.data_listen`); none: agents are not served.
    pub data: Option<TcpListener>,
    /// SkyWalking's gRPC protocol alone (`ingest.grpc_listen`); none: gRPC only on the data
    /// listener.
    pub grpc: Option<TcpListener>,
}

/// The agent data listener, plain or TLS.
pub(super) enum DataListener {
    Plain(TcpListener),
    Tls(crate::base::tls::TlsListener),
}

/// The listeners with their addresses, the data listener made TLS when configured.
pub(super) struct BoundListeners {
    pub(super) admin: TcpListener,
    pub(super) admin_addr: SocketAddr,
    pub(super) data: Option<DataListener>,
    pub(super) data_addr: Option<SocketAddr>,
    pub(super) grpc: Option<DataListener>,
    pub(super) grpc_addr: Option<SocketAddr>,
}

/// The servers a node runs (admin, agent data, cluster bus), named, in start order.
pub(super) type Servers = Vec<(&'static str, JoinHandle<()>)>;

/// Reads the listeners' addresses and wraps the data listener in TLS. Done first, before
/// anything is spawned that an error would leave running.
pub(super) fn prepare(listeners: Listeners, agent_tls: Option<&crate::base::tls::TlsFiles>) -> Result<BoundListeners, NodeError> {
    let Listeners { admin, data, grpc } = listeners;
    let admin_addr = admin.local_addr().map_err(NodeError::Listener)?;
    let data_addr = data.as_ref().map(|l| l.local_addr()).transpose().map_err(NodeError::Listener)?;
    let grpc_addr = grpc.as_ref().map(|l| l.local_addr()).transpose().map_err(NodeError::Listener)?;
    let data = data_listener_for(data, agent_tls)?;
    // The gRPC port is TLS when the data listener is, with the same certificate.
    let grpc = data_listener_for(grpc, agent_tls)?;
    Ok(BoundListeners { admin, admin_addr, data, data_addr, grpc, grpc_addr })
}

/// The agent data listener as configured: plain, TLS, or none.
fn data_listener_for(listener: Option<TcpListener>, agent_tls: Option<&crate::base::tls::TlsFiles>) -> Result<Option<DataListener>, NodeError> {
    Ok(match (listener, agent_tls) {
        (None, _) => None,
        (Some(tcp), None) => Some(DataListener::Plain(tcp)),
        (Some(tcp), Some(files)) => {
            let config = crate::base::tls::server_config(files, crate::base::tls::DEFAULT_RECHECK)?;
            Some(DataListener::Tls(crate::base::tls::TlsListener::new(tcp, config).map_err(NodeError::Listener)?))
        }
    })
}

/// Serves `app` on `listener` with `limits` until `stop` is cancelled.
pub(super) fn spawn_server<L>(listener: L, app: axum::Router, limits: Limits, stop: CancellationToken, what: &'static str) -> JoinHandle<()>
where
    L: axum::serve::Listener<Addr = SocketAddr>,
{
    tokio::spawn(crate::base::listen::serve(listener, app, limits, stop, what))
}

/// What the admin and agent data servers serve.
pub(super) struct Served {
    pub(super) state: Arc<AdminState>,
    pub(super) agents: Arc<AgentService>,
    pub(super) ingest: Arc<Ingest>,
    pub(super) skywalking: Arc<SkyWalkingReceiver>,
}

/// Serves the admin API, and the agent config server with the receivers when a data listener
/// was given, until `stop` is cancelled.
pub(super) fn serve_admin_and_data(
    admin: TcpListener,
    data: Option<DataListener>,
    grpc: Option<DataListener>,
    served: Served,
    limits: &ListenLimits,
    stop: &CancellationToken,
    servers: &mut Servers,
) {
    let Served { state, agents, ingest, skywalking } = served;
    let admin_limits = limits.listener(limits.admin_connections, admin::LARGEST_BODY_BYTES);
    servers.push(("admin", spawn_server(admin, admin::router(state), admin_limits, stop.clone(), "admin")));
    // gRPC calls are bounded by their service (`ingest.grpc.max_stream_duration`, answered with
    // a status); the listener's own deadline for them comes a little later.
    let grpc_stream_timeout = skywalking.settings().max_stream_duration + GRPC_BACKSTOP;
    // The agent routes (and the receivers) refuse an oversized declared length themselves, before reading,
    // with the protocol's error body; the listener leaves that answer to them.
    let data_limits = limits.listener(limits.data_connections, u64::MAX).with_grpc(grpc_stream_timeout);
    if let Some(listener) = data {
        // The receivers (HTTP and gRPC) share the data listener with the agent config server.
        let app = crate::api::agents::router(agents)
            .merge(crate::data::ingest::router(ingest))
            .merge(crate::data::ingest::skywalking::routes(&skywalking));
        servers.push(("agent data", spawn_listener(listener, app, data_limits, stop, "agent data")));
    }
    if let Some(listener) = grpc {
        let app = crate::data::ingest::skywalking::grpc_only_router(&skywalking);
        servers.push(("skywalking grpc", spawn_listener(listener, app, data_limits, stop, "skywalking grpc")));
    }
}

/// How much later than its service the listener cuts a gRPC request stream.
const GRPC_BACKSTOP: std::time::Duration = std::time::Duration::from_secs(5);

/// Serves `app` on a plain or TLS listener.
fn spawn_listener(listener: DataListener, app: axum::Router, limits: Limits, stop: &CancellationToken, what: &'static str) -> JoinHandle<()> {
    match listener {
        DataListener::Plain(tcp) => spawn_server(tcp, app, limits, stop.clone(), what),
        DataListener::Tls(tls) => spawn_server(tls, app, limits, stop.clone(), what),
    }
}
