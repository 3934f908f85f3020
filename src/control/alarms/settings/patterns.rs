//! The two text settings that meet entity names: the name-filter regexes (whole-name match, as
//! Java's `matches()`) and the alarm message template (`{name}` and `{id}` only, as
//! SkyWalking's `AlarmMessageFormatter`). Both compare equal by their source text, which is
//! what a reload diff needs.

use regex::Regex;

/// A name filter regex: kept with its source (equality and display), matched against the whole
/// entity name.
#[derive(Clone, Debug)]
pub struct NameRegex {
    source: String,
    anchored: Regex,
}

impl NameRegex {
    pub fn new(source: &str) -> Result<Self, regex::Error> {
        Ok(NameRegex { source: source.to_string(), anchored: Regex::new(&format!("^(?:{source})$"))? })
    }
    pub fn as_str(&self) -> &str {
        &self.source
    }
    pub fn matches(&self, name: &str) -> bool {
        self.anchored.is_match(name)
    }
}

impl PartialEq for NameRegex {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

/// The alarm message with its `{name}` / `{id}` placeholders (SkyWalking's
/// `AlarmMessageFormatter`: a `{` without a later `}` is plain text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageTemplate {
    source: String,
    parts: Vec<MessagePart>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum MessagePart {
    Text(String),
    Name,
    Id,
}

impl MessageTemplate {
    /// Parses a message; `Err(var)` names the first placeholder that is neither `name` nor `id`.
    pub fn parse(source: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut rest = source;
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}').map(|c| open + c) else {
                break;
            };
            parts.push(MessagePart::Text(rest[..open].to_string()));
            parts.push(match &rest[open + 1..close] {
                "name" => MessagePart::Name,
                "id" => MessagePart::Id,
                other => return Err(other.to_string()),
            });
            rest = &rest[close + 1..];
        }
        parts.push(MessagePart::Text(rest.to_string()));
        parts.retain(|p| !matches!(p, MessagePart::Text(t) if t.is_empty()));
        Ok(MessageTemplate { source: source.to_string(), parts })
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The message for one entity: `{name}` is the entity name, `{id}` its `id0`.
    pub fn render(&self, name: &str, id0: &str) -> String {
        self.parts
            .iter()
            .map(|p| match p {
                MessagePart::Text(t) => t.as_str(),
                MessagePart::Name => name,
                MessagePart::Id => id0,
            })
            .collect()
    }
}
