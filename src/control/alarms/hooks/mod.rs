//! Alarm notification delivery: the messages SkyWalking's alarm engine produces, posted to the
//! hooks the rules name, without ever holding up alarm evaluation.
//!
//! - `message`: `AlarmMessage` / `AlarmRecoveryMessage` with SkyWalking's JSON field names; the
//!   webhook body is a JSON array of them.
//! - `alertmanager`: the same messages as Prometheus Alertmanager API v2 alerts (beyond
//!   SkyWalking), and what hotrule does about Alertmanager's re-send expectation.
//! - `target`: the validated hooks (`webhook.*`, `alertmanager.*`) and the delivery settings.
//! - `plan`: pure decisions: one round of messages → the POSTs to make (grouped by hook, as
//!   SkyWalking does); what to do after an attempt (deliver, retry after backoff, give up).
//! - `sender`: the network seam [`HookSender`] and its hyper implementation; `twin` is its
//!   in-memory twin.
//! - `delivery`: the [`AlarmNotifier`] (non-blocking enqueue, bounded per-receiver queues that
//!   drop their oldest) and the [`HookWorker`] that posts, retries and counts.
//!
//! Wiring: `hook_delivery(targets, settings, sender, metrics)` returns the notifier and the
//! worker; the node spawns the worker on its runner, and the alarm engine calls
//! `notifier.notify(&firing, &recoveries)` once per check round.

pub mod alertmanager;
pub mod delivery;
pub mod message;
pub mod plan;
pub mod sender;
pub mod target;
pub mod twin;

pub use delivery::{AlarmNotifier, HookWorker, NotifyReport, hook_delivery};
pub use message::{AlarmMessage, AlarmRecoveryMessage, Tag};
pub use sender::{HookError, HookSender, HttpHookSender};
pub use target::{DeliverySettings, HookKind, HookTarget, NoticeKind, TargetError};
pub use twin::{Behaviour, MemHookSender};

#[cfg(test)]
mod tests;
