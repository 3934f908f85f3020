//! `hotrule alarm ...`: alarm rules through a node's admin API (`alarm settings` is in
//! `alarm_settings`).
//!
//! `alarm test --rule FILE` is the dry run: it posts the file (an `alarm-settings.yml`) to
//! `POST /runtime/alarm/test` with the range (`--since`, or `--start`/`--end`), and prints one
//! line per (minute, rule, entity) with a transition or a message (`--verbose`: every check),
//! then the rules that could not run and a summary; `--json` prints the answer as is. Nothing
//! is sent to the hooks, nothing is stored, and the running rules are not touched.

use std::io::Write;
use std::path::PathBuf;

use serde_json::Value;

use super::logs::{range_start, report_partial, write_out};
use super::rule::{CliError, check, table};
use crate::api::client::{AdminClient, with_query};

#[derive(clap::Subcommand, Debug)]
pub enum AlarmCommand {
    /// Replay alarm rules over the stored values: each minute's checks and transitions, and the
    /// messages they would send (nothing is sent).
    Test(AlarmTest),
    /// The alarm rules and hooks in force (`alarm-settings.yml`), changed at runtime: get, push,
    /// diff or delete.
    Settings {
        #[command(subcommand)]
        command: super::alarm_settings::SettingsCommand,
    },
}

#[derive(clap::Args, Debug, Clone)]
pub struct AlarmTest {
    /// An alarm-settings.yml holding the rules to replay (its hooks are not called).
    #[arg(long = "rule", value_name = "FILE")]
    pub rule: PathBuf,
    /// How far back to replay (`30m`, `2h`; at most a day); ignored with --start.
    #[arg(long, default_value = "1h")]
    pub since: String,
    /// Epoch ms, RFC 3339, or `yyyy-MM-dd HHmm` (UTC); default: --since before now.
    #[arg(long)]
    pub start: Option<String>,
    /// As --start; default: now.
    #[arg(long)]
    pub end: Option<String>,
    /// Every check, not only those with a transition or a message.
    #[arg(long)]
    pub verbose: bool,
    /// The answer's JSON.
    #[arg(long)]
    pub json: bool,
}

impl AlarmTest {
    /// The request's path as of `now_ms`.
    pub fn path(&self, now_ms: i64) -> Result<String, CliError> {
        let start = range_start(self.start.as_ref(), &self.since, now_ms)?;
        let mut pairs = vec![("start", start.as_str())];
        if let Some(end) = &self.end {
            pairs.push(("end", end.as_str()));
        }
        if self.verbose {
            pairs.push(("verbose", "true"));
        }
        Ok(with_query("/runtime/alarm/test", &pairs))
    }
}

pub async fn run(client: &AdminClient, command: AlarmCommand) -> Result<(), CliError> {
    match command {
        AlarmCommand::Test(test) => run_test(client, &test, crate::base::clock::now_ms() as i64, &mut std::io::stdout()).await,
        AlarmCommand::Settings { command } => super::alarm_settings::run(client, command).await,
    }
}

/// `alarm test`: the file posted, the answer printed.
pub async fn run_test(client: &AdminClient, test: &AlarmTest, now_ms: i64, out: &mut dyn Write) -> Result<(), CliError> {
    let settings = std::fs::read(&test.rule).map_err(|source| CliError::ReadFile { path: test.rule.display().to_string(), source })?;
    let reply = check(client.post(&test.path(now_ms)?, settings).await?)?;
    if test.json {
        write_out(out, &format!("{}\n", reply.text()));
        return Ok(());
    }
    let body = reply.json().unwrap_or(Value::Null);
    report_partial(&body, "values", &mut Vec::new());
    for warning in body["warnings"].as_array().into_iter().flatten() {
        eprintln!("warning: {}", warning.as_str().unwrap_or(""));
    }
    write_out(out, &render(&body));
    Ok(())
}

/// A minute as `2026-11-28T00:21Z`.
fn minute(ms: Option<i64>) -> String {
    let Some(iso) = ms.and_then(|ms| u64::try_from(ms).ok()).map(crate::base::clock::iso8601) else { return "?".into() };
    format!("{}Z", iso.get(..16).unwrap_or(&iso))
}

fn transition(line: &Value, key: &str) -> String {
    let (before, after) = (&line["before"][key], &line["after"][key]);
    let text = |v: &Value| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
    if before == after { text(after) } else { format!("{} -> {}", text(before), text(after)) }
}

fn cells(line: &Value) -> Vec<String> {
    let sent = &line["sent"];
    let sent = match sent["type"].as_str() {
        Some(kind) => {
            let message = sent["message"].as_str().unwrap_or("").replace('\r', "\\r").replace('\n', "\\n");
            format!("{kind} {} \"{message}\"", sent["uuid"].as_str().unwrap_or(""))
        }
        None => String::new(),
    };
    vec![
        minute(line["minute"].as_i64()),
        line["ruleName"].as_str().unwrap_or("").to_string(),
        line["name"].as_str().unwrap_or("").to_string(),
        if line["matched"].as_bool() == Some(true) { "yes" } else { "no" }.to_string(),
        transition(line, "state"),
        transition(line, "silenceCountdown"),
        transition(line, "recoveryObservationCountdown"),
        sent,
    ]
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The answer as text: the range, the lines as a table, the rules that did not run, the summary.
pub fn render(body: &Value) -> String {
    let mut out = String::new();
    let summary = &body["summary"];
    let rules = body["rules"].as_array().cloned().unwrap_or_default();
    out.push_str(&format!(
        "dry run of {} from {} to {} ({}); nothing was sent\n",
        plural(rules.len() as u64, "rule", "rules"),
        minute(body["firstMinute"].as_i64()),
        minute(body["lastMinute"].as_i64()),
        plural(summary["minutes"].as_u64().unwrap_or(0), "minute", "minutes"),
    ));
    let lines = body["lines"].as_array().cloned().unwrap_or_default();
    if lines.is_empty() {
        let what = if body["verbose"].as_bool() == Some(true) { "no window was checked" } else { "no transition and no message in the range" };
        out.push_str(&format!("{what}\n"));
    } else {
        let rows: Vec<Vec<String>> = lines.iter().map(cells).collect();
        out.push_str(&table(&["MINUTE", "RULE", "ENTITY", "MATCHED", "STATE", "SILENCE", "RECOVERY", "SENT"], &rows));
    }
    if let Some(left_out) = body["linesLeftOut"].as_u64().filter(|n| *n > 0) {
        out.push_str(&format!("... {} left out (shorten the range)\n", plural(left_out, "line", "lines")));
    }
    for rule in &rules {
        let name = rule["ruleName"].as_str().unwrap_or("");
        match rule["status"].as_str() {
            Some("waiting") => {
                let missing: Vec<&str> = rule["missingMetrics"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                out.push_str(&format!("rule {name}: waiting: no loaded rule produces {}\n", missing.join(", ")));
            }
            Some("error") => out.push_str(&format!("rule {name}: error: {}\n", rule["reason"].as_str().unwrap_or(""))),
            _ => {
                if rule["windows"].as_u64() == Some(0) {
                    out.push_str(&format!("rule {name}: no value of its metrics in the range\n"));
                }
            }
        }
    }
    let count = |key: &str| summary[key].as_u64().unwrap_or(0);
    out.push_str(&format!(
        "summary: {} checked, {}, {}, {} waiting, {} in error\n",
        plural(count("windows"), "window", "windows"),
        plural(count("fires"), "fire", "fires"),
        plural(count("recoveries"), "recovery", "recoveries"),
        plural(count("rulesWaiting"), "rule", "rules"),
        count("rulesInError"),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn test_args(args: &[&str]) -> AlarmTest {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(subcommand)]
            command: AlarmCommand,
        }
        let mut all = vec!["alarm", "test"];
        all.extend_from_slice(args);
        match Cli::try_parse_from(all).expect("parses").command {
            AlarmCommand::Test(test) => test,
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn the_range_goes_as_start_and_end() {
        let now = 1_735_732_800_000;
        assert_eq!(test_args(&["--rule", "f.yml", "--since", "30m"]).path(now).expect("path"), format!("/runtime/alarm/test?start={}", now - 1_800_000));
        let path = test_args(&["--rule", "f.yml", "--start", "2025-01-01 1100", "--end", "2025-01-01 1200", "--verbose"]).path(now).expect("path");
        assert_eq!(path, "/runtime/alarm/test?start=2025-01-01%201100&end=2025-01-01%201200&verbose=true");
        assert!(test_args(&["--rule", "f.yml", "--since", "soon"]).path(now).is_err());
    }

    #[test]
    fn transitions_and_messages_render_one_line_each() {
        let state = |s: &str, silence: i64, recovery: i64| json!({"state": s, "silenceCountdown": silence, "recoveryObservationCountdown": recovery});
        let body = json!({
            "firstMinute": 1_735_732_800_000_i64,
            "lastMinute": 1_735_734_540_000_i64,
            "lines": [
                {"minute": 1_735_733_400_000_i64, "ruleName": "load_rule", "name": "s", "matched": true,
                 "before": state("NORMAL", -1, 0), "after": state("FIRING", 0, 0),
                 "sent": {"type": "FIRING", "uuid": "dry-run-1", "message": "Load of s is above 100"}},
                {"minute": 1_735_733_460_000_i64, "ruleName": "load_rule", "name": "s", "matched": false,
                 "before": state("FIRING", 0, 0), "after": state("RECOVERED", -1, 0),
                 "sent": {"type": "RECOVERED", "uuid": "dry-run-1", "message": "Load of s is above 100"}},
            ],
            "linesLeftOut": 0,
            "rules": [
                {"ruleName": "load_rule", "status": "ran", "windows": 30},
                {"ruleName": "mem_rule", "status": "waiting", "missingMetrics": ["mem"], "windows": 0},
            ],
            "summary": {"minutes": 30, "windows": 30, "fires": 1, "recoveries": 1, "rulesWaiting": 1, "rulesInError": 0},
        });
        let text = render(&body);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "dry run of 2 rules from 2025-01-01T12:00Z to 2025-01-01T12:29Z (30 minutes); nothing was sent");
        assert!(lines[1].starts_with("MINUTE") && lines[1].contains("SENT"), "{text}");
        assert_eq!(lines[2].split_whitespace().collect::<Vec<_>>()[..8], ["2025-01-01T12:10Z", "load_rule", "s", "yes", "NORMAL", "->", "FIRING", "-1"]);
        assert!(lines[2].ends_with("FIRING dry-run-1 \"Load of s is above 100\""), "{text}");
        assert!(lines[3].contains("FIRING -> RECOVERED") && lines[3].contains("RECOVERED dry-run-1"), "{text}");
        assert_eq!(lines[4], "rule mem_rule: waiting: no loaded rule produces mem");
        assert_eq!(lines[5], "summary: 30 windows checked, 1 fire, 1 recovery, 1 rule waiting, 0 in error");
    }
}
