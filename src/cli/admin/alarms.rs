//! `hotrule alarms list`: stored alarm records through `/query/alarms`, as a table (or the
//! answer's JSON with `--json`): the newest `--limit` of the range, oldest at the top like
//! `tail`, each FIRING or RECOVERED. `--follow` then polls for new fires and for the recoveries
//! of the fires it showed, printing each once ([`Follow`]). On a clustered node the read is
//! cluster-wide by default (each alarm is kept by the node that fired it); `--local` reads one
//! node.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use serde_json::Value;

use super::logs::{bad_flag, range_start, report_partial, write_out};
use super::rule::{CliError, check, table};
use crate::api::client::{AdminClient, with_query};

#[derive(clap::Subcommand, Debug)]
pub enum AlarmsCommand {
    /// Stored alarm records, newest last; `--follow` shows new fires and recoveries until Ctrl-C.
    List(AlarmsList),
}

#[derive(clap::Args, Debug, Clone)]
pub struct AlarmsList {
    /// A rule name; repeat (or give a comma list) for any of several.
    #[arg(long = "rule")]
    pub rules: Vec<String>,
    /// The entity's name (e.g. a service name).
    #[arg(long)]
    pub entity: Option<String>,
    /// An entity id, matching id0 or id1.
    #[arg(long)]
    pub id: Option<String>,
    /// SERVICE, SERVICE_INSTANCE, ENDPOINT, ...
    #[arg(long)]
    pub scope: Option<String>,
    /// `key=value`; repeat for several (every one must match).
    #[arg(long = "tag")]
    pub tags: Vec<String>,
    /// A case-sensitive substring of the message.
    #[arg(long)]
    pub keyword: Option<String>,
    /// How far back to look (`15m`, `2h`, `1d`); ignored with --start.
    #[arg(long, default_value = "1h")]
    pub since: String,
    /// Epoch ms, RFC 3339, or `yyyy-MM-dd HHmm` (UTC); default: --since before now.
    #[arg(long)]
    pub start: Option<String>,
    /// As --start; default: now (not with --follow).
    #[arg(long, conflicts_with = "follow")]
    pub end: Option<String>,
    /// The newest this many records of the range (1 to 1000).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub limit: u16,
    /// The answer's JSON (with --follow: one record per line).
    #[arg(long)]
    pub json: bool,
    /// Keep polling for new fires and recoveries until Ctrl-C.
    #[arg(long)]
    pub follow: bool,
    /// How often --follow polls (at least 100ms).
    #[arg(long, default_value = "5s")]
    pub interval: String,
    /// Only the asked node's records (`cluster=false`).
    #[arg(long)]
    pub local: bool,
}

/// Records per follow poll.
const FOLLOW_PAGE: usize = 1000;

/// Fires a follow watches for their recovery, at most (the oldest are let go).
const WATCHED: usize = 1000;

impl AlarmsList {
    fn start(&self, now_ms: i64) -> Result<String, CliError> {
        range_start(self.start.as_ref(), &self.since, now_ms)
    }

    fn filter_pairs(&self) -> Vec<(&str, &str)> {
        let mut pairs = Vec::new();
        for (key, value) in [("entity", &self.entity), ("id", &self.id), ("scope", &self.scope), ("keyword", &self.keyword)] {
            if let Some(value) = value {
                pairs.push((key, value.as_str()));
            }
        }
        pairs.extend(self.rules.iter().map(|rule| ("rule", rule.as_str())));
        pairs.extend(self.tags.iter().map(|tag| ("tag", tag.as_str())));
        if self.local {
            pairs.push(("cluster", "false"));
        }
        pairs
    }

    /// The first request: the newest `--limit` records of the range.
    pub fn first_path(&self, now_ms: i64) -> Result<String, CliError> {
        let start = self.start(now_ms)?;
        let limit = self.limit.to_string();
        let mut pairs = self.filter_pairs();
        pairs.extend([("start", start.as_str()), ("pageSize", limit.as_str())]);
        if let Some(end) = &self.end {
            pairs.push(("end", end.as_str()));
        }
        Ok(with_query("/query/alarms", &pairs))
    }

    /// A follow poll: the newest records since `from_ms`.
    pub fn poll_path(&self, from_ms: i64) -> String {
        let (start, limit) = (from_ms.to_string(), FOLLOW_PAGE.to_string());
        let mut pairs = self.filter_pairs();
        pairs.extend([("start", start.as_str()), ("pageSize", limit.as_str())]);
        with_query("/query/alarms", &pairs)
    }
}

/// What a follow has shown: every record by uuid (with its start time), and the fires still
/// waiting for their recovery. Pure: [`Follow::absorb`] takes a poll's records and says which
/// lines to print.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Follow {
    /// uuid → start time of every record shown since the poll window's start.
    shown: BTreeMap<String, i64>,
    /// uuid → start time of the fires shown that have not recovered.
    firing: BTreeMap<String, i64>,
    /// The newest start time shown.
    newest: i64,
}

impl Follow {
    /// Where the next poll starts: the oldest fire still watched, or the newest record shown.
    pub fn from_ms(&self) -> i64 {
        self.firing.values().copied().min().map_or(self.newest, |oldest| oldest.min(self.newest))
    }

    /// A poll's records (newest first, as the API answers): the ones to print, oldest first,
    /// each a new record or the recovery of a watched fire.
    pub fn absorb(&mut self, records: &[Value]) -> Vec<Value> {
        let mut out = Vec::new();
        for record in records.iter().rev() {
            let (Some(uuid), Some(start)) = (record["uuid"].as_str(), record["startTime"].as_i64()) else { continue };
            let recovered = !record["recoveryTime"].is_null();
            let new = !self.shown.contains_key(uuid);
            let newly_recovered = recovered && self.firing.contains_key(uuid);
            if new || newly_recovered {
                out.push(record.clone());
            }
            self.shown.insert(uuid.to_string(), start);
            if recovered {
                self.firing.remove(uuid);
            } else if new {
                self.firing.insert(uuid.to_string(), start);
            }
            self.newest = self.newest.max(start);
        }
        // Bounded: the oldest watched fires are let go, and what is older than the window is
        // forgotten (it is not read again).
        while self.firing.len() > WATCHED {
            let Some(oldest) = self.firing.iter().min_by_key(|(_, start)| **start).map(|(uuid, _)| uuid.clone()) else { break };
            self.firing.remove(&oldest);
        }
        let from = self.from_ms();
        self.shown.retain(|_, start| *start >= from);
        out
    }
}

pub async fn run(client: &AdminClient, command: AlarmsCommand) -> Result<(), CliError> {
    let AlarmsCommand::List(list) = command;
    let interval = crate::api::query::time::parse_duration(&list.interval).map_err(|e| bad_flag("--interval", &list.interval, e))?;
    let interval = Duration::from_millis(u64::try_from(interval).unwrap_or(0).max(100));
    let mut out = std::io::stdout();
    let mut follow = Follow::default();
    let mut partial = Vec::new();
    first(client, &list, crate::base::clock::now_ms() as i64, &mut follow, &mut partial, &mut out).await?;
    if !list.follow {
        return Ok(());
    }
    loop {
        tokio::time::sleep(interval).await;
        // A failed poll (the node restarting, say) is reported and retried; Ctrl-C ends it.
        if let Err(e) = follow_once(client, &list, &mut follow, &mut partial, &mut out).await {
            eprintln!("{e}");
        }
    }
}

/// The first answer, printed; the follow starts from what it showed.
pub async fn first(client: &AdminClient, list: &AlarmsList, now_ms: i64, follow: &mut Follow, partial: &mut Vec<String>, out: &mut dyn Write) -> Result<(), CliError> {
    let reply = check(client.get(&list.first_path(now_ms)?).await?)?;
    let body = reply.json().unwrap_or(Value::Null);
    report_partial(&body, "alarm records", partial);
    let records = body["msgs"].as_array().cloned().unwrap_or_default();
    let shown = follow.absorb(&records);
    if follow.newest == 0 {
        follow.newest = now_ms;
    }
    let text = match (list.json, list.follow) {
        (true, false) => format!("{}\n", reply.text()),
        (true, true) => shown.iter().map(|r| format!("{r}\n")).collect(),
        (false, _) => render_table(&shown),
    };
    write_out(out, &text);
    Ok(())
}

/// One follow poll: new records and recoveries, each printed once; how many lines.
pub async fn follow_once(client: &AdminClient, list: &AlarmsList, follow: &mut Follow, partial: &mut Vec<String>, out: &mut dyn Write) -> Result<usize, CliError> {
    let reply = check(client.get(&list.poll_path(follow.from_ms())).await?)?;
    let body = reply.json().unwrap_or(Value::Null);
    report_partial(&body, "alarm records", partial);
    let shown = follow.absorb(body["msgs"].as_array().map(Vec::as_slice).unwrap_or_default());
    let text: String = shown.iter().map(|r| format!("{}\n", if list.json { r.to_string() } else { render_line(r) })).collect();
    write_out(out, &text);
    Ok(shown.len())
}

fn cells(record: &Value) -> Vec<String> {
    let s = |k: &str| record[k].as_str().unwrap_or("").to_string();
    let (time, state) = match record["recoveryTime"].as_i64() {
        Some(recovered) => (recovered, "RECOVERED"),
        None => (record["startTime"].as_i64().unwrap_or(0), "FIRING"),
    };
    let time = u64::try_from(time).map(crate::base::clock::iso8601).unwrap_or_default();
    let message = s("message").replace('\r', "\\r").replace('\n', "\\n");
    vec![time, state.to_string(), s("ruleName"), s("name"), message, s("uuid")]
}

/// Records as a table, in the order given: the time is the recovery's for a recovered one.
pub fn render_table(records: &[Value]) -> String {
    let rows: Vec<Vec<String>> = records.iter().map(cells).collect();
    table(&["TIME", "STATE", "RULE", "ENTITY", "MESSAGE", "UUID"], &rows)
}

/// One record as a line (following: no header, no alignment across polls).
pub fn render_line(record: &Value) -> String {
    cells(record).join("  ")
}

#[cfg(test)]
#[path = "alarms_tests.rs"]
mod tests;
