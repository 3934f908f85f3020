//! `ingest.grpc_listen` and `ingest.grpc`: where SkyWalking's agents reach the node over gRPC,
//! the token they must send, and the limits of their calls.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::base::duration::DurationSetting;

/// The agents' default collector address (`oap_host:11800`), on loopback.
pub const DEFAULT_GRPC_LISTEN: &str = "127.0.0.1:11800";

/// `ingest.grpc_listen` as read by default.
pub fn default_grpc_listen() -> String {
    DEFAULT_GRPC_LISTEN.to_owned()
}
/// As SkyWalking's `maxMessageSize` (grpc-java's default is 4 MiB, tonic's too).
fn default_max_message_bytes() -> usize {
    50 * 1024 * 1024
}
fn default_max_stream_messages() -> usize {
    100_000
}
fn default_max_stream_samples() -> usize {
    1_000_000
}
fn default_max_stream_duration() -> DurationSetting {
    DurationSetting(Duration::from_secs(60))
}

/// `ingest.grpc` as read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGrpc {
    /// SkyWalking's `authentication` token: when set, every call must carry it in the
    /// `authentication` metadata, or is refused with PERMISSION_DENIED.
    #[serde(default)]
    pub authentication: Option<String>,
    /// The largest message a call may send (decoded size); RESOURCE_EXHAUSTED above.
    #[serde(default = "default_max_message_bytes")]
    pub max_message_bytes: usize,
    /// The most messages one stream may send.
    #[serde(default = "default_max_stream_messages")]
    pub max_stream_messages: usize,
    /// The most samples one meter batch (a `collect` stream, or a `collectBatch` collection)
    /// may hold: a histogram is a sample per bucket.
    #[serde(default = "default_max_stream_samples")]
    pub max_stream_samples: usize,
    /// The longest a stream may stay open.
    #[serde(default = "default_max_stream_duration")]
    pub max_stream_duration: DurationSetting,
}

impl Default for RawGrpc {
    fn default() -> Self {
        RawGrpc {
            authentication: None,
            max_message_bytes: default_max_message_bytes(),
            max_stream_messages: default_max_stream_messages(),
            max_stream_samples: default_max_stream_samples(),
            max_stream_duration: default_max_stream_duration(),
        }
    }
}

/// The validated gRPC settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrpcSettings {
    /// The dedicated gRPC port; none: gRPC only on the data listener.
    pub listen: Option<SocketAddr>,
    pub authentication: Option<String>,
    pub max_message_bytes: usize,
    pub max_stream_messages: usize,
    pub max_stream_samples: usize,
    pub max_stream_duration: Duration,
}

impl Default for GrpcSettings {
    fn default() -> Self {
        validate(&default_grpc_listen(), &RawGrpc::default(), &mut |_: &str, _: String| {})
    }
}

/// Validates `listen` (`ip:port`, or `off`) and `raw`, reporting every problem through `issue`.
pub fn validate(listen: &str, raw: &RawGrpc, issue: &mut impl FnMut(&str, String)) -> GrpcSettings {
    let listen = match listen.trim() {
        "off" | "" => None,
        text => match text.parse::<SocketAddr>() {
            Ok(addr) => Some(addr),
            Err(_) => {
                issue("ingest.grpc_listen", format!("{text:?} is not an address of the form ip:port (or off)"));
                None
            }
        },
    };
    if raw.max_message_bytes == 0 {
        issue("ingest.grpc.max_message_bytes", "must be greater than zero".into());
    }
    if raw.max_stream_messages == 0 {
        issue("ingest.grpc.max_stream_messages", "must be greater than zero".into());
    }
    if raw.max_stream_samples == 0 {
        issue("ingest.grpc.max_stream_samples", "must be greater than zero".into());
    }
    if raw.max_stream_duration.0.is_zero() {
        issue("ingest.grpc.max_stream_duration", "must be greater than zero".into());
    }
    GrpcSettings {
        listen,
        authentication: raw.authentication.clone().filter(|t| !t.is_empty()),
        max_message_bytes: raw.max_message_bytes,
        max_stream_messages: raw.max_stream_messages,
        max_stream_samples: raw.max_stream_samples,
        max_stream_duration: raw.max_stream_duration.0,
    }
}
