//! Converters: rewrites applied to the resolved tree after merge and expansion (the Collector's
//! `confmap.Converter`, meant for migrations and backward-compatible renames), and the one real
//! converter, [`RenameKeys`].

use crate::resolver::Resolved;
use crate::value::{Map, Value, is_under};

/// Why a converter failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ConvertError {
    #[error("{converter}: cannot move `{from}` to `{to}`: `{blocked_at}` is a {kind}, not a map")]
    Blocked {
        converter: String,
        from: String,
        to: String,
        blocked_at: String,
        kind: &'static str,
    },
    #[error("{converter}: invalid key path `{path}`")]
    BadPath { converter: String, path: String },
}

/// A rewrite of the resolved configuration. It must keep `origins` in step with the keys it moves
/// and may add warnings.
pub trait Converter: Send + Sync {
    fn name(&self) -> &str;
    fn convert(&self, resolved: &mut Resolved) -> Result<(), ConvertError>;
}

/// Moves deprecated keys to their new names (`old.path` → `new.path`), with a warning. If both are
/// set, the new key wins and the warning says the old one was ignored. Paths are dotted map keys.
#[derive(Debug, Clone, Default)]
pub struct RenameKeys {
    renames: Vec<(String, String)>,
}

impl RenameKeys {
    pub fn new<O: Into<String>, N: Into<String>>(
        renames: impl IntoIterator<Item = (O, N)>,
    ) -> RenameKeys {
        RenameKeys {
            renames: renames
                .into_iter()
                .map(|(old, new)| (old.into(), new.into()))
                .collect(),
        }
    }

    fn rename(&self, resolved: &mut Resolved, old: &str, new: &str) -> Result<(), ConvertError> {
        let bad_path = |path: &str| ConvertError::BadPath {
            converter: self.name().to_owned(),
            path: path.to_owned(),
        };
        if old.is_empty() || new.is_empty() || is_under(new, old) || is_under(old, new) {
            return Err(bad_path(if old.is_empty() { old } else { new }));
        }
        if resolved.value.get_path(old).is_none() {
            return Ok(());
        }
        let new_is_set = resolved
            .value
            .get_path(new)
            .is_some_and(|value| !value.is_null());
        let moved_origins: Vec<(String, String)> = resolved
            .origins
            .iter()
            .filter(|(leaf, _)| is_under(leaf, old))
            .map(|(leaf, source)| (format!("{new}{}", &leaf[old.len()..]), source.clone()))
            .collect();
        if new_is_set {
            take_path(&mut resolved.value, old);
            resolved.origins.retain(|leaf, _| !is_under(leaf, old));
            self.warn(resolved, format!("`{old}` is deprecated and was ignored because `{new}` is also set; remove `{old}`"));
            return Ok(());
        }
        // Check the destination before removing anything, so a failure leaves the tree untouched.
        blocked_at(&resolved.value, new).map_or(Ok(()), |(blocked_at, kind)| {
            Err(ConvertError::Blocked {
                converter: self.name().to_owned(),
                from: old.to_owned(),
                to: new.to_owned(),
                blocked_at,
                kind,
            })
        })?;
        let Some(value) = take_path(&mut resolved.value, old) else {
            return Ok(());
        };
        put_path(&mut resolved.value, new, value);
        resolved
            .origins
            .retain(|leaf, _| !is_under(leaf, old) && !is_under(leaf, new));
        resolved.origins.extend(moved_origins);
        self.warn(
            resolved,
            format!("`{old}` is deprecated; its value was moved to `{new}`"),
        );
        Ok(())
    }

    fn warn(&self, resolved: &mut Resolved, warning: String) {
        tracing::warn!(converter = self.name(), "{warning}");
        resolved.warnings.push(warning);
    }
}

impl Converter for RenameKeys {
    fn name(&self) -> &str {
        "rename-keys"
    }

    fn convert(&self, resolved: &mut Resolved) -> Result<(), ConvertError> {
        for (old, new) in &self.renames {
            self.rename(resolved, old, new)?;
        }
        Ok(())
    }
}

/// Removes and returns the value at a dotted map path.
fn take_path(root: &mut Value, path: &str) -> Option<Value> {
    let (parent, last) = match path.rsplit_once('.') {
        Some((parent, last)) => (Some(parent), last),
        None => (None, path),
    };
    let parent_map = match parent {
        Some(parent) => map_at_mut(root, parent)?,
        None => root.as_map_mut()?,
    };
    parent_map.remove(last)
}

fn map_at_mut<'v>(root: &'v mut Value, path: &str) -> Option<&'v mut Map> {
    let mut current = root.as_map_mut()?;
    for segment in path.split('.') {
        current = current.get_mut(segment)?.as_map_mut()?;
    }
    Some(current)
}

/// The first key on the way to `path` whose value is neither absent, null nor a map.
fn blocked_at(root: &Value, path: &str) -> Option<(String, &'static str)> {
    let segments: Vec<&str> = path.split('.').collect();
    let mut current = root;
    for (depth, segment) in segments
        .iter()
        .enumerate()
        .take(segments.len().saturating_sub(1))
    {
        let Some(map) = current.as_map() else {
            return if current.is_null() {
                None
            } else {
                Some((segments[..depth].join("."), current.kind()))
            };
        };
        match map.get(segment) {
            Some(child) => current = child,
            None => return None,
        }
    }
    match current.as_map() {
        Some(_) => None,
        None if current.is_null() => None,
        None => Some((
            segments[..segments.len().saturating_sub(1)].join("."),
            current.kind(),
        )),
    }
}

/// Sets the value at a dotted map path, creating maps (and replacing nulls) along the way.
/// Callers check [`blocked_at`] first; a blocked path is left unchanged.
fn put_path(root: &mut Value, path: &str, value: Value) {
    let mut current = root;
    let mut segments = path.split('.').peekable();
    while let Some(segment) = segments.next() {
        if current.is_null() {
            *current = Value::empty_map();
        }
        let Some(map) = current.as_map_mut() else {
            return;
        };
        if segments.peek().is_none() {
            map.insert(segment, value);
            return;
        }
        if !map.contains_key(segment) {
            map.insert(segment, Value::empty_map());
        }
        let Some(child) = map.get_mut(segment) else {
            return;
        };
        current = child;
    }
}
