//! The operator's side of the agent protocol: groups and their selectors, pipeline and instance
//! configs, onetime commands, and the identifiers that name them, each with its validation.
//!
//! These are the values the management API accepts and an [`AgentConfigSource`] hands out.
//! Validation happens here, once, when a value is created, so that the protocol logic never has to
//! second-guess what it delivers: names are safe file names on the agent (it writes
//! `<dir>/<name>.json`), versions are never the protocol's reserved `0` or its delete marker `-1`.
//!
//! [`AgentConfigSource`]: super::source::AgentConfigSource

use std::collections::BTreeSet;

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::matching::{IpCidr, ValuePattern};
use super::proto;

/// The group every agent belongs to, whatever its tags and address.
pub const DEFAULT_GROUP: &str = "default";

/// The version that tells an agent to delete a config.
pub const DELETE_VERSION: i64 = -1;

/// Reserved by the protocol; never sent.
pub const RESERVED_VERSION: i64 = 0;

/// Longest config, group or command name, in bytes.
pub const MAX_NAME_LEN: usize = 128;

/// Longest instance id an agent may present, in bytes. The 3.x agent's is about 60.
pub const MAX_INSTANCE_ID_LEN: usize = 256;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ModelError {
    #[error("{what} name is empty")]
    EmptyName { what: &'static str },
    #[error("{what} name {name:?} is longer than {MAX_NAME_LEN} bytes")]
    NameTooLong { what: &'static str, name: String },
    #[error(
        "{what} name {name:?} must use only letters, digits, '_', '.', '-', and not start with '.' or '-'"
    )]
    BadNameCharacters { what: &'static str, name: String },
    #[error("instance id is empty")]
    EmptyInstanceId,
    #[error("instance id is longer than {MAX_INSTANCE_ID_LEN} bytes")]
    InstanceIdTooLong,
    #[error("instance id is not UTF-8")]
    InstanceIdNotUtf8,
    #[error("version {version} of {name:?} is reserved (0) or the delete marker (-1)")]
    ReservedVersion { name: String, version: i64 },
    #[error(
        "onetime command {name:?} has expire_time {expire_time_s}; it must be a positive Unix time in seconds"
    )]
    BadExpireTime { name: String, expire_time_s: i64 },
    #[error("group {group:?} selects no agent: give it at least one tag or IP range")]
    EmptySelector { group: String },
    #[error("tag name in group {group:?} is empty")]
    EmptyTagName { group: String },
}

/// Checks a config, group or command name: it becomes a file name on the agent.
pub fn validate_name(what: &'static str, name: &str) -> Result<(), ModelError> {
    if name.is_empty() {
        return Err(ModelError::EmptyName { what });
    }
    if name.len() > MAX_NAME_LEN {
        return Err(ModelError::NameTooLong {
            what,
            name: name.to_string(),
        });
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
    if !name.chars().all(allowed) || name.starts_with('.') || name.starts_with('-') {
        return Err(ModelError::BadNameCharacters {
            what,
            name: name.to_string(),
        });
    }
    Ok(())
}

/// An agent process, as it names itself. The 3.x agent uses `<uuid>_<ip>_<starttime>`, new on
/// every restart, so a restarted agent is a new instance.
///
/// Decoding (stored agent state) goes through the same checks as the wire.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct InstanceId(String);

impl TryFrom<String> for InstanceId {
    type Error = ModelError;

    fn try_from(text: String) -> Result<InstanceId, ModelError> {
        InstanceId::from_wire(text.as_bytes())
    }
}

impl From<InstanceId> for String {
    fn from(id: InstanceId) -> String {
        id.0
    }
}

impl InstanceId {
    /// Validates the `instance_id` bytes of a request.
    pub fn from_wire(bytes: &[u8]) -> Result<InstanceId, ModelError> {
        if bytes.is_empty() {
            return Err(ModelError::EmptyInstanceId);
        }
        if bytes.len() > MAX_INSTANCE_ID_LEN {
            return Err(ModelError::InstanceIdTooLong);
        }
        let text = std::str::from_utf8(bytes).map_err(|_| ModelError::InstanceIdNotUtf8)?;
        Ok(InstanceId(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for InstanceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A tag an agent reports about itself (`ilogtail_tags` in the agent's config).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentTag {
    pub name: String,
    pub value: String,
}

/// The two kinds of continuously held config. (Onetime configs are [`OnetimeCommand`]s.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfigKind {
    /// A continuous pipeline (collection) config.
    Pipeline,
    /// An instance (process) config.
    Instance,
}

impl ConfigKind {
    /// The agent capability bit without which this kind is never sent.
    pub fn capability(self) -> u64 {
        match self {
            ConfigKind::Pipeline => proto::AGENT_ACCEPTS_PIPELINE,
            ConfigKind::Instance => proto::AGENT_ACCEPTS_INSTANCE,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            ConfigKind::Pipeline => "pipeline config",
            ConfigKind::Instance => "instance config",
        }
    }
}

/// How a config's content is stored. Agents always receive JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContentFormat {
    Yaml,
    Json,
}

/// One tag condition of a group: the agent must carry a tag with this name whose value matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagMatch {
    pub name: String,
    /// `*` matches any run of characters, so `*` alone only asks for the tag to be present.
    pub value: ValuePattern,
}

/// Which agents a group holds. Every tag condition must hold, and when IP ranges are given the
/// agent's reported IP must fall in one of them. A selector with no condition selects nobody
/// (only the `default` group holds everyone), so that a half-written group never reaches the
/// whole fleet.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GroupSelector {
    #[serde(default)]
    pub tags: Vec<TagMatch>,
    #[serde(default)]
    pub ip_cidrs: Vec<IpCidr>,
}

/// A named set of agents that configs and commands are applied to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentGroup {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub selector: GroupSelector,
}

impl AgentGroup {
    /// The catch-all group.
    pub fn default_group() -> AgentGroup {
        AgentGroup {
            name: DEFAULT_GROUP.to_string(),
            description: "every agent".to_string(),
            selector: GroupSelector::default(),
        }
    }

    pub fn is_default(&self) -> bool {
        self.name == DEFAULT_GROUP
    }

    pub fn validate(&self) -> Result<(), ModelError> {
        validate_name("group", &self.name)?;
        if self.is_default() {
            return Ok(());
        }
        if self.selector.tags.is_empty() && self.selector.ip_cidrs.is_empty() {
            return Err(ModelError::EmptySelector {
                group: self.name.clone(),
            });
        }
        if self.selector.tags.iter().any(|t| t.name.is_empty()) {
            return Err(ModelError::EmptyTagName {
                group: self.name.clone(),
            });
        }
        Ok(())
    }
}

/// A pipeline or instance config as stored: content in its stored format, the version the
/// server assigned to that content, and the groups it is applied to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigEntry {
    pub kind: ConfigKind,
    pub name: String,
    pub content: String,
    pub format: ContentFormat,
    /// Assigned by the server; changes whenever the content does and is never reused for other
    /// content under the same name. Agents compare it by inequality only.
    pub version: i64,
    #[serde(default)]
    pub groups: BTreeSet<String>,
}

impl ConfigEntry {
    /// Checks the name and the version; the content is checked when it is converted to JSON.
    pub fn validate(&self) -> Result<(), ModelError> {
        validate_name(self.kind.label(), &self.name)?;
        if self.version == RESERVED_VERSION || self.version == DELETE_VERSION {
            return Err(ModelError::ReservedVersion {
                name: self.name.clone(),
                version: self.version,
            });
        }
        Ok(())
    }
}

/// A onetime pipeline config sent to the agents of one group until each reports it, or until it
/// expires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OnetimeCommand {
    pub name: String,
    pub content: String,
    pub format: ContentFormat,
    /// Unix time in seconds (what agents that implement onetime configs compare it with). After
    /// it the command is neither sent nor served.
    pub expire_time_s: i64,
    pub group: String,
}

impl OnetimeCommand {
    pub fn validate(&self) -> Result<(), ModelError> {
        validate_name("onetime command", &self.name)?;
        validate_name("group", &self.group)?;
        if self.expire_time_s <= 0 {
            return Err(ModelError::BadExpireTime {
                name: self.name.clone(),
                expire_time_s: self.expire_time_s,
            });
        }
        Ok(())
    }

    /// Whether the command is past its expire time at `now_ms`.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        expired(self.expire_time_s, now_ms)
    }
}

/// `expire_time_s` (Unix seconds) has passed at `now_ms`.
pub fn expired(expire_time_s: i64, now_ms: u64) -> bool {
    let expire_ms = u64::try_from(expire_time_s)
        .unwrap_or(0)
        .saturating_mul(1000);
    now_ms >= expire_ms
}

/// What matching looks at: the agent's tags and the IP it reported (if it parses).
#[derive(Debug, Clone, Copy)]
pub struct AgentIdentity<'a> {
    pub tags: &'a [AgentTag],
    pub ip: Option<IpAddr>,
}

impl GroupSelector {
    /// Every tag condition holds, and the IP is in one of the ranges when ranges are given. An
    /// empty selector selects nobody.
    pub fn matches(&self, agent: &AgentIdentity<'_>) -> bool {
        if self.tags.is_empty() && self.ip_cidrs.is_empty() {
            return false;
        }
        let tags_hold = self.tags.iter().all(|want| {
            agent
                .tags
                .iter()
                .any(|tag| tag.name == want.name && want.value.matches(&tag.value))
        });
        let ip_holds = self.ip_cidrs.is_empty()
            || agent
                .ip
                .is_some_and(|ip| self.ip_cidrs.iter().any(|range| range.contains(ip)));
        tags_hold && ip_holds
    }
}
