//! The `hotrule` command line: the protocol client the commands call (`client`).

pub mod client;
