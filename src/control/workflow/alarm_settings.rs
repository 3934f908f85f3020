//! Writes of the runtime alarm settings: `alarm-settings.yml` pushed by an operator, validated
//! here on the main as every node will read it, then written as one entry on the single write
//! path ([`Workflow::write_object`]) and put in force on the main at once. The peers put it in
//! force when the entry reaches them (the commit notice, else the next scan); deleting it
//! returns every node to its boot file.

use super::Workflow;
use crate::control::agents::manage::Edit;
use crate::control::alarms::live::{LiveSettings, Pushed, Synced, settings_key, validate};
use crate::control::outcome::{ApplyStatus, Outcome};
use crate::store::EntryStatus;

impl Workflow {
    /// Pushes `content` as the alarm settings, or (`None`) deletes the pushed settings.
    pub async fn alarm_settings_op(&self, content: Option<&[u8]>) -> Outcome {
        let key = settings_key();
        let write = match content {
            Some(content) => {
                if content.iter().all(u8::is_ascii_whitespace) {
                    return Outcome::new(ApplyStatus::EmptyBody, "the body must be an alarm-settings.yml (rules and hooks)");
                }
                let summary = match validate(content) {
                    Ok((settings, _)) => format!("{} rule(s), {} hook(s)", settings.rules.len(), settings.hooks.len()),
                    Err(e) => return Outcome::new(ApplyStatus::CompileFailed, format!("alarm settings refused, the settings in force stay: {e}")),
                };
                self.write_object(key, |prior, _| {
                    let hash = crate::base::ids::ContentHash::of(content);
                    Ok(match prior {
                        Some(prior) if prior.status == EntryStatus::Active && prior.content_hash == hash => {
                            Edit::NoChange { version: None, message: "alarm settings unchanged".to_string() }
                        }
                        _ => Edit::Put { content: content.to_vec(), version: None, message: format!("alarm settings stored: {summary}") },
                    })
                })
                .await
            }
            None => {
                self.write_object(key, |prior, _| match prior {
                    Some(prior) if prior.status == EntryStatus::Active => {
                        Ok(Edit::Remove { message: "alarm settings deleted: every node returns to its boot file".to_string() })
                    }
                    _ => Err(Outcome::new(ApplyStatus::NotFound, "no alarm settings were pushed: every node runs its boot file")),
                })
                .await
            }
        };
        let (mut outcome, entry) = write;
        if let (Some(entry), Some(live)) = (entry, self.runtime.alarm_settings()) {
            outcome.message.push_str(&in_force_note(&live, &entry));
        }
        outcome
    }
}

/// Puts a written entry in force here and says what that did.
fn in_force_note(live: &LiveSettings, entry: &crate::store::RuleEntry) -> String {
    let pushed = (entry.status == EntryStatus::Active).then_some(Pushed { content: &entry.content, revision: &entry.revision });
    match live.sync(pushed) {
        Synced::Applied { kept, fresh, removed } => {
            let mut parts = Vec::new();
            for (names, what) in [(&kept, "kept their state"), (&fresh, "started fresh"), (&removed, "removed")] {
                if !names.is_empty() {
                    parts.push(format!("{what}: {}", names.join(", ")));
                }
            }
            if parts.is_empty() {
                parts.push("no rules".to_string());
            }
            format!("; in force on the main ({})", parts.join("; "))
        }
        Synced::Unchanged => "; in force on the main (the same rules)".to_string(),
        Synced::Refused { reason } => format!("; not in force on the main: {reason}"),
    }
}
