//! `hotrule logs query`: kept logs through `/query/logs`, as a table (or the answer's JSON with
//! `--json`). The newest `--limit` logs of the range are shown oldest at the top, like `tail`;
//! `--follow` then polls for newer ones with the `after` cursor of the last log shown, so each
//! log is printed once (a log stamped earlier than the last one shown, arriving late, is not).
//! `--cluster` reads every live node's logs merged by time (`cluster=true`); its cursors are
//! cluster cursors, so following pages across nodes the same way, and a log is shown with the
//! node holding it.

use std::io::Write;
use std::time::Duration;

use serde_json::Value;

use super::rule::{CliError, check, table};
use crate::api::client::{AdminClient, with_query};

#[derive(clap::Subcommand, Debug)]
pub enum LogsCommand {
    /// Kept logs, filtered; `--follow` tails them until Ctrl-C.
    Query(LogsQuery),
}

#[derive(clap::Args, Debug, Clone)]
pub struct LogsQuery {
    #[arg(long)]
    pub service: Option<String>,
    #[arg(long)]
    pub instance: Option<String>,
    #[arg(long)]
    pub endpoint: Option<String>,
    /// `key:value`; repeat for several (every one must match).
    #[arg(long = "tag")]
    pub tags: Vec<String>,
    /// A case-sensitive substring of the content.
    #[arg(long)]
    pub keyword: Option<String>,
    /// How far back to look (`15m`, `2h`, `1d`); ignored with --start.
    #[arg(long, default_value = "15m")]
    pub since: String,
    /// Epoch ms, RFC 3339, or `yyyy-MM-dd HHmm` (UTC); default: --since before now.
    #[arg(long)]
    pub start: Option<String>,
    /// As --start; default: now (not with --follow).
    #[arg(long, conflicts_with = "follow")]
    pub end: Option<String>,
    /// The newest this many logs of the range (1 to 10000).
    #[arg(long, default_value_t = 100)]
    pub limit: usize,
    /// The answer's JSON (with --follow: one log per line).
    #[arg(long)]
    pub json: bool,
    /// Keep polling for newer logs until Ctrl-C.
    #[arg(long)]
    pub follow: bool,
    /// How often --follow polls.
    #[arg(long, default_value = "1s")]
    pub interval: String,
    /// Every live node's logs, merged by time (`cluster=true`), each naming its node.
    #[arg(long)]
    pub cluster: bool,
}

/// Logs per page while following.
const FOLLOW_PAGE: usize = 1000;

/// Where a `--follow` is: the start of its range, the last log printed, and (`--cluster`) the
/// nodes last reported as not answering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tail {
    start: String,
    after: Option<String>,
    partial: Vec<String>,
}

pub(super) fn bad_flag(flag: &str, value: &str, why: impl std::fmt::Display) -> CliError {
    CliError::Server { status: 400, apply_status: "invalid_parameter".into(), message: format!("{flag} {value:?}: {why}") }
}

/// A query's `start` as of `now_ms`: `--start`, or `--since` before now (logs and alarms).
pub(super) fn range_start(start: Option<&String>, since: &str, now_ms: i64) -> Result<String, CliError> {
    if let Some(start) = start {
        return Ok(start.clone());
    }
    let since_ms = crate::api::query::time::parse_duration(since).map_err(|e| bad_flag("--since", since, e))?;
    Ok(now_ms.saturating_sub(since_ms).max(0).to_string())
}

impl LogsQuery {
    /// The `start` of the query as of `now_ms`: --start, or --since before now.
    fn start(&self, now_ms: i64) -> Result<String, CliError> {
        range_start(self.start.as_ref(), &self.since, now_ms)
    }

    /// The filter parameters every request carries.
    fn filter_pairs(&self) -> Vec<(&str, &str)> {
        let mut pairs = Vec::new();
        for (key, value) in [("service", &self.service), ("instance", &self.instance), ("endpoint", &self.endpoint), ("keyword", &self.keyword)] {
            if let Some(value) = value {
                pairs.push((key, value.as_str()));
            }
        }
        pairs.extend(self.tags.iter().map(|tag| ("tag", tag.as_str())));
        if self.cluster {
            pairs.push(("cluster", "true"));
        }
        pairs
    }

    /// The first request: the newest `--limit` logs of the range.
    pub fn first_path(&self, now_ms: i64) -> Result<(String, Tail), CliError> {
        let start = self.start(now_ms)?;
        let limit = self.limit.to_string();
        let mut pairs = self.filter_pairs();
        pairs.extend([("start", start.as_str()), ("limit", limit.as_str()), ("order", "newest")]);
        if let Some(end) = &self.end {
            pairs.push(("end", end.as_str()));
        }
        Ok((with_query("/query/logs", &pairs), Tail { start, after: None, partial: Vec::new() }))
    }

    /// A follow poll: the logs after the last one printed, oldest first.
    pub fn poll_path(&self, tail: &Tail) -> String {
        let limit = FOLLOW_PAGE.to_string();
        let mut pairs = self.filter_pairs();
        pairs.extend([("start", tail.start.as_str()), ("limit", limit.as_str()), ("order", "oldest")]);
        if let Some(after) = &tail.after {
            pairs.push(("after", after.as_str()));
        }
        with_query("/query/logs", &pairs)
    }
}

pub async fn run(client: &AdminClient, command: LogsCommand) -> Result<(), CliError> {
    let LogsCommand::Query(query) = command;
    let interval = crate::api::query::time::parse_duration(&query.interval).map_err(|e| bad_flag("--interval", &query.interval, e))?;
    let interval = Duration::from_millis(u64::try_from(interval).unwrap_or(0).max(10));
    let mut out = std::io::stdout();
    let mut tail = first(client, &query, crate::base::clock::now_ms() as i64, &mut out).await?;
    if !query.follow {
        return Ok(());
    }
    loop {
        tokio::time::sleep(interval).await;
        // A failed poll (the node restarting, say) is reported and retried; Ctrl-C ends it.
        if let Err(e) = follow_once(client, &query, &mut tail, &mut out).await {
            eprintln!("{e}");
        }
    }
}

/// The first answer, printed; where a follow goes on from.
pub async fn first(client: &AdminClient, query: &LogsQuery, now_ms: i64, out: &mut dyn Write) -> Result<Tail, CliError> {
    let (path, mut tail) = query.first_path(now_ms)?;
    let reply = check(client.get(&path).await?)?;
    let body = reply.json().unwrap_or(Value::Null);
    report_partial(&body, "logs", &mut tail.partial);
    let mut logs: Vec<Value> = body["logs"].as_array().cloned().unwrap_or_default();
    tail.after = logs.first().and_then(|log| log["cursor"].as_str()).map(str::to_string);
    logs.reverse();
    let text = match (query.json, query.follow) {
        (true, false) => format!("{}\n", reply.text()),
        (true, true) => logs.iter().map(|log| format!("{log}\n")).collect(),
        (false, _) => render_table(&logs),
    };
    write_out(out, &text);
    Ok(tail)
}

/// One follow poll: every log after the last printed one, page by page, each printed once.
pub async fn follow_once(client: &AdminClient, query: &LogsQuery, tail: &mut Tail, out: &mut dyn Write) -> Result<usize, CliError> {
    let mut printed = 0;
    // Bounded: a poll reads at most 100 pages, the rest waits for the next poll.
    for _ in 0..100 {
        let reply = check(client.get(&query.poll_path(tail)).await?)?;
        let body = reply.json().unwrap_or(Value::Null);
        report_partial(&body, "logs", &mut tail.partial);
        let logs = body["logs"].as_array().cloned().unwrap_or_default();
        let mut text = String::new();
        for log in &logs {
            text.push_str(&if query.json { log.to_string() } else { render_line(log) });
            text.push('\n');
        }
        write_out(out, &text);
        printed += logs.len();
        if let Some(cursor) = logs.last().and_then(|log| log["cursor"].as_str()) {
            tail.after = Some(cursor.to_string());
        }
        if body["next"].is_null() {
            break;
        }
    }
    Ok(printed)
}

/// Names on stderr the nodes a cluster answer left out (their `missing` are missing), when they
/// differ from those `reported` last (a follow says so once, not every poll).
pub(super) fn report_partial(body: &Value, missing: &str, reported: &mut Vec<String>) {
    let partial: Vec<String> = body["partial"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| format!("node {} did not answer (its {missing} are missing): {}", p["node"].as_str().unwrap_or("?"), p["reason"].as_str().unwrap_or("")))
        .collect();
    if partial != *reported {
        for line in &partial {
            eprintln!("{line}");
        }
        *reported = partial;
    }
}

pub(super) fn write_out(out: &mut dyn Write, text: &str) {
    // A closed stdout (`| head`) ends nothing here; the next write fails the same way.
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

fn cells(log: &Value) -> Vec<String> {
    let s = |k: &str| log[k].as_str().unwrap_or("").to_string();
    let tags: Vec<String> = log["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| format!("{}={}", t["key"].as_str().unwrap_or(""), t["value"].as_str().unwrap_or("")))
        .collect();
    // One log, one line: line breaks in the content are shown escaped.
    let content = s("content").replace('\r', "\\r").replace('\n', "\\n");
    vec![s("time"), s("node"), s("service"), s("instance"), s("endpoint"), tags.join(","), content]
}

/// Logs as a table, in the order given; a NODE column when they name their nodes (`--cluster`).
pub fn render_table(logs: &[Value]) -> String {
    let mut rows: Vec<Vec<String>> = logs.iter().map(cells).collect();
    let mut header = vec!["TIME", "NODE", "SERVICE", "INSTANCE", "ENDPOINT", "TAGS", "CONTENT"];
    if !logs.iter().any(|log| log.get("node").is_some()) {
        header.remove(1);
        for row in &mut rows {
            row.remove(1);
        }
    }
    table(&header, &rows)
}

/// One log as a line (following: no header, no alignment across polls).
pub fn render_line(log: &Value) -> String {
    cells(log).into_iter().filter(|c| !c.is_empty()).collect::<Vec<_>>().join("  ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use serde_json::json;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: LogsCommand,
    }

    fn parse(args: &[&str]) -> LogsQuery {
        let mut all = vec!["hotrule", "query"];
        all.extend(args);
        match Cli::try_parse_from(all).expect("parse").command {
            LogsCommand::Query(query) => query,
        }
    }

    #[test]
    fn requests_carry_every_flag() {
        let query = parse(&["--service", "a b", "--tag", "level:ERROR", "--tag", "k:v", "--keyword", "time out", "--since", "1h", "--limit", "5"]);
        let (path, tail) = query.first_path(10_000_000).expect("path");
        assert_eq!(path, "/query/logs?service=a%20b&keyword=time%20out&tag=level%3AERROR&tag=k%3Av&start=6400000&limit=5&order=newest");
        assert_eq!(tail, Tail { start: "6400000".into(), after: None, partial: Vec::new() });
        let tail = Tail { after: Some("6500000-3".into()), ..tail };
        assert_eq!(
            query.poll_path(&tail),
            "/query/logs?service=a%20b&keyword=time%20out&tag=level%3AERROR&tag=k%3Av&start=6400000&limit=1000&order=oldest&after=6500000-3"
        );
        let explicit = parse(&["--start", "2025-01-01 1100", "--end", "2025-01-01 1200"]);
        let (path, _) = explicit.first_path(0).expect("path");
        assert!(path.contains("start=2025-01-01%201100") && path.contains("end=2025-01-01%201200"), "{path}");
        assert!(parse(&["--since", "soon"]).first_path(0).is_err());
        assert!(Cli::try_parse_from(["hotrule", "query", "--follow", "--end", "1"]).is_err(), "--end cannot follow");

        // --cluster asks for the merged read on the first page and on every follow poll.
        let cluster = parse(&["--cluster", "--follow", "--limit", "2"]);
        let (path, tail) = cluster.first_path(10_000_000).expect("path");
        assert_eq!(path, "/query/logs?cluster=true&start=9100000&limit=2&order=newest");
        let tail = Tail { after: Some("9500000-node-2-7".into()), ..tail };
        assert_eq!(cluster.poll_path(&tail), "/query/logs?cluster=true&start=9100000&limit=1000&order=oldest&after=9500000-node-2-7");
    }

    #[test]
    fn tables_and_lines_render_one_row_per_log() {
        let log = json!({"time": "2025-01-01T12:00:00.000Z", "service": "checkout", "instance": "c-1", "endpoint": "",
            "tags": [{"key": "level", "value": "ERROR"}, {"key": "k", "value": "v"}], "content": "line one\nline two"});
        let other = json!({"time": "2025-01-01T12:00:01.000Z", "service": "cart", "instance": "", "endpoint": "/x", "tags": [], "content": "ok"});
        let text = render_table(&[log.clone(), other]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("TIME") && lines[0].ends_with("CONTENT"), "{text}");
        assert!(lines[1].contains("checkout") && lines[1].contains("level=ERROR,k=v") && lines[1].ends_with("line one\\nline two"), "{text}");
        assert!(lines[2].contains("cart") && lines[2].ends_with("ok"), "{text}");
        assert_eq!(render_line(&log), "2025-01-01T12:00:00.000Z  checkout  c-1  level=ERROR,k=v  line one\\nline two");

        // A cluster answer's logs name their node: a NODE column, and the node on a line.
        let mut on_node = log.clone();
        on_node["node"] = json!("q2");
        let text = render_table(&[on_node.clone()]);
        assert!(text.lines().next().is_some_and(|h| h.contains("NODE")) && text.contains("q2"), "{text}");
        assert_eq!(render_line(&on_node), "2025-01-01T12:00:00.000Z  q2  checkout  c-1  level=ERROR,k=v  line one\\nline two");
    }
}
