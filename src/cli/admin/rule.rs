//! `hotrule rule ...`: the operator's CLI over the admin API. On failure it prints the
//! server's applyStatus and message and exits non-zero.

use std::path::Path;

use serde_json::Value;

use crate::api::client::{AdminClient, Reply, with_query};

/// A CLI failure, printed as one line on stderr.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Client(#[from] crate::api::client::ClientError),
    #[error("{status} {apply_status}: {message}")]
    Server { status: u16, apply_status: String, message: String },
    #[error("reading {path}: {source}")]
    ReadFile { path: String, source: std::io::Error },
    #[error("writing {path}: {source}")]
    WriteFile { path: String, source: std::io::Error },
}

pub(crate) fn check(reply: Reply) -> Result<Reply, CliError> {
    if reply.status.is_success() || reply.status.as_u16() == 304 {
        return Ok(reply);
    }
    let json = reply.json().unwrap_or(Value::Null);
    Err(CliError::Server {
        status: reply.status.as_u16(),
        apply_status: json["applyStatus"].as_str().unwrap_or("").to_string(),
        message: json["message"].as_str().map(str::to_string).unwrap_or_else(|| reply.text()),
    })
}

fn print_outcome(reply: &Reply) {
    let json = reply.json().unwrap_or(Value::Null);
    let apply_id = json["applyId"].as_str().map(|id| format!(" (applyId {id})")).unwrap_or_default();
    println!(
        "{} {}/{}: {}{apply_id}",
        json["applyStatus"].as_str().unwrap_or("?"),
        json["catalog"].as_str().unwrap_or(""),
        json["name"].as_str().unwrap_or(""),
        json["message"].as_str().unwrap_or("")
    );
}

/// What `hotrule rule status` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusQuery {
    ApplyId(String),
    Rule { catalog: String, name: String, content_hash: Option<String> },
}

/// `hotrule rule status`: one readable line (or the answer's JSON with `--json`).
pub async fn status(client: &AdminClient, query: &StatusQuery, json: bool) -> Result<(), CliError> {
    let path = match query {
        StatusQuery::ApplyId(id) => with_query("/runtime/rule/status", &[("applyId", id)]),
        StatusQuery::Rule { catalog, name, content_hash } => {
            let mut pairs = vec![("catalog", catalog.as_str()), ("name", name.as_str())];
            if let Some(hash) = content_hash {
                pairs.push(("contentHash", hash.as_str()));
            }
            with_query("/runtime/rule/status", &pairs)
        }
    };
    let reply = check(client.get(&path).await?)?;
    if json {
        println!("{}", reply.text());
    } else {
        println!("{}", render_status(&reply.json().unwrap_or(Value::Null)));
    }
    Ok(())
}

/// A status answer as one line: phase, file, applyId, short hash, who answered, and why when
/// it failed, is degraded, was derived from storage, or was not found.
pub fn render_status(body: &Value) -> String {
    let s = |k: &str| body[k].as_str().unwrap_or("");
    let mut line = s("phase").to_string();
    if !s("catalog").is_empty() || !s("name").is_empty() {
        line.push_str(&format!(" {}/{}", s("catalog"), s("name")));
    }
    if !s("applyId").is_empty() {
        line.push_str(&format!(" applyId={}", s("applyId")));
    }
    if !s("contentHash").is_empty() {
        line.push_str(&format!(" hash={}", s("contentHash").chars().take(12).collect::<String>()));
    }
    if let Some(updated) = body["updatedAtMs"].as_u64() {
        line.push_str(&format!(" updated={}", crate::base::clock::iso8601(updated)));
    }
    if !s("servedBy").is_empty() {
        line.push_str(&format!(" servedBy={}", s("servedBy")));
    }
    if body["found"] == false {
        line.push_str(" (not found)");
    }
    if !s("derivedFrom").is_empty() {
        line.push_str(&format!(" derivedFrom={}", s("derivedFrom")));
    }
    if !s("failureReason").is_empty() {
        line.push_str(&format!(": {}", s("failureReason")));
    }
    if !s("note").is_empty() {
        line.push_str(&format!(" [{}]", s("note")));
    }
    line
}

pub async fn push(
    client: &AdminClient,
    catalog: &str,
    name: &str,
    file: &Path,
    allow_storage_change: bool,
    force: bool,
) -> Result<(), CliError> {
    let content = std::fs::read(file).map_err(|source| CliError::ReadFile { path: file.display().to_string(), source })?;
    let path = with_query(
        "/runtime/rule/addOrUpdate",
        &[
            ("catalog", catalog),
            ("name", name),
            ("allowStorageChange", if allow_storage_change { "true" } else { "false" }),
            ("force", if force { "true" } else { "false" }),
        ],
    );
    let reply = check(client.post(&path, content).await?)?;
    print_outcome(&reply);
    Ok(())
}

pub async fn inactivate(client: &AdminClient, catalog: &str, name: &str) -> Result<(), CliError> {
    let path = with_query("/runtime/rule/inactivate", &[("catalog", catalog), ("name", name)]);
    let reply = check(client.post(&path, Vec::new()).await?)?;
    print_outcome(&reply);
    Ok(())
}

pub async fn delete(client: &AdminClient, catalog: &str, name: &str, revert_to_bundled: bool) -> Result<(), CliError> {
    let mode = if revert_to_bundled { "revertToBundled" } else { "" };
    let path = with_query("/runtime/rule/delete", &[("catalog", catalog), ("name", name), ("mode", mode)]);
    let reply = check(client.post(&path, Vec::new()).await?)?;
    print_outcome(&reply);
    Ok(())
}

pub async fn get(client: &AdminClient, catalog: &str, name: &str, bundled: bool, json: bool) -> Result<(), CliError> {
    let source = if bundled { "bundled" } else { "runtime" };
    let path = with_query("/runtime/rule", &[("catalog", catalog), ("name", name), ("source", source)]);
    let accept = json.then_some("application/json");
    let reply = check(client.send(hyper::Method::GET, &path, Vec::new(), accept).await?)?;
    print!("{}", reply.text());
    if json {
        println!();
    }
    Ok(())
}

pub async fn list(client: &AdminClient, catalog: Option<&str>, json: bool) -> Result<(), CliError> {
    let path = match catalog {
        Some(c) => with_query("/runtime/rule/list", &[("catalog", c)]),
        None => "/runtime/rule/list".to_string(),
    };
    let reply = check(client.get(&path).await?)?;
    if json {
        println!("{}", reply.text());
        return Ok(());
    }
    let body = reply.json().unwrap_or(Value::Null);
    print!("{}", render_table(&body));
    Ok(())
}

/// `hotrule rule layers`: the runtime layers (and with `built_in` the built-in ones too).
pub async fn layers(client: &AdminClient, built_in: bool, json: bool) -> Result<(), CliError> {
    let path = if built_in { "/runtime/layers?builtIn=true" } else { "/runtime/layers" };
    let reply = check(client.get(path).await?)?;
    if json {
        println!("{}", reply.text());
        return Ok(());
    }
    print!("{}", render_layers(&reply.json().unwrap_or(Value::Null)));
    Ok(())
}

/// The layers answer as a fixed-width table.
pub fn render_layers(body: &Value) -> String {
    let rows: Vec<Vec<String>> = body["layers"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|l| {
            let by: Vec<&str> = l["declaredBy"].as_array().map_or(Vec::new(), |a| a.iter().filter_map(Value::as_str).collect());
            vec![
                l["name"].as_str().unwrap_or("").to_string(),
                l["ordinal"].to_string(),
                l["normal"].to_string(),
                l["source"].as_str().unwrap_or("").to_string(),
                by.join(","),
            ]
        })
        .collect();
    table(&["NAME", "ORDINAL", "NORMAL", "SOURCE", "DECLARED BY"], &rows)
}

/// The list envelope as a fixed-width table.
pub fn render_table(body: &Value) -> String {
    let rows: Vec<Vec<String>> = body["rules"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
            let updated = r["updateTime"].as_u64().map(crate::base::clock::iso8601).unwrap_or_default();
            vec![s("catalog"), s("name"), s("status"), s("localState"), s("suspendOrigin"), s("contentHash").chars().take(12).collect(), updated, s("lastApplyError")]
        })
        .collect();
    table(&["CATALOG", "NAME", "STATUS", "LOCAL", "ORIGIN", "HASH", "UPDATED", "ERROR"], &rows)
}

pub async fn dump(client: &AdminClient, catalog: Option<&str>, output: &Path) -> Result<(), CliError> {
    let path = match catalog {
        Some(c) => format!("/runtime/rule/dump/{c}"),
        None => "/runtime/rule/dump".to_string(),
    };
    let reply = check(client.get(&path).await?)?;
    std::fs::write(output, &reply.body).map_err(|source| CliError::WriteFile { path: output.display().to_string(), source })?;
    eprintln!("wrote {} bytes to {}", reply.body.len(), output.display());
    Ok(())
}

/// `hotrule cluster status`.
pub async fn cluster_status(client: &AdminClient, json: bool) -> Result<(), CliError> {
    let reply = check(client.get("/cluster/status").await?)?;
    if json {
        println!("{}", reply.text());
        return Ok(());
    }
    let body = reply.json().unwrap_or(Value::Null);
    let agents = match body["agentConfigsServed"].as_bool() {
        Some(true) => "served",
        Some(false) => "held back until this node has synced",
        None => "?",
    };
    println!(
        "self: {}   main: {}   agent configs: {agents}",
        body["self"].as_str().unwrap_or("?"),
        body["main"].as_str().unwrap_or("?")
    );
    let rows: Vec<Vec<String>> = body["members"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|m| {
            let s = |k: &str| match &m[k] {
                Value::String(v) => v.clone(),
                Value::Null => "-".into(),
                other => other.to_string(),
            };
            vec![s("nodeId"), if m["live"] == true { "live".into() } else { "dead".into() }, s("adminAddr"), s("busAddr"), s("generation"), s("digest"), s("lastScanTime")]
        })
        .collect();
    print!("{}", table(&["NODE", "LIVE", "ADMIN", "BUS", "GENERATION", "DIGEST", "LAST SCAN"], &rows));
    Ok(())
}

/// `hotrule rule list --cluster`.
pub async fn cluster_list(client: &AdminClient, json: bool) -> Result<(), CliError> {
    let reply = check(client.get("/runtime/rule/list?cluster=true").await?)?;
    if json {
        println!("{}", reply.text());
        return Ok(());
    }
    let body = reply.json().unwrap_or(Value::Null);
    let rows: Vec<Vec<String>> = body["rules"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
            vec![s("catalog"), s("name"), s("node"), s("status"), s("localState"), s("contentHash").chars().take(12).collect(), (if r["converged"] == true { "yes" } else { "NO" }).into()]
        })
        .collect();
    print!("{}", table(&["CATALOG", "NAME", "NODE", "STATUS", "LOCAL", "HASH", "CONVERGED"], &rows));
    if let Some(unreachable) = body["unreachable"].as_array().filter(|u| !u.is_empty()) {
        eprintln!("unreachable: {unreachable:?}");
    }
    Ok(())
}

pub(crate) fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<String>| {
        let parts: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(parts.join("  ").trim_end());
        out.push('\n');
    };
    line(headers.iter().map(|h| h.to_string()).collect());
    for row in rows {
        line(row.clone());
    }
    out
}
