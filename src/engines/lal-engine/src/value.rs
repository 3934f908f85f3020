//! Runtime values of LAL expressions and the conversions SkyWalking's generated code applies
//! (`LalRuntimeHelper`: `toStr`, `toLong`, `toInt`, `toBool`, `isTrue`, `isNotEmpty`), with Java's
//! string forms (`String.valueOf`, `Map.toString`, a protobuf message's text format).

use serde_json::Value as Json;

use crate::error::EvalError;

/// A value while a rule runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// A JSON object or array: a parsed map, a nested value of one, a `toJson()` result.
    Json(Json),
    /// A message of a typed input, in proto3-JSON form. Its missing fields read as empty
    /// messages, as protobuf getters never return null.
    Proto(Json),
}

impl Val {
    /// A JSON value as LAL sees it: scalars become scalars, objects and arrays stay JSON.
    pub fn from_json(json: &Json) -> Val {
        match json {
            Json::Null => Val::Null,
            Json::Bool(b) => Val::Bool(*b),
            Json::Number(n) => match n.as_i64() {
                Some(i) => Val::Int(i),
                None => Val::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Json::String(s) => Val::Str(s.clone()),
            Json::Object(_) | Json::Array(_) => Val::Json(json.clone()),
        }
    }

    /// The value as JSON (for output fields and building lists).
    pub fn to_json(&self) -> Json {
        match self {
            Val::Null => Json::Null,
            Val::Bool(b) => Json::Bool(*b),
            Val::Int(i) => Json::from(*i),
            Val::Float(f) => serde_json::Number::from_f64(*f).map_or(Json::Null, Json::Number),
            Val::Str(s) => Json::String(s.clone()),
            Val::Json(json) | Val::Proto(json) => json.clone(),
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Val::Null)
    }

    /// `String.valueOf(x)` for a non-null value; `None` for null (`toStr(null)` is null).
    pub fn to_str(&self) -> Option<String> {
        match self {
            Val::Null => None,
            Val::Str(s) => Some(s.clone()),
            other => Some(other.display()),
        }
    }

    /// [`Val::to_str`] that moves a string instead of copying it.
    pub fn into_str(self) -> Option<String> {
        match self {
            Val::Str(s) => Some(s),
            other => other.to_str(),
        }
    }

    /// [`Val::display`] that borrows a string instead of copying it.
    pub fn display_cow(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Val::Str(s) => std::borrow::Cow::Borrowed(s),
            other => std::borrow::Cow::Owned(other.display()),
        }
    }

    /// Java's string form; null is `"null"` (as in a GString).
    pub fn display(&self) -> String {
        match self {
            Val::Null => "null".to_owned(),
            Val::Bool(b) => b.to_string(),
            Val::Int(i) => i.to_string(),
            Val::Float(f) => java_double(*f),
            Val::Str(s) => s.clone(),
            Val::Json(json) => java_json(json),
            Val::Proto(json) => proto_text(json, 0),
        }
    }

    /// `toLong`: a number's long value, a string parsed (failure is an error), anything else 0.
    pub fn to_long(&self) -> Result<i64, EvalError> {
        match self {
            Val::Int(i) => Ok(*i),
            Val::Float(f) => Ok(*f as i64),
            Val::Str(s) => s
                .trim_end_matches(['L', 'l'])
                .parse()
                .map_err(|_| EvalError::NotANumber { text: s.clone() }),
            _ => Ok(0),
        }
    }

    /// `toInt`: as `toLong`, narrowed to 32 bits as Java's `intValue()` does.
    pub fn to_int(&self) -> Result<i64, EvalError> {
        match self {
            Val::Str(s) => s
                .parse::<i32>()
                .map(i64::from)
                .map_err(|_| EvalError::NotANumber { text: s.clone() }),
            other => Ok(i64::from(other.to_long()? as i32)),
        }
    }

    /// `as Double`.
    pub fn to_double(&self) -> Result<f64, EvalError> {
        match self {
            Val::Int(i) => Ok(*i as f64),
            Val::Float(f) => Ok(*f),
            Val::Str(s) => s
                .trim()
                .trim_end_matches(['D', 'd', 'F', 'f'])
                .parse()
                .map_err(|_| EvalError::NotANumber { text: s.clone() }),
            Val::Null => Err(EvalError::NullNumber),
            _ => Ok(0.0),
        }
    }

    /// `toBool` / `isTrue`: a boolean itself, a string parsed (`"true"`, any case), null false,
    /// anything else true.
    pub fn to_bool(&self) -> bool {
        match self {
            Val::Null => false,
            Val::Bool(b) => *b,
            Val::Str(s) => s.eq_ignore_ascii_case("true"),
            _ => true,
        }
    }

    /// `isNotEmpty`: null false, otherwise the string form is not empty.
    pub fn is_not_empty(&self) -> bool {
        match self {
            Val::Null => false,
            Val::Str(s) => !s.is_empty(),
            other => !other.display().is_empty(),
        }
    }

    /// The truth of a bare condition `if (x)`: a boolean is itself, anything else must be
    /// non-null with a non-empty string form.
    pub fn truth(&self) -> bool {
        match self {
            Val::Bool(b) => *b,
            other => other.is_not_empty(),
        }
    }

    pub fn is_numeric(&self) -> bool {
        matches!(self, Val::Int(_) | Val::Float(_))
    }
}

/// Java's `Double.toString`.
pub fn java_double(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    let magnitude = value.abs();
    if magnitude == 0.0 || (1e-3..1e7).contains(&magnitude) {
        let text = format!("{value}");
        if text.contains('.') {
            text
        } else {
            format!("{text}.0")
        }
    } else {
        let text = format!("{value:e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let mantissa = if mantissa.contains('.') {
            mantissa.to_owned()
        } else {
            format!("{mantissa}.0")
        };
        format!("{mantissa}E{exponent}")
    }
}

/// Java's `Map.toString` / `List.toString` of a JSON value as Jackson reads it.
pub fn java_json(json: &Json) -> String {
    match json {
        Json::Null => "null".to_owned(),
        Json::Bool(b) => b.to_string(),
        Json::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => java_double(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => s.clone(),
        Json::Array(items) => {
            let parts: Vec<String> = items.iter().map(java_json).collect();
            format!("[{}]", parts.join(", "))
        }
        Json::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k}={}", java_json(v)))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
    }
}

/// A protobuf message's `toString()` (text format) from its proto3-JSON form: snake_case field
/// names, one field per line, nested messages in braces. An empty message is `""`.
pub fn proto_text(json: &Json, indent: usize) -> String {
    let Json::Object(map) = json else {
        return java_json(json);
    };
    let pad = "  ".repeat(indent);
    let mut out = String::new();
    for (key, value) in map {
        let name = snake_case(key);
        let items: Vec<&Json> = match value {
            Json::Array(items) => items.iter().collect(),
            other => vec![other],
        };
        for item in items {
            match item {
                Json::Object(_) => {
                    out.push_str(&format!("{pad}{name} {{\n"));
                    out.push_str(&proto_text(item, indent + 1));
                    out.push_str(&format!("{pad}}}\n"));
                }
                Json::String(s) => out.push_str(&format!("{pad}{name}: {s:?}\n")),
                other => out.push_str(&format!("{pad}{name}: {}\n", java_json(other))),
            }
        }
    }
    out
}

fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_string_forms() {
        assert_eq!(java_double(3000.0), "3000.0");
        assert_eq!(java_double(0.5), "0.5");
        assert_eq!(java_double(1e10), "1.0E10");
        assert_eq!(
            java_json(&serde_json::json!({"a": 1, "b": [true, "x"]})),
            "{a=1, b=[true, x]}"
        );
        assert_eq!(
            proto_text(&serde_json::json!({"upstreamConnectionFailure": true}), 0),
            "upstream_connection_failure: true\n"
        );
        assert_eq!(proto_text(&serde_json::json!({}), 0), "");
    }

    #[test]
    fn conversions_follow_the_runtime_helper() {
        assert_eq!(Val::Null.to_long(), Ok(0));
        assert_eq!(Val::Str("42".into()).to_int(), Ok(42));
        assert!(Val::Str("x".into()).to_long().is_err());
        assert!(Val::Str("TRUE".into()).to_bool());
        assert!(!Val::Null.truth());
        assert!(!Val::Str(String::new()).truth());
        assert!(!Val::Proto(serde_json::json!({})).truth());
        assert!(Val::Int(0).truth());
    }
}
