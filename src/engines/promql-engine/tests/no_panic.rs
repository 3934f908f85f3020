//! Throws a few thousand random and mutated query strings at parse, plan, instant and range
//! evaluation with tight limits, over series holding NaN, infinities, huge values and stale
//! markers. A panic anywhere fails the test; every query must end in a value or an Error.

use std::collections::BTreeMap;

use hotrule_promql_engine::{Limits, Loaded, Series, eval_instant, eval_range, parse, selectors_to_load};

const SEEDS: &[&str] = &[
    "up",
    "rate(http_requests_total{job=~\"a.*\"}[5m] offset 1m)",
    "sum by (job) (rate(x[1m])) / ignoring(instance) group_left count(y)",
    "max_over_time(up[10m:30s] @ 100)",
    "histogram_quantile(0.9, sum by (le) (rate(b_bucket[5m])))",
    "-up @ end() offset -5m",
    "last_over_time(up[1y])",
    "topk(3, label_replace(up, \"a\", \"$1\", \"b\", \"(.*)\"))",
    "1 + 2 * 3 ^ 4 % 5 == bool 6",
    "{__name__=\"up\", job!=\"\"}",
    "count_values without (le) (\"value\", up)",
    "histogram_quantile(NaN, rate(b_bucket[5m:]))",
    "timestamp((up @ 100 offset 1m))",
    "absent_over_time(nope{a=\"b\", a=~\"c\"}[5m])",
    "sum_over_time(rate(up[1m:10s] offset -1m)[5m:1m] @ end())",
    "predict_linear(up[10m], 3600) + holt_winters(up[5m:30s], 0.5, 0.5)",
    "year(vector(1e300)) + minute(-up) + days_in_month() + day_of_week(vector(NaN))",
    "sgn(up) atan2 on() group_left sort_desc(deriv(up[2m]))",
    "quantile_over_time(0.5, (up)[1h:1m]) or absent(up)",
    "topk(NaN, up) * count_values(\"1bad\", up)",
];

const PIECES: &[&str] = &["[5m:]", "[1h:1ms]", "le", "NaN", "Inf", "stale", "timestamp", "absent_over_time", "count_values", "histogram_quantile", "(", ")", "[", "]", "{", "}", ",", "\"", "@", "offset", "by", ":", "5m", "-", "0x", "1e308", "=~", "!", "sum", "up", " ", "\\", "'", "`", "1y", "@ -1", "[0s]", "[1ms:1ms]"];

struct Lcg(u64);

impl Lcg {
    fn next(&mut self, bound: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % bound.max(1)
    }
}

fn mutate(rng: &mut Lcg) -> String {
    let mut text: Vec<char> = SEEDS[rng.next(SEEDS.len())].chars().collect();
    for _ in 0..=rng.next(4) {
        let at = rng.next(text.len() + 1);
        match rng.next(3) {
            0 if at < text.len() => {
                text.remove(at);
            }
            1 => {
                let piece: Vec<char> = PIECES[rng.next(PIECES.len())].chars().collect();
                text.splice(at..at, piece);
            }
            _ => text.insert(at, char::from(rng.next(95) as u8 + 32)),
        }
    }
    text.into_iter().collect()
}

#[test]
fn random_queries_never_panic() {
    let mut rng = Lcg(0x5eed);
    let mut evaluated = 0;
    for _ in 0..4000 {
        let query = mutate(&mut rng);
        let Ok(expr) = parse(&query) else { continue };
        let Ok(loads) = selectors_to_load(&expr, 0, 600_000, 300_000) else { continue };
        let mut loaded: Loaded = BTreeMap::new();
        for load in loads {
            // Bucket-like series with awkward values: NaN, infinities, huge numbers, a stale marker.
            for (n, le) in ["0.1", "+Inf", "x", "1e309"].iter().enumerate() {
                let samples = (0..50)
                    .map(|i| {
                        let value = match (i + n) % 7 {
                            0 => f64::NAN,
                            1 => f64::INFINITY,
                            2 => -1e308,
                            3 => f64::from_bits(0x7ff0_0000_0000_0002),
                            _ => i as f64,
                        };
                        (i as i64 * 15_000, value)
                    })
                    .collect();
                let labels = BTreeMap::from([("le".to_string(), le.to_string())]);
                loaded.entry(load.key.clone()).or_default().push(Series { labels, samples });
            }
        }
        let limits = Limits { max_samples: 1000, deadline: std::time::Instant::now() + std::time::Duration::from_secs(5), default_subquery_step_ms: 60_000 };
        let _ = eval_instant(&expr, 600_000, 300_000, &loaded, &limits);
        let _ = eval_range(&expr, 0, 600_000, 120_000, 300_000, &loaded, &limits);
        evaluated += 1;
    }
    // The mutations must leave some queries valid, or this test would exercise only the parser.
    assert!(evaluated > 100, "only {evaluated} queries parsed");
}
