//! Group matching, detail conversion, liveness, the in-memory source, and the registry's batched
//! persistence.

use std::sync::Arc;

use crate::control::agents::detail::{DetailError, MAX_YAML_DEPTH, to_json_detail};
use crate::api::agents::liveness::{Liveness, LivenessPolicy};
use crate::control::agents::matching::{IpCidr, ValuePattern};
use crate::control::agents::model::AgentIdentity;
use crate::control::agents::model::{
    AgentGroup, AgentTag, ConfigKind, ContentFormat, GroupSelector, InstanceId, TagMatch,
};
use crate::api::agents::registry::{AgentRegistry, RegistryError};
use crate::api::agents::source::{AgentConfigSource, MemConfigSource, SourceError};
use crate::api::agents::state::{AgentRecord, AgentStateStore, MemAgentStateStore};

use super::{NOW_MS, command, prod_group};

fn tags(pairs: &[(&str, &str)]) -> Vec<AgentTag> {
    pairs
        .iter()
        .map(|(n, v)| AgentTag {
            name: n.to_string(),
            value: v.to_string(),
        })
        .collect()
}

fn cidr(text: &str) -> IpCidr {
    text.parse().expect("a valid range")
}

#[test]
fn groups_match_on_tags_wildcards_and_ip_ranges() {
    let prod = tags(&[("env", "prod"), ("app", "nginx-frontend")]);
    let agent = |t: &[AgentTag], ip: &str| (t.to_vec(), ip.parse().ok());
    let matches = |selector: &GroupSelector,
                   (t, ip): &(Vec<AgentTag>, Option<std::net::IpAddr>)| {
        selector.matches(&AgentIdentity { tags: t, ip: *ip })
    };
    let by_tag = |name: &str, value: &str| GroupSelector {
        tags: vec![TagMatch {
            name: name.to_string(),
            value: ValuePattern::new(value),
        }],
        ip_cidrs: vec![],
    };
    let web = agent(&prod, "10.1.2.3");
    assert!(matches(&by_tag("env", "prod"), &web));
    assert!(!matches(&by_tag("env", "staging"), &web));
    assert!(
        !matches(&by_tag("zone", "prod"), &web),
        "the tag name must match too"
    );
    assert!(matches(&by_tag("app", "nginx-*"), &web));
    assert!(matches(&by_tag("app", "*front*"), &web));
    assert!(matches(&by_tag("app", "*"), &web));
    assert!(!matches(&by_tag("app", "apache-*"), &web));

    let in_range = GroupSelector {
        tags: vec![],
        ip_cidrs: vec![cidr("10.1.0.0/16")],
    };
    assert!(matches(&in_range, &web));
    assert!(!matches(&in_range, &agent(&prod, "10.2.0.1")));
    assert!(!matches(&in_range, &agent(&prod, "not-an-ip")));
    let both = GroupSelector {
        ip_cidrs: vec![cidr("10.1.2.3")],
        ..by_tag("env", "prod")
    };
    assert!(matches(&both, &web));
    assert!(!matches(
        &both,
        &agent(&tags(&[("env", "dev")]), "10.1.2.3")
    ));
    assert!(cidr("2001:db8::/32").contains("2001:db8::1".parse().expect("ip")));
    assert!("10.0.0.0/33".parse::<IpCidr>().is_err());

    assert!(
        !matches(&GroupSelector::default(), &web),
        "an empty selector selects nobody"
    );
    let snapshot =
        crate::api::agents::snapshot::ConfigSnapshot::build(vec![prod_group()], vec![], vec![]);
    let none: Vec<AgentTag> = Vec::new();
    let groups = snapshot.groups_of(&AgentIdentity {
        tags: &none,
        ip: None,
    });
    assert_eq!(
        groups.into_iter().collect::<Vec<_>>(),
        vec!["default"],
        "default holds every agent"
    );
}

#[test]
fn detail_checks_json_and_converts_yaml() {
    assert_eq!(
        to_json_detail("{\"a\": 1}", ContentFormat::Json)
            .expect("object")
            .as_ref(),
        b"{\"a\": 1}"
    );
    assert!(matches!(
        to_json_detail("[1]", ContentFormat::Json),
        Err(DetailError::NotAnObject { .. })
    ));
    assert!(matches!(
        to_json_detail("{", ContentFormat::Json),
        Err(DetailError::BadJson { .. })
    ));
    let converted =
        to_json_detail("a: 1\nb: [x, 2.5, null, ~]\n3: yes\n", ContentFormat::Yaml).expect("YAML");
    let value: serde_json::Value = serde_json::from_slice(&converted).expect("JSON");
    assert_eq!(
        value,
        serde_json::json!({"a": 1, "b": ["x", 2.5, null, null], "3": "yes"})
    );
    assert!(matches!(
        to_json_detail("a: [1", ContentFormat::Yaml),
        Err(DetailError::BadYaml { .. })
    ));
    assert!(matches!(
        to_json_detail("- 1\n", ContentFormat::Yaml),
        Err(DetailError::NotAnObject { .. })
    ));
    assert!(matches!(
        to_json_detail("a: &x 1\nb: *x\n", ContentFormat::Yaml),
        Err(DetailError::YamlAlias)
    ));
    assert!(matches!(
        to_json_detail("a: 1\n---\nb: 2\n", ContentFormat::Yaml),
        Err(DetailError::DocumentCount { .. })
    ));
    assert!(matches!(
        to_json_detail("a: .nan\n", ContentFormat::Yaml),
        Err(DetailError::NoJsonEquivalent { .. })
    ));
    let deep = format!(
        "a: {}{}",
        "[".repeat(MAX_YAML_DEPTH + 1),
        "]".repeat(MAX_YAML_DEPTH + 1)
    );
    assert!(matches!(
        to_json_detail(&deep, ContentFormat::Yaml),
        Err(DetailError::TooDeep)
    ));
}

#[test]
fn liveness_follows_missed_intervals_and_retention() {
    let policy = LivenessPolicy::default();
    assert_eq!(
        (policy.heartbeat_interval_ms, policy.missed_intervals),
        (10_000, 3)
    );
    assert_eq!(policy.retention_ms, 12 * 3600 * 1000);
    let last = NOW_MS;
    assert_eq!(policy.liveness(last, last), Liveness::Online);
    assert_eq!(policy.liveness(last, last + 29_999), Liveness::Online);
    assert_eq!(policy.liveness(last, last + 30_000), Liveness::Offline);
    assert_eq!(
        policy.liveness(last, last + policy.retention_ms - 1),
        Liveness::Offline
    );
    assert_eq!(
        policy.liveness(last, last + policy.retention_ms),
        Liveness::Forgotten
    );
    assert_eq!(
        policy.liveness(last + 5_000, last),
        Liveness::Online,
        "a stamp from the future counts as now"
    );
}

#[test]
fn mem_source_assigns_versions_that_change_with_content_and_are_never_reused() {
    let source = MemConfigSource::new();
    let v1 = source
        .put_config(ConfigKind::Pipeline, "p", "a: 1\n", ContentFormat::Yaml)
        .expect("valid");
    let same = source
        .put_config(ConfigKind::Pipeline, "p", "a: 1\n", ContentFormat::Yaml)
        .expect("valid");
    assert_eq!(v1, same, "unchanged content keeps its version");
    let v2 = source
        .put_config(ConfigKind::Pipeline, "p", "a: 2\n", ContentFormat::Yaml)
        .expect("valid");
    assert_ne!(v1, v2);
    source
        .remove_config(ConfigKind::Pipeline, "p")
        .expect("exists");
    let v3 = source
        .put_config(ConfigKind::Pipeline, "p", "a: 1\n", ContentFormat::Yaml)
        .expect("valid");
    assert!(![v1, v2, 0, -1].contains(&v3));

    assert!(matches!(
        source.remove_group("default"),
        Err(SourceError::DefaultGroupFixed)
    ));
    assert!(
        source
            .put_config(ConfigKind::Pipeline, "../etc", "{}", ContentFormat::Json)
            .is_err()
    );
    assert!(
        source
            .put_config(ConfigKind::Pipeline, "bad", "a: [", ContentFormat::Yaml)
            .is_err()
    );
    assert!(matches!(
        source.apply_config(ConfigKind::Pipeline, "p", "nope"),
        Err(SourceError::GroupNotFound { .. })
    ));
    assert!(
        source
            .put_group(AgentGroup {
                selector: GroupSelector::default(),
                ..prod_group()
            })
            .is_err()
    );
    assert!(
        source.put_command(command("c", "default", 0)).is_err(),
        "expire_time must be set"
    );

    let before = source.snapshot().expect("snapshot");
    assert!(
        Arc::ptr_eq(&before, &source.snapshot().expect("snapshot")),
        "cached until a change"
    );
    source.put_group(prod_group()).expect("valid group");
    assert!(!Arc::ptr_eq(&before, &source.snapshot().expect("snapshot")));
}

fn record(id: &str, last_heartbeat_ms: u64) -> AgentRecord {
    let mut record = AgentRecord::new(
        InstanceId::from_wire(id.as_bytes()).expect("valid id"),
        last_heartbeat_ms,
    );
    record.agent_type = "LoongCollector".to_string();
    record
}

#[test]
fn registry_flushes_dirty_agents_in_one_batch_and_loads_them_back() {
    let store = Arc::new(MemAgentStateStore::new());
    let registry = AgentRegistry::load(store.clone(), 100).expect("loads");
    for i in 0..5 {
        registry
            .upsert(record(&format!("agent-{i}"), NOW_MS))
            .expect("room");
    }
    assert_eq!(registry.dirty_count(), 5);
    let report = registry.flush().expect("store up");
    assert_eq!(
        (report.upserted, store.batches_written(), store.len()),
        (5, 1, 5)
    );
    assert_eq!(registry.flush().expect("nothing to do").upserted, 0);
    assert_eq!(
        store.batches_written(),
        1,
        "a clean registry writes nothing"
    );

    store.set_failing(true);
    registry
        .upsert(record("agent-0", NOW_MS + 1))
        .expect("room");
    assert!(matches!(registry.flush(), Err(RegistryError::Store(_))));
    assert_eq!(
        registry.dirty_count(),
        1,
        "a failed flush keeps the change for the next one"
    );
    store.set_failing(false);
    registry.flush().expect("store back");
    let id = InstanceId::from_wire(b"agent-0").expect("valid id");
    assert_eq!(
        store.get(&id).map(|r| r.last_heartbeat_ms),
        Some(NOW_MS + 1)
    );

    let reloaded = AgentRegistry::load(store.clone(), 100).expect("loads");
    assert_eq!(reloaded.len(), 5);
    assert_eq!(store.load_all().expect("readable").len(), 5);
}

#[test]
fn registry_forgets_expired_agents_and_refuses_beyond_its_cap() {
    let store = Arc::new(MemAgentStateStore::new());
    let registry = AgentRegistry::load(store.clone(), 2).expect("loads");
    let policy = LivenessPolicy::default();
    registry
        .upsert(record("old", NOW_MS - policy.retention_ms))
        .expect("room");
    registry.upsert(record("fresh", NOW_MS)).expect("room");
    assert!(matches!(
        registry.upsert(record("third", NOW_MS)),
        Err(RegistryError::Full { .. })
    ));
    registry
        .upsert(record("fresh", NOW_MS + 1))
        .expect("an update of a held agent is always allowed");
    registry.flush().expect("store up");

    let forgotten = registry.forget_expired(NOW_MS, &policy);
    assert_eq!(
        forgotten,
        vec![InstanceId::from_wire(b"old").expect("valid id")]
    );
    let report = registry.flush().expect("store up");
    assert_eq!((report.upserted, report.removed, store.len()), (0, 1, 1));
    registry
        .upsert(record("third", NOW_MS))
        .expect("room again");
}
