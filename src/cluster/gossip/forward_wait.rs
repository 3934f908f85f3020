//! What a forwarded write does after an attempt: a pure decision over the attempt's outcome, the
//! view as it is now, and the time spent, so a write sent during a failover waits for the next
//! main instead of failing.
//!
//! The write is retried only when the main cannot have run it: the connection was refused (the
//! request never left), there was no route to the main yet, or the target answered
//! `421 cluster_view_split` (it is not the main in its own view; it ran nothing). Each retry goes
//! to the main of the view at that moment, or runs here when this node has become the main. A
//! timeout or a connection broken mid-call is never retried: the main may have run the write, or
//! still be running it, and its outcome is unknown. Once `bound` (`cluster.forward_wait`) has
//! passed, the last attempt's error is the answer, as before.

use std::time::Duration;

use crate::base::ids::NodeId;

/// How long to wait before trying again when the view has not moved: long enough for a gossip
/// look or a probe to land, short enough to be no real delay once the new main is known.
pub const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// How one attempt to forward a write ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// The target answered (anything but 421): relay it.
    Answered,
    /// The target answered `421 cluster_view_split`: its view names another main.
    ViewSplit,
    /// The connection was refused: the target may be dead, and did not get the write.
    Unreachable,
    /// The connection broke mid-call: the target may have run the write before it died.
    Interrupted,
    /// No call was made: the main is not in the member list or has no bus address yet.
    NoRoute,
    /// No answer in time: the write may be running there, so it is not sent anywhere else.
    TimedOut,
    /// Anything else (authentication, a busy or broken answer): not a failover.
    Failed,
}

/// What to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextStep {
    /// Relay the target's answer.
    Relay,
    /// Forward to this main now.
    Forward(NodeId),
    /// This node is the main now: run the write here.
    RunHere,
    /// Wait for the view to change, at most this long, then decide where to send it again.
    Wait(Duration),
    /// Answer the last attempt's error.
    GiveUp,
}

/// Where the next attempt goes once the view is `view_main` (no attempt made, or after a wait).
pub fn route(self_id: &NodeId, view_main: Option<&NodeId>) -> NextStep {
    match view_main {
        Some(main) if main == self_id => NextStep::RunHere,
        Some(main) => NextStep::Forward(main.clone()),
        None => NextStep::Wait(RETRY_PAUSE),
    }
}

/// The decision after an attempt to `tried` ended with `attempt`, `elapsed` after the write
/// arrived, with the view now naming `view_main`.
pub fn next_step(
    attempt: Attempt,
    tried: &NodeId,
    self_id: &NodeId,
    view_main: Option<&NodeId>,
    elapsed: Duration,
    bound: Duration,
) -> NextStep {
    match attempt {
        Attempt::Answered => return NextStep::Relay,
        Attempt::TimedOut | Attempt::Interrupted | Attempt::Failed => return NextStep::GiveUp,
        Attempt::ViewSplit | Attempt::Unreachable | Attempt::NoRoute => {}
    }
    if elapsed >= bound {
        return NextStep::GiveUp;
    }
    match view_main {
        Some(main) if main != tried => route(self_id, Some(main)),
        _ => NextStep::Wait(RETRY_PAUSE.min(bound - elapsed)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> NodeId {
        NodeId(name.into())
    }

    #[test]
    fn the_retry_decision_over_outcomes_views_and_time() {
        use Attempt::*;
        let bound = Duration::from_secs(5);
        let ms = Duration::from_millis;
        let (a, b, me) = (id("a"), id("b"), id("me"));
        // (attempt, view's main now, elapsed) → next step; the attempt went to "a".
        let table: Vec<(Attempt, Option<&NodeId>, Duration, NextStep)> = vec![
            // an answer is relayed, even a late one, whatever the view says now
            (Answered, Some(&a), ms(0), NextStep::Relay),
            (Answered, Some(&b), ms(9000), NextStep::Relay),
            // a timeout, a broken call or another failure is answered at once: never re-sent
            (TimedOut, Some(&b), ms(10), NextStep::GiveUp),
            (TimedOut, Some(&me), ms(10), NextStep::GiveUp),
            (Interrupted, Some(&a), ms(10), NextStep::GiveUp),
            (Interrupted, Some(&b), ms(10), NextStep::GiveUp),
            (Failed, Some(&b), ms(10), NextStep::GiveUp),
            // refused, no route or a split view, and the view has not moved: wait
            (Unreachable, Some(&a), ms(0), NextStep::Wait(RETRY_PAUSE)),
            (NoRoute, Some(&a), ms(0), NextStep::Wait(RETRY_PAUSE)),
            (ViewSplit, Some(&a), ms(1000), NextStep::Wait(RETRY_PAUSE)),
            (Unreachable, None, ms(0), NextStep::Wait(RETRY_PAUSE)),
            // ... but never past the bound
            (Unreachable, Some(&a), ms(4980), NextStep::Wait(ms(20))),
            (Unreachable, Some(&a), ms(5000), NextStep::GiveUp),
            (ViewSplit, Some(&a), ms(6000), NextStep::GiveUp),
            (ViewSplit, Some(&b), ms(5000), NextStep::GiveUp),
            // the view moved: the next main at once, or here when this node is it
            (Unreachable, Some(&b), ms(800), NextStep::Forward(b.clone())),
            (ViewSplit, Some(&b), ms(10), NextStep::Forward(b.clone())),
            (NoRoute, Some(&b), ms(10), NextStep::Forward(b.clone())),
            (Unreachable, Some(&me), ms(800), NextStep::RunHere),
            (ViewSplit, Some(&me), ms(4999), NextStep::RunHere),
        ];
        for (attempt, view_main, elapsed, expected) in table {
            assert_eq!(
                next_step(attempt, &a, &me, view_main, elapsed, bound),
                expected,
                "{attempt:?}, view main {view_main:?}, {elapsed:?}"
            );
        }
    }

    #[test]
    fn a_zero_bound_keeps_the_old_behaviour() {
        let (a, b, me) = (id("a"), id("b"), id("me"));
        for attempt in [Attempt::Unreachable, Attempt::ViewSplit, Attempt::NoRoute] {
            assert_eq!(next_step(attempt, &a, &me, Some(&b), Duration::ZERO, Duration::ZERO), NextStep::GiveUp);
        }
    }

    #[test]
    fn routing_follows_the_view() {
        let me = id("me");
        assert_eq!(route(&me, Some(&me)), NextStep::RunHere);
        assert_eq!(route(&me, Some(&id("a"))), NextStep::Forward(id("a")));
        assert_eq!(route(&me, None), NextStep::Wait(RETRY_PAUSE));
    }
}
