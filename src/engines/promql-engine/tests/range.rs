//! `eval_range`: a range query is the instant evaluation at every step, gathered per series.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hotrule_promql_engine::{Error, Labels, Limits, Loaded, Series, Value, eval_range, parse, selectors_to_load};

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// `m{a="1"}` every minute from 0 to 10 min (value = minute), and `m{a="2"}` only up to 3 min.
fn loaded_for(query: &str, start_ms: i64, end_ms: i64) -> Loaded {
    let series = [
        Series { labels: labels(&[("__name__", "m"), ("a", "1")]), samples: (0..=10).map(|i| (i * 60_000, i as f64)).collect() },
        Series { labels: labels(&[("__name__", "m"), ("a", "2")]), samples: (0..=3).map(|i| (i * 60_000, 10.0 * i as f64)).collect() },
    ];
    let expr = parse(query).expect("parses");
    let mut loaded: Loaded = BTreeMap::new();
    for load in selectors_to_load(&expr, start_ms, end_ms, 300_000).expect("plan") {
        let matching = series.iter().filter(|s| {
            load.metric.as_ref().is_none_or(|name| s.labels.get("__name__") == Some(name))
                && load.matchers.matchers.iter().all(|m| m.is_match(s.labels.get(&m.name).map_or("", String::as_str)))
        });
        loaded.insert(load.key, matching.cloned().collect());
    }
    loaded
}

fn run(query: &str, start_ms: i64, end_ms: i64, step_ms: i64) -> Result<Value, Error> {
    let limits = Limits { max_samples: 1_000_000, deadline: Instant::now() + Duration::from_secs(10), default_subquery_step_ms: 60_000 };
    let expr = parse(query).expect("parses");
    eval_range(&expr, start_ms, end_ms, step_ms, 300_000, &loaded_for(query, start_ms, end_ms), &limits)
}

#[test]
fn every_step_is_an_instant_evaluation_gathered_per_series() {
    let Ok(Value::Matrix(out)) = run("m * 2", 0, 600_000, 120_000) else { panic!("a matrix") };
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].labels, labels(&[("a", "1")]), "arithmetic drops the name");
    assert_eq!(out[0].samples, vec![(0, 0.0), (120_000, 4.0), (240_000, 8.0), (360_000, 12.0), (480_000, 16.0), (600_000, 20.0)]);
    // `a="2"` stops at 3 min: it holds for the 5 min lookback (to 8 min inclusive in 2.x), then is gone.
    assert_eq!(out[1].samples, vec![(0, 0.0), (120_000, 40.0), (240_000, 60.0), (360_000, 60.0), (480_000, 60.0)]);
}

#[test]
fn scalars_and_aggregations_become_one_series_per_label_set() {
    let Ok(Value::Matrix(out)) = run("sum(m)", 0, 240_000, 120_000) else { panic!("a matrix") };
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].labels, Labels::new());
    assert_eq!(out[0].samples, vec![(0, 0.0), (120_000, 22.0), (240_000, 34.0)]);
    let Ok(Value::Matrix(out)) = run("time()", 0, 120_000, 60_000) else { panic!("a matrix") };
    assert_eq!(out[0].samples, vec![(0, 0.0), (60_000, 60.0), (120_000, 120.0)]);
}

#[test]
fn a_range_vector_or_a_bad_step_is_refused() {
    assert!(matches!(run("m[5m]", 0, 60_000, 60_000), Err(Error::Unsupported { .. })));
    assert!(matches!(run("m", 0, 60_000, 0), Err(Error::Unsupported { .. })));
}

#[test]
fn regex_matchers_are_fully_anchored_as_in_prometheus() {
    let Ok(hotrule_promql_engine::Expr::VectorSelector(selector)) = parse("m{a=~\"1|2\"}") else { panic!("a selector") };
    let matcher = &selector.matchers.matchers[0];
    assert!(matcher.is_match("1") && matcher.is_match("2"));
    assert!(!matcher.is_match("12") && !matcher.is_match("21") && !matcher.is_match("x1"));
}
