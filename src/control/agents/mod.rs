//! The agents' desired state, as the control plane keeps it: groups, pipeline and instance
//! configs and onetime commands (`model`), the pure management operations on them that the
//! workflow runs on the main (`manage`), label matching (`matching`), config detail encoding
//! (`detail`), and the ConfigServer v2 message types they are described in (`proto`). The
//! ConfigServer that serves them to agents is `api::agents`.

pub mod detail;
pub mod manage;
pub mod matching;
pub mod model;
pub mod proto;
