//! Forwarding writes to the main, and waiting for the next main during a failover.
//!
//! [`Cluster::forward`] is one attempt: the main's answer relayed, or `forward_failed`. A write
//! goes through [`Cluster::forward_write`], which carries out `cluster::forward_wait`'s decisions:
//! a write whose main refuses the connection, cannot be routed to, or answers
//! `421 cluster_view_split` waits
//! (at most `forward_wait`, 5 s by default) for the view to name a main that takes it, and is sent
//! there, or run here when this node has become the main. Only when the bound passes does the
//! client get the last error.
//!
//! [`run_probe`] is the other half of a fast failover: while this node's main is suspect
//! (`Member::suspect`), it calls the main over the bus every [`PROBE_PAUSE`], so a dead main's
//! refused connection reaches the evidence rule even on a node that forwards nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};


use super::Cluster;
use crate::cluster::bus::BusError;
use crate::cluster::bus::messages::{BusRequest, BusResponse, ForwardOp};
use crate::cluster::gossip::forward_wait::{Attempt, NextStep, next_step, route};
use crate::cluster::gossip::view::ClusterView;
use crate::base::ids::{Catalog, NodeId, Revision, RuleKey, RuleName};
use crate::control::outcome::{ApplyStatus, Outcome};

/// How often a suspect main is probed.
pub const PROBE_PAUSE: Duration = Duration::from_millis(50);
/// How long a probe waits for an answer (a timeout proves nothing either way).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// The outcome of a write on a node that may not be the main.
#[derive(Debug)]
pub enum Forwarded {
    /// This node is the main: run the write here.
    RunHere,
    /// The main's status and body, to relay unchanged.
    Answer(u16, Vec<u8>),
    /// This node's `forward_failed`, with the main it tried.
    Failed(Outcome, String),
}

impl Cluster {
    /// Forwards a write to the main, once. `Ok((status, body))` is the main's answer, relayed
    /// unchanged; `Err` is this node's `forward_failed`.
    pub async fn forward(&self, op: ForwardOp) -> Result<(u16, Vec<u8>), (Outcome, String)> {
        let view = self.view();
        let main_id = view.main.clone().unwrap_or_else(|| self.self_id().clone());
        self.forward_to(&view, &main_id, op).await.1
    }

    /// Runs a write's forwarding to its end: here when this node is (or becomes) the main, else
    /// the main's answer, waiting through a failover for at most `settings.forward_wait`.
    pub async fn forward_write(&self, op: ForwardOp) -> Forwarded {
        let started = Instant::now();
        let bound = self.settings.forward_wait;
        let self_id = self.self_id().clone();
        let mut view_rx = self.membership.view();
        let mut step = route(&self_id, view_rx.borrow_and_update().main.as_ref());
        let mut last = None;
        loop {
            step = match step {
                NextStep::RunHere => return Forwarded::RunHere,
                NextStep::Relay | NextStep::GiveUp => break,
                NextStep::Forward(main) => {
                    let view = view_rx.borrow_and_update().clone();
                    let (attempt, result) = self.forward_to(&view, &main, op.clone()).await;
                    last = Some(result);
                    let now_main = view_rx.borrow().main.clone();
                    let next = next_step(attempt, &main, &self_id, now_main.as_ref(), started.elapsed(), bound);
                    if matches!(next, NextStep::Wait(_) | NextStep::Forward(_) | NextStep::RunHere) {
                        tracing::debug!(%main, ?attempt, elapsed = ?started.elapsed(), ?next, "forwarded write waits for the next main");
                    }
                    next
                }
                NextStep::Wait(pause) => {
                    tokio::select! {
                        changed = view_rx.changed() => {
                            if changed.is_err() {
                                // Membership stopped: the view never moves again; pace the retries.
                                tokio::time::sleep(pause).await;
                            }
                        }
                        _ = tokio::time::sleep(pause) => {}
                    }
                    match route(&self_id, view_rx.borrow_and_update().main.as_ref()) {
                        NextStep::Wait(_) if started.elapsed() >= bound => NextStep::GiveUp,
                        next => next,
                    }
                }
            };
        }
        match last {
            Some(Ok((status, body))) => Forwarded::Answer(status, body),
            Some(Err((outcome, main))) => Forwarded::Failed(outcome, main),
            None => Forwarded::Failed(
                Outcome::new(ApplyStatus::ForwardFailed, format!("no main in view within {bound:?}")),
                String::new(),
            ),
        }
    }

    /// One attempt to forward `op` to `main_id`, and how it ended.
    async fn forward_to(
        &self,
        view: &ClusterView,
        main_id: &NodeId,
        op: ForwardOp,
    ) -> (Attempt, Result<(u16, Vec<u8>), (Outcome, String)>) {
        let failed = |attempt: Attempt, message: String| {
            (attempt, Err((Outcome::new(ApplyStatus::ForwardFailed, message), main_id.0.clone())))
        };
        let Some(main) = view.member(main_id).filter(|m| m.bus_addr.is_some()).cloned() else {
            return failed(Attempt::NoRoute, format!("main {main_id} is not in the member list or has no bus address yet"));
        };
        let (sender, issued_at_ms) = (self.self_id().clone(), crate::base::clock::now_ms());
        // The caller of the request this node took goes with it, for the history record.
        let request = match crate::control::history::current_caller() {
            Some(caller) => BusRequest::ForwardFrom { op, caller, sender, issued_at_ms },
            None => BusRequest::Forward { op, sender, issued_at_ms },
        };
        match self.call(&main, request, self.settings.forward_timeout).await {
            Ok(BusResponse::Forwarded { http_status, body, .. }) => {
                let attempt = if http_status == 421 { Attempt::ViewSplit } else { Attempt::Answered };
                (attempt, Ok((http_status, body)))
            }
            Ok(other) => failed(Attempt::Failed, format!("main {main_id} answered {}", other.name())),
            Err(e) => {
                let attempt = match e {
                    BusError::Unreachable { .. } => Attempt::Unreachable,
                    BusError::Transport { .. } => Attempt::Interrupted,
                    BusError::Timeout { .. } => Attempt::TimedOut,
                    _ => Attempt::Failed,
                };
                failed(attempt, format!("forwarding to main {main_id}: {e}"))
            }
        }
    }
}

/// Probes this node's main over the bus while it is suspect. The call's outcome is the
/// evidence (`Cluster::call` reports it); its answer does not matter. One probe is one unit of
/// work; between probes it waits [`PROBE_PAUSE`], and while the main is not suspect it waits
/// for the next change of the cluster view.
pub struct ProbeWorker {
    cluster: Arc<Cluster>,
    view_rx: tokio::sync::watch::Receiver<ClusterView>,
    /// The cheapest read on the bus: an index lookup of a key nobody stores.
    probe_key: Option<RuleKey>,
    probing: bool,
}

impl ProbeWorker {
    pub fn new(cluster: Arc<Cluster>) -> ProbeWorker {
        let view_rx = cluster.membership.view();
        let probe_key = RuleName::parse("failover-probe").ok().map(|name| RuleKey::new(Catalog::OtelRules, name));
        ProbeWorker { cluster, view_rx, probe_key, probing: false }
    }
}

#[async_trait::async_trait]
impl crate::base::worker::Worker for ProbeWorker {
    fn name(&self) -> &'static str {
        "main-probe"
    }

    async fn work(&mut self) -> crate::base::worker::WorkerState {
        let Some(probe_key) = self.probe_key.clone() else {
            return crate::base::worker::WorkerState::Done;
        };
        let suspect_main = {
            let view = self.view_rx.borrow_and_update();
            view.main
                .as_ref()
                .filter(|main| !view.is_main() && view.member(main).is_some_and(|m| m.suspect))
                .and_then(|main| view.member(main).cloned())
        };
        self.probing = suspect_main.is_some();
        if let Some(main) = suspect_main {
            let request = BusRequest::ConfirmHeld { key: probe_key, revision: Revision::zero() };
            let outcome = self.cluster.call(&main, request, PROBE_TIMEOUT).await;
            tracing::debug!(main = %main.node_id, ok = outcome.is_ok(), "probed the suspect main");
        }
        crate::base::worker::WorkerState::Idle
    }

    async fn wait_for_work(&mut self) -> crate::base::worker::WorkerState {
        if self.probing {
            tokio::time::sleep(PROBE_PAUSE).await;
        } else if self.view_rx.changed().await.is_err() {
            return crate::base::worker::WorkerState::Done;
        }
        crate::base::worker::WorkerState::Busy
    }
}
