//! Typed decoding: a serde `Deserializer` over a resolved [`Value`].
//!
//! This is where the Collector's decode hook for expanded values lives: an inferred value
//! ([`Value::Inferred`]) gives its text to a string field and its typed value to everything else,
//! so `${env:PORT}` fills both `port: u16` and `port: String`, and `0123` read into a string stays
//! `"0123"`. Typing is otherwise strict (weakly-typed input is off): a quoted `"8080"` does not fill
//! an integer and `t` does not fill a bool. Errors name the key path.
//!
//! Null means "unset", at every depth (the Collector keeps a field's default when its value is nil):
//! a map entry whose value is null (`tls:`, `watch: null`, `port: ${env:UNSET}`) is skipped, so the
//! field takes its serde default (or is a missing field when it has none); a null list element is
//! skipped; a null where a struct, map or list is wanted reads as an empty one; `Option` reads `None`.
//! An explicit empty string (`${env:X:-}`, `""`) is a string, not null.

use std::fmt;

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, Visitor};
use serde::forward_to_deserialize_any;

use crate::value::{Value, join_path};

/// Why a value did not fit the requested type.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{}{message}", if path.is_empty() { String::new() } else { format!("`{path}`: ") })]
pub struct DecodeError {
    /// Dotted key path of the innermost value that did not fit (empty for the root).
    pub path: String,
    pub message: String,
}

impl DecodeError {
    fn at(mut self, path: &str) -> DecodeError {
        if self.path.is_empty() {
            self.path = path.to_owned();
        }
        self
    }
}

impl de::Error for DecodeError {
    fn custom<T: fmt::Display>(message: T) -> DecodeError {
        DecodeError {
            path: String::new(),
            message: message.to_string(),
        }
    }
}

/// Deserializes `value` into `T`. An inferred value gives its text to a string field and its typed
/// value to any other; typing is otherwise strict; null means unset (see the module docs).
pub fn from_value<'de, T: de::Deserialize<'de>>(value: &'de Value) -> Result<T, DecodeError> {
    T::deserialize(ValueDeserializer {
        value,
        path: String::new(),
    })
}

struct ValueDeserializer<'de> {
    value: &'de Value,
    path: String,
}

impl<'de> ValueDeserializer<'de> {
    fn child(&self, value: &'de Value, segment: &str) -> ValueDeserializer<'de> {
        ValueDeserializer {
            value,
            path: join_path(&self.path, segment),
        }
    }
}

impl<'de> Deserializer<'de> for ValueDeserializer<'de> {
    type Error = DecodeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(flag) => visitor.visit_bool(*flag),
            Value::Int(number) => visitor.visit_i64(*number),
            Value::Float(number) => visitor.visit_f64(*number),
            Value::String(text) => visitor.visit_borrowed_str(text),
            Value::List(items) => visitor.visit_seq(SeqAccess {
                items: items.iter().enumerate().filter(|(_, item)| !item.is_null()),
                parent: &self,
            }),
            Value::Map(map) => visitor.visit_map(MapAccess {
                entries: map.iter().filter(|(_, value)| !value.is_null()),
                pending: None,
                parent: &self,
            }),
            Value::Inferred { value, .. } => ValueDeserializer {
                value,
                path: self.path,
            }
            .deserialize_any(visitor),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.value {
            Value::Inferred { text, .. } => visitor.visit_borrowed_str(text),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        if self.value.is_null() {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        if self.value.is_null() {
            return visitor.visit_seq(SeqAccess {
                items: std::iter::empty(),
                parent: &self,
            });
        }
        self.deserialize_any(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        if self.value.is_null() {
            return visitor.visit_map(MapAccess {
                entries: std::iter::empty(),
                pending: None,
                parent: &self,
            });
        }
        self.deserialize_any(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.deserialize_map(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        if let Some(text) = self.value.as_str() {
            return visitor.visit_enum(BorrowedStrDeserializer::new(text));
        }
        let single_entry = self
            .value
            .as_map()
            .filter(|map| map.len() == 1)
            .and_then(|map| map.iter().next());
        match single_entry {
            Some((variant, value)) => visitor.visit_enum(EnumAccess {
                variant,
                value: self.child(value, variant),
            }),
            None => Err(de::Error::invalid_type(
                unexpected(self.value),
                &"a variant name or a map with one key",
            )),
        }
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 bytes byte_buf unit unit_struct
        tuple tuple_struct identifier ignored_any
    }
}

fn unexpected(value: &Value) -> de::Unexpected<'_> {
    match value.typed() {
        Value::Null => de::Unexpected::Unit,
        Value::Bool(flag) => de::Unexpected::Bool(*flag),
        Value::Int(number) => de::Unexpected::Signed(*number),
        Value::Float(number) => de::Unexpected::Float(*number),
        Value::String(text) => de::Unexpected::Str(text),
        Value::List(_) => de::Unexpected::Seq,
        _ => de::Unexpected::Map,
    }
}

struct SeqAccess<'a, 'de, I> {
    /// The elements with their index in the list (null elements are already left out).
    items: I,
    parent: &'a ValueDeserializer<'de>,
}

impl<'de, I: Iterator<Item = (usize, &'de Value)>> de::SeqAccess<'de> for SeqAccess<'_, 'de, I> {
    type Error = DecodeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DecodeError> {
        let Some((index, item)) = self.items.next() else {
            return Ok(None);
        };
        let child = self.parent.child(item, &index.to_string());
        let path = child.path.clone();
        seed.deserialize(child)
            .map(Some)
            .map_err(|error| error.at(&path))
    }

    fn size_hint(&self) -> Option<usize> {
        match self.items.size_hint() {
            (low, Some(high)) if low == high => Some(low),
            _ => None,
        }
    }
}

struct MapAccess<'a, 'de, I> {
    entries: I,
    pending: Option<(&'de str, &'de Value)>,
    parent: &'a ValueDeserializer<'de>,
}

impl<'de, I: Iterator<Item = (&'de str, &'de Value)>> de::MapAccess<'de> for MapAccess<'_, 'de, I> {
    type Error = DecodeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DecodeError> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        self.pending = Some((key, value));
        seed.deserialize(BorrowedStrDeserializer::new(key))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, DecodeError> {
        let Some((key, value)) = self.pending.take() else {
            return Err(de::Error::custom("map value requested before its key"));
        };
        let child = self.parent.child(value, key);
        let path = child.path.clone();
        seed.deserialize(child).map_err(|error| error.at(&path))
    }
}

struct EnumAccess<'de> {
    variant: &'de str,
    value: ValueDeserializer<'de>,
}

impl<'de> de::EnumAccess<'de> for EnumAccess<'de> {
    type Error = DecodeError;
    type Variant = ValueDeserializer<'de>;

    fn variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<(T::Value, Self::Variant), DecodeError> {
        let variant = seed.deserialize(self.variant.into_deserializer())?;
        Ok((variant, self.value))
    }
}

impl<'de> de::VariantAccess<'de> for ValueDeserializer<'de> {
    type Error = DecodeError;

    fn unit_variant(self) -> Result<(), DecodeError> {
        de::Deserialize::deserialize(self)
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, DecodeError> {
        let path = self.path.clone();
        seed.deserialize(self).map_err(|error| error.at(&path))
    }

    fn tuple_variant<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.deserialize_seq(visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.deserialize_map(visitor)
    }
}
