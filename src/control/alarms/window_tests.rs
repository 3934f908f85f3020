use super::*;

const M: i64 = 29_000_000; // some minute in 2025

fn single(v: f64) -> MetricValue {
    MetricValue::Single(v)
}

/// The values of `metric` as plain numbers (labeled values are not used here), oldest first.
fn values(window: &Window, metric: &str) -> Vec<Option<f64>> {
    window
        .series(metric)
        .into_iter()
        .map(|(_, v)| match v {
            Some(MetricValue::Single(x)) => Some(*x),
            Some(MetricValue::Labeled(_)) => Some(f64::NAN),
            None => None,
        })
        .collect()
}

enum Op {
    Add(&'static str, i64, f64, AddOutcome),
    Move(i64),
}

/// Each case: window size, operations (minutes relative to M), expected end (relative) and
/// the series of metric "a".
#[test]
fn feeding_and_moving() {
    use AddOutcome::*;
    use Op::*;
    #[allow(clippy::type_complexity)]
    let cases: Vec<(&str, usize, Vec<Op>, Option<i64>, Vec<Option<f64>>)> = vec![
        ("fresh window is empty", 3, vec![], None, vec![]),
        ("first value sets the end", 3, vec![Add("a", 0, 1.0, Stored)], Some(0), vec![None, None, Some(1.0)]),
        (
            "older minutes go to earlier slots",
            3,
            vec![Add("a", 0, 1.0, Stored), Add("a", -2, 3.0, Stored), Add("a", -1, 2.0, Stored)],
            Some(0),
            vec![Some(3.0), Some(2.0), Some(1.0)],
        ),
        ("too old is dropped", 3, vec![Add("a", 0, 1.0, Stored), Add("a", -3, 9.0, TooOld)], Some(0), vec![None, None, Some(1.0)]),
        (
            "same minute: latest wins",
            3,
            vec![Add("a", 0, 1.0, Stored), Add("a", 0, 5.0, Overwrote)],
            Some(0),
            vec![None, None, Some(5.0)],
        ),
        (
            "a newer minute shifts the window",
            3,
            vec![Add("a", 0, 1.0, Stored), Add("a", 1, 2.0, Stored)],
            Some(1),
            vec![None, Some(1.0), Some(2.0)],
        ),
        (
            "a far newer minute clears it",
            3,
            vec![Add("a", 0, 1.0, Stored), Add("a", 10, 2.0, Stored)],
            Some(10),
            vec![None, None, Some(2.0)],
        ),
        ("move forward drops the oldest", 3, vec![Add("a", -2, 1.0, Stored), Add("a", 0, 3.0, Stored), Move(2)], Some(2), {
            // after Add(-2) the end is -2; Add(0) moves to 0 ([1, None, 3]); Move(2) drops two.
            vec![Some(3.0), None, None]
        }),
        ("move backward does nothing", 3, vec![Add("a", 0, 1.0, Stored), Move(-1)], Some(0), vec![None, None, Some(1.0)]),
        ("move on a fresh window sets the end", 2, vec![Move(5)], Some(5), vec![None, None]),
        (
            "after a move, a minute before the new window is too old",
            2,
            vec![Add("a", 0, 1.0, Stored), Move(3), Add("a", 1, 2.0, TooOld), Add("a", 2, 4.0, Stored)],
            Some(3),
            vec![Some(4.0), None],
        ),
        ("size one keeps only the end minute", 1, vec![Add("a", 0, 1.0, Stored), Add("a", -1, 2.0, TooOld)], Some(0), vec![Some(1.0)]),
    ];
    for (name, size, ops, end, series) in cases {
        let mut window = Window::new(size);
        for (i, op) in ops.into_iter().enumerate() {
            match op {
                Add(metric, minute, v, outcome) => {
                    assert_eq!(window.add(metric, EpochMinute(M + minute), single(v)), outcome, "{name}: op {i}")
                }
                Move(minute) => window.move_to(EpochMinute(M + minute)),
            }
        }
        assert_eq!(window.end(), end.map(|e| EpochMinute(M + e)), "{name}: end");
        assert_eq!(values(&window, "a"), series, "{name}: series");
    }
}

#[test]
fn metrics_share_a_slot_and_read_apart() {
    let mut window = Window::new(2);
    window.add("a", EpochMinute(M), single(1.0));
    window.add("b", EpochMinute(M), MetricValue::Labeled(vec![("50".into(), 10.0), ("99".into(), 30.0)]));
    window.add("b", EpochMinute(M - 1), single(2.0));
    assert_eq!(values(&window, "a"), vec![None, Some(1.0)]);
    let b = window.series("b");
    assert_eq!(b[0], (EpochMinute(M - 1), Some(&single(2.0))));
    assert_eq!(b[1].0, EpochMinute(M));
    assert_eq!(b[1].1, Some(&MetricValue::Labeled(vec![("50".into(), 10.0), ("99".into(), 30.0)])));
    assert_eq!(values(&window, "missing"), vec![None, None]);
}

#[test]
fn expiry_follows_the_slots() {
    let mut window = Window::new(3);
    assert!(window.is_expired(), "a fresh window is expired");
    window.add("a", EpochMinute(M), single(1.0));
    assert!(!window.is_expired());
    window.move_to(EpochMinute(M + 2));
    assert!(!window.is_expired(), "the value is still in the window");
    window.move_to(EpochMinute(M + 3));
    assert!(window.is_expired(), "the value fell off");
}

#[test]
fn reset_empties_and_forgets_the_end() {
    let mut window = Window::new(3);
    window.add("a", EpochMinute(M), single(1.0));
    window.reset();
    assert!(window.is_expired());
    assert_eq!(window.end(), None);
    assert_eq!(window.add("a", EpochMinute(M - 10), single(2.0)), AddOutcome::Stored, "a reset window takes any minute");
}

#[test]
fn sizes_and_minutes() {
    assert_eq!(window_size(10, 0), 10);
    assert_eq!(window_size(10, 2), 12);
    assert_eq!(window_size(0, 0), 1);
    assert_eq!(Window::new(0).size(), 1);
    assert_eq!(EpochMinute::from_epoch_ms(119_999), EpochMinute(1));
    assert_eq!(EpochMinute::from_epoch_ms(-1), EpochMinute(-1));
    let mut window = Window::new(2);
    window.add("a", EpochMinute(i64::MAX), single(1.0));
    assert_eq!(window.add("a", EpochMinute(i64::MIN), single(1.0)), AddOutcome::TooOld, "no overflow");
    window.move_to(EpochMinute(i64::MIN));
    assert_eq!(window.end(), Some(EpochMinute(i64::MAX)));
}

#[test]
fn the_window_round_trips_through_json() {
    let mut window = Window::new(3);
    window.add("a", EpochMinute(M), single(1.5));
    window.add("b", EpochMinute(M - 1), MetricValue::Labeled(vec![("p".into(), 2.0)]));
    let text = serde_json::to_string(&window).expect("serializes");
    let back: Window = serde_json::from_str(&text).expect("deserializes");
    assert_eq!(back, window);
    let minutes: Vec<EpochMinute> = back.slots().map(|(m, _)| m).collect();
    assert_eq!(minutes, vec![EpochMinute(M - 2), EpochMinute(M - 1), EpochMinute(M)]);
}
