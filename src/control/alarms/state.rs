//! The alarm state machine of SkyWalking 10.4+ (`RunningRule.Window.AlarmStateMachine`), as one
//! pure function.
//!
//! Each (rule, entity) window has an [`AlarmState`]. Once a minute the caller evaluates the
//! rule's expression over the window and calls [`check`] with the boolean result. `check`
//! applies `onMatch` / `onMismatch` and the entry actions of `transitionTo` exactly as
//! SkyWalking does (the transition list is in `docs` and in the table test below):
//!
//! | from | match | mismatch |
//! |---|---|---|
//! | NORMAL | FIRING | NORMAL |
//! | FIRING | SILENCED_FIRING if silence ≥ 0, else stays FIRING | RECOVERED if both countdowns < 0, else OBSERVING_RECOVERY |
//! | SILENCED_FIRING | FIRING if silence < 0, else SILENCED_FIRING | as FIRING |
//! | OBSERVING_RECOVERY | as SILENCED_FIRING | RECOVERED if both < 0, else stays |
//! | RECOVERED | as SILENCED_FIRING | NORMAL |
//!
//! A match first decrements the silence countdown; a mismatch decrements both. Entering FIRING
//! sets silence = S and recovery = R; entering OBSERVING_RECOVERY sets recovery = R - 1;
//! entering RECOVERED or NORMAL sets recovery = R. SILENCED_FIRING has no entry action, and
//! staying in FIRING or OBSERVING_RECOVERY runs none.
//!
//! After the transition: in FIRING the check outputs [`Output::Fire`] (every check, with a new
//! identity each time); in RECOVERED it outputs [`Output::Recover`] for the last fired alarm and
//! forgets it. To keep `check` pure the caller passes in the identity a fire would carry
//! ([`FiredAlarm`]: a fresh random uuid and the check's time); it is used only on a fire. The
//! state holds the last fired identity as plain data, so a persisted state lets a new owner
//! send the recovery of an alarm another node fired.

use serde::{Deserialize, Serialize};

/// The five states of SkyWalking's `RunningRule.State`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AlarmPhase {
    Normal,
    Firing,
    SilencedFiring,
    ObservingRecovery,
    Recovered,
}

/// A rule's periods: `period` sizes the window (with the expression's trend range); the state
/// machine reads the other two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Periods {
    /// Window length in minutes (`period`).
    pub period: u32,
    /// `silence-period`, S: checks after a fire during which a still-true condition does not
    /// notify again (and no recovery is sent).
    pub silence_period: u32,
    /// `recovery-observation-period`, R: a recovery is sent on the (R+1)-th consecutive false
    /// check.
    pub recovery_observation_period: u32,
}

/// A fired alarm's identity: what a recovery refers to. `uuid` is a random 128-bit id minted by
/// the caller; `start_time_ms` is epoch milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FiredAlarm {
    pub uuid: AlarmUuid,
    pub start_time_ms: i64,
}

/// A random alarm id, shown in the usual 8-4-4-4-12 hex form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AlarmUuid(pub u128);

impl std::fmt::Display for AlarmUuid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hex = format!("{:032x}", self.0);
        write!(f, "{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
    }
}

/// One window's alarm state. `Copy`, serializable: it is persisted with the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlarmState {
    pub phase: AlarmPhase,
    pub silence_countdown: i64,
    pub recovery_countdown: i64,
    /// The last fired alarm not yet recovered (SkyWalking's `lastAlarmMessage`).
    pub last_fired: Option<FiredAlarm>,
}

impl AlarmState {
    /// The construction state: NORMAL, silence -1, recovery R. Also the state after a reset.
    pub fn new(periods: Periods) -> Self {
        AlarmState {
            phase: AlarmPhase::Normal,
            silence_countdown: -1,
            recovery_countdown: i64::from(periods.recovery_observation_period),
            last_fired: None,
        }
    }
}

/// What one check asks the caller to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Output {
    /// A new alarm message with this identity (the one passed in as `fresh`).
    Fire(FiredAlarm),
    /// The recovery of this earlier fire (its uuid and start time; recovery time is now).
    Recover(FiredAlarm),
}

/// One check of one window: `matched` is the expression's result this minute; `fresh` is the
/// identity a fire would carry (used only when the check fires).
pub fn check(state: AlarmState, matched: bool, periods: Periods, fresh: FiredAlarm) -> (AlarmState, Option<Output>) {
    let next = if matched { on_match(state, periods) } else { on_mismatch(state, periods) };
    match next.phase {
        AlarmPhase::Firing => (AlarmState { last_fired: Some(fresh), ..next }, Some(Output::Fire(fresh))),
        AlarmPhase::Recovered => {
            // RECOVERED is reached only from a fired alarm; a resumed state without one sends
            // nothing rather than a recovery of nothing.
            let output = next.last_fired.map(Output::Recover);
            (AlarmState { last_fired: None, ..next }, output)
        }
        _ => (next, None),
    }
}

fn on_match(mut state: AlarmState, periods: Periods) -> AlarmState {
    state.silence_countdown -= 1;
    match state.phase {
        AlarmPhase::Normal => enter(state, AlarmPhase::Firing, periods),
        AlarmPhase::SilencedFiring | AlarmPhase::ObservingRecovery | AlarmPhase::Recovered => {
            if state.silence_countdown < 0 {
                enter(state, AlarmPhase::Firing, periods)
            } else {
                enter(state, AlarmPhase::SilencedFiring, periods)
            }
        }
        AlarmPhase::Firing => {
            if state.silence_countdown >= 0 {
                enter(state, AlarmPhase::SilencedFiring, periods)
            } else {
                state
            }
        }
    }
}

fn on_mismatch(mut state: AlarmState, periods: Periods) -> AlarmState {
    state.recovery_countdown -= 1;
    state.silence_countdown -= 1;
    let both_elapsed = state.recovery_countdown < 0 && state.silence_countdown < 0;
    match state.phase {
        AlarmPhase::Firing | AlarmPhase::SilencedFiring => {
            if both_elapsed {
                enter(state, AlarmPhase::Recovered, periods)
            } else {
                enter(state, AlarmPhase::ObservingRecovery, periods)
            }
        }
        AlarmPhase::ObservingRecovery if both_elapsed => enter(state, AlarmPhase::Recovered, periods),
        AlarmPhase::ObservingRecovery | AlarmPhase::Normal => state,
        AlarmPhase::Recovered => enter(state, AlarmPhase::Normal, periods),
    }
}

/// `transitionTo`: set the phase and run its entry action.
fn enter(mut state: AlarmState, phase: AlarmPhase, periods: Periods) -> AlarmState {
    let silence = i64::from(periods.silence_period);
    let recovery = i64::from(periods.recovery_observation_period);
    state.phase = phase;
    match phase {
        AlarmPhase::Firing => {
            state.silence_countdown = silence;
            state.recovery_countdown = recovery;
        }
        AlarmPhase::SilencedFiring => {}
        AlarmPhase::ObservingRecovery => state.recovery_countdown = recovery - 1,
        AlarmPhase::Recovered | AlarmPhase::Normal => state.recovery_countdown = recovery,
    }
    state
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
