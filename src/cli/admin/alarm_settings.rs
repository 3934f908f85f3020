//! `hotrule alarm settings get|push|diff|delete`: the `alarm-settings.yml` in force, through
//! `/runtime/alarm/settings`. A push or delete goes to the main (any node forwards it) and
//! reaches every node like a rule change; `diff` says, before a push, which rules would keep
//! their windows and states and which would start fresh.

use std::io::Write;

use clap::Subcommand;
use serde_json::Value;

use super::rule::{CliError, check};
use crate::api::client::AdminClient;
use crate::control::alarms::live::validate;
use crate::control::alarms::settings::{AlarmSettings, diff};

#[derive(Subcommand, Debug)]
pub enum SettingsCommand {
    /// Print the settings in force on the node (the YAML; where it came from goes to stderr).
    Get {
        /// The whole answer as JSON (source, revision, rules, hooks, refused settings).
        #[arg(long)]
        json: bool,
    },
    /// Make FILE the settings of every node (validated first; unchanged rules keep their state).
    Push { file: std::path::PathBuf },
    /// What pushing FILE would change: rules added, removed, changed (start fresh) or kept.
    Diff { file: std::path::PathBuf },
    /// Delete the pushed settings: every node returns to its boot file.
    Delete,
}

pub async fn run(client: &AdminClient, command: SettingsCommand) -> Result<(), CliError> {
    let path = "/runtime/alarm/settings";
    let mut out = std::io::stdout();
    match command {
        SettingsCommand::Get { json } => {
            let body = check(client.get(path).await?)?.json().unwrap_or(Value::Null);
            if json {
                let _ = writeln!(out, "{}", serde_json::to_string_pretty(&body).unwrap_or_default());
            } else {
                eprintln!("# {}", source_line(&body));
                let _ = write!(out, "{}", body["content"].as_str().unwrap_or(""));
            }
        }
        SettingsCommand::Push { file } => {
            let content = read(&file)?;
            let reply = check(client.post(path, content).await?)?;
            let _ = writeln!(out, "{}", outcome_line(&reply.json().unwrap_or(Value::Null)));
        }
        SettingsCommand::Diff { file } => {
            let content = read(&file)?;
            let candidate = match validate(&content) {
                Ok((settings, _)) => settings,
                Err(e) => {
                    return Err(CliError::Server { status: 400, apply_status: "compile_failed".into(), message: format!("{}: {e}", file.display()) });
                }
            };
            let body = check(client.get(path).await?)?.json().unwrap_or(Value::Null);
            let current_text = body["content"].as_str().unwrap_or("");
            let current = validate(current_text.as_bytes()).map(|(s, _)| s).unwrap_or_else(|_| AlarmSettings::empty());
            let _ = writeln!(out, "# against the settings in force on {}: {}", client.base(), source_line(&body));
            for line in diff_lines(&current, &candidate) {
                let _ = writeln!(out, "{line}");
            }
        }
        SettingsCommand::Delete => {
            let reply = check(client.delete(path).await?)?;
            let _ = writeln!(out, "{}", outcome_line(&reply.json().unwrap_or(Value::Null)));
        }
    }
    Ok(())
}

fn read(file: &std::path::Path) -> Result<Vec<u8>, CliError> {
    std::fs::read(file).map_err(|source| CliError::ReadFile { path: file.display().to_string(), source })
}

/// `runtime (revision …)`, `file config/alarm-settings.yml`, or `none (…)`.
fn source_line(body: &Value) -> String {
    let text = |key: &str| body[key].as_str().unwrap_or("").to_string();
    let mut line = match body["source"].as_str() {
        Some("runtime") => format!("pushed at runtime, revision {}", text("revision")),
        Some("file") => format!("the boot file {}", text("path")),
        Some("none") => format!("no settings (no boot file at {})", text("path")),
        _ => "unknown source".to_string(),
    };
    if let Some(reason) = body["refused"]["reason"].as_str() {
        line.push_str(&format!("; newer settings were refused: {reason}"));
    }
    line
}

fn outcome_line(body: &Value) -> String {
    format!("{}: {}", body["applyStatus"].as_str().unwrap_or("?"), body["message"].as_str().unwrap_or(""))
}

/// One line per rule and per changed hook: `+` added, `-` removed, `~` changed (starts fresh),
/// `=` unchanged (keeps its windows and states).
pub fn diff_lines(current: &AlarmSettings, candidate: &AlarmSettings) -> Vec<String> {
    let changes = diff(current, candidate);
    let mut lines = Vec::new();
    let rule_lines = [
        (&changes.added, "+", "added"),
        (&changes.removed, "-", "removed, its alarms dropped without a recovery"),
        (&changes.changed, "~", "changed, starts fresh (its alarms dropped without a recovery)"),
        (&changes.unchanged, "=", "unchanged, keeps its windows and states"),
    ];
    for (names, mark, what) in rule_lines {
        lines.extend(names.iter().map(|name| format!("{mark} rule {name}: {what}")));
    }
    for hook in &candidate.hooks {
        match current.hook(&hook.id) {
            None => lines.push(format!("+ hook {}: added", hook.id)),
            Some(before) if before != hook => lines.push(format!("~ hook {}: changed", hook.id)),
            Some(_) => {}
        }
    }
    for hook in current.hooks.iter().filter(|h| candidate.hook(&h.id).is_none()) {
        lines.push(format!("- hook {}: removed", hook.id));
    }
    if changes.added.is_empty() && changes.removed.is_empty() && changes.changed.is_empty() && !lines.iter().any(|l| l.contains(" hook ")) {
        lines.push("no differences in rules or hooks".to_string());
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(text: &str) -> AlarmSettings {
        validate(text.as_bytes()).expect("valid").0
    }

    #[test]
    fn a_diff_names_each_rule_and_hook_change() {
        let current = settings(
            "rules:\n  a_rule:\n    expression: sum(m > 1) >= 1\n  b_rule:\n    expression: sum(m > 2) >= 1\n  c_rule:\n    expression: sum(m > 3) >= 1\n\
             hooks:\n  webhook:\n    w:\n      urls: [http://127.0.0.1:1/a]\n    gone:\n      urls: [http://127.0.0.1:1/g]\n",
        );
        let candidate = settings(
            "rules:\n  a_rule:\n    expression: sum(m > 1) >= 1\n  b_rule:\n    expression: sum(m > 20) >= 1\n  d_rule:\n    expression: sum(m > 4) >= 1\n\
             hooks:\n  webhook:\n    w:\n      urls: [http://127.0.0.1:1/b]\n  alertmanager:\n    am:\n      urls: [http://127.0.0.1:1]\n",
        );
        let lines = diff_lines(&current, &candidate);
        for expected in [
            "+ rule d_rule: added",
            "- rule c_rule: removed, its alarms dropped without a recovery",
            "~ rule b_rule: changed, starts fresh (its alarms dropped without a recovery)",
            "= rule a_rule: unchanged, keeps its windows and states",
            "~ hook webhook.w: changed",
            "+ hook alertmanager.am: added",
            "- hook webhook.gone: removed",
        ] {
            assert!(lines.iter().any(|l| l == expected), "{expected:?} missing from {lines:#?}");
        }
        assert!(!lines.iter().any(|l| l.starts_with("no differences")));
        let same = diff_lines(&current, &current);
        assert_eq!(same.last().map(String::as_str), Some("no differences in rules or hooks"));
        assert!(same.iter().all(|l| l.starts_with('=') || l.starts_with("no differences")), "{same:#?}");
    }

    #[test]
    fn source_lines_say_where_settings_came_from() {
        let body = serde_json::json!({"source": "runtime", "revision": "1.0@a", "refused": {"reason": "bad"}});
        assert_eq!(source_line(&body), "pushed at runtime, revision 1.0@a; newer settings were refused: bad");
        assert_eq!(source_line(&serde_json::json!({"source": "file", "path": "x.yml"})), "the boot file x.yml");
    }
}
