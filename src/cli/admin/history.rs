//! `hotrule rule history`, `rule diff` and `rule restore` (issue 26): thin calls to
//! `GET /runtime/rule/history`, `GET /runtime/rule/history/diff` and `POST /runtime/rule/restore`.

use serde_json::Value;

use super::rule::{CliError, check, table};
use crate::api::client::{AdminClient, with_query};

/// `hotrule rule history`: the revisions newest first as a table (or the answer with `--json`).
pub async fn history(client: &AdminClient, catalog: &str, name: &str, json: bool) -> Result<(), CliError> {
    let path = with_query("/runtime/rule/history", &[("catalog", catalog), ("name", name)]);
    let reply = check(client.get(&path).await?)?;
    if json {
        println!("{}", reply.text());
        return Ok(());
    }
    print!("{}", render_history(&reply.json().unwrap_or(Value::Null)));
    Ok(())
}

/// The history answer as a table, then the retention line.
pub fn render_history(body: &Value) -> String {
    let rows: Vec<Vec<String>> = body["revisions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or("-").to_string();
            let mut action = s("action");
            if let Some(of) = r["restoreOf"].as_str() {
                action.push_str(&format!(" of {of}"));
            }
            vec![
                format!("{}{}", s("revision"), if r["current"] == true { " *" } else { "" }),
                s("time"),
                s("status"),
                action,
                s("classification"),
                s("applyStatus"),
                s("committedBy"),
                s("takenBy"),
                s("client"),
                s("contentHash").chars().take(12).collect(),
            ]
        })
        .collect();
    let mut out = table(
        &["REVISION", "TIME", "STATUS", "ACTION", "CLASS", "APPLY STATUS", "MAIN", "TAKEN BY", "CLIENT", "HASH"],
        &rows,
    );
    out.push_str(&format!(
        "oldest kept: {}; retention: {} revisions, {}\n",
        body["oldestRevision"].as_str().unwrap_or("-"),
        body["retention"]["maxRevisions"],
        body["retention"]["maxAge"].as_str().unwrap_or("-"),
    ));
    out
}

/// `hotrule rule diff`: the unified diff from one revision to another.
pub async fn diff(client: &AdminClient, catalog: &str, name: &str, from: &str, to: &str) -> Result<(), CliError> {
    let path = with_query("/runtime/rule/history/diff", &[("catalog", catalog), ("name", name), ("from", from), ("to", to)]);
    let reply = check(client.get(&path).await?)?;
    let body = reply.json().unwrap_or(Value::Null);
    match body["diff"].as_str() {
        Some("") => eprintln!("revisions {from} and {to} hold the same content"),
        Some(text) => print!("{text}"),
        None => println!("{}", reply.text()),
    }
    Ok(())
}

/// What `hotrule rule restore` sends besides the revision.
#[derive(Debug, Clone, Default)]
pub struct RestoreFlags {
    pub allow_storage_change: bool,
    pub force: bool,
    pub rolling: bool,
}

/// `hotrule rule restore`: a normal write of the revision's content (or its inactivate/delete).
pub async fn restore(client: &AdminClient, catalog: &str, name: &str, revision: &str, flags: &RestoreFlags) -> Result<(), CliError> {
    let mut pairs = vec![
        ("catalog", catalog),
        ("name", name),
        ("revision", revision),
        ("allowStorageChange", if flags.allow_storage_change { "true" } else { "false" }),
        ("force", if flags.force { "true" } else { "false" }),
    ];
    if flags.rolling {
        pairs.push(("rollout", "rolling"));
    }
    let reply = check(client.post(&with_query("/runtime/rule/restore", &pairs), Vec::new()).await?)?;
    let json = reply.json().unwrap_or(Value::Null);
    println!(
        "{} {}/{}: {} (restored {revision})",
        json["applyStatus"].as_str().unwrap_or("?"),
        json["catalog"].as_str().unwrap_or(""),
        json["name"].as_str().unwrap_or(""),
        json["message"].as_str().unwrap_or("")
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_marks_the_current_revision_and_names_restores() {
        let body = serde_json::json!({
            "oldestRevision": "1.0@a",
            "retention": {"maxRevisions": 50, "maxAge": "30d"},
            "revisions": [
                {"revision": "2.0@a", "current": true, "time": "t2", "status": "ACTIVE", "action": "restore",
                 "restoreOf": "1.0@a", "applyStatus": "structural_applied", "committedBy": "a", "takenBy": "b",
                 "client": "127.0.0.1:1", "contentHash": "abcdef0123456789"},
                {"revision": "1.0@a", "current": false, "time": "t1", "status": "ACTIVE", "action": "addOrUpdate",
                 "classification": "NEW", "applyStatus": "structural_applied", "committedBy": "a", "contentHash": "ff"}
            ]
        });
        let text = render_history(&body);
        assert!(text.contains("2.0@a *"), "{text}");
        assert!(text.contains("restore of 1.0@a"), "{text}");
        assert!(text.contains("127.0.0.1:1  abcdef012345\n"), "the hash is cut to 12: {text}");
        assert!(text.contains("oldest kept: 1.0@a; retention: 50 revisions, 30d"), "{text}");
    }
}
