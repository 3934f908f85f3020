//! Showing a configuration to an operator: [`redact`] secrets, and print YAML with
//! [`to_yaml_string`], optionally with a `# from <source>` comment after every value
//! (`config print --show-origin`); a source spanning lines (`yaml:a: |\n  b`) is written on one
//! line with `\n` escapes, so the printed text stays YAML that reads back to the same tree.
//!
//! The printer writes block-style YAML that this crate reads back to the same tree. Strings are
//! written plain only when plain text would read back as the same string; otherwise they are
//! double-quoted. Inferred values print as written when that text reads back to the same value.

use std::collections::BTreeMap;

use crate::value::{Map, Value, join_path};
use crate::yaml::resolve_plain;

/// What a redacted value is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// A copy of `value` in which every non-null value whose dotted key path satisfies `is_secret` is
/// replaced by `"[REDACTED]"` (a whole subtree, when a map or list matches). The text kept by
/// inferred maps and lists is dropped, since it may spell out a secret.
pub fn redact(value: &Value, is_secret: impl Fn(&str) -> bool) -> Value {
    redact_at(value, "", &is_secret)
}

fn redact_at(value: &Value, path: &str, is_secret: &dyn Fn(&str) -> bool) -> Value {
    if !path.is_empty() && !value.is_null() && is_secret(path) {
        return Value::String(REDACTED.to_owned());
    }
    match value.typed() {
        Value::Map(map) => Value::Map(
            map.iter()
                .map(|(key, child)| {
                    (
                        key.to_owned(),
                        redact_at(child, &join_path(path, key), is_secret),
                    )
                })
                .collect(),
        ),
        Value::List(items) => Value::List(
            items
                .iter()
                .enumerate()
                .map(|(index, child)| {
                    redact_at(child, &join_path(path, &index.to_string()), is_secret)
                })
                .collect(),
        ),
        _ => value.clone(),
    }
}

/// A copy of `origins` fit to show beside a redacted tree: for every leaf at or below a secret key
/// path, an inline `yaml:` source (which spells out its value, as `--set` does) keeps only its key.
pub fn redact_origins(
    origins: &BTreeMap<String, String>,
    is_secret: impl Fn(&str) -> bool,
) -> BTreeMap<String, String> {
    let is_secret_leaf = |path: &str| {
        let mut prefixes = path
            .match_indices('.')
            .map(|(end, _)| &path[..end])
            .chain(std::iter::once(path));
        prefixes.any(&is_secret)
    };
    origins
        .iter()
        .map(|(path, origin)| {
            let shown = if is_secret_leaf(path) {
                mask_inline_source(origin)
            } else {
                origin.clone()
            };
            (path.clone(), shown)
        })
        .collect()
}

fn mask_inline_source(origin: &str) -> String {
    let (source, via) = origin.split_at(origin.find(" via ${").unwrap_or(origin.len()));
    match source.strip_prefix("yaml:") {
        Some(inline) => {
            let key = inline.split(": ").next().unwrap_or_default();
            format!("yaml:{key}: {REDACTED}{via}")
        }
        None => origin.to_owned(),
    }
}

/// Prints `value` as YAML; with `origins`, each value line ends with `# from <source>`.
pub fn to_yaml_string(value: &Value, origins: Option<&BTreeMap<String, String>>) -> String {
    let mut printer = Printer {
        origins,
        lines: Vec::new(),
    };
    match value.typed() {
        Value::Map(map) if !map.is_empty() => printer.map_entries(map, "", 0),
        Value::List(items) if !items.is_empty() => printer.list_items(items, "", 0),
        _ => {
            let line = format!("{}{}", scalar(value), printer.comment(""));
            printer.lines.push(line);
        }
    }
    let mut text = printer.lines.join("\n");
    text.push('\n');
    text
}

struct Printer<'a> {
    origins: Option<&'a BTreeMap<String, String>>,
    lines: Vec<String>,
}

impl Printer<'_> {
    fn comment(&self, path: &str) -> String {
        match self.origins.and_then(|origins| origins.get(path)) {
            Some(source) => format!("  # from {}", one_line(source)),
            None => String::new(),
        }
    }

    fn map_entries(&mut self, map: &Map, path: &str, indent: usize) {
        let pad = " ".repeat(indent);
        for (key, child) in map.iter() {
            let child_path = join_path(path, key);
            let key = quote_if_needed(key);
            match child.typed() {
                Value::Map(inner) if !inner.is_empty() => {
                    self.lines.push(format!("{pad}{key}:"));
                    self.map_entries(inner, &child_path, indent + 2);
                }
                Value::List(items) if !items.is_empty() => {
                    self.lines.push(format!("{pad}{key}:"));
                    self.list_items(items, &child_path, indent + 2);
                }
                _ => {
                    let line =
                        format!("{pad}{key}: {}{}", scalar(child), self.comment(&child_path));
                    self.lines.push(line);
                }
            }
        }
    }

    fn list_items(&mut self, items: &[Value], path: &str, indent: usize) {
        let pad = " ".repeat(indent);
        for (index, item) in items.iter().enumerate() {
            let item_path = join_path(path, &index.to_string());
            let first_line = self.lines.len();
            match item.typed() {
                Value::Map(inner) if !inner.is_empty() => {
                    self.map_entries(inner, &item_path, indent + 2)
                }
                Value::List(inner) if !inner.is_empty() => {
                    self.list_items(inner, &item_path, indent + 2)
                }
                _ => {
                    let line = format!("{pad}- {}{}", scalar(item), self.comment(&item_path));
                    self.lines.push(line);
                    continue;
                }
            }
            // The nested block's first line starts with `indent + 2` spaces: put the dash there.
            if let Some(line) = self.lines.get_mut(first_line) {
                *line = format!("{pad}- {}", line.get(indent + 2..).unwrap_or_default());
            }
        }
    }
}

/// `text` fit for a one-line comment: a line break (an inline `yaml:` source may span lines) is
/// written `\n`, a backslash `\\`, and any other control character `\u{..}`, so the comment
/// cannot end early and start a line of YAML.
fn one_line(text: &str) -> String {
    let mut line = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => line.push_str("\\\\"),
            '\n' => line.push_str("\\n"),
            '\r' => line.push_str("\\r"),
            '\t' => line.push_str("\\t"),
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{85}') => {
                line.push_str(&format!("\\u{{{:04X}}}", c as u32))
            }
            c => line.push(c),
        }
    }
    line
}

/// One scalar (or an empty map or list) on one line.
fn scalar(value: &Value) -> String {
    match value {
        Value::Inferred { text, .. } if resolve_plain(text) == *value && is_plain_safe(text) => {
            text.clone()
        }
        Value::Inferred { value: typed, .. } => scalar(typed),
        Value::Null => "null".to_owned(),
        Value::Bool(flag) => flag.to_string(),
        Value::Int(number) => number.to_string(),
        Value::Float(number) if number.is_nan() => ".nan".to_owned(),
        Value::Float(number) if number.is_infinite() => {
            if number.is_sign_positive() {
                ".inf".to_owned()
            } else {
                "-.inf".to_owned()
            }
        }
        Value::Float(number) => format!("{number:?}"),
        Value::String(text) => quote_if_needed(text),
        Value::Map(_) => "{}".to_owned(),
        Value::List(_) => "[]".to_owned(),
    }
}

/// Plain when plain text reads back as this same string; double-quoted otherwise.
fn quote_if_needed(text: &str) -> String {
    if is_plain_safe(text) && matches!(resolve_plain(text), Value::String(_)) {
        return text.to_owned();
    }
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '\\' => quoted.push_str("\\\\"),
            '"' => quoted.push_str("\\\""),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            '\r' => quoted.push_str("\\r"),
            c if c.is_control() => quoted.push_str(&format!("\\u{:04X}", c as u32)),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// Conservative: letters, digits and a few punctuation marks that never start YAML syntax,
/// no leading or trailing space.
fn is_plain_safe(text: &str) -> bool {
    let Some(first) = text.chars().next() else {
        return false;
    };
    let allowed = |c: char| {
        c.is_alphanumeric()
            || matches!(
                c,
                '_' | '.' | '/' | '-' | '+' | '=' | '(' | ')' | '~' | '^' | ' '
            )
    };
    (first.is_alphanumeric() || matches!(first, '_' | '.' | '/'))
        && !text.ends_with(' ')
        && text.chars().all(allowed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml;

    #[test]
    fn printed_yaml_reads_back_to_the_same_tree() {
        let source = "a: \"0123\"\nb: 0x1F\nc: [1, \"two\", {d: null, e: [x, [y]]}]\nf: \"with: colon # and hash\"\n\
                      g: {}\nh: []\ni: \"line\\nbreak\"\nj: 1.0\nk: -.inf\n\"8080\": true\nl: \"\"\nm: \" pad\"\n";
        let value = yaml::parse(source).expect("valid");
        let printed = to_yaml_string(&value, None);
        assert_eq!(
            yaml::parse(&printed)
                .expect("printed yaml is valid")
                .to_json(),
            value.to_json(),
            "{printed}"
        );
        assert!(printed.contains("b: 0x1F\n"), "{printed}");
        assert!(printed.contains("a: \"0123\"\n"), "{printed}");
    }

    /// A `yaml:` source spanning lines (`--config $'yaml:log:\n  level: debug'`) used to end its
    /// `# from` comment at the line break and print the rest as YAML.
    #[test]
    fn show_origin_output_with_a_multi_line_source_reads_back_to_the_same_tree() {
        use std::sync::Arc;
        let sources = [
            "yaml:log:\n  level: debug\nnote: |\n  two\n  lines\n",
            "yaml:weird: \"a\\\\b\"\r\n",
        ];
        let resolved = crate::Resolver::builder()
            .uris(sources)
            .standard_providers(Arc::new(crate::MapEnv::default()))
            .build()
            .expect("builds")
            .resolve()
            .expect("resolves");
        let printed = to_yaml_string(&resolved.value, Some(&resolved.origins));
        let reread = yaml::parse(&printed).unwrap_or_else(|error| panic!("{error}:\n{printed}"));
        assert_eq!(reread.to_json(), resolved.value.to_json(), "{printed}");
        assert_eq!(printed.lines().count(), 4, "one line per key:\n{printed}");
        assert!(
            printed.contains("level: debug  # from yaml:log:\\n  level: debug\\nnote: |"),
            "{printed}"
        );
        assert_eq!(
            one_line("a\\b\r\n\u{2028}\u{85}c"),
            "a\\\\b\\r\\n\\u{2028}\\u{0085}c"
        );
    }
}
