use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use AlarmPhase::*;

fn periods(silence: u32, recovery: u32) -> Periods {
    Periods { period: 10, silence_period: silence, recovery_observation_period: recovery }
}

fn fired(n: u128) -> FiredAlarm {
    FiredAlarm { uuid: AlarmUuid(n), start_time_ms: n as i64 * 60_000 }
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Out {
    None,
    Fire,
    Recover,
}

fn kind(output: Option<Output>) -> Out {
    match output {
        None => Out::None,
        Some(Output::Fire(_)) => Out::Fire,
        Some(Output::Recover(_)) => Out::Recover,
    }
}

/// Every arm of `onMatch` / `onMismatch` with its entry action, S = 2 and R = 3 unless noted:
/// (from phase, silence, recovery, matched, S, R) → (phase, silence, recovery, output).
#[test]
fn the_transition_list() {
    #[rustfmt::skip]
    #[allow(clippy::type_complexity)]
    let cases: &[(AlarmPhase, i64, i64, bool, u32, u32, AlarmPhase, i64, i64, Out)] = &[
        // onMatch: silence-- first.
        (Normal,            -1, 3, true,  2, 3, Firing,            2, 3, Out::Fire),
        (Firing,             2, 3, true,  2, 3, SilencedFiring,    1, 3, Out::None),
        (Firing,             0, 3, true,  2, 3, Firing,           -1, 3, Out::Fire),    // stays, no entry action
        (SilencedFiring,     1, 3, true,  2, 3, SilencedFiring,    0, 3, Out::None),
        (SilencedFiring,     0, 3, true,  2, 3, Firing,            2, 3, Out::Fire),
        (ObservingRecovery,  3, 1, true,  2, 3, SilencedFiring,    2, 1, Out::None),    // no entry action: recovery kept
        (ObservingRecovery,  0, 1, true,  2, 3, Firing,            2, 3, Out::Fire),
        (Recovered,         -2, 3, true,  2, 3, Firing,            2, 3, Out::Fire),
        (Recovered,          5, 3, true,  2, 3, SilencedFiring,    4, 3, Out::None),
        // onMismatch: recovery-- and silence-- first.
        (Normal,            -1, 3, false, 2, 3, Normal,           -2, 2, Out::None),    // no transition
        (Firing,             2, 3, false, 2, 3, ObservingRecovery, 1, 2, Out::None),    // entry: R-1
        (Firing,             0, 0, false, 2, 0, Recovered,        -1, 0, Out::Recover), // entry: R
        (Firing,             0, 3, false, 2, 3, ObservingRecovery,-1, 2, Out::None),
        (SilencedFiring,     1, 0, false, 2, 0, ObservingRecovery, 0,-1, Out::None),    // entry: R-1 = -1
        (SilencedFiring,     0, 0, false, 2, 0, Recovered,        -1, 0, Out::Recover),
        (ObservingRecovery,  2, 0, false, 2, 3, ObservingRecovery, 1,-1, Out::None),    // silence still counting
        (ObservingRecovery,  0, 1, false, 2, 3, ObservingRecovery,-1, 0, Out::None),
        (ObservingRecovery,  0, 0, false, 2, 3, Recovered,        -1, 3, Out::Recover),
        (Recovered,         -1, 3, false, 2, 3, Normal,           -2, 3, Out::None),    // entry: R
    ];
    for (i, &(from, silence, recovery, matched, s, r, to, silence_after, recovery_after, out)) in cases.iter().enumerate() {
        let before = AlarmState {
            phase: from,
            silence_countdown: silence,
            recovery_countdown: recovery,
            last_fired: Some(fired(1)),
        };
        let (after, output) = check(before, matched, periods(s, r), fired(2));
        assert_eq!(
            (after.phase, after.silence_countdown, after.recovery_countdown, kind(output)),
            (to, silence_after, recovery_after, out),
            "case {i}: {from:?} matched={matched}"
        );
        match output {
            Some(Output::Fire(f)) => {
                assert_eq!(f, fired(2), "case {i}: a fire carries the fresh identity");
                assert_eq!(after.last_fired, Some(fired(2)));
            }
            Some(Output::Recover(f)) => {
                assert_eq!(f, fired(1), "case {i}: a recovery is of the last fire");
                assert_eq!(after.last_fired, None);
            }
            None => assert_eq!(after.last_fired, Some(fired(1)), "case {i}"),
        }
    }
}

#[test]
fn a_new_state_is_normal_with_silence_minus_one_and_recovery_r() {
    let state = AlarmState::new(periods(5, 3));
    assert_eq!((state.phase, state.silence_countdown, state.recovery_countdown, state.last_fired), (Normal, -1, 3, None));
}

/// Runs a sequence of checks from a new state; returns the output kinds.
fn run(sequence: &[bool], p: Periods) -> Vec<Out> {
    let mut state = AlarmState::new(p);
    let mut outs = Vec::new();
    for (minute, &matched) in sequence.iter().enumerate() {
        let (next, output) = check(state, matched, p, fired(minute as u128 + 100));
        state = next;
        outs.push(kind(output));
    }
    outs
}

fn fire_checks(outs: &[Out]) -> Vec<usize> {
    outs.iter().enumerate().filter(|(_, o)| **o == Out::Fire).map(|(i, _)| i).collect()
}

#[test]
fn with_silence_zero_every_true_check_notifies() {
    let outs = run(&[true; 6], periods(0, 0));
    assert_eq!(outs, vec![Out::Fire; 6]);
}

#[test]
fn a_true_condition_repeats_every_s_plus_one_checks() {
    for s in 0..6u32 {
        let outs = run(&[true; 20], periods(s, 2));
        let expected: Vec<usize> = (0..20).step_by(s as usize + 1).collect();
        assert_eq!(fire_checks(&outs), expected, "S = {s}");
    }
}

#[test]
fn recovery_on_the_r_plus_first_false_check_once_silence_elapsed() {
    for r in 0..5u32 {
        // S = 0: silence is over one check after the fire.
        let mut sequence = vec![true];
        sequence.extend(std::iter::repeat_n(false, 10));
        let outs = run(&sequence, periods(0, r));
        let recovered_at = outs.iter().position(|o| *o == Out::Recover);
        assert_eq!(recovered_at, Some(1 + r as usize), "R = {r}: the (R+1)-th false check recovers");
    }
}

#[test]
fn no_recovery_while_silence_is_counting() {
    // S = 5, R = 0: the fire at check 0 sets silence 5; false checks bring it to 4, 3, .. -1.
    let mut sequence = vec![true];
    sequence.extend(std::iter::repeat_n(false, 10));
    let outs = run(&sequence, periods(5, 0));
    assert_eq!(outs.iter().position(|o| *o == Out::Recover), Some(6), "silence 5 → 6 false checks");
}

#[test]
fn a_true_check_while_observing_after_silence_refires_with_a_new_identity() {
    let p = periods(0, 3);
    let (s1, o1) = check(AlarmState::new(p), true, p, fired(1));
    assert_eq!(o1, Some(Output::Fire(fired(1))));
    let (s2, o2) = check(s1, false, p, fired(2));
    assert_eq!((s2.phase, o2), (ObservingRecovery, None));
    let (s3, o3) = check(s2, true, p, fired(3));
    assert_eq!((s3.phase, o3), (Firing, Some(Output::Fire(fired(3)))));
    assert_eq!(s3.last_fired, Some(fired(3)), "the earlier uuid never gets a recovery");
}

#[test]
fn recovered_goes_back_to_normal_on_a_false_check() {
    let p = periods(0, 0);
    let (s1, _) = check(AlarmState::new(p), true, p, fired(1));
    let (s2, o2) = check(s1, false, p, fired(2));
    assert_eq!((s2.phase, o2), (Recovered, Some(Output::Recover(fired(1)))));
    let (s3, o3) = check(s2, false, p, fired(3));
    assert_eq!((s3.phase, o3), (Normal, None));
}

#[test]
fn a_resumed_recovered_state_without_a_fire_sends_nothing() {
    let p = periods(0, 0);
    let state = AlarmState { phase: ObservingRecovery, silence_countdown: 0, recovery_countdown: 0, last_fired: None };
    let (after, output) = check(state, false, p, fired(9));
    assert_eq!((after.phase, output), (Recovered, None));
}

#[test]
fn the_state_round_trips_through_json() {
    let state = AlarmState { phase: SilencedFiring, silence_countdown: 3, recovery_countdown: -1, last_fired: Some(fired(7)) };
    let text = serde_json::to_string(&state).expect("serializes");
    assert!(text.contains("SILENCED_FIRING"), "{text}");
    let back: AlarmState = serde_json::from_str(&text).expect("deserializes");
    assert_eq!(back, state);
}

#[test]
fn the_uuid_is_shown_in_the_usual_form() {
    assert_eq!(AlarmUuid(0x0123_4567_89ab_cdef_0011_2233_4455_6677).to_string(), "01234567-89ab-cdef-0011-223344556677");
}

/// Long random sequences: every Recover is of the alarm fired last, follows a Fire, and two
/// Recovers always have a Fire between them; FIRING is the only phase that fires.
#[test]
fn random_sequences_keep_the_invariants() {
    let mut rng = StdRng::seed_from_u64(0x5eed);
    for round in 0..300 {
        let p = periods(rng.random_range(0..6), rng.random_range(0..6));
        let bias: f64 = rng.random_range(0.1..0.9);
        let mut state = AlarmState::new(p);
        let mut last_fire: Option<FiredAlarm> = None;
        let mut recovered_since_fire = true;
        for step in 0..2_000u128 {
            let matched = rng.random_bool(bias);
            let fresh = fired(step + 1);
            let (next, output) = check(state, matched, p, fresh);
            match output {
                Some(Output::Fire(f)) => {
                    assert!(matched, "round {round} step {step}: fired on a false check");
                    assert_eq!(f, fresh);
                    last_fire = Some(f);
                    recovered_since_fire = false;
                }
                Some(Output::Recover(f)) => {
                    assert!(!matched, "round {round} step {step}: recovered on a true check");
                    assert!(!recovered_since_fire, "round {round} step {step}: two recoveries without a fire");
                    assert_eq!(Some(f), last_fire, "round {round} step {step}: recovery of the last fire");
                    recovered_since_fire = true;
                }
                None => {}
            }
            assert_eq!(next.phase == Firing, matches!(output, Some(Output::Fire(_))), "round {round} step {step}");
            if next.phase == Normal {
                assert!(recovered_since_fire || last_fire.is_none(), "round {round} step {step}: normal with an open alarm");
            }
            state = next;
        }
    }
}
