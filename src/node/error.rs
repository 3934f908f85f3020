//! Why a node did not start: one variant per step that can fail, each carrying its cause.

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("opening management storage: {0}")]
    Store(#[from] crate::store::StoreError),
    #[error("reading bundled rules: {0}")]
    Bundled(#[from] crate::control::bundled::BundledError),
    #[error("listener: {0}")]
    Listener(std::io::Error),
    #[error("agent state: {0}")]
    AgentState(#[from] crate::api::agents::registry::RegistryError),
    #[error("{0}")]
    Config(#[from] crate::config::ConfigErrors),
    #[error("cluster membership: {0}")]
    Cluster(crate::cluster::gossip::ClusterError),
    #[error("agent data listener TLS: {0}")]
    Tls(#[from] crate::base::tls::TlsError),
    #[error("remote-write export: {0}")]
    Export(#[from] crate::data::export::ExportError),
    /// The query protocol's schema (a build defect: it is compiled in).
    #[error(transparent)]
    QueryProtocol(#[from] crate::api::graphql::ProtocolError),
    #[error("dispatch: {0}")]
    Dispatch(#[from] crate::data::evaluation::DispatchError),
    #[error("opening metric storage: {0}")]
    MetricStore(#[from] crate::data::metrics::MetricStoreError),
    #[error("opening log storage: {0}")]
    LogStore(#[from] crate::data::logs::LogStoreError),
    /// `alarm-settings.yml` could not be read, or is not valid (the message names the rule).
    #[error("alarm settings {path}: {reason}")]
    AlarmSettings { path: std::path::PathBuf, reason: String },
    /// The management database under the data dir (its message says which step and where).
    #[error(transparent)]
    Storage(#[from] super::StorageError),
    /// The cluster bus listener (its message names the address).
    #[error(transparent)]
    Wiring(#[from] super::WiringError),
}
