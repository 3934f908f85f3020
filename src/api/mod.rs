//! What the outside world calls: the admin HTTP routes (`admin`), the read APIs over the
//! metric and log stores (`query`: JSON and the Prometheus API), and the agents' ConfigServer
//! (`agents`), and the admin API's protocol client (`client`).

pub mod admin;
pub mod agents;
pub mod client;
pub mod graphql;
pub mod query;
