//! YAML text to [`Value`], keeping the text of every inferred scalar.
//!
//! Built on yaml-rust2's event parser rather than its loader because the loader forgets how an
//! integer was written (`0123` and `123` both become 123). Typing follows yaml-rust2 (YAML 1.2 core
//! schema): quoted scalars are strings; plain `true`/`false`, integers (decimal, `0x`, `0o`), floats
//! and `.inf`/`.nan` are inferred and keep their text; `~`, `null` and the empty scalar are null.
//! Only the first document of a stream is read. Duplicate keys and non-scalar keys are errors.
//! Aliases are expanded, with a node budget so a "billion laughs" document cannot exhaust memory,
//! and nesting is capped so later recursive walks cannot overflow the stack.

use std::collections::HashMap;

use yaml_rust2::Yaml;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

use crate::value::{Map, Value};

/// Deepest nesting of maps and lists accepted.
const MAX_DEPTH: usize = 128;
/// Most nodes (including alias copies) one document may produce.
const MAX_NODES: usize = 1_000_000;

/// Why a YAML text could not be read.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum YamlError {
    #[error("invalid YAML: {message}")]
    Syntax { message: String },
    #[error("duplicate key `{key}` at line {line}")]
    DuplicateKey { key: String, line: usize },
    #[error("unsupported non-scalar map key at line {line}")]
    ComplexKey { line: usize },
    #[error("value `{text}` at line {line} is not a valid !!{tag}")]
    BadTag {
        text: String,
        tag: String,
        line: usize,
    },
    #[error("unknown alias at line {line}")]
    UnknownAlias { line: usize },
    #[error("YAML nesting deeper than {MAX_DEPTH} levels at line {line}")]
    TooDeep { line: usize },
    #[error("YAML document expands to more than {MAX_NODES} nodes (alias bomb?)")]
    TooLarge,
}

/// Parses the first document of `text`. An empty or comment-only text is [`Value::Null`].
pub fn parse(text: &str) -> Result<Value, YamlError> {
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(text);
    if let Err(error) = parser.load(&mut builder, false) {
        // A structural error found after the builder has failed is less useful than the first one.
        return Err(builder.error.unwrap_or(YamlError::Syntax {
            message: error.to_string(),
        }));
    }
    if let Some(error) = builder.error {
        return Err(error);
    }
    Ok(builder.document.unwrap_or(Value::Null))
}

/// Resolves a plain (unquoted, untagged) scalar the way the parser does.
pub(crate) fn resolve_plain(text: &str) -> Value {
    let inferred = |value: Value| Value::Inferred {
        value: Box::new(value),
        text: text.to_owned(),
    };
    if let Some(number) = yaml11_octal(text) {
        return inferred(Value::Int(number));
    }
    match Yaml::from_str(text) {
        Yaml::Null => Value::Null,
        Yaml::Boolean(flag) => inferred(Value::Bool(flag)),
        Yaml::Integer(number) => inferred(Value::Int(number)),
        real @ Yaml::Real(_) => match real.as_f64() {
            Some(number) => inferred(Value::Float(number)),
            None => Value::String(text.to_owned()),
        },
        _ => Value::String(text.to_owned()),
    }
}

/// A YAML 1.1 octal integer (`0123` is 83, `-017` is -15), as the Collector's YAML reader
/// resolves one (Go's `strconv.ParseInt(text, 0, 64)`); YAML 1.2 would read `0123` as 123. Only
/// typed fields see the number: a string field still reads the text (`"0123"`).
fn yaml11_octal(text: &str) -> Option<i64> {
    let (negative, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let digits = unsigned.strip_prefix('0').filter(|d| !d.is_empty() && d.bytes().all(|b| (b'0'..=b'7').contains(&b)))?;
    let magnitude = i64::from_str_radix(digits, 8).ok()?;
    Some(if negative { -magnitude } else { magnitude })
}

enum Frame {
    List {
        items: Vec<Value>,
        anchor: usize,
    },
    Map {
        map: Map,
        anchor: usize,
        pending_key: Option<String>,
    },
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    anchors: HashMap<usize, Value>,
    document: Option<Value>,
    documents_seen: usize,
    nodes: usize,
    error: Option<YamlError>,
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, event: Event, mark: Marker) {
        if self.error.is_some() || self.documents_seen > 1 {
            return;
        }
        if let Err(error) = self.handle(event, mark) {
            self.error = Some(error);
        }
    }
}

impl Builder {
    fn handle(&mut self, event: Event, mark: Marker) -> Result<(), YamlError> {
        let line = mark.line();
        match event {
            Event::DocumentStart => self.documents_seen += 1,
            Event::SequenceStart(anchor, _) => self.open(
                Frame::List {
                    items: Vec::new(),
                    anchor,
                },
                line,
            )?,
            Event::MappingStart(anchor, _) => self.open(
                Frame::Map {
                    map: Map::new(),
                    anchor,
                    pending_key: None,
                },
                line,
            )?,
            Event::SequenceEnd | Event::MappingEnd => {
                let (value, anchor) = match self.stack.pop() {
                    Some(Frame::List { items, anchor }) => (Value::List(items), anchor),
                    Some(Frame::Map { map, anchor, .. }) => (Value::Map(map), anchor),
                    None => {
                        return Err(YamlError::Syntax {
                            message: format!("unbalanced end at line {line}"),
                        });
                    }
                };
                self.remember(anchor, &value);
                self.push(value, line)?;
            }
            Event::Scalar(text, style, anchor, tag) => {
                if self.expecting_key() {
                    self.remember(anchor, &Value::String(text.clone()));
                    return self.set_key(text, line);
                }
                let value = scalar(text, style, tag.as_ref(), line)?;
                self.remember(anchor, &value);
                self.push(value, line)?;
            }
            Event::Alias(anchor) => {
                let value = self
                    .anchors
                    .get(&anchor)
                    .cloned()
                    .ok_or(YamlError::UnknownAlias { line })?;
                self.nodes += count_nodes(&value);
                if self.nodes > MAX_NODES {
                    return Err(YamlError::TooLarge);
                }
                if self.expecting_key() {
                    return match value {
                        Value::String(key) => self.set_key(key, line),
                        _ => Err(YamlError::ComplexKey { line }),
                    };
                }
                self.push(value, line)?;
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => {}
        }
        Ok(())
    }

    fn open(&mut self, frame: Frame, line: usize) -> Result<(), YamlError> {
        if self.expecting_key() {
            return Err(YamlError::ComplexKey { line });
        }
        if self.stack.len() >= MAX_DEPTH {
            return Err(YamlError::TooDeep { line });
        }
        self.stack.push(frame);
        Ok(())
    }

    fn expecting_key(&self) -> bool {
        matches!(
            self.stack.last(),
            Some(Frame::Map {
                pending_key: None,
                ..
            })
        )
    }

    fn set_key(&mut self, key: String, line: usize) -> Result<(), YamlError> {
        if let Some(Frame::Map {
            map, pending_key, ..
        }) = self.stack.last_mut()
        {
            if map.contains_key(&key) {
                return Err(YamlError::DuplicateKey { key, line });
            }
            *pending_key = Some(key);
        }
        Ok(())
    }

    fn remember(&mut self, anchor: usize, value: &Value) {
        if anchor > 0 {
            self.anchors.insert(anchor, value.clone());
        }
    }

    fn push(&mut self, value: Value, line: usize) -> Result<(), YamlError> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(YamlError::TooLarge);
        }
        match self.stack.last_mut() {
            Some(Frame::List { items, .. }) => items.push(value),
            Some(Frame::Map {
                map, pending_key, ..
            }) => match pending_key.take() {
                Some(key) => {
                    map.insert(key, value);
                }
                None => return Err(YamlError::ComplexKey { line }),
            },
            None => {
                if self.document.is_none() {
                    self.document = Some(value);
                }
            }
        }
        Ok(())
    }
}

fn scalar(
    text: String,
    style: TScalarStyle,
    tag: Option<&Tag>,
    line: usize,
) -> Result<Value, YamlError> {
    let core_tag = tag
        .filter(|tag| tag.handle == "tag:yaml.org,2002:")
        .map(|tag| tag.suffix.as_str());
    if style != TScalarStyle::Plain && core_tag.is_none() {
        return Ok(Value::String(text));
    }
    let Some(suffix) = core_tag else {
        // Plain: untagged scalars are typed by their text; with a non-core tag they are strings,
        // as yaml-rust2's loader does.
        return Ok(if tag.is_some() {
            Value::String(text)
        } else {
            resolve_plain(&text)
        });
    };
    let resolved = resolve_plain(&text);
    let matches = match suffix {
        "str" => return Ok(Value::String(text)),
        "int" => matches!(resolved.typed(), Value::Int(_)),
        "float" => matches!(resolved.typed(), Value::Float(_) | Value::Int(_)),
        "bool" => matches!(resolved.typed(), Value::Bool(_)),
        "null" => resolved.is_null(),
        _ => return Ok(Value::String(text)),
    };
    if !matches {
        return Err(YamlError::BadTag {
            text,
            tag: suffix.to_owned(),
            line,
        });
    }
    if let ("float", Value::Inferred { value, text }) = (suffix, &resolved)
        && let Value::Int(number) = **value
    {
        return Ok(Value::Inferred {
            value: Box::new(Value::Float(number as f64)),
            text: text.clone(),
        });
    }
    Ok(resolved)
}

fn count_nodes(value: &Value) -> usize {
    match value.typed() {
        Value::List(items) => 1 + items.iter().map(count_nodes).sum::<usize>(),
        Value::Map(map) => {
            1 + map
                .iter()
                .map(|(_, child)| count_nodes(child))
                .sum::<usize>()
        }
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> serde_json::Value {
        parse(text).expect("valid yaml").to_json()
    }

    #[test]
    fn quoted_scalars_stay_strings_and_plain_ones_keep_their_text() {
        let value =
            parse("a: \"0123\"\nb: 0123\nc: '8080'\nd: 1.10\ne: true\nf: ~\ng:\n").expect("valid");
        assert_eq!(value.get_path("a"), Some(&Value::String("0123".into())));
        let b = value.get_path("b").expect("b");
        assert_eq!((b.typed(), b.as_str()), (&Value::Int(83), Some("0123")), "YAML 1.1 octal");
        for (text, want) in [("-017", Value::Int(-15)), ("+07", Value::Int(7)), ("0", Value::Int(0)), ("08", Value::Int(8)), ("0o17", Value::Int(15))] {
            assert_eq!(parse(&format!("x: {text}\n")).expect("valid").get_path("x").map(Value::typed), Some(&want), "{text}");
        }
        assert_eq!(value.get_path("c"), Some(&Value::String("8080".into())));
        assert_eq!(value.get_path("d").and_then(Value::as_str), Some("1.10"));
        assert_eq!(value.get_path("e").and_then(Value::as_bool), Some(true));
        assert_eq!(value.get_path("f"), Some(&Value::Null));
        assert_eq!(value.get_path("g"), Some(&Value::Null));
    }

    #[test]
    fn empty_and_comment_only_documents_are_null() {
        assert_eq!(parse("").expect("empty"), Value::Null);
        assert_eq!(parse("# nothing\n").expect("comment"), Value::Null);
    }

    #[test]
    fn tags_anchors_and_order() {
        assert_eq!(
            json("x: !!str 12\ny: !!float 3\n"),
            serde_json::json!({"x": "12", "y": 3.0})
        );
        assert_eq!(
            json("base: &b {p: 1}\nz: *b\n"),
            serde_json::json!({"base": {"p": 1}, "z": {"p": 1}})
        );
        let keys: Vec<String> = parse("z: 1\na: 2\nm: 3\n")
            .expect("valid")
            .as_map()
            .expect("map")
            .keys()
            .map(str::to_owned)
            .collect();
        assert_eq!(keys, ["z", "a", "m"]);
    }

    #[test]
    fn malformed_inputs_are_errors_not_panics() {
        assert!(matches!(parse("a: b: c"), Err(YamlError::Syntax { .. })));
        assert!(matches!(
            parse("a: 1\na: 2\n"),
            Err(YamlError::DuplicateKey { .. })
        ));
        assert!(matches!(
            parse("? [a]\n: 1\n"),
            Err(YamlError::ComplexKey { .. })
        ));
        assert!(matches!(
            parse("x: !!int abc\n"),
            Err(YamlError::BadTag { .. })
        ));
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert!(matches!(parse(&deep), Err(YamlError::TooDeep { .. })));
        let very_deep = "[".repeat(100_000) + &"]".repeat(100_000);
        // yaml-rust2's scanner has its own limit; either way it is an error, not a stack overflow.
        assert!(parse(&very_deep).is_err());
        for odd in [
            "\u{0}",
            "- [",
            "{a: 1",
            "key: \"unterminated",
            "&a [*a]",
            "*nothing",
            "? \n",
            "---\n...\n---\n",
            "\u{feff}a: é",
        ] {
            let _ = parse(odd);
        }
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for level in 1..9 {
            let prev = (b'a' + level - 1) as char;
            let name = (b'a' + level) as char;
            bomb += &format!(
                "{name}: &{name} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
            );
        }
        assert_eq!(parse(&bomb), Err(YamlError::TooLarge));
    }
}
