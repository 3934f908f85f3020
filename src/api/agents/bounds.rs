//! Bounds on what the server stores about one agent: every free-text field an agent sends is
//! kept to [`MAX_FIELD_BYTES`], and all of an agent's text together to [`MAX_RECORD_TEXT_BYTES`],
//! so neither memory nor `GET /agent/agents` grows with what a (hostile or broken) agent puts in
//! a heartbeat.
//!
//! Pure: [`bound`] trims a merged record in place and names what it cut in the record's
//! `truncated` list (shown by `/agent/agents`); the service counts and logs.
//!
//! Config status names are protocol state, not free text, and are counted first: a name longer
//! than a config name can be ([`MAX_NAME_LEN`]) cannot be one this server sent and its entry is
//! dropped; the others are kept whatever the budget (the lists are bounded by count in the
//! protocol, so only an agent reporting hundreds of configs can pass the total with names
//! alone). The rest of the budget is spent in a fixed order, most useful first, so that what
//! group matching reads survives: `agent_type`, the attributes (`ip`, `hostname`, `hostid`,
//! `version`), the tags, `running_status`, the attribute `extras`, then the config status
//! messages. A cut text field keeps its start and ends in [`TRUNCATION_MARKER`]; tags and extras
//! that no longer fit are dropped whole.

use std::collections::BTreeSet;

use crate::control::agents::model::MAX_NAME_LEN;
use super::state::{AgentRecord, ConfigStatusRecord};

/// Longest stored free-text field (and extras key), in bytes.
pub const MAX_FIELD_BYTES: usize = 4 * 1024;

/// Most text stored for one agent, in bytes (config status names included).
pub const MAX_RECORD_TEXT_BYTES: usize = 64 * 1024;

/// What a cut field ends with.
pub const TRUNCATION_MARKER: &str = "…[truncated]";

/// Trims `record` to the bounds; returns true when anything was cut (then listed in
/// `record.truncated`, which is replaced).
pub fn bound(record: &mut AgentRecord) -> bool {
    let mut budget = Budget { left: MAX_RECORD_TEXT_BYTES, cut: BTreeSet::new() };
    budget.spend(record.instance_id.as_str().len());
    // Config status names first: they are protocol state, kept whatever the budget.
    for (field, list) in [
        ("pipeline_configs", &mut record.pipeline_configs),
        ("instance_configs", &mut record.instance_configs),
        ("onetime_commands", &mut record.onetime_commands),
    ] {
        let before = list.len();
        list.retain(|status| status.name.len() <= MAX_NAME_LEN);
        if list.len() != before {
            budget.cut.insert(field);
        }
        for status in list.iter() {
            budget.spend(status.name.len());
        }
    }
    budget.text("agent_type", &mut record.agent_type);
    budget.text("attributes.ip", &mut record.attributes.ip);
    budget.text("attributes.hostname", &mut record.attributes.hostname);
    budget.text("attributes.hostid", &mut record.attributes.hostid);
    budget.text("attributes.version", &mut record.attributes.version);

    let mut kept_tags = Vec::with_capacity(record.tags.len());
    for mut tag in std::mem::take(&mut record.tags) {
        if tag.name.len() > MAX_FIELD_BYTES || tag.name.len() > budget.left {
            budget.cut.insert("tags");
            continue;
        }
        budget.spend(tag.name.len());
        budget.text("tags", &mut tag.value);
        kept_tags.push(tag);
    }
    record.tags = kept_tags;

    budget.text("running_status", &mut record.running_status);

    let extras = std::mem::take(&mut record.attributes.extras);
    for (key, mut value) in extras {
        if key.len() > MAX_FIELD_BYTES || key.len() > budget.left {
            budget.cut.insert("attributes.extras");
            continue;
        }
        budget.spend(key.len());
        budget.text("attributes.extras", &mut value);
        record.attributes.extras.insert(key, value);
    }

    for (field, list) in [
        ("pipeline_configs.message", &mut record.pipeline_configs),
        ("instance_configs.message", &mut record.instance_configs),
        ("onetime_commands.message", &mut record.onetime_commands),
    ] {
        list.iter_mut().for_each(|status: &mut ConfigStatusRecord| budget.text(field, &mut status.message));
    }

    record.truncated = budget.cut.iter().map(|field| field.to_string()).collect();
    !budget.cut.is_empty()
}

struct Budget {
    left: usize,
    cut: BTreeSet<&'static str>,
}

impl Budget {
    fn spend(&mut self, bytes: usize) {
        self.left = self.left.saturating_sub(bytes);
    }

    /// Keeps at most the field limit, and at most what is left of the budget.
    fn text(&mut self, field: &'static str, text: &mut String) {
        let allowed = MAX_FIELD_BYTES.min(self.left);
        if text.len() > allowed {
            cut_to(text, allowed);
            self.cut.insert(field);
        }
        self.spend(text.len());
    }
}

/// Cuts `text` to at most `max` bytes, marker included, on a character boundary; empty when
/// not even the marker fits.
fn cut_to(text: &mut String, max: usize) {
    if max < TRUNCATION_MARKER.len() {
        text.clear();
        return;
    }
    let mut end = max - TRUNCATION_MARKER.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(TRUNCATION_MARKER);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::agents::model::{AgentTag, InstanceId};
    use crate::api::agents::state::ApplyStatus;

    fn record() -> AgentRecord {
        AgentRecord::new(InstanceId::from_wire(b"agent-1").expect("id"), 1)
    }

    fn text_bytes(record: &AgentRecord) -> usize {
        let a = &record.attributes;
        let statuses = record.pipeline_configs.iter().chain(&record.instance_configs).chain(&record.onetime_commands);
        record.instance_id.as_str().len()
            + record.agent_type.len()
            + a.ip.len()
            + a.hostname.len()
            + a.hostid.len()
            + a.version.len()
            + record.tags.iter().map(|t| t.name.len() + t.value.len()).sum::<usize>()
            + record.running_status.len()
            + a.extras.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
            + statuses.map(|s| s.name.len() + s.message.len()).sum::<usize>()
    }

    #[test]
    fn a_small_record_is_untouched() {
        let mut small = record();
        small.running_status = "running".into();
        small.attributes.extras.insert("osDetail".into(), "Linux".into());
        let before = small.clone();
        assert!(!bound(&mut small));
        assert_eq!(small, before);
    }

    #[test]
    fn a_huge_field_is_cut_with_a_marker_and_named() {
        let mut huge = record();
        huge.running_status = "é".repeat(2_000_000);
        assert!(bound(&mut huge));
        assert!(huge.running_status.len() <= MAX_FIELD_BYTES);
        assert!(huge.running_status.ends_with(TRUNCATION_MARKER));
        assert!(huge.running_status.starts_with("éé"));
        assert_eq!(huge.truncated, vec!["running_status".to_string()]);
    }

    #[test]
    fn the_whole_record_stays_within_its_budget() {
        let mut flood = record();
        flood.running_status = "x".repeat(10_000);
        for i in 0..1_000 {
            flood.attributes.extras.insert(format!("key{i}"), "v".repeat(10_000));
            flood.tags.push(AgentTag { name: format!("tag{i}"), value: "t".repeat(10_000) });
        }
        flood.attributes.extras.insert("k".repeat(MAX_FIELD_BYTES + 1), "v".into());
        for i in 0..100 {
            flood.pipeline_configs.push(ConfigStatusRecord {
                name: format!("c{i}"),
                version: 1,
                status: ApplyStatus::Failed,
                message: "m".repeat(10_000),
            });
        }
        flood.pipeline_configs.push(ConfigStatusRecord {
            name: "n".repeat(MAX_NAME_LEN + 1),
            version: 1,
            status: ApplyStatus::Applied,
            message: String::new(),
        });
        assert!(bound(&mut flood));
        assert!(text_bytes(&flood) <= MAX_RECORD_TEXT_BYTES, "{} bytes kept", text_bytes(&flood));
        // Names of configs the agent holds are kept (but the impossible one); messages give way.
        assert_eq!(flood.pipeline_configs.len(), 100);
        for field in ["tags", "running_status", "attributes.extras", "pipeline_configs", "pipeline_configs.message"] {
            assert!(flood.truncated.iter().any(|t| t == field), "{field} in {:?}", flood.truncated);
        }
        // Bounding again changes nothing more.
        let once = flood.clone();
        bound(&mut flood);
        assert_eq!(flood.running_status, once.running_status);
        assert_eq!(flood.attributes.extras, once.attributes.extras);
    }
}
