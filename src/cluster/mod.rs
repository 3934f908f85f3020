//! How nodes work together: gossip membership and main selection (`gossip`), the signed
//! request bus between nodes and its in-memory twin (`bus`), and the replication of committed
//! entries (`replication`: forwarding, prepare/commit notices, the outbox, anti-entropy sync).

pub mod bus;
pub mod gossip;
pub mod replication;
