//! The compiled evaluation against the MQE engine's over generated reads, and the frame's
//! windows against [`Window`] fed the same reads: minutes missing, repeated, too old or after
//! the check's minute, common and labeled values (p=50, p=99, odd label keys) mixed in one
//! metric, entities read in any order.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use hotrule_mqe_engine::parse;

use super::*;
use crate::control::alarms::engine::evaluate_window;
use crate::control::alarms::entity::AlarmEntity;
use crate::control::alarms::window::{EpochMinute, MetricValue, Window};

const NOW: i64 = 29_402_900;
/// Minutes read per metric (the longest window below: period 10 + trend range 3).
const READ: usize = 13;
const METRICS: [&str; 3] = ["a", "b", "pct"];

type Reads = BTreeMap<String, Vec<(AlarmEntity, EpochMinute, MetricValue)>>;

/// A value around the thresholds of the expressions below; a `high` entity's are mostly above.
fn value(rng: &mut StdRng, high: bool) -> f64 {
    const HIGH: [f64; 5] = [101.0, 150.0, 1000.0, 1001.0, 2000.0];
    if high && rng.random_bool(0.7) {
        return HIGH[rng.random_range(0..HIGH.len())];
    }
    const VALUES: [f64; 18] = [0.0, 1.0, 0.5, 1.5, 2.0, 3.0, 40.0, 50.0, 99.0, 100.0, 101.0, 150.0, 1000.0, 1001.0, 2000.0, -1.0, -0.0, 0.9];
    match rng.random_range(0..100) {
        0 => f64::NAN,
        1 => f64::INFINITY,
        2 => f64::NEG_INFINITY,
        3 => 1e-7 * rng.random_range(1.0..1000.0),
        4 => 1e21 * rng.random_range(1.0..10.0),
        5 => rng.random_range(-1000.0..1000.0),
        _ => VALUES[rng.random_range(0..VALUES.len())],
    }
}

fn labeled(rng: &mut StdRng, high: bool) -> MetricValue {
    const KEYS: [&str; 7] = ["p=50", "p=99", "p=75", "50", "", "p=50,q=1", "q=1,p=50"];
    let pairs = match rng.random_range(0..10) {
        0 => Vec::new(),
        1..=6 => vec![("p=50".to_string(), value(rng, high)), ("p=99".to_string(), value(rng, high))],
        _ => (0..rng.random_range(1..4)).map(|_| (KEYS[rng.random_range(0..KEYS.len())].to_string(), value(rng, high))).collect(),
    };
    MetricValue::Labeled(pairs)
}

/// Reads of a few entities: `a` and `b` mostly common, `pct` mostly labeled.
fn reads(rng: &mut StdRng) -> Reads {
    let entities: Vec<AlarmEntity> = (0..rng.random_range(1..12)).map(|i| AlarmEntity::service(&format!("s{i}"))).collect();
    let mut reads = Reads::new();
    for metric in METRICS {
        let density: f64 = rng.random_range(0.0..1.0);
        let mut points = Vec::new();
        for entity in &entities {
            if rng.random_bool(0.1) {
                continue;
            }
            let high = rng.random_bool(0.3);
            for minute in NOW - READ as i64 - 1..=NOW + 1 {
                let outside = minute > NOW || minute <= NOW - READ as i64;
                if !rng.random_bool(density) || (outside && !rng.random_bool(0.05)) {
                    continue;
                }
                let labeled_metric = metric == "pct";
                let point = if rng.random_bool(if labeled_metric { 0.9 } else { 0.05 }) { labeled(rng, high) } else { MetricValue::Single(value(rng, high)) };
                points.push((entity.clone(), EpochMinute(minute), point));
                if rng.random_bool(0.05) {
                    points.push((entity.clone(), EpochMinute(minute), MetricValue::Single(value(rng, high))));
                }
            }
        }
        if rng.random_bool(0.3) {
            // Not grouped by entity.
            for i in (1..points.len()).rev() {
                points.swap(i, rng.random_range(0..=i));
            }
        }
        reads.insert(metric.to_string(), points);
    }
    reads
}

fn frame_of(reads: &Reads) -> Frame {
    let mut frame = Frame::new(EpochMinute(NOW));
    for (metric, points) in reads {
        frame.add(metric.clone(), READ, Ok(points.clone()));
    }
    frame.finish()
}

/// The window the engine built before frames: fresh at the check's minute, fed the reads.
fn fed_window(reads: &Reads, metrics: &[String], entity: &AlarmEntity, size: usize) -> Option<Window> {
    let mut window: Option<Window> = None;
    for metric in metrics {
        for (e, minute, value) in reads.get(metric).into_iter().flatten() {
            if e == entity {
                let window = window.get_or_insert_with(|| {
                    let mut fresh = Window::new(size);
                    fresh.move_to(EpochMinute(NOW));
                    fresh
                });
                window.add(metric, *minute, value.clone());
            }
        }
    }
    window.filter(|w| !w.is_expired())
}

/// The message snapshot as the engine wrote it from a fed window, through serde_json values.
fn json_snapshot(metrics: &[String], window: &Window) -> BTreeMap<String, String> {
    let mut snapshot = BTreeMap::new();
    for metric in metrics {
        let mut points = Vec::new();
        for (minute, value) in window.series(metric) {
            let ts = minute.0.saturating_mul(60_000);
            match value {
                Some(MetricValue::Single(v)) => points.push(serde_json::json!({"id": ts.to_string(), "value": v})),
                Some(MetricValue::Labeled(pairs)) => {
                    for (key, v) in pairs {
                        points.push(serde_json::json!({"id": ts.to_string(), "labels": key, "value": v}));
                    }
                }
                None => {}
            }
        }
        snapshot.insert(metric.clone(), serde_json::Value::Array(points).to_string());
    }
    snapshot
}

/// Each entity's window in a frame: the Window the reads feed, and the same message snapshot.
#[test]
fn frame_windows_are_the_fed_windows() {
    let mut rng = StdRng::seed_from_u64(23);
    let metric_sets: Vec<Vec<String>> = vec![vec!["a".into()], vec!["a".into(), "b".into()], vec!["pct".into()], vec!["a".into(), "b".into(), "pct".into()]];
    let mut compared = 0;
    for _ in 0..300 {
        let reads = reads(&mut rng);
        let frame = frame_of(&reads);
        for metrics in &metric_sets {
            for size in [1, 3, 10, 13] {
                let tables = frame.tables(metrics);
                let mut cells = WindowCells::default();
                for &at in frame.sorted() {
                    let entity = frame.entity(at);
                    let live = frame.fill(&tables, at, size, &mut cells);
                    let fed = fed_window(&reads, metrics, entity, size);
                    assert_eq!(live, fed.is_some(), "{entity:?} {metrics:?} size {size}");
                    if let Some(fed) = fed {
                        // Compared as text: NaN values are equal there.
                        assert_eq!(format!("{:?}", frame.window(metrics, at, size)), format!("{fed:?}"), "{entity:?} {metrics:?} size {size}");
                        assert_eq!(frame.snapshot(metrics, &cells), json_snapshot(metrics, &fed), "{entity:?} {metrics:?} size {size}");
                        compared += 1;
                    }
                }
            }
        }
    }
    assert!(compared > 10_000, "{compared} windows compared");
}

/// Expressions in the shapes alarm rules use: every comparison, `&&` and `||`, trends, labeled
/// selectors (p=50, p=99), aggregations, arithmetic. Each is compiled, and matches over some
/// generated windows and not over others.
const SHAPES: &[&str] = &[
    "sum(a > 100) >= 3",
    "sum((a > 100) && (b > 100)) >= 3",
    "sum((a > 100) || (b < 50)) >= 2",
    "sum(increase(a, 2) > 100) >= 3",
    "sum(rate(a, 3) > 0.5) >= 1",
    "sum(increase(pct{p='99'}, 1) > 0) >= 1",
    "sum(pct{p='50,99'} > 1000) >= 3",
    "sum(pct{p='99'} > 1000) >= 1",
    "sum(pct > 1000) >= 1",
    "sum(a == 100) >= 1",
    "sum(a != 100) >= 2",
    "sum(a < 50) >= 2",
    "sum(a <= 50) > 1",
    "count(a) == 3",
    "avg(a) > 60",
    "avg(a + b) > 60",
    "avg(a - pct{p='99'}) < 0",
    "sum(pct{p='50,99'} - a > 0) >= 1",
    "max(a) >= 100",
    "min(b) < 50",
    "latest(a) > 99",
    "latest(a > 99) == 1",
    "max(increase(b, 2)) > 10",
    "sum(a * 2 > b) >= 1",
    "sum(a / b > 1) >= 1",
    "sum(a % 7 > 3) >= 1",
    "sum(a > b) >= 1",
    "sum(a > 100) >= 3 || sum(b > 100) >= 3",
    "sum(a > 100) >= 1 && sum(b > 100) >= 1",
    "(sum(a > 100) >= 1) && (sum(b > 100) >= 1)",
    "((sum(a > 100) >= 1))",
    "sum((a > 1)) >= 1",
    "sum(a > 1) >= sum(b > 1)",
    "sum(pct{p='99'} > 1000) >= sum(a > 50)",
    "sum(a > 50) <= sum(pct{p='99'} > 1000)",
    "sum(a) > 100",
    "sum(a) > 100 && sum(b) > 100",
    "avg(a) / 0 > 1",
];

/// Around them: odd label selectors, results that are not single values, bool operations on
/// what is not a comparison (MQE errors), two labeled sides (handed to the MQE engine at each
/// window), and what is not compiled at all.
const EDGES: &[&str] = &[
    "sum(pct{q='1'} > 1) >= 1",
    "sum(pct{p='50',q='1'} >= 50) >= 1",
    "sum(pct{label='50'} > 1) >= 1",
    "sum(pct{p=''} > 1) >= 1",
    "sum(pct{p='99'} > 1000) >= sum(pct{p='50'} > 10)",
    "sum(a) >= 0",
    "a > 100",
    "(a > 100) && (b > 100)",
    "sum(a && b) >= 1",
    "sum((a > 1) && b) >= 1",
    "sum((a > 1) && ((b > 1))) >= 1",
    "sum((a + 1) && (b > 1)) >= 1",
    "sum(abs(a) > 1) >= 1",
];

#[test]
fn compiled_matches_the_mqe_evaluation() {
    let mut rng = StdRng::seed_from_u64(2026);
    // (text, expression, metrics, period, compiled)
    #[allow(clippy::type_complexity)]
    let rules: Vec<(String, hotrule_mqe_engine::Expr, Vec<String>, u32, Option<Compiled>)> = SHAPES
        .iter()
        .chain(EDGES)
        .flat_map(|text| {
            let expr = parse(text).expect(text);
            let mut metrics = expr.metric_names();
            metrics.sort();
            [1, 3, 10].map(|period| {
                let compiled = Compiled::compile(&expr, &metrics, period);
                (text.to_string(), expr.clone(), metrics.clone(), period, compiled)
            })
        })
        .collect();
    // Per expression: windows compared, matches, handed to the MQE engine.
    let mut seen: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    let mut scratch = Scratch::default();
    let mut cells = WindowCells::default();
    for _ in 0..400 {
        let reads = reads(&mut rng);
        let frame = frame_of(&reads);
        for (text, expr, metrics, period, compiled) in &rules {
            let size = *period as usize + expr.max_trend_range() as usize;
            let tables = frame.tables(metrics);
            scratch.reset();
            for &at in frame.sorted() {
                if !frame.fill(&tables, at, size, &mut cells) {
                    continue;
                }
                let generic = evaluate_window(expr, metrics, *period, &frame, &cells);
                let counts = seen.entry(text.as_str()).or_default();
                match compiled.as_ref().and_then(|c| c.matches(&frame, &cells, &mut scratch)) {
                    Some(fast) => {
                        assert_eq!(fast, generic, "`{text}` period {period} over {:?} (end {}, size {size})", frame.window(metrics, at, size), cells.end);
                        counts.0 += 1;
                        counts.1 += usize::from(fast);
                    }
                    None => counts.2 += 1,
                }
            }
        }
    }
    for text in SHAPES {
        let (compared, matched, handed) = seen[text];
        assert!(compared > 1000, "`{text}`: {compared} compared, {handed} handed over");
        assert!(matched >= 20, "`{text}` matched {matched} of {compared}");
        assert!(matched < compared, "`{text}` always matched");
    }
    let edges: usize = EDGES.iter().map(|text| seen[text].0).sum();
    assert!(edges > 10_000, "{edges} windows of the edge cases compared");
    assert!(seen["sum(pct{p='99'} > 1000) >= sum(pct{p='50'} > 10)"].2 > 1000, "two labeled sides go to the MQE engine");
    assert_eq!(seen["sum(abs(a) > 1) >= 1"].0, 0, "not compiled");
}
