//! The cluster bus: node-to-node RPC (HTTP + bincode + HMAC) and its in-memory twin.
