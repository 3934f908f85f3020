//! The control plane: the rule lifecycle. `rules` holds the pure decisions (lifecycle,
//! classification, merge), `workflow` is the one writer of rule entries, `scan` converges what
//! is stored with what runs, `runtime` holds the dispatch gates the data plane reads, and
//! `rolling` carries a change one node at a time (pure decisions, the roller beside them).
//! `alarms` is SkyWalking's alarm engine: settings, per-entity windows and the state machine.

pub mod agents;
pub mod alarms;
pub mod bundled;
pub mod compile_pool;
pub mod history;
pub mod outcome;
pub mod rolling;
pub mod rules;
pub mod runtime;
pub mod scan;
pub mod ui_templates;
pub mod workflow;
