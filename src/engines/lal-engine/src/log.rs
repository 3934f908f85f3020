//! The input record: SkyWalking's `LogData` (the native log protocol, which the OTLP log receiver
//! also maps onto), plus what a receiver may attach that is not stored: OTLP resource attributes
//! (`sourceAttribute()`) and a typed input (an envoy access-log entry) that `parsed` reads.
//!
//! [`LogData::from_json`] reads one element of the native HTTP API's JSON array (proto3 JSON:
//! camelCase names, `int64` as a number or a string).

use std::collections::BTreeMap;

use serde_json::Value as Json;

/// One log as received.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogData {
    /// Epoch milliseconds; 0 means "now" at intake.
    pub timestamp_ms: i64,
    pub service: String,
    pub service_instance: String,
    pub endpoint: String,
    /// A layer name (`GENERAL`, `NGINX`, ...); empty routes to the `auto` rules.
    pub layer: String,
    pub body: Body,
    pub trace_context: TraceContext,
    /// In arrival order; keys may repeat.
    pub tags: Vec<(String, String)>,
    /// OTLP resource attributes, read by `sourceAttribute("k")`; never stored.
    pub source_attributes: BTreeMap<String, String>,
    /// A typed input object instead of a body (envoy ALS): rules whose input type matches read
    /// it as `parsed`.
    pub typed: Option<TypedInput>,
}

/// The log body.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Body {
    #[default]
    None,
    Text(String),
    /// A JSON document, as a string (as in `body.json.json`).
    Json(String),
    Yaml(String),
}

/// How a stored log's content is encoded (SkyWalking's `ContentType`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ContentType {
    #[default]
    None = 0,
    Text = 1,
    Json = 2,
    Yaml = 3,
}

impl Body {
    pub fn content_type(&self) -> ContentType {
        match self {
            Body::None => ContentType::None,
            Body::Text(_) => ContentType::Text,
            Body::Json(_) => ContentType::Json,
            Body::Yaml(_) => ContentType::Yaml,
        }
    }

    pub fn content(&self) -> &str {
        match self {
            Body::None => "",
            Body::Text(text) | Body::Json(text) | Body::Yaml(text) => text,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceContext {
    pub trace_id: String,
    pub trace_segment_id: String,
    pub span_id: i32,
}

/// A typed input: the message's proto3-JSON form (camelCase field names, wrapper types as their
/// bare value) and its fully qualified type name.
#[derive(Debug, Clone, PartialEq)]
pub struct TypedInput {
    pub type_name: String,
    pub message: Json,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogDataError {
    #[error("a log must be a JSON object")]
    NotAnObject,
    #[error("field '{field}' has the wrong type: expected {expected}")]
    WrongType {
        field: &'static str,
        expected: &'static str,
    },
}

impl LogData {
    /// Reads one `LogData` in proto3 JSON (the `/v3/logs` array element).
    pub fn from_json(json: &Json) -> Result<LogData, LogDataError> {
        let object = json.as_object().ok_or(LogDataError::NotAnObject)?;
        let text = |field: &'static str| -> Result<String, LogDataError> {
            match object.get(field) {
                None | Some(Json::Null) => Ok(String::new()),
                Some(Json::String(s)) => Ok(s.clone()),
                Some(_) => Err(LogDataError::WrongType {
                    field,
                    expected: "a string",
                }),
            }
        };
        let mut log = LogData {
            timestamp_ms: int_field(object.get("timestamp"), "timestamp")?,
            service: text("service")?,
            service_instance: text("serviceInstance")?,
            endpoint: text("endpoint")?,
            layer: text("layer")?,
            ..LogData::default()
        };
        if let Some(body) = object.get("body").filter(|b| !b.is_null()) {
            log.body = body_from_json(body)?;
        }
        if let Some(trace) = object.get("traceContext").and_then(Json::as_object) {
            let s = |key: &str| {
                trace
                    .get(key)
                    .and_then(Json::as_str)
                    .unwrap_or("")
                    .to_owned()
            };
            log.trace_context = TraceContext {
                trace_id: s("traceId"),
                trace_segment_id: s("traceSegmentId"),
                span_id: i32::try_from(int_field(trace.get("spanId"), "traceContext.spanId")?)
                    .map_err(|_| LogDataError::WrongType {
                        field: "traceContext.spanId",
                        expected: "a 32-bit integer",
                    })?,
            };
        }
        if let Some(tags) = object.get("tags") {
            let data =
                tags.get("data")
                    .and_then(Json::as_array)
                    .ok_or(LogDataError::WrongType {
                        field: "tags",
                        expected: "{\"data\": [{\"key\", \"value\"}]}",
                    })?;
            for pair in data {
                let key = pair.get("key").and_then(Json::as_str).unwrap_or("");
                let value = pair.get("value").and_then(Json::as_str).unwrap_or("");
                log.tags.push((key.to_owned(), value.to_owned()));
            }
        }
        Ok(log)
    }

    /// The first tag with this key, `""` when absent (LAL's `tag("k")` never returns null).
    pub fn tag(&self, key: &str) -> &str {
        self.tags
            .iter()
            .find(|(k, _)| k == key)
            .map_or("", |(_, v)| v.as_str())
    }
}

fn int_field(value: Option<&Json>, field: &'static str) -> Result<i64, LogDataError> {
    let wrong = LogDataError::WrongType {
        field,
        expected: "an integer or an integer string",
    };
    match value {
        None | Some(Json::Null) => Ok(0),
        Some(Json::Number(n)) => n.as_i64().ok_or(wrong),
        Some(Json::String(s)) if s.is_empty() => Ok(0),
        Some(Json::String(s)) => s.parse().map_err(|_| wrong),
        Some(_) => Err(wrong),
    }
}

fn body_from_json(body: &Json) -> Result<Body, LogDataError> {
    let inner = |kind: &str| -> Option<String> {
        let part = body.get(kind)?;
        Some(
            part.get(kind)
                .and_then(Json::as_str)
                .unwrap_or("")
                .to_owned(),
        )
    };
    if let Some(text) = inner("text") {
        return Ok(Body::Text(text));
    }
    if let Some(json) = inner("json") {
        return Ok(Body::Json(json));
    }
    if let Some(yaml) = inner("yaml") {
        return Ok(Body::Yaml(yaml));
    }
    if body.is_object() {
        Ok(Body::None)
    } else {
        Err(LogDataError::WrongType {
            field: "body",
            expected: "{text|json|yaml: {...}}",
        })
    }
}
