//! Throws a few thousand random and mutated query strings at parse, plan and instant evaluation
//! with tight limits. A panic anywhere fails the test; every query must end in a value or an Error.

use std::collections::BTreeMap;

use hotrule_promql_engine::{Limits, Loaded, Series, eval_instant, parse, selectors_to_load};

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
];

const PIECES: &[&str] = &["(", ")", "[", "]", "{", "}", ",", "\"", "@", "offset", "by", ":", "5m", "-", "0x", "1e308", "=~", "!", "sum", "up", " ", "\\", "'", "`", "1y", "@ -1", "[0s]", "[1ms:1ms]"];

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
            let samples = (0..50).map(|i| (i * 15_000, i as f64)).collect();
            loaded.entry(load.key).or_default().push(Series { labels: BTreeMap::new(), samples });
        }
        let limits = Limits { max_samples: 1000, deadline: std::time::Instant::now() + std::time::Duration::from_secs(5), default_subquery_step_ms: 60_000 };
        let _ = eval_instant(&expr, 600_000, 300_000, &loaded, &limits);
        evaluated += 1;
    }
    // The mutations must leave some queries valid, or this test would exercise only the parser.
    assert!(evaluated > 100, "only {evaluated} queries parsed");
}
