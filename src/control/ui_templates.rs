//! Dashboard templates changed at runtime through SkyWalking's GraphQL mutations
//! (`addTemplate` / `changeTemplate` / `disableTemplate`): what is stored, and what a change
//! makes of the template it meets. Pure; the workflow writes ([`crate::control::workflow`]),
//! the GraphQL room reads through a trait the admin API implements.
//!
//! - **One entry per template id**, catalog `ui-template` ([`Catalog::UiTemplate`]). The
//!   entry's name is the id when the id is plain (`[A-Za-z0-9_-]`, at most
//!   [`MAX_PLAIN_NAME_BYTES`]: every bundled id, every generated UUID); any other id is named
//!   `id.<sha256 of the id, hex>`, which no plain id can be (plain ids hold no `.`). The real id
//!   is always in the content.
//! - **Content** ([`StoredTemplate`]): JSON `{"formatVersion":1,"id","configuration","disabled"}`,
//!   the configuration kept as the JSON text the client sent. A node refuses content of a newer
//!   format rather than guess at it.
//! - **Semantics** (OAP's `UITemplateManagementService`): `addTemplate` stores a new id (a UUID
//!   the receiving node draws); `changeTemplate` replaces the configuration of an existing id
//!   (bundled or stored, disabled or not) and enables it; `disableTemplate` keeps the
//!   configuration and hides the template. An unknown id is refused; so is a configuration that
//!   is not a JSON object, before anything is written.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::base::ids::{Catalog, RuleKey, RuleName};

/// The content format written now.
pub const FORMAT_VERSION: u32 = 1;

/// The longest template id accepted.
pub const MAX_ID_BYTES: usize = 512;

/// The longest id used as an entry name as is.
pub const MAX_PLAIN_NAME_BYTES: usize = 128;

/// The largest stored content (the bound on every entry's content).
pub const MAX_CONTENT_BYTES: usize = crate::control::bundled::MAX_CONTENT_BYTES;

/// One runtime template, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredTemplate {
    pub format_version: u32,
    pub id: String,
    /// The dashboard configuration: JSON text (an object), as the protocol carries it.
    pub configuration: String,
    pub disabled: bool,
}

impl StoredTemplate {
    pub fn new(id: &str, configuration: &str, disabled: bool) -> StoredTemplate {
        StoredTemplate { format_version: FORMAT_VERSION, id: id.to_string(), configuration: configuration.to_string(), disabled }
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Reads stored content; content of a newer format is refused.
    pub fn decode(content: &[u8]) -> Result<StoredTemplate, TemplateRefused> {
        let stored: StoredTemplate = serde_json::from_slice(content).map_err(|e| TemplateRefused::Unreadable(e.to_string()))?;
        if stored.format_version > FORMAT_VERSION {
            return Err(TemplateRefused::Unreadable(format!(
                "format version {} is newer than this build's {FORMAT_VERSION}",
                stored.format_version
            )));
        }
        Ok(stored)
    }
}

/// One template mutation. Carried to the main as JSON (`ForwardOp::UiTemplate`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum TemplateOp {
    /// `addTemplate`: `id` is drawn by the node that took the request ([`new_id`]).
    Add { id: String, configuration: String },
    /// `changeTemplate`.
    Change { id: String, configuration: String },
    /// `disableTemplate`.
    Disable { id: String },
}

/// Why a template mutation is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateRefused {
    #[error("the template id is empty")]
    EmptyId,
    #[error("the template id is {0} bytes long; at most {MAX_ID_BYTES} are allowed")]
    IdTooLong(usize),
    #[error("the configuration is {0} bytes; at most {MAX_CONTENT_BYTES} are allowed")]
    TooLarge(usize),
    #[error("the configuration must be a JSON object: {0}")]
    NotAnObject(String),
    #[error("Can't find the template {0}")]
    NotFound(String),
    #[error("a template with id {0} exists already")]
    Exists(String),
    #[error("the stored template cannot be read: {0}")]
    Unreadable(String),
}

impl TemplateOp {
    pub fn id(&self) -> &str {
        match self {
            TemplateOp::Add { id, .. } | TemplateOp::Change { id, .. } | TemplateOp::Disable { id } => id,
        }
    }

    /// The checks that need nothing stored: the id, and the configuration is a JSON object
    /// within the size bound.
    pub fn validate(&self) -> Result<(), TemplateRefused> {
        check_id(self.id())?;
        match self {
            TemplateOp::Add { configuration, .. } | TemplateOp::Change { configuration, .. } => check_configuration(configuration),
            TemplateOp::Disable { .. } => Ok(()),
        }
    }

    /// The entry this mutation writes.
    pub fn key(&self) -> RuleKey {
        template_key(self.id())
    }

    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn from_json(bytes: &[u8]) -> Result<TemplateOp, String> {
        serde_json::from_slice(bytes).map_err(|e| e.to_string())
    }

    /// What the mutation makes of the template it meets: `prior` the live stored template of
    /// its id, `bundled` the bundled configuration of its id. `Ok(None)`: nothing changes.
    pub fn decide(&self, prior: Option<&StoredTemplate>, bundled: Option<&str>) -> Result<Option<StoredTemplate>, TemplateRefused> {
        self.validate()?;
        let next = match self {
            TemplateOp::Add { id, configuration } => {
                if prior.is_some() || bundled.is_some() {
                    return Err(TemplateRefused::Exists(id.clone()));
                }
                StoredTemplate::new(id, configuration, false)
            }
            TemplateOp::Change { id, configuration } => {
                if prior.is_none() && bundled.is_none() {
                    return Err(TemplateRefused::NotFound(id.clone()));
                }
                StoredTemplate::new(id, configuration, false)
            }
            TemplateOp::Disable { id } => {
                let current = match (prior, bundled) {
                    (Some(prior), _) => prior.configuration.as_str(),
                    (None, Some(bundled)) => bundled,
                    (None, None) => return Err(TemplateRefused::NotFound(id.clone())),
                };
                StoredTemplate::new(id, current, true)
            }
        };
        if prior == Some(&next) {
            return Ok(None);
        }
        let size = next.encode().len();
        if size > MAX_CONTENT_BYTES {
            return Err(TemplateRefused::TooLarge(size));
        }
        Ok(Some(next))
    }
}

pub fn check_id(id: &str) -> Result<(), TemplateRefused> {
    if id.is_empty() {
        return Err(TemplateRefused::EmptyId);
    }
    if id.len() > MAX_ID_BYTES {
        return Err(TemplateRefused::IdTooLong(id.len()));
    }
    Ok(())
}

/// A configuration is a JSON object of at most [`MAX_CONTENT_BYTES`].
pub fn check_configuration(configuration: &str) -> Result<(), TemplateRefused> {
    if configuration.len() > MAX_CONTENT_BYTES {
        return Err(TemplateRefused::TooLarge(configuration.len()));
    }
    match serde_json::from_str::<serde_json::Value>(configuration) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        Ok(other) => Err(TemplateRefused::NotAnObject(format!("got {}", kind(&other)))),
        Err(e) => Err(TemplateRefused::NotAnObject(e.to_string())),
    }
}

fn kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// The entry name of a template id (see the module docs).
pub fn entry_name(id: &str) -> RuleName {
    let plain = !id.is_empty()
        && id.len() <= MAX_PLAIN_NAME_BYTES
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    let name = if plain {
        id.to_string()
    } else {
        let digest = Sha256::digest(id.as_bytes());
        format!("id.{}", digest.iter().map(|b| format!("{b:02x}")).collect::<String>())
    };
    RuleName::parse(&name).expect("a plain id or a hex digest is a valid name")
}

/// The entry key of a template id.
pub fn template_key(id: &str) -> RuleKey {
    RuleKey::new(Catalog::UiTemplate, entry_name(id))
}

/// A fresh template id: a random UUID (v4), as OAP draws for `addTemplate`.
pub fn new_id() -> String {
    crate::base::ids::random_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONF: &str = r#"{"layer":"OS_LINUX","entity":"Service","name":"x"}"#;

    #[test]
    fn names_are_the_plain_id_or_a_digest() {
        assert_eq!(entry_name("Linux-Service").as_str(), "Linux-Service");
        let uuid = new_id();
        assert_eq!(uuid.len(), 36);
        assert_eq!(entry_name(&uuid).as_str(), uuid);
        assert_ne!(new_id(), uuid);
        let odd = entry_name("a/b c.d");
        assert!(odd.as_str().starts_with("id.") && odd.as_str().len() == 3 + 64, "{odd}");
        assert_eq!(odd, entry_name("a/b c.d"), "deterministic");
        assert_ne!(odd, entry_name("a/b c.e"));
        assert!(entry_name(&"x".repeat(MAX_PLAIN_NAME_BYTES + 1)).as_str().starts_with("id."));
        assert!(entry_name("..").as_str().starts_with("id."));
        assert!(entry_name("日本").as_str().starts_with("id."));
        assert_eq!(template_key("Linux-Service").catalog, Catalog::UiTemplate);
    }

    #[test]
    fn content_round_trips_and_newer_formats_are_refused() {
        let stored = StoredTemplate::new("a", CONF, true);
        assert_eq!(StoredTemplate::decode(&stored.encode()), Ok(stored.clone()));
        let text: serde_json::Value = serde_json::from_slice(&stored.encode()).expect("json");
        assert_eq!(text["formatVersion"], 1);
        assert_eq!(text["configuration"], CONF);
        let newer = StoredTemplate { format_version: FORMAT_VERSION + 1, ..stored };
        assert!(matches!(StoredTemplate::decode(&newer.encode()), Err(TemplateRefused::Unreadable(_))));
        assert!(StoredTemplate::decode(b"not json").is_err());
    }

    #[test]
    fn ops_travel_as_json() {
        for op in [
            TemplateOp::Add { id: "u".into(), configuration: CONF.into() },
            TemplateOp::Change { id: "Linux-Service".into(), configuration: CONF.into() },
            TemplateOp::Disable { id: "x".into() },
        ] {
            assert_eq!(TemplateOp::from_json(&op.to_json()), Ok(op));
        }
        assert!(TemplateOp::from_json(b"{\"op\":\"drop\"}").is_err());
    }

    #[test]
    fn configurations_must_be_json_objects_within_the_bound() {
        assert_eq!(check_configuration(CONF), Ok(()));
        for bad in ["", "not json", "[1]", "\"text\"", "3", "null", "{\"a\":"] {
            assert!(matches!(check_configuration(bad), Err(TemplateRefused::NotAnObject(_))), "{bad:?}");
        }
        let huge = format!("{{\"a\":\"{}\"}}", "x".repeat(MAX_CONTENT_BYTES));
        assert!(matches!(check_configuration(&huge), Err(TemplateRefused::TooLarge(_))));
        assert_eq!(check_id(""), Err(TemplateRefused::EmptyId));
        assert!(matches!(check_id(&"i".repeat(MAX_ID_BYTES + 1)), Err(TemplateRefused::IdTooLong(_))));
    }

    #[test]
    fn add_change_and_disable_decide_as_oap() {
        let add = TemplateOp::Add { id: "u1".into(), configuration: CONF.into() };
        assert_eq!(add.decide(None, None), Ok(Some(StoredTemplate::new("u1", CONF, false))));
        assert_eq!(add.decide(None, Some("{}")), Err(TemplateRefused::Exists("u1".into())));
        assert_eq!(add.decide(Some(&StoredTemplate::new("u1", "{}", true)), None), Err(TemplateRefused::Exists("u1".into())));

        let change = TemplateOp::Change { id: "Linux-Service".into(), configuration: CONF.into() };
        assert_eq!(change.decide(None, None), Err(TemplateRefused::NotFound("Linux-Service".into())));
        assert_eq!(change.decide(None, Some("{}")), Ok(Some(StoredTemplate::new("Linux-Service", CONF, false))));
        // A change enables a disabled template; the same content again is no change.
        assert_eq!(
            change.decide(Some(&StoredTemplate::new("Linux-Service", CONF, true)), Some("{}")),
            Ok(Some(StoredTemplate::new("Linux-Service", CONF, false)))
        );
        assert_eq!(change.decide(Some(&StoredTemplate::new("Linux-Service", CONF, false)), None), Ok(None));
        let bad = TemplateOp::Change { id: "Linux-Service".into(), configuration: "[]".into() };
        assert!(matches!(bad.decide(None, Some("{}")), Err(TemplateRefused::NotAnObject(_))));

        let disable = TemplateOp::Disable { id: "Linux-Service".into() };
        assert_eq!(disable.decide(None, None), Err(TemplateRefused::NotFound("Linux-Service".into())));
        assert_eq!(disable.decide(None, Some("{}")), Ok(Some(StoredTemplate::new("Linux-Service", "{}", true))));
        assert_eq!(
            disable.decide(Some(&StoredTemplate::new("Linux-Service", CONF, false)), Some("{}")),
            Ok(Some(StoredTemplate::new("Linux-Service", CONF, true))),
            "the stored configuration is kept, not the bundled one"
        );
        assert_eq!(disable.decide(Some(&StoredTemplate::new("Linux-Service", CONF, true)), None), Ok(None));
    }
}
