//! End to end over HTTP: the router on 127.0.0.1:0, the desired state in a `MemConfigSource`, and
//! simulated 3.x agents. Each test is a sequence of phases; every heartbeat is driven explicitly,
//! so nothing waits on time.

use std::time::Duration;

use crate::control::agents::model::{AgentGroup, ConfigKind, ContentFormat, InstanceId};
use crate::control::agents::proto;
use crate::api::agents::protocol::DetailDelivery;
use crate::api::agents::service::AgentServiceSettings;
use crate::api::agents::sim::{
    AgentBenchSettings, REAL_AGENT_CAPABILITIES, SimAgent, SimAgentSpec, run_agents,
};
use crate::api::agents::state::ApplyStatus;

use super::{NOW_S, TestServer, command, prod_group};

const NGINX_V1: &str = "inputs:\n  - Type: input_file\n    FilePaths: [/var/log/nginx/access.log]\nflushers:\n  - Type: flusher_stdout\n";
const NGINX_V2: &str = "inputs:\n  - Type: input_file\n    FilePaths: [/var/log/nginx/*.log]\nflushers:\n  - Type: flusher_stdout\n";

fn prod_agent(capabilities: u64) -> SimAgent {
    let mut spec = SimAgentSpec::numbered(7);
    spec.tags = vec![("env".to_string(), "prod".to_string())];
    spec.capabilities = capabilities;
    SimAgent::new(spec, NOW_S)
}

fn held(agent: &SimAgent, name: &str) -> Option<(i64, ApplyStatus)> {
    agent
        .configs(ConfigKind::Pipeline)
        .get(name)
        .map(|h| (h.version, h.status))
}

fn remembered(server: &TestServer, agent: &SimAgent, name: &str) -> Option<(i64, ApplyStatus)> {
    let id = InstanceId::from_wire(agent.instance_id().as_bytes()).expect("sim ids are valid");
    let record = server.service.registry().get(&id)?;
    record
        .pipeline_configs
        .iter()
        .find(|c| c.name == name)
        .map(|c| (c.version, c.status))
}

async fn config_lifecycle(delivery: DetailDelivery) {
    let server = TestServer::start(AgentServiceSettings {
        detail_delivery: delivery,
        ..Default::default()
    })
    .await;
    let client = server.client();
    let source = &server.source;
    let fetching = delivery == DetailDelivery::Fetch;
    let mut agent = prod_agent(REAL_AGENT_CAPABILITIES);

    // Phase 1: a group and a config, not yet applied: the agent registers and gets nothing.
    source.put_group(prod_group()).expect("valid group");
    let v1 = source
        .put_config(ConfigKind::Pipeline, "nginx", NGINX_V1, ContentFormat::Yaml)
        .expect("valid");
    let round = agent.heartbeat(&client, NOW_S).await.expect("heartbeat");
    assert_ne!(
        round.response.flags & proto::RESPONSE_REPORT_FULL_STATE,
        0,
        "a new agent is asked for full state"
    );
    assert_eq!(round.applied, 0);
    assert_eq!(round.fetches, 0);

    // Phase 2: applied to the group: delivered (inline or fetched) as JSON, APPLYING.
    source
        .apply_config(ConfigKind::Pipeline, "nginx", "prod")
        .expect("both exist");
    let round = agent
        .heartbeat(&client, NOW_S + 10)
        .await
        .expect("heartbeat");
    assert_eq!(round.applied, 1);
    assert_eq!(
        round.fetches,
        if fetching { 2 } else { 0 },
        "the 3.x agent calls both fetch paths"
    );
    assert!(round.fetch_errors.is_empty(), "{:?}", round.fetch_errors);
    assert_eq!(held(&agent, "nginx"), Some((v1, ApplyStatus::Applying)));
    let detail = &agent.configs(ConfigKind::Pipeline)["nginx"].detail;
    let json: serde_json::Value = serde_json::from_slice(detail).expect("JSON detail");
    assert_eq!(
        json["inputs"][0]["FilePaths"][0],
        "/var/log/nginx/access.log"
    );

    // Phase 3: the next heartbeat reports APPLIED, and the server remembers it.
    let round = agent
        .heartbeat(&client, NOW_S + 20)
        .await
        .expect("heartbeat");
    assert_eq!(round.applied, 0);
    assert_eq!(round.response.flags, 0, "in order, nothing to fetch");
    assert_eq!(
        remembered(&server, &agent, "nginx"),
        Some((v1, ApplyStatus::Applied))
    );

    // Phase 4: a new version is delivered and applied.
    let v2 = source
        .put_config(ConfigKind::Pipeline, "nginx", NGINX_V2, ContentFormat::Yaml)
        .expect("valid");
    assert_ne!(v1, v2);
    let round = agent
        .heartbeat(&client, NOW_S + 30)
        .await
        .expect("heartbeat");
    assert_eq!(round.applied, 1);
    assert_eq!(held(&agent, "nginx"), Some((v2, ApplyStatus::Applying)));
    agent
        .heartbeat(&client, NOW_S + 40)
        .await
        .expect("heartbeat");
    assert_eq!(
        remembered(&server, &agent, "nginx"),
        Some((v2, ApplyStatus::Applied))
    );

    // Phase 5: removed from the group: the agent is told -1 and deletes it.
    source
        .remove_config_from_group(ConfigKind::Pipeline, "nginx", "prod")
        .expect("exists");
    let round = agent
        .heartbeat(&client, NOW_S + 50)
        .await
        .expect("heartbeat");
    assert_eq!(round.deleted, 1);
    assert_eq!(held(&agent, "nginx"), None);
    let round = agent
        .heartbeat(&client, NOW_S + 60)
        .await
        .expect("heartbeat");
    assert_eq!((round.applied, round.deleted, round.fetches), (0, 0, 0));
    assert_eq!(remembered(&server, &agent, "nginx"), None);
    assert_eq!(server.service.registry().len(), 1);
    assert_eq!(agent.sequence_num(), 7);
}

#[tokio::test]
async fn a_config_is_delivered_updated_and_removed_inline() {
    config_lifecycle(DetailDelivery::Inline).await;
}

#[tokio::test]
async fn a_config_is_delivered_updated_and_removed_through_the_fetch_paths() {
    config_lifecycle(DetailDelivery::Fetch).await;
}

#[tokio::test]
async fn a_onetime_command_is_delivered_and_not_resent_once_reported() {
    let server = TestServer::start(AgentServiceSettings::default()).await;
    let client = server.client();
    server.source.put_group(prod_group()).expect("valid group");
    let mut onetime_agent = prod_agent(REAL_AGENT_CAPABILITIES | proto::AGENT_ACCEPTS_ONETIME);
    let mut plain_agent = prod_agent(REAL_AGENT_CAPABILITIES);

    server
        .source
        .put_command(command("collect-once", "prod", NOW_S + 3600))
        .expect("valid command");
    let round = onetime_agent
        .heartbeat(&client, NOW_S)
        .await
        .expect("heartbeat");
    assert_eq!(round.commands_received, 1);
    assert_eq!(
        onetime_agent.commands()["collect-once"].expire_time_s,
        NOW_S + 3600
    );
    let plain = plain_agent
        .heartbeat(&client, NOW_S)
        .await
        .expect("heartbeat");
    assert!(
        plain.response.onetime_pipeline_config_updates.is_empty(),
        "not advertised, not sent"
    );

    // The agent now reports it; the server stops sending it, on this and later heartbeats.
    for second in [10, 20] {
        let round = onetime_agent
            .heartbeat(&client, NOW_S + second)
            .await
            .expect("heartbeat");
        assert!(round.response.onetime_pipeline_config_updates.is_empty());
    }
    let id = InstanceId::from_wire(onetime_agent.instance_id().as_bytes()).expect("valid");
    let record = server.service.registry().get(&id).expect("held");
    assert_eq!(record.onetime_commands[0].status, ApplyStatus::Applied);
}

#[tokio::test]
async fn a_restarted_agent_is_a_new_instance_and_gets_its_configs_again() {
    let server = TestServer::start(AgentServiceSettings::default()).await;
    let client = server.client();
    server
        .source
        .put_config(
            ConfigKind::Pipeline,
            "all",
            "{\"inputs\":[]}",
            ContentFormat::Json,
        )
        .expect("valid");
    server
        .source
        .apply_config(ConfigKind::Pipeline, "all", "default")
        .expect("exists");
    let mut agent = prod_agent(REAL_AGENT_CAPABILITIES);
    agent.heartbeat(&client, NOW_S).await.expect("heartbeat");
    agent
        .heartbeat(&client, NOW_S + 10)
        .await
        .expect("heartbeat");
    let before = agent.instance_id().to_string();

    agent.restart(NOW_S + 100);
    assert_ne!(agent.instance_id(), before);
    assert!(
        agent
            .instance_id()
            .ends_with(&format!("_10.0.0.7_{}", NOW_S + 100))
    );
    let round = agent
        .heartbeat(&client, NOW_S + 100)
        .await
        .expect("heartbeat");
    assert_ne!(round.response.flags & proto::RESPONSE_REPORT_FULL_STATE, 0);
    assert_eq!(round.applied, 0, "it reloaded the same version from disk");
    assert_eq!(
        server.service.registry().len(),
        2,
        "the old instance stays until it is forgotten"
    );

    let maintained = server.service.maintain().expect("store up");
    assert_eq!((maintained.forgotten, maintained.flushed.upserted), (0, 2));
    assert_eq!(server.store.len(), 2);
    assert_eq!(server.service.agents().len(), 2);
}

#[tokio::test]
async fn run_agents_reports_heartbeats_latency_and_deliveries() {
    let server = TestServer::start(AgentServiceSettings {
        detail_delivery: DetailDelivery::Fetch,
        ..Default::default()
    })
    .await;
    server
        .source
        .put_group(AgentGroup {
            name: "bench".to_string(),
            ..prod_group()
        })
        .expect("valid");
    server
        .source
        .put_config(
            ConfigKind::Pipeline,
            "bench",
            "{\"inputs\":[]}",
            ContentFormat::Json,
        )
        .expect("valid");
    server
        .source
        .apply_config(ConfigKind::Pipeline, "bench", "bench")
        .expect("exists");

    let mut bench = AgentBenchSettings::new(server.addr.to_string(), 5, Duration::from_millis(100));
    bench.duration = Duration::from_millis(350);
    bench.tags = vec![("env".to_string(), "prod".to_string())];
    let report = run_agents(bench).await;
    assert_eq!(report.error_count, 0, "{report}");
    assert!(report.heartbeats_ok >= 10, "{report}");
    assert_eq!(
        report.configs_applied, 5,
        "each agent gets the config once: {report}"
    );
    assert!(
        report.fetches_ok >= 10,
        "two fetch calls per delivery: {report}"
    );
    assert!(report.latency_p50 <= report.latency_p99 && report.latency_p99 <= report.latency_max);
    assert_eq!(server.service.registry().len(), 5);

    let unreachable = run_agents(AgentBenchSettings::new(
        "not a server",
        1,
        Duration::from_millis(10),
    ))
    .await;
    assert_eq!((unreachable.heartbeats_ok, unreachable.error_count), (0, 1));
}
