//! The cost of one-sample MAL evaluations, as the node runs them for each error log line:
//! `log-mal-rules/nginx.yaml` (two rules) on one `nginx_error_log_count` sample per call.
//! `cargo run --release -p hotrule-mal-engine --example one_sample [calls]` prints the best of
//! three rounds in µs per call, and checks that every call produced its two values of 1.

use std::time::Instant;

use hotrule_mal_engine::{EngineState, PreparedFile, Sample, Value, labels};
use hotrule_rule_compiler::{Compiled, DslKind, compile_bundled};

// The node's allocator: most of an evaluation's cost is allocation.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const NGINX: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../config/rules/log-mal-rules/nginx.yaml"
);

fn main() {
    let calls: i64 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    let source = std::fs::read(NGINX).expect("read log-mal-rules/nginx.yaml");
    let Ok(Compiled::Mal(file)) = compile_bundled(DslKind::Mal, &source) else {
        panic!("log-mal-rules/nginx.yaml does not compile");
    };
    let file = PreparedFile::new(file);
    // Four services, four instances each: sixteen series, one label map each.
    let mut samples: Vec<Sample> = (0..16)
        .map(|i| {
            let service = format!("nginx::svc-{}", i % 4);
            let instance = format!("nginx-{}", i / 4);
            Sample::new(
                "nginx_error_log_count",
                labels([
                    ("level", "error"),
                    ("service", service.as_str()),
                    ("service_instance_id", instance.as_str()),
                ]),
                1.0,
                0,
            )
        })
        .collect();
    let t0 = 1_700_000_000_000_i64;
    let mut best = f64::INFINITY;
    for round in 0..3 {
        let mut state = EngineState::default();
        let mut total = 0_i64;
        let started = Instant::now();
        for call in 0..calls {
            // Timestamps advance 1 ms a call: minute buckets roll over as in a live stream.
            let now = t0 + call;
            let sample = &mut samples[(call as usize * 7) % 16];
            sample.timestamp_ms = now;
            let evaluation = file.evaluate(std::slice::from_ref(sample), now, &mut state);
            for value in &evaluation.values {
                total += match &value.value {
                    Value::Single(v) => *v,
                    // The labels left after the scope (`level`, and the instance for the
                    // service rule) make these labeled values.
                    Value::Labeled(table) => table.iter().map(|(_, v)| v).sum(),
                    Value::Histogram { .. } => 0,
                };
            }
            assert!(evaluation.errors.is_empty() && evaluation.warnings.is_empty());
        }
        let per_call = started.elapsed().as_secs_f64() * 1e6 / calls as f64;
        assert_eq!(total, calls * 2, "every call yields two values of 1");
        println!("round {round}: {per_call:.3} µs per call");
        best = best.min(per_call);
    }
    println!("best of 3: {best:.3} µs per call ({calls} calls, one sample each)");
}
