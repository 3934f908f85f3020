//! SkyWalking's alarm engine: the rules, their checks and the hooks (no clock: the worker in
//! `data::alarms` owns it).
//!
//! - [`settings`] reads `alarm-settings.yml` the way SkyWalking's `RulesReader` does and
//!   validates it into [`settings::AlarmSettings`]; [`settings::diff`] says which rules a reload
//!   keeps (an unchanged rule keeps its windows and states, any other change rebuilds them).
//! - [`window`] is one sliding window per (rule, entity): `period + max_trend_range` minute
//!   slots, fed by minute bucket, read by the MQE evaluation as one series per metric.
//! - `frame` holds one check's reads as rows of minute cells per (metric, entity), shared by
//!   every rule: a rule's window is a slice of them (the same minutes a [`window::Window`] fed
//!   the same reads holds), built as a `Window` only for the status API; `compiled` evaluates
//!   the usual alarm expressions straight over those cells, the MQE engine the others.
//! - [`state`] is the 10.4+ firing/silence/recovery state machine as one pure function, over a
//!   small serializable state that a new owner can resume.
//! - [`engine`] runs the rules: once a minute it rebuilds each (rule, entity) window from the
//!   stored values, evaluates the expression (MQE) and steps the state machine; [`hooks`]
//!   delivers what it sends. The clock and the check worker live in `data::alarms`.
//! - [`live`] is which settings are in force on a node: those pushed at runtime (one replicated
//!   entry), else the boot file.
//! - [`replay`] is the dry run (`hotrule alarm test`): a fresh engine checked minute by minute
//!   over values held in memory, every check and transition listed, nothing sent.
//!
//! The settings reader checks expressions through a seam ([`settings::ExpressionFacts`]);
//! [`verify`] is that seam over the MQE engine.

mod compiled;
pub mod config;
pub mod engine;
#[cfg(test)]
mod engine_reference;
#[cfg(test)]
mod engine_tests;
pub mod entity;
mod frame;
pub mod hooks;
pub mod live;
pub mod replay;
pub mod settings;
pub mod state;
pub mod verify;
pub mod window;

/// The running rules, shared by the alarm worker (checks), the runtime (resets) and the admin API
/// (status): each holds the lock only for one check, one reset or one copy.
pub type SharedAlarms = std::sync::Arc<std::sync::Mutex<engine::AlarmEngine>>;
