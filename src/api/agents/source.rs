//! The seam to the desired state: [`AgentConfigSource`] hands out [`ConfigSnapshot`]s, and
//! [`MemConfigSource`] is its in-memory implementation, with the mutations a management API needs.
//!
//! The node will implement the trait over its replicated store; the protocol only reads. Mutation
//! is deliberately not part of the trait: writes go through the node's own write path, and the
//! source only has to publish a new snapshot when the desired state changes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::control::agents::detail::{DetailError, to_json_detail};
use crate::control::agents::model::{
    AgentGroup, ConfigEntry, ConfigKind, ContentFormat, DEFAULT_GROUP, ModelError, OnetimeCommand,
    validate_name,
};
use super::snapshot::ConfigSnapshot;

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Invalid(#[from] ModelError),
    #[error("content of {name:?}: {source}")]
    Content { name: String, source: DetailError },
    #[error("group {name:?} does not exist")]
    GroupNotFound { name: String },
    #[error("the {DEFAULT_GROUP:?} group cannot be removed or changed")]
    DefaultGroupFixed,
    #[error("{kind} {name:?} does not exist", kind = kind.label())]
    ConfigNotFound { kind: ConfigKind, name: String },
    #[error("onetime command {name:?} does not exist")]
    CommandNotFound { name: String },
    #[error("the desired state is unavailable: {reason}")]
    Unavailable { reason: String },
}

/// Where the protocol reads the desired state from.
pub trait AgentConfigSource: Send + Sync {
    /// The current desired state. Called on every heartbeat and fetch, so implementations keep the
    /// last snapshot and rebuild it only after a change.
    fn snapshot(&self) -> Result<Arc<ConfigSnapshot>, SourceError>;

    /// Whether [`AgentConfigSource::snapshot`] would answer from its cache, without reading
    /// storage. Callers on async threads run a rebuild on the blocking pool.
    fn is_current(&self) -> bool {
        true
    }
}

/// The desired state in memory: for tests, the simulated fleet, and as the model of what a
/// store-backed source does.
pub struct MemConfigSource {
    inner: Mutex<MemState>,
}

struct MemState {
    groups: BTreeMap<String, AgentGroup>,
    configs: BTreeMap<(ConfigKind, String), ConfigEntry>,
    commands: BTreeMap<String, OnetimeCommand>,
    /// Versions come from one counter for every config, so a version is never reused, not even
    /// for a config deleted and created again under the same name.
    last_version: i64,
    cached: Option<Arc<ConfigSnapshot>>,
}

impl Default for MemConfigSource {
    fn default() -> Self {
        MemConfigSource::new()
    }
}

impl MemConfigSource {
    /// An empty desired state with the `default` group.
    pub fn new() -> MemConfigSource {
        let mut groups = BTreeMap::new();
        groups.insert(DEFAULT_GROUP.to_string(), AgentGroup::default_group());
        MemConfigSource {
            inner: Mutex::new(MemState {
                groups,
                configs: BTreeMap::new(),
                commands: BTreeMap::new(),
                last_version: 0,
                cached: None,
            }),
        }
    }

    fn change<T>(
        &self,
        edit: impl FnOnce(&mut MemState) -> Result<T, SourceError>,
    ) -> Result<T, SourceError> {
        let mut state = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let result = edit(&mut state)?;
        state.cached = None;
        Ok(result)
    }

    /// Creates or replaces a group. The `default` group is fixed.
    pub fn put_group(&self, group: AgentGroup) -> Result<(), SourceError> {
        if group.is_default() {
            return Err(SourceError::DefaultGroupFixed);
        }
        group.validate()?;
        self.change(|state| {
            state.groups.insert(group.name.clone(), group);
            Ok(())
        })
    }

    /// Removes a group; configs stay, applied to the groups that remain.
    pub fn remove_group(&self, name: &str) -> Result<(), SourceError> {
        if name == DEFAULT_GROUP {
            return Err(SourceError::DefaultGroupFixed);
        }
        self.change(|state| {
            state
                .groups
                .remove(name)
                .ok_or_else(|| SourceError::GroupNotFound {
                    name: name.to_string(),
                })?;
            for entry in state.configs.values_mut() {
                entry.groups.remove(name);
            }
            Ok(())
        })
    }

    pub fn group(&self, name: &str) -> Option<AgentGroup> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .groups
            .get(name)
            .cloned()
    }

    /// Creates a config or replaces its content, keeping the groups it is applied to. Returns the
    /// version: a new one when the content changed, the current one when it did not.
    pub fn put_config(
        &self,
        kind: ConfigKind,
        name: &str,
        content: &str,
        format: ContentFormat,
    ) -> Result<i64, SourceError> {
        validate_name(kind.label(), name)?;
        to_json_detail(content, format).map_err(|source| SourceError::Content {
            name: name.to_string(),
            source,
        })?;
        self.change(|state| {
            let key = (kind, name.to_string());
            if let Some(entry) = state.configs.get(&key)
                && entry.content == content
                && entry.format == format
            {
                return Ok(entry.version);
            }
            state.last_version += 1;
            let version = state.last_version;
            let groups = state
                .configs
                .get(&key)
                .map(|e| e.groups.clone())
                .unwrap_or_default();
            let entry = ConfigEntry {
                kind,
                name: name.to_string(),
                content: content.to_string(),
                format,
                version,
                groups,
            };
            state.configs.insert(key, entry);
            Ok(version)
        })
    }

    pub fn remove_config(&self, kind: ConfigKind, name: &str) -> Result<(), SourceError> {
        self.change(|state| {
            state
                .configs
                .remove(&(kind, name.to_string()))
                .map(|_| ())
                .ok_or_else(|| SourceError::ConfigNotFound {
                    kind,
                    name: name.to_string(),
                })
        })
    }

    pub fn config(&self, kind: ConfigKind, name: &str) -> Option<ConfigEntry> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .configs
            .get(&(kind, name.to_string()))
            .cloned()
    }

    /// Applies a config to a group (idempotent).
    pub fn apply_config(
        &self,
        kind: ConfigKind,
        name: &str,
        group: &str,
    ) -> Result<(), SourceError> {
        self.change(|state| {
            if !state.groups.contains_key(group) {
                return Err(SourceError::GroupNotFound {
                    name: group.to_string(),
                });
            }
            let entry = state
                .configs
                .get_mut(&(kind, name.to_string()))
                .ok_or_else(|| SourceError::ConfigNotFound {
                    kind,
                    name: name.to_string(),
                })?;
            entry.groups.insert(group.to_string());
            Ok(())
        })
    }

    /// Removes a config from a group (idempotent). Agents of that group that hold it, and are in
    /// no other group it is applied to, are told to delete it.
    pub fn remove_config_from_group(
        &self,
        kind: ConfigKind,
        name: &str,
        group: &str,
    ) -> Result<(), SourceError> {
        self.change(|state| {
            let entry = state
                .configs
                .get_mut(&(kind, name.to_string()))
                .ok_or_else(|| SourceError::ConfigNotFound {
                    kind,
                    name: name.to_string(),
                })?;
            entry.groups.remove(group);
            Ok(())
        })
    }

    /// Creates or replaces a onetime command.
    pub fn put_command(&self, command: OnetimeCommand) -> Result<(), SourceError> {
        command.validate()?;
        to_json_detail(&command.content, command.format).map_err(|source| {
            SourceError::Content {
                name: command.name.clone(),
                source,
            }
        })?;
        self.change(|state| {
            if !state.groups.contains_key(&command.group) {
                return Err(SourceError::GroupNotFound {
                    name: command.group.clone(),
                });
            }
            state.commands.insert(command.name.clone(), command);
            Ok(())
        })
    }

    pub fn remove_command(&self, name: &str) -> Result<(), SourceError> {
        self.change(|state| {
            state
                .commands
                .remove(name)
                .map(|_| ())
                .ok_or_else(|| SourceError::CommandNotFound {
                    name: name.to_string(),
                })
        })
    }
}

impl AgentConfigSource for MemConfigSource {
    fn snapshot(&self) -> Result<Arc<ConfigSnapshot>, SourceError> {
        let mut state = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(cached) = &state.cached {
            return Ok(Arc::clone(cached));
        }
        let snapshot = Arc::new(ConfigSnapshot::build(
            state.groups.values().cloned().collect(),
            state.configs.values().cloned().collect(),
            state.commands.values().cloned().collect(),
        ));
        state.cached = Some(Arc::clone(&snapshot));
        Ok(snapshot)
    }
}
