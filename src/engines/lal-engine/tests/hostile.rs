//! Hostile and odd input never panics: every shipped LAL file, plus scripts that convert and
//! compare aggressively, on generated logs (random text, JSON, YAML bodies, typed inputs, odd
//! tags, extreme timestamps and clocks). A failure is a rule error, never a panic.

mod common;

use common::{load_lal, load_lal_text, rules_path};
use hotrule_lal_engine::testing::Rng;
use hotrule_lal_engine::{Body, LalState, LogData, PreparedLalFile, TypedInput, analyze};

/// Random text with some CJK characters in it.
fn text(rng: &mut Rng) -> String {
    let len = (rng.next() % 40) as usize;
    (0..len)
        .map(|_| {
            let c = rng.next() % 128;
            char::from_u32(if c < 32 { 0x4E00 + c as u32 } else { c as u32 }).unwrap_or('?')
        })
        .collect()
}

const LAYERS: &[&str] = &[
    "",
    "GENERAL",
    "NGINX",
    "MYSQL",
    "POSTGRESQL",
    "REDIS",
    "MESH",
    "MESH_DP",
    "K8S_SERVICE",
    "ENVOY_AI_GATEWAY",
    "OTHER",
];
const BODIES: &[&str] = &[
    r#"{"time":"not-a-number","service":"x","layer":"MYSQL"}"#,
    r#"{"time":99999999999999999999,"query_time":"1e400","client_process":[1,2]}"#,
    r#"{"latency":"abc","client_process":{"process_id":null,"local":"maybe"}}"#,
    "[1,2,3]",
    "{\"a\":",
    "2021/13/45 99:99:99 [error] x",
    "9999/99/99 00:00:00 [] y",
    "\"\" 999 ",
    "a: [b, {c: d}]\n- broken",
    "",
];
const TAG_KEYS: &[&str] = &[
    "LOG_KIND",
    "response_code",
    "gen_ai.request.model",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "mcp.method.name",
    "exception.type",
    "name",
];
const TAG_VALUES: &[&str] = &[
    "NGINX_ACCESS_LOG",
    "NGINX_ERROR_LOG",
    "SLOW_SQL",
    "NET_PROFILING_SAMPLED_TRACE",
    "-",
    "",
    "abc",
    "99999999999999999999",
    "-2147483649",
    "metrickit.diagnostic.x",
    "500",
];
const TIMES: &[i64] = &[0, 1, -1, i64::MIN, i64::MAX, 1_609_459_200_000];

fn generated(rng: &mut Rng) -> LogData {
    let body_text = if rng.next().is_multiple_of(3) {
        text(rng)
    } else {
        rng.pick(BODIES).to_owned()
    };
    let body = match rng.next() % 4 {
        0 => Body::Text(body_text),
        1 => Body::Json(body_text),
        2 => Body::Yaml(body_text),
        _ => Body::None,
    };
    let mut log = LogData {
        service: if rng.next().is_multiple_of(10) {
            String::new()
        } else {
            text(rng) + "svc"
        },
        service_instance: text(rng),
        layer: rng.pick(LAYERS).to_owned(),
        timestamp_ms: TIMES[(rng.next() % TIMES.len() as u64) as usize],
        body,
        ..LogData::default()
    };
    for _ in 0..rng.next() % 5 {
        log.tags.push((
            rng.pick(TAG_KEYS).to_owned(),
            rng.pick(TAG_VALUES).to_owned(),
        ));
    }
    if rng.next().is_multiple_of(2) {
        log.source_attributes.insert(
            rng.pick(&["os.name", "miniprogram.platform"]).to_owned(),
            rng.pick(&["iOS", "wechat", "alipay", ""]).to_owned(),
        );
    }
    if rng.next().is_multiple_of(4) {
        let message = serde_json::from_str(rng.pick(&[
            r#"{"response":{"responseCode":"x"}}"#,
            r#"{"commonProperties":{"responseFlags":[1,{"a":true}]}}"#,
            r#"{"response":null}"#,
            "7",
        ]))
        .unwrap_or_default();
        log.typed = Some(TypedInput {
            type_name: rng
                .pick(&[
                    "io.envoyproxy.envoy.data.accesslog.v3.HTTPAccessLogEntry",
                    "io.envoyproxy.envoy.data.accesslog.v3.TCPAccessLogEntry",
                ])
                .to_owned(),
            message,
        });
    }
    log
}

const AGGRESSIVE: &str = r#"rules:
  - name: converts
    layer: GENERAL
    dsl: |
      filter {
        json { abortOnFailure false }
        extractor {
          def n = parsed.time as Long
          def i = tag("response_code") as Integer
          if (parsed.time > 5 && i % 2 == 0 || n / 0 == 1) { tag odd: "yes" }
          timestamp parsed.time, "yyyy-MM-dd'T'HH:mm:ss.SSSX"
          spanId tag("response_code")
          metrics {
            name "m"
            timestamp parsed.time
            labels a: parsed.a, b: parsed?.b?.c
            value parsed.query_time as Double
          }
        }
        sink { sampler { rateLimit("${parsed}") { rpm 1 } possibility(-5) {} } }
      }
"#;

#[test]
fn generated_logs_never_panic() {
    let dir = rules_path("lal");
    let mut files: Vec<PreparedLalFile> = std::fs::read_dir(&dir)
        .expect("rules dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| load_lal(&p))
        .collect();
    files.push(load_lal_text(AGGRESSIVE));
    let refs: Vec<&PreparedLalFile> = files.iter().collect();
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut state = LalState::default();
    let mut ran = 0;
    let mut failed = 0;
    for i in 0..3000 {
        let log = generated(&mut rng);
        let now = TIMES[i % TIMES.len()];
        for outcome in analyze(&refs, &log, now, &mut state).outcomes() {
            ran += 1;
            failed += usize::from(outcome.error.is_some());
        }
    }
    // Rules did run, and some failed on the hostile values (as errors, not panics).
    assert!(ran > 1000, "{ran}");
    assert!(failed > 0, "{failed}");
}
