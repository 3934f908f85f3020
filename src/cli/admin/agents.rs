//! `hotrule agent ...`, `hotrule agent-config ...`, `hotrule agent-group ...`: the operator's CLI
//! over the agent management API. Failures print the server's applyStatus and message.

use std::path::Path;

use serde_json::{Value, json};

use super::rule::{CliError, check, table};
use crate::api::client::{AdminClient, with_query};

fn print_outcome(reply: &crate::api::client::Reply) {
    let body = reply.json().unwrap_or(Value::Null);
    let mut line = format!(
        "{} {}/{}: {}",
        body["applyStatus"].as_str().unwrap_or("?"),
        body["catalog"].as_str().unwrap_or(""),
        body["name"].as_str().unwrap_or(""),
        body["message"].as_str().unwrap_or("")
    );
    if let Some(version) = body["version"]
        .as_i64()
        .filter(|_| !line.contains("version"))
    {
        line.push_str(&format!(" (version {version})"));
    }
    println!("{line}");
}

fn print_json(reply: &crate::api::client::Reply) {
    let body = reply.json().unwrap_or(Value::Null);
    println!(
        "{}",
        serde_json::to_string_pretty(&body).unwrap_or_default()
    );
}

fn cell(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

pub async fn list_agents(
    client: &AdminClient,
    group: Option<&str>,
    status: Option<&str>,
    offline: Option<bool>,
    json_out: bool,
) -> Result<(), CliError> {
    let offline_text = offline.map(|o| o.to_string());
    let mut pairs = Vec::new();
    if let Some(group) = group {
        pairs.push(("group", group));
    }
    if let Some(status) = status {
        pairs.push(("status", status));
    }
    if let Some(offline) = offline_text.as_deref() {
        pairs.push(("offline", offline));
    }
    let reply = check(client.get(&with_query("/agent/agents", &pairs)).await?)?;
    if json_out {
        print_json(&reply);
        return Ok(());
    }
    let body = reply.json().unwrap_or(Value::Null);
    let rows: Vec<Vec<String>> = body["agents"]
        .as_array()
        .map(|agents| {
            agents
                .iter()
                .map(|a| {
                    vec![
                        cell(&a["instance_id"]),
                        cell(&a["attributes"]["ip"]),
                        cell(&a["attributes"]["hostname"]),
                        cell(&a["liveness"]),
                        cell(&a["running_status"]),
                        cell(&a["node"]),
                        a["groups"]
                            .as_array()
                            .map(|g| g.iter().map(cell).collect::<Vec<_>>().join(","))
                            .unwrap_or_default(),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    print!(
        "{}",
        table(
            &[
                "INSTANCE", "IP", "HOST", "LIVENESS", "STATUS", "NODE", "GROUPS"
            ],
            &rows
        )
    );
    if let Some(unreachable) = body["unreachableNodes"]
        .as_array()
        .filter(|u| !u.is_empty())
    {
        eprintln!("unreachable nodes: {unreachable:?}");
    }
    Ok(())
}

pub async fn show_agent(client: &AdminClient, instance_id: &str) -> Result<(), CliError> {
    let reply = check(
        client
            .get(&format!("/agent/agents/{}", encode_segment(instance_id)))
            .await?,
    )?;
    print_json(&reply);
    Ok(())
}

pub async fn push_config(
    client: &AdminClient,
    kind: &str,
    name: &str,
    file: &Path,
    format: Option<&str>,
) -> Result<(), CliError> {
    let content = std::fs::read_to_string(file).map_err(|source| CliError::ReadFile {
        path: file.display().to_string(),
        source,
    })?;
    let format = format.unwrap_or_else(|| match file.extension().and_then(|e| e.to_str()) {
        Some("json") => "json",
        _ => "yaml",
    });
    let body = json!({"kind": kind, "name": name, "content": content, "format": format});
    let reply = check(
        client
            .post("/agent/configs", body.to_string().into_bytes())
            .await?,
    )?;
    print_outcome(&reply);
    Ok(())
}

pub async fn apply_config(
    client: &AdminClient,
    kind: &str,
    name: &str,
    group: &str,
    remove: bool,
) -> Result<(), CliError> {
    let verb = if remove { "remove" } else { "apply" };
    let path = with_query(
        &format!(
            "/agent/configs/{}/{}/{verb}",
            encode_segment(kind),
            encode_segment(name)
        ),
        &[("group", group)],
    );
    let reply = check(client.post(&path, Vec::new()).await?)?;
    print_outcome(&reply);
    Ok(())
}

pub async fn config_status(
    client: &AdminClient,
    kind: &str,
    name: &str,
    json_out: bool,
) -> Result<(), CliError> {
    let path = format!(
        "/agent/configs/{}/{}/status",
        encode_segment(kind),
        encode_segment(name)
    );
    let reply = check(client.get(&path).await?)?;
    if json_out {
        print_json(&reply);
        return Ok(());
    }
    let body = reply.json().unwrap_or(Value::Null);
    println!(
        "{} {} version {} groups {}",
        cell(&body["kind"]),
        cell(&body["name"]),
        cell(&body["version"]),
        body["groups"]
    );
    let mut rows = Vec::new();
    if let Some(states) = body["agents"].as_object() {
        for (state, agents) in states {
            for agent in agents.as_array().into_iter().flatten() {
                rows.push(vec![
                    state.clone(),
                    cell(&agent["instanceId"]),
                    cell(&agent["node"]),
                    cell(&agent["reportedVersion"]),
                    cell(&agent["message"]),
                ]);
            }
        }
    }
    print!(
        "{}",
        table(&["STATE", "INSTANCE", "NODE", "REPORTED", "MESSAGE"], &rows)
    );
    Ok(())
}

pub async fn create_group(
    client: &AdminClient,
    name: &str,
    description: &str,
    tags: &[(String, String)],
    ip_cidrs: &[String],
) -> Result<(), CliError> {
    let tags: Vec<Value> = tags
        .iter()
        .map(|(n, v)| json!({"name": n, "value": v}))
        .collect();
    let body = json!({"name": name, "description": description, "selector": {"tags": tags, "ip_cidrs": ip_cidrs}});
    let reply = check(
        client
            .post("/agent/groups", body.to_string().into_bytes())
            .await?,
    )?;
    print_outcome(&reply);
    Ok(())
}

pub async fn list_groups(client: &AdminClient, json_out: bool) -> Result<(), CliError> {
    let reply = check(client.get("/agent/groups").await?)?;
    if json_out {
        print_json(&reply);
        return Ok(());
    }
    let body = reply.json().unwrap_or(Value::Null);
    let rows: Vec<Vec<String>> = body["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| {
            let tags: Vec<String> = g["selector"]["tags"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| format!("{}={}", cell(&t["name"]), cell(&t["value"])))
                .collect();
            let cidrs: Vec<String> = g["selector"]["ip_cidrs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(cell)
                .collect();
            vec![
                cell(&g["name"]),
                tags.join(","),
                cidrs.join(","),
                cell(&g["description"]),
            ]
        })
        .collect();
    print!(
        "{}",
        table(&["NAME", "TAGS", "IP RANGES", "DESCRIPTION"], &rows)
    );
    Ok(())
}

pub async fn delete_group(client: &AdminClient, name: &str) -> Result<(), CliError> {
    let reply = check(
        client
            .delete(&format!("/agent/groups/{}", encode_segment(name)))
            .await?,
    )?;
    print_outcome(&reply);
    Ok(())
}

/// Percent-encodes one path segment.
fn encode_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
