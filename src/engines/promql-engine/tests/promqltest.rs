//! A small reader for Prometheus' promqltest format (`load <step>` with `a+bxN` series and
//! `eval instant at <time> <expr>` with expected samples), so cases are data. It understands the
//! subset used in `testdata/basic.test` below; native histograms and `eval range` are not read.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hotrule_promql_engine::{Expr, Labels, Limits, Loaded, Series, Value, eval_instant, parse, selectors_to_load};

fn duration_ms(text: &str) -> i64 {
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let n: i64 = number.parse().unwrap_or_else(|_| panic!("bad duration {text}"));
    n * match unit {
        "ms" => 1,
        "s" | "" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        other => panic!("unit {other}"),
    }
}

/// The labels of a series description such as `foo{a="b"}`.
fn labels_of(text: &str) -> Labels {
    let Ok(Expr::VectorSelector(selector)) = parse(text) else { panic!("not a series: {text}") };
    let mut labels: Labels = selector.matchers.matchers.iter().map(|m| (m.name.clone(), m.value.clone())).collect();
    if let Some(name) = selector.name {
        labels.insert("__name__".to_string(), name);
    }
    labels
}

/// Expands `1 _ 0+10x3 5-1x2` into values per step (`None` for `_`).
fn values_of(text: &str) -> Vec<Option<f64>> {
    let mut out = Vec::new();
    for item in text.split_whitespace() {
        if item == "_" {
            out.push(None);
        } else if let Some((head, times)) = item.split_once('x') {
            let split = head[1..].find(['+', '-']).map(|i| i + 1).unwrap_or_else(|| panic!("bad item {item}"));
            let start: f64 = head[..split].parse().unwrap_or_else(|_| panic!("bad item {item}"));
            let delta: f64 = head[split..].trim_start_matches('+').parse().unwrap_or_else(|_| panic!("bad item {item}"));
            let n: usize = times.parse().unwrap_or_else(|_| panic!("bad item {item}"));
            out.extend((0..=n).map(|i| Some(start + delta * i as f64)));
        } else {
            out.push(Some(item.parse().unwrap_or_else(|_| panic!("bad value {item}"))));
        }
    }
    out
}

fn run(script: &str) -> usize {
    let mut series: Vec<Series> = Vec::new();
    let mut lines = script.lines().peekable();
    let mut checked = 0;
    while let Some(line) = lines.next() {
        let line = line.trim();
        if let Some(step) = line.strip_prefix("load ") {
            let step_ms = duration_ms(step.trim());
            while let Some(body) = lines.peek().filter(|l| l.starts_with(' ')) {
                let body = body.trim();
                let split = body.find('}').map(|i| i + 1).unwrap_or_else(|| body.find(' ').unwrap_or(body.len()));
                let samples = values_of(&body[split..]).into_iter().enumerate().filter_map(|(i, v)| v.map(|v| (i as i64 * step_ms, v))).collect();
                series.push(Series { labels: labels_of(&body[..split]), samples });
                lines.next();
            }
        } else if let Some(rest) = line.strip_prefix("eval instant at ") {
            let (at, query) = rest.split_once(' ').unwrap_or_else(|| panic!("bad eval {line}"));
            let t_ms = duration_ms(at);
            let mut expected: BTreeMap<Labels, f64> = BTreeMap::new();
            while let Some(body) = lines.peek().filter(|l| l.starts_with(' ')) {
                let body = body.trim();
                // A bare number is a scalar result, compared as the empty label set.
                let split = body.rfind(' ').unwrap_or(0);
                let labels = if body[..split].trim() == "{}" || split == 0 { Labels::new() } else { labels_of(body[..split].trim()) };
                expected.insert(labels, body[split..].trim().parse().unwrap_or_else(|_| panic!("bad sample {body}")));
                lines.next();
            }
            let expr = parse(query).unwrap_or_else(|error| panic!("{query}: {error}"));
            let mut loaded: Loaded = BTreeMap::new();
            for load in selectors_to_load(&expr, t_ms, t_ms, 300_000).unwrap_or_else(|error| panic!("{query}: {error}")) {
                let matching = series.iter().filter(|s| {
                    load.metric.as_ref().is_none_or(|name| s.labels.get("__name__") == Some(name))
                        && load.matchers.matchers.iter().all(|m| m.is_match(s.labels.get(&m.name).map_or("", String::as_str)))
                });
                loaded.insert(load.key, matching.cloned().collect());
            }
            let limits = Limits { max_samples: 1_000_000, deadline: Instant::now() + Duration::from_secs(60) };
            let got: BTreeMap<Labels, f64> = match eval_instant(&expr, t_ms, 300_000, &loaded, &limits) {
                Ok(Value::Vector(samples)) => samples.into_iter().map(|(labels, _, v)| (labels, v)).collect(),
                Ok(Value::Scalar(_, v)) => BTreeMap::from([(Labels::new(), v)]),
                other => panic!("{query}: {other:?}"),
            };
            assert_eq!(got.keys().collect::<Vec<_>>(), expected.keys().collect::<Vec<_>>(), "{query} at {at}");
            for (labels, want) in &expected {
                let have = got[labels];
                assert!((have - want).abs() <= 1e-9 * want.abs().max(1.0), "{query} at {at}: {labels:?} = {have}, want {want}");
            }
            checked += 1;
        }
    }
    checked
}

#[test]
fn basic_cases() {
    let checked = run(include_str!("testdata/basic.test"));
    assert!(checked >= 5, "only {checked} evals read");
}
