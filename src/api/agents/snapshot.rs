//! One consistent view of the desired state (groups, configs with their JSON detail, onetime
//! commands) and the pure question asked of it on every heartbeat: what should this agent hold?
//!
//! A snapshot is built once per change of the desired state, not per heartbeat: content is
//! checked and converted to JSON here, so a heartbeat only compares names and versions and clones
//! reference-counted bytes. Entries that fail validation are left out and listed in
//! [`ConfigSnapshot::rejected`], so one bad stored entry cannot stop every other from reaching
//! agents.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bytes::Bytes;

use crate::control::agents::detail::to_json_detail;
use crate::control::agents::model::AgentIdentity;
use crate::control::agents::model::{AgentGroup, ConfigEntry, ConfigKind, OnetimeCommand};

/// A config ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliverableConfig {
    pub name: String,
    pub version: i64,
    pub json_detail: Bytes,
    pub groups: BTreeSet<String>,
}

/// A onetime command ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliverableCommand {
    pub name: String,
    pub json_detail: Bytes,
    pub expire_time_s: i64,
    pub group: String,
}

/// A stored entry the snapshot left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedEntry {
    pub what: &'static str,
    pub name: String,
    pub reason: String,
}

/// What one agent should hold, by name. Entries are shared with the snapshot, so computing this on
/// every heartbeat copies pointers, not configs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DesiredState {
    pub pipeline: BTreeMap<String, Arc<DeliverableConfig>>,
    pub instance: BTreeMap<String, Arc<DeliverableConfig>>,
    pub commands: BTreeMap<String, Arc<DeliverableCommand>>,
    /// Configs stored but left out of the snapshot: never told to be deleted on that account.
    pub withheld: Arc<Withheld>,
}

impl DesiredState {
    pub fn configs(&self, kind: ConfigKind) -> &BTreeMap<String, Arc<DeliverableConfig>> {
        match kind {
            ConfigKind::Pipeline => &self.pipeline,
            ConfigKind::Instance => &self.instance,
        }
    }
}

/// Names of stored configs the snapshot could not serve (see [`ConfigSnapshot::rejected`]). An
/// agent holding one keeps its copy: a bad stored entry must not turn into a `-1`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Withheld {
    pipeline: BTreeSet<String>,
    instance: BTreeSet<String>,
}

impl Withheld {
    pub fn contains(&self, kind: ConfigKind, name: &str) -> bool {
        match kind {
            ConfigKind::Pipeline => self.pipeline.contains(name),
            ConfigKind::Instance => self.instance.contains(name),
        }
    }

    fn insert(&mut self, kind: ConfigKind, name: &str) {
        match kind {
            ConfigKind::Pipeline => self.pipeline.insert(name.to_string()),
            ConfigKind::Instance => self.instance.insert(name.to_string()),
        };
    }
}

#[derive(Debug, Clone, Default)]
pub struct ConfigSnapshot {
    groups: BTreeMap<String, AgentGroup>,
    pipeline: BTreeMap<String, Arc<DeliverableConfig>>,
    instance: BTreeMap<String, Arc<DeliverableConfig>>,
    commands: BTreeMap<String, Arc<DeliverableCommand>>,
    rejected: Vec<RejectedEntry>,
    withheld: Arc<Withheld>,
}

impl ConfigSnapshot {
    /// Validates and indexes the desired state. The `default` group is always present.
    pub fn build(
        groups: Vec<AgentGroup>,
        configs: Vec<ConfigEntry>,
        commands: Vec<OnetimeCommand>,
    ) -> ConfigSnapshot {
        let mut snapshot = ConfigSnapshot::default();
        let default = AgentGroup::default_group();
        snapshot.groups.insert(default.name.clone(), default);
        for group in groups {
            match group.validate() {
                Ok(()) => {
                    snapshot.groups.insert(group.name.clone(), group);
                }
                Err(e) => snapshot.reject("group", &group.name, e.to_string()),
            }
        }
        for entry in configs {
            let checked = entry.validate().map_err(|e| e.to_string()).and_then(|()| {
                to_json_detail(&entry.content, entry.format).map_err(|e| e.to_string())
            });
            match checked {
                Ok(json_detail) => {
                    let deliverable = DeliverableConfig {
                        name: entry.name.clone(),
                        version: entry.version,
                        json_detail,
                        groups: entry.groups,
                    };
                    let target = match entry.kind {
                        ConfigKind::Pipeline => &mut snapshot.pipeline,
                        ConfigKind::Instance => &mut snapshot.instance,
                    };
                    target.insert(entry.name, Arc::new(deliverable));
                }
                Err(reason) => {
                    Arc::make_mut(&mut snapshot.withheld).insert(entry.kind, &entry.name);
                    snapshot.reject(entry.kind.label(), &entry.name, reason)
                }
            }
        }
        for command in commands {
            let checked = command
                .validate()
                .map_err(|e| e.to_string())
                .and_then(|()| {
                    to_json_detail(&command.content, command.format).map_err(|e| e.to_string())
                });
            match checked {
                Ok(json_detail) => {
                    let deliverable = DeliverableCommand {
                        name: command.name.clone(),
                        json_detail,
                        expire_time_s: command.expire_time_s,
                        group: command.group,
                    };
                    snapshot
                        .commands
                        .insert(command.name, Arc::new(deliverable));
                }
                Err(reason) => snapshot.reject("onetime command", &command.name, reason),
            }
        }
        snapshot
    }

    fn reject(&mut self, what: &'static str, name: &str, reason: String) {
        tracing::warn!(what, name, %reason, "agent config entry left out of the snapshot");
        self.rejected.push(RejectedEntry {
            what,
            name: name.to_string(),
            reason,
        });
    }

    pub fn rejected(&self) -> &[RejectedEntry] {
        &self.rejected
    }

    pub fn groups(&self) -> impl Iterator<Item = &AgentGroup> {
        self.groups.values()
    }

    pub fn config(&self, kind: ConfigKind, name: &str) -> Option<&DeliverableConfig> {
        match kind {
            ConfigKind::Pipeline => self.pipeline.get(name).map(Arc::as_ref),
            ConfigKind::Instance => self.instance.get(name).map(Arc::as_ref),
        }
    }

    pub fn withheld(&self) -> &Withheld {
        &self.withheld
    }

    pub fn command(&self, name: &str) -> Option<&DeliverableCommand> {
        self.commands.get(name).map(Arc::as_ref)
    }

    /// The names of the groups that hold this agent; always includes `default`.
    pub fn groups_of(&self, agent: &AgentIdentity<'_>) -> BTreeSet<&str> {
        self.groups
            .values()
            .filter(|group| group.is_default() || group.selector.matches(agent))
            .map(|group| group.name.as_str())
            .collect()
    }

    /// The configs applied to any of the agent's groups, and the unexpired commands aimed at one.
    pub fn desired_for(&self, agent: &AgentIdentity<'_>, now_ms: u64) -> DesiredState {
        let member_of = self.groups_of(agent);
        let applied = |config: &&Arc<DeliverableConfig>| {
            config.groups.iter().any(|g| member_of.contains(g.as_str()))
        };
        let pick = |configs: &BTreeMap<String, Arc<DeliverableConfig>>| {
            configs
                .values()
                .filter(applied)
                .map(|c| (c.name.clone(), Arc::clone(c)))
                .collect()
        };
        DesiredState {
            pipeline: pick(&self.pipeline),
            instance: pick(&self.instance),
            commands: self
                .commands
                .values()
                .filter(|c| {
                    member_of.contains(c.group.as_str())
                        && !crate::control::agents::model::expired(c.expire_time_s, now_ms)
                })
                .map(|c| (c.name.clone(), Arc::clone(c)))
                .collect(),
            withheld: Arc::clone(&self.withheld),
        }
    }
}
