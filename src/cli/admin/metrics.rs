//! `hotrule metrics list|query`: stored metric values through `/query/metrics*`, as tables (or
//! the answer's JSON with `--json`). Nodes left out of a cluster-wide read are named on stderr.

use serde_json::Value;

use super::rule::{CliError, check, table};
use crate::api::client::{AdminClient, with_query};

#[derive(clap::Subcommand, Debug)]
pub enum MetricsCommand {
    /// The metrics with stored values: name, scope, storage function.
    List {
        /// Every live node's metrics, not only this node's.
        #[arg(long)]
        cluster: bool,
        #[arg(long)]
        json: bool,
    },
    /// The values of one metric, one row per entity and bucket.
    Query {
        #[arg(long)]
        name: String,
        #[arg(long)]
        service: Option<String>,
        #[arg(long)]
        instance: Option<String>,
        #[arg(long)]
        endpoint: Option<String>,
        /// Epoch ms, RFC 3339, or `yyyy-MM-dd HHmm` (UTC); default: 30 steps before --end.
        #[arg(long)]
        start: Option<String>,
        /// As --start; default: now.
        #[arg(long)]
        end: Option<String>,
        /// MINUTE, HOUR or DAY.
        #[arg(long, default_value = "MINUTE")]
        step: String,
        /// Merge every live node's values (each node stores what it evaluated).
        #[arg(long)]
        cluster: bool,
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(client: &AdminClient, command: MetricsCommand) -> Result<(), CliError> {
    match command {
        MetricsCommand::List { cluster, json } => {
            let reply = check(client.get(&with_query("/query/metrics/list", &[("cluster", bool_text(cluster))])).await?)?;
            if json {
                println!("{}", reply.text());
                return Ok(());
            }
            let body = reply.json().unwrap_or(Value::Null);
            print!("{}", render_list(&body));
            warn_partial(&body);
            Ok(())
        }
        MetricsCommand::Query { name, service, instance, endpoint, start, end, step, cluster, json } => {
            let mut pairs = vec![("name", name.as_str()), ("step", step.as_str()), ("cluster", bool_text(cluster))];
            for (key, value) in [("service", &service), ("instance", &instance), ("endpoint", &endpoint), ("start", &start), ("end", &end)] {
                if let Some(value) = value {
                    pairs.push((key, value.as_str()));
                }
            }
            let reply = check(client.get(&with_query("/query/metrics", &pairs)).await?)?;
            if json {
                println!("{}", reply.text());
                return Ok(());
            }
            let body = reply.json().unwrap_or(Value::Null);
            print!("{}", render_query(&body));
            warn_partial(&body);
            Ok(())
        }
    }
}

fn bool_text(flag: bool) -> &'static str {
    if flag { "true" } else { "false" }
}

fn warn_partial(body: &Value) {
    for missing in body["partial"].as_array().into_iter().flatten() {
        eprintln!(
            "partial: node {} left out: {}",
            missing["node"].as_str().unwrap_or("?"),
            missing["reason"].as_str().unwrap_or("")
        );
    }
}

/// The list answer as a table.
pub fn render_list(body: &Value) -> String {
    let rows: Vec<Vec<String>> = body["metrics"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let s = |k: &str| m[k].as_str().unwrap_or("").to_string();
            vec![s("name"), s("scope"), s("function")]
        })
        .collect();
    table(&["NAME", "SCOPE", "FUNCTION"], &rows)
}

/// The entity's names, `service/instance/endpoint` style, for a table cell.
fn entity_cell(entity: &Value) -> String {
    let keys = [
        "service", "service_instance", "endpoint", "process", "source_service", "source_service_instance", "dest_service",
        "dest_service_instance", "detect_point",
    ];
    let parts: Vec<String> = keys
        .iter()
        .filter_map(|k| entity[*k].as_str().map(|v| format!("{k}={v}")))
        .collect();
    parts.join(" ")
}

/// The query answer as a table: one row per entity and bucket.
pub fn render_query(body: &Value) -> String {
    let mut rows = Vec::new();
    for series in body["series"].as_array().into_iter().flatten() {
        let entity = entity_cell(&series["entity"]);
        for point in series["points"].as_array().into_iter().flatten() {
            let time = point["time"].as_u64().map(crate::base::clock::iso8601).unwrap_or_default();
            let value = match &point["value"] {
                Value::Number(n) => n.to_string(),
                other => other.to_string(),
            };
            rows.push(vec![time, point["bucket"].to_string(), entity.clone(), value]);
        }
    }
    table(&["TIME", "BUCKET", "ENTITY", "VALUE"], &rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_render_rows_per_entity_and_bucket() {
        let body = json!({"series": [{"entity": {"scope": "SERVICE", "service": "a"}, "points": [
            {"bucket": 202_501_011_200i64, "time": 1_735_732_800_000i64, "value": 4},
            {"bucket": 202_501_011_201i64, "time": 1_735_732_860_000i64, "value": {"k=v": 1}},
        ]}]});
        let text = render_query(&body);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[1].contains("2025-01-01T12:00:00.000Z") && lines[1].contains("service=a") && lines[1].ends_with('4'), "{text}");
        assert!(lines[2].ends_with("{\"k=v\":1}"), "{text}");
        let list = render_list(&json!({"metrics": [{"name": "m", "scope": "SERVICE", "function": "avgLabeled"}]}));
        assert_eq!(list.lines().nth(1), Some("m     SERVICE  avgLabeled"));
    }
}
