//! Management operations on the agents' desired state, as pure decisions.
//!
//! Groups, pipeline and instance configs and onetime commands are stored as entries of the agent
//! catalogs (`rule/<agent catalog>/<name>`, content = the object as JSON), written by the one
//! workflow on the main and replicated like rule entries. An [`AgentOp`] names one object; the
//! workflow reads the stored object under that key's lock and asks [`AgentOp::edit`] what to
//! write. Operations travel to the main as they are (not as the resulting object), so a
//! read-modify-write such as "apply this config to a group" always runs on the main's latest
//! state.

use serde::{Deserialize, Serialize};

use super::detail::{DetailError, to_json_detail};
use super::model::{
    AgentGroup, ConfigEntry, ConfigKind, ContentFormat, DEFAULT_GROUP, ModelError, OnetimeCommand,
    validate_name,
};
use crate::base::ids::{Catalog, RuleKey, RuleName};

#[derive(Debug, thiserror::Error)]
pub enum ManageError {
    #[error(transparent)]
    Invalid(#[from] ModelError),
    #[error("{name:?} cannot be stored: {reason}")]
    BadKey { name: String, reason: String },
    #[error("content of {name:?}: {source}")]
    Content { name: String, source: DetailError },
    #[error("the {DEFAULT_GROUP:?} group always exists and cannot be changed or deleted")]
    DefaultGroupFixed,
    #[error("group {name:?} does not exist")]
    GroupNotFound { name: String },
    #[error("{kind} {name:?} does not exist", kind = kind.label())]
    ConfigNotFound { kind: ConfigKind, name: String },
    #[error("onetime command {name:?} does not exist")]
    CommandNotFound { name: String },
    #[error("stored {what} {name:?} is unreadable: {reason}")]
    Corrupt {
        what: &'static str,
        name: String,
        reason: String,
    },
}

/// One management write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum AgentOp {
    PutGroup {
        group: AgentGroup,
    },
    DeleteGroup {
        name: String,
    },
    /// Create a config, or replace its content (keeping the groups it is applied to).
    PushConfig {
        kind: ConfigKind,
        name: String,
        content: String,
        format: ContentFormat,
    },
    DeleteConfig {
        kind: ConfigKind,
        name: String,
    },
    ApplyConfig {
        kind: ConfigKind,
        name: String,
        group: String,
    },
    RemoveConfig {
        kind: ConfigKind,
        name: String,
        group: String,
    },
    PutCommand {
        command: OnetimeCommand,
    },
    DeleteCommand {
        name: String,
    },
}

/// What the workflow writes for an operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// Store this object (JSON); `version` is the config version it carries, if any.
    Put {
        content: Vec<u8>,
        version: Option<i64>,
        message: String,
    },
    /// Write a tombstone.
    Remove { message: String },
    /// Nothing to write; `version` is the current config version, if any.
    NoChange {
        version: Option<i64>,
        message: String,
    },
}

pub fn config_catalog(kind: ConfigKind) -> Catalog {
    match kind {
        ConfigKind::Pipeline => Catalog::AgentPipelineConfigs,
        ConfigKind::Instance => Catalog::AgentInstanceConfigs,
    }
}

/// What kind of agent object a key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AgentObjectKind {
    Group,
    Config(ConfigKind),
    Command,
}

impl AgentObjectKind {
    /// The agent catalog objects of this kind are stored in.
    pub fn catalog(self) -> Catalog {
        match self {
            AgentObjectKind::Group => Catalog::AgentGroups,
            AgentObjectKind::Config(kind) => config_catalog(kind),
            AgentObjectKind::Command => Catalog::AgentCommands,
        }
    }
}

/// The key of an agent object (group, config, onetime command): only ever one of the agent
/// catalogs, so it cannot be mistaken for a rule file's key. Storage and the per-file locks are
/// keyed by [`AgentObjectKey::entry_key`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AgentObjectKey {
    kind: AgentObjectKind,
    name: RuleName,
}

impl AgentObjectKey {
    /// The key of the object `name` of `kind`; the name must be a valid entry name.
    pub fn new(kind: AgentObjectKind, name: &str) -> Result<AgentObjectKey, ManageError> {
        let name = RuleName::parse(name).map_err(|e| ManageError::BadKey {
            name: name.to_string(),
            reason: e.to_string(),
        })?;
        Ok(AgentObjectKey { kind, name })
    }

    pub fn kind(&self) -> AgentObjectKind {
        self.kind
    }

    pub fn catalog(&self) -> Catalog {
        self.kind.catalog()
    }

    pub fn name(&self) -> &str {
        self.name.as_str()
    }

    /// The entry key the object is stored (and locked) under.
    pub fn entry_key(&self) -> RuleKey {
        RuleKey::new(self.catalog(), self.name.clone())
    }
}

impl std::fmt::Display for AgentObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.catalog(), self.name.as_str())
    }
}

/// Parses a config kind as the API spells it.
pub fn parse_kind(text: &str) -> Option<ConfigKind> {
    match text.trim() {
        "pipeline" => Some(ConfigKind::Pipeline),
        "instance" => Some(ConfigKind::Instance),
        _ => None,
    }
}

fn decode<T: serde::de::DeserializeOwned>(
    what: &'static str,
    name: &str,
    bytes: &[u8],
) -> Result<T, ManageError> {
    serde_json::from_slice(bytes).map_err(|e| ManageError::Corrupt {
        what,
        name: name.to_string(),
        reason: e.to_string(),
    })
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Plain structs of strings, integers and sets: serializing them to JSON cannot fail.
    serde_json::to_vec(value).unwrap_or_default()
}

/// Stores an unversioned object (a group or a onetime command), or nothing when the stored one
/// is equal.
fn put_unless_same<T: Serialize + serde::de::DeserializeOwned + PartialEq>(
    prior: Option<&[u8]>,
    what: &'static str,
    name: &str,
    value: &T,
    stored_message: String,
) -> Result<Edit, ManageError> {
    if let Some(bytes) = prior
        && decode::<T>(what, name, bytes)? == *value
    {
        return Ok(Edit::NoChange {
            version: None,
            message: format!("{what} {name:?} is unchanged"),
        });
    }
    Ok(Edit::Put {
        content: encode(value),
        version: None,
        message: stored_message,
    })
}

fn check_content(name: &str, content: &str, format: ContentFormat) -> Result<(), ManageError> {
    to_json_detail(content, format)
        .map(|_| ())
        .map_err(|source| ManageError::Content {
            name: name.to_string(),
            source,
        })
}

impl AgentOp {
    /// The object this operation writes.
    pub fn key(&self) -> Result<AgentObjectKey, ManageError> {
        match self {
            AgentOp::PutGroup { group } => AgentObjectKey::new(AgentObjectKind::Group, &group.name),
            AgentOp::DeleteGroup { name } => AgentObjectKey::new(AgentObjectKind::Group, name),
            AgentOp::PushConfig { kind, name, .. }
            | AgentOp::DeleteConfig { kind, name }
            | AgentOp::ApplyConfig { kind, name, .. }
            | AgentOp::RemoveConfig { kind, name, .. } => AgentObjectKey::new(AgentObjectKind::Config(*kind), name),
            AgentOp::PutCommand { command } => AgentObjectKey::new(AgentObjectKind::Command, &command.name),
            AgentOp::DeleteCommand { name } => AgentObjectKey::new(AgentObjectKind::Command, name),
        }
    }

    /// Checks what can be checked without the stored state (names, selectors, content), so a
    /// node answers 400 before forwarding anything to the main.
    pub fn validate(&self) -> Result<(), ManageError> {
        match self {
            AgentOp::PutGroup { group } => {
                if group.is_default() {
                    return Err(ManageError::DefaultGroupFixed);
                }
                group.validate()?;
            }
            AgentOp::DeleteGroup { name } => {
                if name == DEFAULT_GROUP {
                    return Err(ManageError::DefaultGroupFixed);
                }
                validate_name("group", name)?;
            }
            AgentOp::PushConfig {
                kind,
                name,
                content,
                format,
            } => {
                validate_name(kind.label(), name)?;
                check_content(name, content, *format)?;
            }
            AgentOp::DeleteConfig { kind, name } => validate_name(kind.label(), name)?,
            AgentOp::ApplyConfig { kind, name, group }
            | AgentOp::RemoveConfig { kind, name, group } => {
                validate_name(kind.label(), name)?;
                validate_name("group", group)?;
            }
            AgentOp::PutCommand { command } => {
                command.validate()?;
                check_content(&command.name, &command.content, command.format)?;
            }
            AgentOp::DeleteCommand { name } => validate_name("onetime command", name)?,
        }
        self.key().map(|_| ())
    }

    /// Decides the write from the stored object (`prior`, live entries only), the version a new
    /// config content would get, and whether a group exists.
    pub fn edit(
        &self,
        prior: Option<&[u8]>,
        new_version: i64,
        group_exists: impl Fn(&str) -> bool,
    ) -> Result<Edit, ManageError> {
        self.validate()?;
        match self {
            AgentOp::PutGroup { group } => put_unless_same(
                prior,
                "group",
                &group.name,
                group,
                format!("group {:?} stored", group.name),
            ),
            AgentOp::DeleteGroup { name } => match prior {
                None => Err(ManageError::GroupNotFound { name: name.clone() }),
                Some(_) => Ok(Edit::Remove {
                    message: format!(
                        "group {name:?} deleted; configs still naming it reach no agent until a group of that name exists again"
                    ),
                }),
            },
            AgentOp::PushConfig {
                kind,
                name,
                content,
                format,
            } => {
                let current: Option<ConfigEntry> =
                    prior.map(|b| decode(kind.label(), name, b)).transpose()?;
                if let Some(current) = &current
                    && current.content == *content
                    && current.format == *format
                {
                    return Ok(Edit::NoChange {
                        version: Some(current.version),
                        message: format!(
                            "{} {name:?} already has this content at version {}",
                            kind.label(),
                            current.version
                        ),
                    });
                }
                // Above the current version even if the revision-derived one is not (a wall clock
                // stepped back far enough for the clock's counter to wrap its three digits).
                let new_version = match &current {
                    Some(current) => new_version.max(current.version.saturating_add(1)),
                    None => new_version,
                };
                let entry = ConfigEntry {
                    kind: *kind,
                    name: name.clone(),
                    content: content.clone(),
                    format: *format,
                    version: new_version,
                    groups: current.map(|c| c.groups).unwrap_or_default(),
                };
                Ok(Edit::Put {
                    content: encode(&entry),
                    version: Some(new_version),
                    message: format!("{} {name:?} stored at version {new_version}", kind.label()),
                })
            }
            AgentOp::DeleteConfig { kind, name } => match prior {
                None => Err(ManageError::ConfigNotFound {
                    kind: *kind,
                    name: name.clone(),
                }),
                Some(_) => Ok(Edit::Remove {
                    message: format!(
                        "{} {name:?} deleted; agents holding it delete it",
                        kind.label()
                    ),
                }),
            },
            AgentOp::ApplyConfig { kind, name, group }
            | AgentOp::RemoveConfig { kind, name, group } => {
                let apply = matches!(self, AgentOp::ApplyConfig { .. });
                let Some(bytes) = prior else {
                    return Err(ManageError::ConfigNotFound {
                        kind: *kind,
                        name: name.clone(),
                    });
                };
                if apply && !group_exists(group) {
                    return Err(ManageError::GroupNotFound {
                        name: group.clone(),
                    });
                }
                let mut entry: ConfigEntry = decode(kind.label(), name, bytes)?;
                let changed = if apply {
                    entry.groups.insert(group.clone())
                } else {
                    entry.groups.remove(group)
                };
                let version = Some(entry.version);
                if !changed {
                    let state = if apply {
                        "already applied to"
                    } else {
                        "not applied to"
                    };
                    return Ok(Edit::NoChange {
                        version,
                        message: format!("{} {name:?} is {state} group {group:?}", kind.label()),
                    });
                }
                let verb = if apply { "applied to" } else { "removed from" };
                Ok(Edit::Put {
                    content: encode(&entry),
                    version,
                    message: format!("{} {name:?} {verb} group {group:?}", kind.label()),
                })
            }
            AgentOp::PutCommand { command } => {
                if !group_exists(&command.group) {
                    return Err(ManageError::GroupNotFound {
                        name: command.group.clone(),
                    });
                }
                put_unless_same(
                    prior,
                    "onetime command",
                    &command.name,
                    command,
                    format!(
                        "onetime command {:?} stored for group {:?}",
                        command.name, command.group
                    ),
                )
            }
            AgentOp::DeleteCommand { name } => match prior {
                None => Err(ManageError::CommandNotFound { name: name.clone() }),
                Some(_) => Ok(Edit::Remove {
                    message: format!("onetime command {name:?} deleted"),
                }),
            },
        }
    }
}

/// Decodes stored agent objects into the parts of a snapshot; unreadable ones are skipped with a
/// warning (the snapshot builder rejects invalid ones the same way).
pub fn decode_objects(
    groups: &[Vec<u8>],
    configs: &[Vec<u8>],
    commands: &[Vec<u8>],
) -> (Vec<AgentGroup>, Vec<ConfigEntry>, Vec<OnetimeCommand>) {
    // Replicated objects are validated here as well as where they were written: a name from a
    // peer becomes a file name on the agent, so an invalid one is never served.
    fn all<T: serde::de::DeserializeOwned>(
        what: &str,
        items: &[Vec<u8>],
        validate: impl Fn(&T) -> Result<(), super::model::ModelError>,
    ) -> Vec<T> {
        items
            .iter()
            .filter_map(|bytes| match serde_json::from_slice(bytes) {
                Ok(value) => match validate(&value) {
                    Ok(()) => Some(value),
                    Err(e) => {
                        tracing::warn!(what, error = %e, "stored agent object is invalid; left out");
                        None
                    }
                },
                Err(e) => {
                    tracing::warn!(what, error = %e, "stored agent object is unreadable; left out");
                    None
                }
            })
            .collect()
    }
    (
        all("group", groups, AgentGroup::validate),
        all("config", configs, ConfigEntry::validate),
        all("onetime command", commands, OnetimeCommand::validate),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::agents::matching::ValuePattern;
    use crate::control::agents::model::{GroupSelector, TagMatch};

    fn push(content: &str) -> AgentOp {
        AgentOp::PushConfig {
            kind: ConfigKind::Pipeline,
            name: "nginx".into(),
            content: content.into(),
            format: ContentFormat::Yaml,
        }
    }

    #[test]
    fn decoded_objects_with_invalid_names_are_left_out() {
        let config = |name: &str| {
            serde_json::to_vec(&serde_json::json!({
                "kind": "pipeline", "name": name, "content": "{}", "format": "json", "version": 3, "groups": []
            }))
            .expect("json")
        };
        let (_, configs, _) = decode_objects(&[], &[config("nginx"), config("../../etc/evil"), config("")], &[]);
        let names: Vec<&str> = configs.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, vec!["nginx"]);
    }

    fn put_bytes(edit: Edit) -> Vec<u8> {
        match edit {
            Edit::Put { content, .. } => content,
            other => panic!("expected a put, got {other:?}"),
        }
    }

    #[test]
    fn pushing_versions_only_on_content_change_and_keeps_groups() {
        let first = put_bytes(
            push("inputs: []\n")
                .edit(None, 100, |_| true)
                .expect("push"),
        );
        let applied = AgentOp::ApplyConfig {
            kind: ConfigKind::Pipeline,
            name: "nginx".into(),
            group: "default".into(),
        };
        let with_group = put_bytes(applied.edit(Some(&first), 200, |_| true).expect("apply"));
        let entry: ConfigEntry = serde_json::from_slice(&with_group).expect("json");
        assert_eq!(entry.version, 100, "applying does not change the version");
        assert!(matches!(
            push("inputs: []\n").edit(Some(&with_group), 300, |_| true),
            Ok(Edit::NoChange {
                version: Some(100),
                ..
            })
        ));
        let updated = put_bytes(
            push("inputs: [1]\n")
                .edit(Some(&with_group), 300, |_| true)
                .expect("update"),
        );
        let entry: ConfigEntry = serde_json::from_slice(&updated).expect("json");
        assert_eq!((entry.version, entry.groups.len()), (300, 1));
    }

    #[test]
    fn a_content_change_always_raises_the_version_even_if_the_revision_does_not() {
        let first = put_bytes(push("inputs: []\n").edit(None, 5_000, |_| true).expect("push"));
        // A revision-derived version at or below the current one (the clock's counter wrapped).
        for offered in [5_000, 4_999, 1] {
            let edit = push("inputs: [2]\n").edit(Some(&first), offered, |_| true).expect("update");
            let entry: ConfigEntry = serde_json::from_slice(&put_bytes(edit)).expect("json");
            assert_eq!(entry.version, 5_001, "offered {offered}");
        }
    }

    #[test]
    fn invalid_requests_are_refused_before_any_write() {
        assert!(matches!(
            push("a: [").edit(None, 1, |_| true),
            Err(ManageError::Content { .. })
        ));
        assert!(matches!(
            push("- a\n").edit(None, 1, |_| true),
            Err(ManageError::Content { .. })
        ));
        let delete_default = AgentOp::DeleteGroup {
            name: "default".into(),
        };
        assert!(matches!(
            delete_default.validate(),
            Err(ManageError::DefaultGroupFixed)
        ));
        let empty = AgentOp::PutGroup {
            group: AgentGroup {
                name: "g".into(),
                description: String::new(),
                selector: GroupSelector::default(),
            },
        };
        assert!(matches!(empty.validate(), Err(ManageError::Invalid(_))));
        let apply = AgentOp::ApplyConfig {
            kind: ConfigKind::Pipeline,
            name: "nginx".into(),
            group: "nope".into(),
        };
        let stored = put_bytes(push("a: 1\n").edit(None, 5, |_| true).expect("push"));
        assert!(matches!(
            apply.edit(Some(&stored), 6, |_| false),
            Err(ManageError::GroupNotFound { .. })
        ));
        assert!(matches!(
            apply.edit(None, 6, |_| true),
            Err(ManageError::ConfigNotFound { .. })
        ));
    }

    #[test]
    fn ops_round_trip_as_json_and_name_their_key() {
        let op = AgentOp::PutGroup {
            group: AgentGroup {
                name: "web".into(),
                description: "d".into(),
                selector: GroupSelector {
                    tags: vec![TagMatch {
                        name: "env".into(),
                        value: ValuePattern("prod*".into()),
                    }],
                    ip_cidrs: Vec::new(),
                },
            },
        };
        let back: AgentOp =
            serde_json::from_slice(&serde_json::to_vec(&op).expect("json")).expect("back");
        assert_eq!(back, op);
        let key = op.key().expect("key");
        assert_eq!(key.to_string(), "agent-groups/web");
        assert_eq!(key.kind(), AgentObjectKind::Group);
        assert_eq!(key.entry_key().to_string(), "agent-groups/web");
    }
}
