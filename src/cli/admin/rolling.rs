//! `hotrule rule roll status [--catalog C --name N] [--watch]`: the rolls a node holds, each as
//! a progress bar, its state line and one line per node. With `--watch` it redraws every
//! interval until no roll is in progress. The answer's shape is `rolling::view::RollView`.
//!
//! The writes: `hotrule rule push … --rolling [--step-timeout 5m --health-window 30s
//! --health-checks evalErrors,values]` ([`push_rolling`]) and `hotrule rule roll
//! rollback|force-commit --catalog C --name N` ([`end`]); each prints the answer's line and the
//! roll as `status` draws it.

use std::time::Duration;

use super::rule::{CliError, check};
use crate::api::client::{AdminClient, with_query};
use crate::control::rolling::view::RollView;

/// The width of the progress bar, in cells.
const BAR_CELLS: usize = 30;

/// Which rolls to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RollQuery {
    All,
    One { catalog: String, name: String },
}

/// Prints the rolls once, or with `watch` every `interval` until none is in progress.
pub async fn status(client: &AdminClient, query: &RollQuery, watch: Option<Duration>, json: bool) -> Result<(), CliError> {
    status_into(client, query, watch, json, |text| println!("{text}")).await
}

/// [`status`], handing each rendering (or JSON answer) to `out` instead of stdout.
pub async fn status_into(
    client: &AdminClient,
    query: &RollQuery,
    watch: Option<Duration>,
    json: bool,
    mut out: impl FnMut(&str),
) -> Result<(), CliError> {
    loop {
        let (text, rolls) = fetch(client, query).await?;
        out(&if json { text } else { render(&rolls) + "\n" });
        let Some(interval) = watch else { return Ok(()) };
        if !rolls.iter().any(|r| r.state == "in_progress") {
            return Ok(());
        }
        tokio::time::sleep(interval).await;
    }
}

async fn fetch(client: &AdminClient, query: &RollQuery) -> Result<(String, Vec<RollView>), CliError> {
    let path = match query {
        RollQuery::All => "/runtime/rule/rolling".to_string(),
        RollQuery::One { catalog, name } => {
            with_query("/runtime/rule/rolling", &[("catalog", catalog.as_str()), ("name", name.as_str())])
        }
    };
    let reply = check(client.get(&path).await?)?;
    let text = reply.text();
    let unreadable = |e: serde_json::Error| CliError::Server {
        status: reply.status.as_u16(),
        apply_status: String::new(),
        message: format!("the answer is not a roll view: {e}"),
    };
    let rolls = match query {
        RollQuery::All => {
            #[derive(serde::Deserialize)]
            struct All {
                rolls: Vec<RollView>,
            }
            serde_json::from_slice::<All>(&reply.body).map_err(unreadable)?.rolls
        }
        RollQuery::One { .. } => vec![serde_json::from_slice::<RollView>(&reply.body).map_err(unreadable)?],
    };
    Ok((text, rolls))
}

/// The optional settings of a rolling push (each as the server parses it: `5m`, `30s`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RollingPush {
    pub step_timeout: Option<String>,
    pub health_window: Option<String>,
    pub health_checks: Option<String>,
}

/// `hotrule rule push … --rolling`: `addOrUpdate?rollout=rolling`.
pub async fn push_rolling(
    client: &AdminClient,
    catalog: &str,
    name: &str,
    file: &std::path::Path,
    allow_storage_change: bool,
    force: bool,
    settings: &RollingPush,
) -> Result<(), CliError> {
    let content =
        std::fs::read(file).map_err(|source| CliError::ReadFile { path: file.display().to_string(), source })?;
    let mut pairs = vec![
        ("catalog", catalog),
        ("name", name),
        ("rollout", "rolling"),
        ("allowStorageChange", if allow_storage_change { "true" } else { "false" }),
        ("force", if force { "true" } else { "false" }),
    ];
    for (param, value) in [
        ("stepTimeout", &settings.step_timeout),
        ("healthWindow", &settings.health_window),
        ("healthChecks", &settings.health_checks),
    ] {
        if let Some(value) = value {
            pairs.push((param, value.as_str()));
        }
    }
    let reply = check(client.post(&with_query("/runtime/rule/addOrUpdate", &pairs), content).await?)?;
    println!("{}", answer_text(&reply.json().unwrap_or_default()));
    Ok(())
}

/// The operator's end of a roll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RollEnd {
    Rollback,
    ForceCommit,
}

/// `hotrule rule roll rollback|force-commit`.
pub async fn end(client: &AdminClient, catalog: &str, name: &str, how: RollEnd) -> Result<(), CliError> {
    let route = match how {
        RollEnd::Rollback => "/runtime/rule/rollback-rolling",
        RollEnd::ForceCommit => "/runtime/rule/force-commit-rolling",
    };
    let reply = check(client.post(&with_query(route, &[("catalog", catalog), ("name", name)]), Vec::new()).await?)?;
    println!("{}", answer_text(&reply.json().unwrap_or_default()));
    Ok(())
}

/// A roll write's answer as text: `applyStatus catalog/name: message`, then the roll.
pub fn answer_text(json: &serde_json::Value) -> String {
    let s = |field: &str| json[field].as_str().unwrap_or("").to_string();
    let mut text = format!("{} {}/{}: {}", s("applyStatus"), s("catalog"), s("name"), s("message"));
    if let Ok(view) = serde_json::from_value::<RollView>(json["roll"].clone()) {
        text.push('\n');
        text.push_str(&render_one(&view));
    }
    text
}

/// Every roll, as text.
pub fn render(rolls: &[RollView]) -> String {
    if rolls.is_empty() {
        return "no rolls".to_string();
    }
    rolls.iter().map(render_one).collect::<Vec<_>>().join("\n\n")
}

fn render_one(roll: &RollView) -> String {
    let mut out = format!(
        "{}/{} {} {:>3}% {}\n  {}",
        roll.catalog,
        roll.name,
        bar(roll.percent_done),
        roll.percent_done,
        roll.state,
        roll.status
    );
    out.push_str(&format!(
        "\n  started {} updated {} rolling {}",
        crate::base::clock::iso8601(roll.started_at_ms),
        crate::base::clock::iso8601(roll.updated_at_ms),
        roll.rolling_hash.chars().take(12).collect::<String>()
    ));
    for node in &roll.nodes {
        let marker = if roll.node_at_index.as_deref() == Some(node.node.as_str()) { '>' } else { ' ' };
        let mut line = format!("\n  {marker} {:>2}. {} {} ({})", node.position + 1, node.node, node.state, node.content);
        if let Some(tries) = node.tries {
            line.push_str(&format!(" tries={tries}"));
        }
        if let Some(reason) = &node.reason {
            line.push_str(&format!(": {reason}"));
        }
        out.push_str(&line);
    }
    out
}

/// `[#########.....]` for `percent` (clamped to 100).
pub fn bar(percent: u8) -> String {
    let filled = usize::from(percent.min(100)) * BAR_CELLS / 100;
    format!("[{}{}]", "#".repeat(filled), ".".repeat(BAR_CELLS - filled))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::ids::{Catalog, NodeId, Revision, RuleKey, RuleName};
    use crate::control::rolling::{HealthFailure, HealthSettings, NodeState, RollRecord, StartRoll};

    #[test]
    fn the_bar_fills_with_the_percent() {
        assert_eq!(bar(0), format!("[{}]", ".".repeat(BAR_CELLS)));
        assert_eq!(bar(50), format!("[{}{}]", "#".repeat(15), ".".repeat(15)));
        assert_eq!(bar(100), format!("[{}]", "#".repeat(BAR_CELLS)));
        assert_eq!(bar(250), bar(100));
    }

    #[test]
    fn a_roll_renders_its_bar_status_and_nodes() {
        let mut record = RollRecord::start(StartRoll {
            key: RuleKey::new(Catalog::Lal, RuleName::parse("envoy-als").expect("name")),
            master: Some(b"a".to_vec()),
            rolling: b"b".to_vec(),
            nodes: ["n1", "n2", "n3"].iter().map(|n| NodeId(n.to_string())).collect(),
            step_timeout_ms: 60_000,
            health: HealthSettings::default(),
            now_ms: 0,
            revision: Revision::zero(),
        })
        .expect("start");
        record.index = 1;
        record.nodes[0].state = NodeState::Healthy { at_ms: 1 };
        record.nodes[1].state = NodeState::Unreachable { since_ms: 2, tries: 2 };
        record.nodes[2].state = NodeState::Pending;
        let text = render(&[RollView::of(&record)]);
        assert!(text.starts_with(&format!("lal/envoy-als {}  33% in_progress", bar(33))), "{text}");
        assert!(text.contains("applying to \"n2\" (next will be \"n3\")"), "{text}");
        assert!(text.contains("     1. n1 healthy (rolling)"), "{text}");
        assert!(text.contains("  >  2. n2 unreachable (rolling) tries=2"), "{text}");
        assert!(text.contains("     3. n3 pending (master)"), "{text}");
        record.nodes[1].state = NodeState::Unhealthy { since_ms: 3, reason: HealthFailure::DispatchNotRunning };
        assert!(render(&[RollView::of(&record)]).contains("n2 unhealthy (rolling): dispatch is not running"));
        assert_eq!(render(&[]), "no rolls");
    }
}
