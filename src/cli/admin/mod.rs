//! The commands that call the admin API and print its answers: `rule` (push, list, dump,
//! inactivate, delete), `rule roll` (`rolling`), `rule test`, the agent commands, `metrics`,
//! `logs`, `alarms` and `alarm` (`alarm settings`, `alarm test`). Each is a thin call through
//! the protocol client (`api::client`); on failure it prints the server's applyStatus and message
//! and exits non-zero.

pub mod agents;
pub mod alarm;
pub mod alarm_settings;
pub mod alarms;
pub mod history;
pub mod logs;
pub mod metrics;
pub mod rolling;
pub mod rule;
pub mod rule_test;
