//! Loading, validation, redaction, the live/restart diff and reload rejection.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hotrule_confmap::MapEnv;

use super::reload::{LiveSettings, Reloader, diff};
use super::*;

fn env(vars: &[(&str, &str)]) -> Arc<dyn hotrule_confmap::Env> {
    Arc::new(MapEnv::new(vars.iter().map(|(k, v)| (k.to_string(), v.to_string()))))
}

fn file(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("write");
    format!("file:{}", path.display())
}

fn sources(uris: Vec<String>) -> ConfigSources {
    ConfigSources { uris, ..ConfigSources::default() }
}

fn errors(result: Result<Loaded, ConfigErrors>) -> Vec<(String, String)> {
    match result {
        Ok(_) => panic!("expected configuration errors"),
        Err(ConfigErrors(issues)) => issues.into_iter().map(|i| (i.key, i.message)).collect(),
    }
}

#[test]
fn no_sources_give_the_documented_defaults() {
    let loaded = load(&ConfigSources::default(), env(&[])).expect("defaults are valid");
    let c = loaded.config;
    assert_eq!(c.admin_listen.to_string(), "127.0.0.1:17128");
    assert_eq!(c.data_dir, std::path::PathBuf::from("./hotrule-data"));
    assert_eq!(c.rules_dir, std::path::PathBuf::from("./config/rules"));
    assert_eq!((c.scan_interval, c.self_heal_threshold), (Duration::from_secs(30), Duration::from_secs(60)));
    assert_eq!(c.log_level, "info");
    assert!(c.watch && c.admin_token.is_none());
}

#[test]
fn files_merge_in_order_then_sets_then_flags_win() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = file(&dir, "a.yaml", "rules:\n  scan_interval: 10s\n  self_heal_threshold: 2m\nlog:\n  level: debug\n");
    let b = file(&dir, "b.yaml", "rules:\n  scan_interval: 20s\n");
    let mut s = sources(vec![a.clone(), b.clone()]);
    let loaded = load(&s, env(&[])).expect("valid");
    assert_eq!(loaded.config.scan_interval, Duration::from_secs(20), "later file wins");
    assert_eq!(loaded.config.self_heal_threshold, Duration::from_secs(120), "maps merge deeply");
    assert_eq!(loaded.origins.get("rules.scan_interval"), Some(&b));
    assert_eq!(loaded.origins.get("log.level"), Some(&a));
    s.sets.push("rules.scan_interval=5s".into());
    assert_eq!(load(&s, env(&[])).expect("valid").config.scan_interval, Duration::from_secs(5));
    s.overrides.push(("rules.scan_interval".into(), "3".into()));
    assert_eq!(load(&s, env(&[])).expect("valid").config.scan_interval, Duration::from_secs(3), "flags override");
}

#[test]
fn expansion_defaults_and_string_typing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let uri = file(
        &dir,
        "n.yaml",
        "admin:\n  listen: ${env:HR_LISTEN:-127.0.0.1:9999}\nnode:\n  id: 0123\nrules:\n  scan_interval: ${HR_SCAN}\n",
    );
    let loaded = load(&sources(vec![uri]), env(&[("HR_SCAN", "7")])).expect("valid");
    assert_eq!(loaded.config.admin_listen.to_string(), "127.0.0.1:9999");
    assert_eq!(loaded.config.node_id.as_deref(), Some("0123"), "0123 stays a string where a string is expected");
    assert_eq!(loaded.config.scan_interval, Duration::from_secs(7), "a whole-value expansion takes the value's type");
}

#[test]
fn every_error_is_listed_with_its_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let uri = file(
        &dir,
        "bad.yaml",
        "admin:\n  listen: nowhere\nrules:\n  scan_intervall: 5s\n  self_heal_threshold: 0s\nlogg:\n  level: info\n",
    );
    let issues = errors(load(&sources(vec![uri]), env(&[])));
    let keys: Vec<&str> = issues.iter().map(|(k, _)| k.as_str()).collect();
    assert!(keys.contains(&"rules.scan_intervall") && keys.contains(&"logg"), "{issues:?}");
    let message = |key: &str| issues.iter().find(|(k, _)| k == key).map(|(_, m)| m.clone()).unwrap_or_default();
    assert!(message("rules.scan_intervall").contains("did you mean `rules.scan_interval`"), "{issues:?}");
    assert!(message("logg").contains("did you mean `log`"), "{issues:?}");
    // Field validation runs once the keys are known; fix the keys and every field error shows.
    let uri = file(&dir, "bad2.yaml", "admin:\n  listen: nowhere\nrules:\n  self_heal_threshold: 0s\n  scan_interval: -5s\n");
    let issues = errors(load(&sources(vec![uri]), env(&[])));
    assert!(issues.iter().any(|(k, m)| k == "rules.scan_interval" && m.contains("negative")), "{issues:?}");
    let uri = file(&dir, "bad3.yaml", "admin:\n  listen: nowhere\nrules:\n  self_heal_threshold: 0s\nlog:\n  level: \"[[\"\n");
    let issues = errors(load(&sources(vec![uri]), env(&[])));
    let keys: Vec<&str> = issues.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["admin.listen", "rules.self_heal_threshold", "log.level"], "{issues:?}");
}

#[test]
fn a_public_admin_address_needs_a_token_or_insecure() {
    let s = ConfigSources { sets: vec!["admin.listen=0.0.0.0:17128".into()], ..ConfigSources::default() };
    let issues = errors(load(&s, env(&[])));
    assert_eq!(issues[0].0, "admin.token");
    let mut with_token = s.clone();
    with_token.sets.push("admin.token=t0ken".into());
    assert!(load(&with_token, env(&[])).is_ok());
    let mut insecure = s.clone();
    insecure.sets.push("admin.insecure=true".into());
    assert!(load(&insecure, env(&[])).is_ok());
}

#[test]
fn deprecated_flat_keys_move_with_a_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let uri = file(&dir, "old.yaml", "scan_interval: 9s\nadmin_listen: 127.0.0.1:18000\n");
    let loaded = load(&sources(vec![uri]), env(&[])).expect("valid");
    assert_eq!(loaded.config.scan_interval, Duration::from_secs(9));
    assert_eq!(loaded.config.admin_listen.port(), 18000);
    assert!(loaded.warnings.iter().any(|w| w.contains("scan_interval")), "{:?}", loaded.warnings);
}

#[test]
fn secrets_are_redacted_in_the_view() {
    let s = ConfigSources { sets: vec!["admin.token=s3cr3t-value".into()], ..ConfigSources::default() };
    let state = ConfigState::new(load(&s, env(&[])).expect("valid"));
    let view = state.view().to_string();
    assert!(!view.contains("s3cr3t-value"), "{view}");
    assert!(view.contains("[REDACTED]"), "{view}");
    // SkyWalking's agent token too.
    let s = ConfigSources { sets: vec!["ingest.grpc.authentication=agent-s3cr3t".into()], ..ConfigSources::default() };
    let loaded = load(&s, env(&[])).expect("valid");
    assert_eq!(loaded.config.ingest.grpc.authentication.as_deref(), Some("agent-s3cr3t"));
    let view = ConfigState::new(loaded).view().to_string();
    assert!(!view.contains("agent-s3cr3t"), "{view}");
}

#[test]
fn the_diff_separates_live_from_restart_keys() {
    let base = load(&ConfigSources::default(), env(&[])).expect("valid").config;
    let changed = load(
        &ConfigSources {
            sets: vec![
                "rules.scan_interval=1s".into(),
                "log.level=debug".into(),
                "admin.token=x".into(),
                "admin.listen=127.0.0.1:1".into(),
                "node.data_dir=/elsewhere".into(),
            ],
            ..ConfigSources::default()
        },
        env(&[]),
    )
    .expect("valid")
    .config;
    let delta = diff(&base, &changed);
    assert_eq!(delta.live, ["log.level", "rules.scan_interval", "admin.token"]);
    assert_eq!(delta.restart, ["node.data_dir", "admin.listen"]);
    assert_eq!(diff(&base, &base), reload::Delta::default());
}

#[derive(Default)]
struct Recorder {
    applied: Mutex<Vec<Duration>>,
}

impl LiveSettings for Recorder {
    fn apply(&self, config: &NodeConfig) -> Result<(), reload::LiveError> {
        self.applied.lock().expect("applied").push(config.scan_interval);
        Ok(())
    }
}

#[test]
fn an_invalid_reload_is_rejected_and_the_previous_config_stays() {
    let dir = tempfile::tempdir().expect("tempdir");
    let uri = file(&dir, "live.yaml", "rules:\n  scan_interval: 30s\n");
    let s = sources(vec![uri]);
    let state = Arc::new(ConfigState::new(load(&s, env(&[])).expect("valid")));
    let recorder = Arc::new(Recorder::default());
    let reloader = Reloader::new(s, env(&[]), state.clone(), recorder.clone());
    file(&dir, "live.yaml", "rules:\n  scan_interval: 2s\n  lock_timeout: 10s\n");
    let delta = reloader.reload("test").expect("valid reload");
    assert_eq!(delta.live, ["rules.scan_interval"]);
    assert_eq!(delta.restart, ["rules.lock_timeout"]);
    assert_eq!(state.view()["pendingRestart"], serde_json::json!(["rules.lock_timeout"]));
    file(&dir, "live.yaml", "rules:\n  scan_interval: 0s\n");
    assert!(reloader.reload("test").is_err());
    assert_eq!(state.reload_failures(), 1);
    assert_eq!(state.current().config.scan_interval, Duration::from_secs(2), "previous config kept");
    assert_eq!(*recorder.applied.lock().expect("applied"), [Duration::from_secs(2)], "nothing applied on rejection");
    assert!(state.view()["lastReloadError"].as_str().is_some_and(|e| e.contains("must be greater than zero")));
}

#[test]
fn durations_parse_every_documented_form() {
    for (text, ms) in [("500ms", 500), ("30s", 30_000), ("30", 30_000), ("5m", 300_000), ("24h", 86_400_000), ("7d", 604_800_000)] {
        assert_eq!(DurationSetting::parse(text).map(|d| d.0.as_millis()), Ok(ms), "{text}");
    }
    for bad in ["", "s", "5w", "1.5s", "99999999999999999999s"] {
        assert!(DurationSetting::parse(bad).is_err(), "{bad}");
    }
    assert_eq!(DurationSetting(Duration::from_millis(1500)).to_string(), "1500ms");
    assert_eq!(DurationSetting(Duration::from_secs(120)).to_string(), "2m");
}

#[test]
fn a_clustered_node_needs_a_bus_secret_unless_insecure() {
    let base = |extra: &[&str]| ConfigSources {
        sets: ["cluster.gossip_listen=127.0.0.1:17130", "cluster.seeds=[127.0.0.2:17130]"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect(),
        ..ConfigSources::default()
    };
    let issues = errors(load(&base(&[]), env(&[])));
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].0, "cluster.secret");
    assert!(issues[0].1.contains("--insecure-bus"), "{issues:?}");
    let insecure = load(&base(&["cluster.insecure_bus=true"]), env(&[])).expect("insecure bus allowed");
    assert_eq!(insecure.config.cluster.as_ref().and_then(|c| c.secret.clone()), None);
    let with_secret = load(&base(&["cluster.secret=s3cret"]), env(&[])).expect("valid");
    let cluster = with_secret.config.cluster.clone().expect("clustered");
    assert_eq!(cluster.secret.as_deref(), Some(&b"s3cret"[..]));
    assert_eq!(cluster.bus_listen.port(), 17131, "the bus defaults to the gossip port + 1");
    assert_eq!(cluster.admin_advertise, "127.0.0.1:17128");
    assert!(!ConfigState::new(with_secret).view().to_string().contains("s3cret"), "the secret is redacted");
}

#[test]
fn cluster_settings_are_validated_and_a_lone_node_has_none() {
    assert!(load(&ConfigSources::default(), env(&[])).expect("valid").config.cluster.is_none());
    let s = ConfigSources {
        sets: vec![
            "cluster.gossip_listen=0.0.0.0:17130".into(),
            "cluster.seeds=[nohost]".into(),
            "cluster.insecure_bus=true".into(),
        ],
        ..ConfigSources::default()
    };
    let issues = errors(load(&s, env(&[])));
    let keys: Vec<&str> = issues.iter().map(|(k, _)| k.as_str()).collect();
    assert!(keys.contains(&"cluster.seeds") && keys.contains(&"cluster.advertise_host"), "{issues:?}");
}

#[test]
fn failover_settings_default_parse_and_are_bounded() {
    let sources = |extra: &[&str]| ConfigSources {
        sets: ["cluster.gossip_listen=127.0.0.1:17130", "cluster.insecure_bus=true"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect(),
        ..ConfigSources::default()
    };
    let defaults = load(&sources(&[]), env(&[])).expect("valid").config.cluster.expect("clustered");
    assert_eq!(
        (defaults.phi_threshold, defaults.suspect_phi_threshold, defaults.forward_wait),
        (8.0, 3.0, Duration::from_secs(5))
    );
    let set = ["cluster.phi_threshold=10", "cluster.suspect_phi_threshold=2.5", "cluster.forward_wait=0s", "cluster.gossip_interval=250ms"];
    let tuned = load(&sources(&set), env(&[])).expect("valid").config.cluster.expect("clustered");
    assert_eq!(
        (tuned.phi_threshold, tuned.suspect_phi_threshold, tuned.forward_wait, tuned.gossip_interval),
        (10.0, 2.5, Duration::ZERO, Duration::from_millis(250))
    );
    for (bad, key) in [
        ("cluster.phi_threshold=0.5", "cluster.phi_threshold"),
        ("cluster.phi_threshold=1000", "cluster.phi_threshold"),
        ("cluster.suspect_phi_threshold=9", "cluster.suspect_phi_threshold"),
        ("cluster.suspect_phi_threshold=0", "cluster.suspect_phi_threshold"),
        ("cluster.forward_wait=10m", "cluster.forward_wait"),
    ] {
        let issues = errors(load(&sources(&[bad]), env(&[])));
        assert!(issues.iter().any(|(k, _)| k == key), "{bad}: {issues:?}");
    }
}

#[test]
fn agent_tls_needs_both_files_and_a_pair_that_fits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pair = |name: &str| {
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        let (cert_file, key_file) = (dir.path().join(format!("{name}.crt")), dir.path().join(format!("{name}.key")));
        std::fs::write(&cert_file, cert.pem()).expect("write");
        std::fs::write(&key_file, key.serialize_pem()).expect("write");
        (cert_file.display().to_string(), key_file.display().to_string())
    };
    let (a_cert, a_key) = pair("a");
    let (_, b_key) = pair("b");
    let with = |sets: &[String]| load(&ConfigSources { sets: sets.to_vec(), ..ConfigSources::default() }, env(&[]));

    let none = with(&[]).expect("no TLS is valid").config;
    assert_eq!(none.agents.tls, None);
    let good = with(&[format!("agents.tls.cert_file={a_cert}"), format!("agents.tls.key_file={a_key}")])
        .expect("a matching pair is valid")
        .config;
    let files = good.agents.tls.clone().expect("TLS configured");
    assert_eq!(files.cert_file, std::path::PathBuf::from(&a_cert));
    assert_eq!(diff(&none, &good).restart, ["agents.tls"], "changing the files needs a restart");

    let only_cert = errors(with(&[format!("agents.tls.cert_file={a_cert}")]));
    assert_eq!(only_cert[0].0, "agents.tls.key_file", "{only_cert:?}");
    let only_key = errors(with(&[format!("agents.tls.key_file={a_key}")]));
    assert_eq!(only_key[0].0, "agents.tls.cert_file", "{only_key:?}");
    let crossed = errors(with(&[format!("agents.tls.cert_file={a_cert}"), format!("agents.tls.key_file={b_key}")]));
    assert_eq!(crossed[0].0, "agents.tls", "{crossed:?}");
    assert!(crossed[0].1.contains("does not fit"), "{crossed:?}");
    let missing = errors(with(&[
        format!("agents.tls.cert_file={}", dir.path().join("absent.crt").display()),
        format!("agents.tls.key_file={a_key}"),
    ]));
    assert!(missing[0].1.contains("absent.crt"), "{missing:?}");
}

#[test]
fn agent_settings_are_validated_and_become_the_service_settings() {
    use crate::api::agents::{DetailDelivery, LivenessPolicy};
    let with = |sets: &[&str]| {
        load(&ConfigSources { sets: sets.iter().map(|s| s.to_string()).collect(), ..ConfigSources::default() }, env(&[]))
    };
    let keys = |issues: &[(String, String)]| issues.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();

    let bad_delivery = errors(with(&["agents.detail_delivery=push"]));
    assert_eq!(keys(&bad_delivery), ["agents.detail_delivery"], "{bad_delivery:?}");
    assert!(bad_delivery[0].1.contains("\"push\"") && bad_delivery[0].1.contains("inline or fetch"), "{bad_delivery:?}");

    let early_offline = errors(with(&["agents.heartbeat_interval=10s", "agents.offline_after=5s"]));
    assert_eq!(keys(&early_offline), ["agents.offline_after"], "{early_offline:?}");
    assert!(early_offline[0].1.contains("agents.heartbeat_interval"), "{early_offline:?}");

    let short_retention = errors(with(&["agents.offline_after=1m", "agents.retention=30s"]));
    assert_eq!(keys(&short_retention), ["agents.retention"], "{short_retention:?}");
    assert!(short_retention[0].1.contains("agents.offline_after"), "{short_retention:?}");

    let defaults = with(&[]).expect("defaults are valid").config.agents.service;
    assert_eq!(defaults.detail_delivery, DetailDelivery::Inline);
    assert_eq!(defaults.liveness, LivenessPolicy::default(), "10s x 3 and 12h by default");

    let custom = with(&[
        "agents.detail_delivery=fetch",
        "agents.heartbeat_interval=10s",
        "agents.offline_after=25s",
        "agents.retention=1h",
    ])
    .expect("valid")
    .config
    .agents
    .service;
    assert_eq!(custom.detail_delivery, DetailDelivery::Fetch);
    assert_eq!(
        custom.liveness,
        LivenessPolicy { heartbeat_interval_ms: 10_000, missed_intervals: 3, retention_ms: 3_600_000 },
        "offline after ceil(25s / 10s) = 3 missed intervals"
    );
}

#[test]
fn every_agent_setting_problem_is_reported_together() {
    let with = |sets: &[&str]| {
        load(&ConfigSources { sets: sets.iter().map(|s| s.to_string()).collect(), ..ConfigSources::default() }, env(&[]))
    };
    let keys = |sets: &[&str]| {
        let mut keys: Vec<String> = errors(with(sets)).into_iter().map(|(k, _)| k).collect();
        keys.sort();
        keys
    };
    assert_eq!(
        keys(&["agents.detail_delivery=push", "agents.tls.cert_file=/nonexistent/agent.crt"]),
        ["agents.detail_delivery", "agents.tls.key_file"],
        "a bad delivery mode does not hide a TLS problem"
    );
    assert_eq!(
        keys(&["agents.heartbeat_interval=0s", "agents.offline_after=1m", "agents.retention=30s"]),
        ["agents.heartbeat_interval", "agents.retention"],
        "a zero interval does not hide the retention problem"
    );
}

#[tokio::test]
async fn the_reload_worker_applies_a_watched_file_edit_off_the_async_threads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let uri = file(&dir, "live.yaml", "rules:\n  scan_interval: 30s\n");
    let s = sources(vec![uri]);
    let state = Arc::new(ConfigState::new(load(&s, env(&[])).expect("valid")));
    let recorder = Arc::new(Recorder::default());
    let reloader = Arc::new(Reloader::new(s, env(&[]), state.clone(), recorder.clone()));
    let mut runner = crate::base::worker::WorkerRunner::new(tokio_util::sync::CancellationToken::new());
    runner.spawn(reload::ReloadWorker::new(reloader));
    file(&dir, "live.yaml", "rules:\n  scan_interval: 2s\n");
    let applied = tokio::time::timeout(Duration::from_secs(15), async {
        while !recorder.applied.lock().expect("applied").contains(&Duration::from_secs(2)) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(applied.is_ok(), "the edit was applied: {:?}", recorder.applied.lock().expect("applied"));
    assert_eq!(state.current().config.scan_interval, Duration::from_secs(2));
    let report = runner.shutdown(Duration::from_secs(5)).await;
    assert!(report.aborted.is_empty());
}

#[test]
fn the_query_section_sets_promqls_bounds_and_refuses_zeroes() {
    let defaults = load(&ConfigSources::default(), env(&[])).expect("defaults are valid").config.query;
    assert_eq!(defaults, crate::api::query::QuerySettings::default(), "Prometheus' own defaults");
    assert_eq!((defaults.max_samples, defaults.timeout, defaults.subquery_step_ms), (50_000_000, Duration::from_secs(120), 60_000));
    let dir = tempfile::tempdir().expect("tempdir");
    let uri = file(&dir, "q.yaml", "query:\n  lookback_delta: 2m\n  timeout: 5s\n  max_samples: 1000\n  evaluation_interval: 30s\n  fan_out_timeout: 1s\n");
    let q = load(&sources(vec![uri]), env(&[])).expect("valid").config.query;
    assert_eq!((q.lookback_ms, q.timeout, q.max_samples, q.subquery_step_ms, q.fan_out_timeout), (120_000, Duration::from_secs(5), 1000, 30_000, Duration::from_secs(1)));
    let uri = file(&dir, "bad.yaml", "query:\n  max_samples: 0\n  timeout: 0s\n  evaluation_interval: 0s\n  max_concurrency: 0\n");
    let keys: Vec<String> = errors(load(&sources(vec![uri]), env(&[]))).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["query.timeout", "query.evaluation_interval", "query.max_samples", "query.max_concurrency"]);
    let uri = file(&dir, "typo.yaml", "query:\n  max_sample: 10\n");
    let issues = errors(load(&sources(vec![uri]), env(&[])));
    assert!(issues.iter().any(|(k, m)| k == "query.max_sample" && m.contains("did you mean `query.max_samples`")), "{issues:?}");
}

#[test]
fn history_retention_defaults_parse_and_is_bounded() {
    let sources = |sets: &[&str]| ConfigSources { sets: sets.iter().map(|s| s.to_string()).collect(), ..ConfigSources::default() };
    let defaults = load(&sources(&[]), env(&[])).expect("valid").config.history;
    assert_eq!((defaults.max_revisions, defaults.max_age), (50, Duration::from_secs(30 * 24 * 3600)));
    let tuned = load(&sources(&["rules.history_max_revisions=7", "rules.history_max_age=2h"]), env(&[])).expect("valid").config;
    assert_eq!((tuned.history.max_revisions, tuned.history.max_age), (7, Duration::from_secs(7200)));
    for (bad, key) in [
        ("rules.history_max_revisions=0", "rules.history_max_revisions"),
        ("rules.history_max_revisions=10001", "rules.history_max_revisions"),
        ("rules.history_max_age=0s", "rules.history_max_age"),
    ] {
        let issues = errors(load(&sources(&[bad]), env(&[])));
        assert!(issues.iter().any(|(k, _)| k == key), "{bad}: {issues:?}");
    }
}
