//! What a configured node starts on, from its validated configuration: the management database
//! in the data dir ([`open_storage`]) and, for a clustered node, the bound cluster bus and the
//! gossip settings ([`cluster_wiring`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cluster::bus::BusAuth;
use crate::cluster::gossip::{GossipTransport, MembershipSettings};
use crate::cluster::replication::ReplicationSettings;
use crate::config::NodeConfig;
use crate::config::model::ClusterConfig;
use crate::store::kv::KvEngine;

use super::{BusWiring, ClusterWiring, resolve_node_id};

/// Why the management database could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("creating data dir {}: {source}", dir.display())]
    CreateDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The engine refused to open (its message names the path).
    #[error("{source}")]
    Open {
        path: PathBuf,
        #[source]
        source: crate::store::kv::KvError,
    },
    #[error("this build has no RocksDB support (built without the `rocksdb` feature); rebuild with default features")]
    NoRocksDb,
}

/// Why a clustered node could not be wired to its peers.
#[derive(Debug, thiserror::Error)]
pub enum WiringError {
    #[error("cannot listen for the cluster bus on {addr}: {source}")]
    BusListen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// The management database (RocksDB) under `dir`, created when missing.
#[cfg(feature = "rocksdb")]
pub fn open_storage(dir: &Path) -> Result<Arc<dyn KvEngine>, StorageError> {
    std::fs::create_dir_all(dir).map_err(|source| StorageError::CreateDir { dir: dir.to_path_buf(), source })?;
    let path = dir.join("db");
    let engine = crate::store::kv::RocksEngine::open(&path).map_err(|source| StorageError::Open { path, source })?;
    Ok(Arc::new(engine))
}

/// Without the `rocksdb` feature there is no database to open.
#[cfg(not(feature = "rocksdb"))]
pub fn open_storage(_dir: &Path) -> Result<Arc<dyn KvEngine>, StorageError> {
    Err(StorageError::NoRocksDb)
}

/// Binds the bus and describes gossip for a clustered node.
pub async fn cluster_wiring(cluster: &ClusterConfig, node: &NodeConfig) -> Result<ClusterWiring, WiringError> {
    let bus_listener = tokio::net::TcpListener::bind(cluster.bus_listen)
        .await
        .map_err(|source| WiringError::BusListen { addr: cluster.bus_listen, source })?;
    let auth = match &cluster.secret {
        Some(secret) => BusAuth::secret(secret),
        None => {
            tracing::warn!("cluster gossip and bus run WITHOUT authentication (--insecure-bus)");
            BusAuth::Insecure
        }
    };
    let node_id = resolve_node_id(node.node_id.as_deref(), &cluster.admin_advertise);
    let mut membership = MembershipSettings::new(node_id, cluster.gossip_advertise);
    membership.gossip_listen_addr = cluster.gossip_listen;
    membership.seeds = cluster.seeds.clone();
    membership.cluster_id = cluster.id.clone();
    membership.gossip_interval = cluster.gossip_interval;
    membership.phi_threshold = cluster.phi_threshold;
    membership.suspect_phi_threshold = cluster.suspect_phi_threshold;
    let replication = ReplicationSettings {
        commit_replicas: cluster.commit_replicas,
        forward_wait: cluster.forward_wait,
        ..ReplicationSettings::default()
    };
    Ok(ClusterWiring {
        membership,
        // The one secret seals gossip and signs the bus: membership and data alike.
        gossip: GossipTransport::Udp(auth.clone()),
        bus: BusWiring::Http { listener: bus_listener, advertise: cluster.bus_advertise.clone(), auth },
        replication,
        admin_advertise: cluster.admin_advertise.clone(),
    })
}
