//! SkyWalking's alarm engine, the pure core (no IO, no async, no clock).
//!
//! - [`settings`] reads `alarm-settings.yml` the way SkyWalking's `RulesReader` does and
//!   validates it into [`settings::AlarmSettings`]; [`settings::diff`] says which rules a reload
//!   keeps (an unchanged rule keeps its windows and states, any other change rebuilds them).
//! - [`window`] is one sliding window per (rule, entity): `period + max_trend_range` minute
//!   slots, fed by minute bucket, read by the MQE evaluation as one series per metric.
//! - [`state`] is the 10.4+ firing/silence/recovery state machine as one pure function, over a
//!   small serializable state that a new owner can resume.
//!
//! - [`replay`] is the dry run (`hotrule alarm test`): a fresh engine checked minute by minute
//!   over values held in memory, every check and transition listed, nothing sent.
//!
//! The caller (the alarm worker, not written yet) owns the clock: it moves windows to the
//! current minute, evaluates each rule's expression over each window once a minute, feeds the
//! boolean to [`state::check`], and hands the outputs to the hooks (delivery lives elsewhere).
//! The expression itself is checked through a seam ([`settings::ExpressionFacts`]) so this
//! module does not depend on the MQE engine.

pub mod config;
pub mod engine;
#[cfg(test)]
mod engine_tests;
pub mod entity;
pub mod hooks;
pub mod replay;
pub mod settings;
pub mod state;
pub mod verify;
pub mod window;

/// The running rules, shared by the alarm worker (checks), the runtime (resets) and the admin API
/// (status): each holds the lock only for one check, one reset or one copy.
pub type SharedAlarms = std::sync::Arc<std::sync::Mutex<engine::AlarmEngine>>;
