//! SkyWalking's alarm engine inside hotrule. `hooks` delivers the notifications the alarm rules
//! produce (SkyWalking's webhook, and Prometheus Alertmanager's API v2).

pub mod hooks;
