//! `hotrule alarms list`: its flags as request parameters, the table, and what a follow prints.

use clap::Parser;
use serde_json::json;

use super::*;

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: AlarmsCommand,
}

fn parse(args: &[&str]) -> AlarmsList {
    let mut all = vec!["hotrule", "list"];
    all.extend(args);
    match Cli::try_parse_from(all).expect("parse").command {
        AlarmsCommand::List(list) => list,
    }
}

#[test]
fn requests_carry_every_flag() {
    let list = parse(&[
        "--rule", "a_rule", "--rule", "b_rule,c_rule", "--entity", "check out", "--id", "Y2g=.1", "--scope", "SERVICE", "--tag", "level=WARNING",
        "--keyword", "more than", "--since", "2h", "--limit", "5", "--local",
    ]);
    assert_eq!(
        list.first_path(10_000_000).expect("path"),
        "/query/alarms?entity=check%20out&id=Y2g%3D.1&scope=SERVICE&keyword=more%20than&rule=a_rule&rule=b_rule%2Cc_rule&tag=level%3DWARNING&cluster=false&start=2800000&pageSize=5"
    );
    let defaults = parse(&[]);
    assert_eq!(defaults.first_path(10_000_000).expect("path"), "/query/alarms?start=6400000&pageSize=20");
    assert_eq!(defaults.poll_path(9_000_000), "/query/alarms?start=9000000&pageSize=1000");
    let explicit = parse(&["--start", "2026-11-27 1100", "--end", "2026-11-27 1200"]);
    let path = explicit.first_path(0).expect("path");
    assert!(path.contains("start=2026-11-27%201100") && path.contains("end=2026-11-27%201200"), "{path}");
    assert!(parse(&["--since", "soon"]).first_path(0).is_err());
    assert!(Cli::try_parse_from(["hotrule", "list", "--follow", "--end", "1"]).is_err(), "--end cannot follow");
    assert!(Cli::try_parse_from(["hotrule", "list", "--limit", "0"]).is_err());
    assert!(Cli::try_parse_from(["hotrule", "list", "--limit", "1001"]).is_err());
    assert!(parse(&["--follow", "--json", "--interval", "1s"]).follow);
}

fn record(uuid: &str, start: i64, recovered: Option<i64>) -> Value {
    json!({"uuid": uuid, "startTime": start, "recoveryTime": recovered, "ruleName": "service_resp_time_rule", "name": "checkout",
        "message": "Response time of service checkout is more than 1000ms"})
}

#[test]
fn the_table_shows_state_and_time() {
    let text = render_table(&[record("u1", 1_795_608_000_000, None), record("u0", 1_795_607_000_000, Some(1_795_608_060_000))]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("TIME") && lines[0].contains("STATE") && lines[0].ends_with("UUID"), "{text}");
    assert!(lines[1].starts_with("2026-11-25T12:00:00.000Z") && lines[1].contains("FIRING") && lines[1].ends_with("u1"), "{text}");
    assert!(lines[2].starts_with("2026-11-25T12:01:00.000Z") && lines[2].contains("RECOVERED"), "{text}");
    assert_eq!(
        render_line(&record("u1", 1_795_608_000_000, None)),
        "2026-11-25T12:00:00.000Z  FIRING  service_resp_time_rule  checkout  Response time of service checkout is more than 1000ms  u1"
    );
}

#[test]
fn a_follow_prints_each_fire_once_and_the_recovery_of_a_fire_it_showed() {
    let mut follow = Follow::default();
    let uuids = |shown: Vec<Value>| shown.iter().map(|r| format!("{}{}", r["uuid"].as_str().unwrap_or(""), if r["recoveryTime"].is_null() { "" } else { "+" })).collect::<Vec<_>>();
    // Newest first, as the API answers: printed oldest first.
    assert_eq!(uuids(follow.absorb(&[record("b", 20, None), record("a", 10, None)])), ["a", "b"]);
    assert_eq!(follow.from_ms(), 10, "the oldest fire still watched");
    // The same again: nothing. `a` recovers, `c` fires: both shown once.
    assert!(follow.absorb(&[record("b", 20, None), record("a", 10, None)]).is_empty());
    assert_eq!(uuids(follow.absorb(&[record("c", 30, None), record("b", 20, None), record("a", 10, Some(35))])), ["a+", "c"]);
    assert_eq!(follow.from_ms(), 20, "a recovered: the window moves past it");
    // The next poll reads from 20 on (as the API filters on the start time).
    assert!(follow.absorb(&[record("c", 30, None), record("b", 20, None)]).is_empty());
    // A record that arrives already recovered is shown once, as recovered.
    assert_eq!(uuids(follow.absorb(&[record("d", 40, Some(45))])), ["d+"]);
    assert!(follow.absorb(&[record("d", 40, Some(45))]).is_empty());
    // Records without the fields are skipped, not a panic.
    assert!(follow.absorb(&[json!({"uuid": 5}), json!(null)]).is_empty());
}
