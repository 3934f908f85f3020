//! `eval_range`: a range query is the instant evaluation at every step, gathered per series; the
//! sample limit bounds what one step holds.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hotrule_promql_engine::{Error, Labels, Limits, Loaded, Series, Value, eval_instant, eval_range, parse, selectors_to_load};

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

fn limits(max_samples: usize) -> Limits {
    Limits { max_samples, deadline: Instant::now() + Duration::from_secs(10), default_subquery_step_ms: 60_000 }
}

fn run_limited(query: &str, start_ms: i64, end_ms: i64, step_ms: i64, max_samples: usize) -> Result<Value, Error> {
    let expr = parse(query).expect("parses");
    eval_range(&expr, start_ms, end_ms, step_ms, 300_000, &loaded_for(query, start_ms, end_ms), &limits(max_samples))
}

fn run(query: &str, start_ms: i64, end_ms: i64, step_ms: i64) -> Result<Value, Error> {
    run_limited(query, start_ms, end_ms, step_ms, 1_000_000)
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

#[test]
fn subqueries_in_a_range_query_give_each_step_its_instant_value() {
    // The range evaluation reuses inner results across steps; every step must still equal the
    // instant evaluation at that time, nested subqueries, offsets and `@` included.
    for query in [
        "max_over_time(m[3m:1m])",
        "sum_over_time(rate(m[2m:30s])[3m:1m])",
        "sum_over_time(sum_over_time(m[90s:20s])[4m:45s] offset 1m)",
        "count_over_time(m[5m:] @ 240)",
    ] {
        let (start, end, step) = (0, 600_000, 30_000);
        let Ok(Value::Matrix(range)) = run(query, start, end, step) else { panic!("{query}: a matrix") };
        let expr = parse(query).expect("parses");
        let mut t = start;
        while t <= end {
            let Ok(Value::Vector(instant)) = eval_instant(&expr, t, 300_000, &loaded_for(query, t, t), &limits(1_000_000)) else {
                panic!("{query} at {t}: a vector")
            };
            let at_t: Vec<(Labels, f64)> =
                range.iter().filter_map(|s| s.samples.iter().find(|(ts, _)| *ts == t).map(|(_, v)| (s.labels.clone(), *v))).collect();
            let mut want: Vec<(Labels, f64)> = instant.into_iter().map(|(labels, _, v)| (labels, v)).collect();
            want.sort_by(|a, b| a.0.cmp(&b.0));
            assert_eq!(at_t, want, "{query} at {t}");
            t += step;
        }
    }
}

#[test]
fn the_sample_limit_bounds_one_step_not_the_sum_over_steps() {
    // The 11 steps select 42 samples in all (at most 6 in one step) and give 17 points: the
    // most held at once is under 30.
    let Ok(Value::Matrix(out)) = run_limited("count_over_time(m[2m])", 0, 600_000, 60_000, 30) else { panic!("within the limit") };
    assert_eq!(out.iter().map(|s| s.samples.len()).sum::<usize>(), 17);
    // A single step reading 11 samples of one series cannot fit a limit of 10.
    assert_eq!(run_limited("count_over_time(m[10m])", 600_000, 600_000, 60_000, 10), Err(Error::TooManySamples { limit: 10 }));
}
