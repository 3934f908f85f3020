//! `LogReportService`'s `LogData` to the LAL input, as `LogReportServiceGrpcHandler` maps it.
//! Pure. The fields map as `/v3/logs` maps their JSON form ([`crate::data::ingest::native_logs`]):
//! the same analyzer sees the same log whichever way it came.
//!
//! One rule is the stream's own ([`StreamService`]): the first non-empty `service` of a stream
//! is written onto every later element, overriding a different one (an agent names the service
//! on a stream's first element only). Nothing else carries over: not the instance, the endpoint,
//! the layer or the timestamp. Elements before the first named one pass with an empty service.

use hotrule_lal_engine::{Body, TraceContext};

use super::wire::{self, log_data_body};
use crate::data::seam::LogData;

/// The service a log stream carries over.
#[derive(Debug, Default)]
pub struct StreamService(Option<String>);

impl StreamService {
    /// Maps one element of the stream.
    pub fn map(&mut self, log: wire::LogData) -> LogData {
        let mut mapped = to_log(log);
        match &self.0 {
            Some(service) => mapped.service.clone_from(service),
            None if !mapped.service.is_empty() => self.0 = Some(mapped.service.clone()),
            None => {}
        }
        mapped
    }
}

/// One element as the analyzer reads it.
pub fn to_log(log: wire::LogData) -> LogData {
    let body = match log.body.and_then(|b| b.content) {
        None => Body::None,
        Some(log_data_body::Content::Text(text)) => Body::Text(text.text),
        Some(log_data_body::Content::Json(json)) => Body::Json(json.json),
        Some(log_data_body::Content::Yaml(yaml)) => Body::Yaml(yaml.yaml),
    };
    let trace_context = log
        .trace_context
        .map(|t| TraceContext { trace_id: t.trace_id, trace_segment_id: t.trace_segment_id, span_id: t.span_id })
        .unwrap_or_default();
    let tags = log.tags.map(|t| t.data.into_iter().map(|pair| (pair.key, pair.value)).collect()).unwrap_or_default();
    LogData {
        timestamp_ms: log.timestamp,
        service: log.service,
        service_instance: log.service_instance,
        endpoint: log.endpoint,
        layer: log.layer,
        body,
        trace_context,
        tags,
        ..LogData::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::ingest::skywalking::wire::{KeyStringValuePair, LogDataBody, LogTags, TextLog};

    fn element(service: &str, instance: &str, text: &str) -> wire::LogData {
        wire::LogData {
            timestamp: 1_700_000_000_123,
            service: service.into(),
            service_instance: instance.into(),
            endpoint: "/e".into(),
            body: Some(LogDataBody { r#type: "text".into(), content: Some(log_data_body::Content::Text(TextLog { text: text.into() })) }),
            trace_context: Some(wire::TraceContext { trace_id: "t".into(), trace_segment_id: "s".into(), span_id: 3 }),
            tags: Some(LogTags { data: vec![KeyStringValuePair { key: "level".into(), value: "ERROR".into() }] }),
            layer: "GENERAL".into(),
        }
    }

    #[test]
    fn an_element_maps_as_its_json_form_does() {
        let json = serde_json::json!({
            "timestamp": 1_700_000_000_123i64, "service": "svc", "serviceInstance": "i1", "endpoint": "/e",
            "body": {"type": "text", "text": {"text": "boom"}},
            "traceContext": {"traceId": "t", "traceSegmentId": "s", "spanId": 3},
            "tags": {"data": [{"key": "level", "value": "ERROR"}]}, "layer": "GENERAL",
        });
        let from_json = LogData::from_json(&json).expect("json");
        assert_eq!(to_log(element("svc", "i1", "boom")), from_json);
    }

    #[test]
    fn the_first_named_service_is_forced_onto_later_elements_and_nothing_else_carries() {
        let mut stream = StreamService::default();
        let before = stream.map(element("", "i0", "a"));
        assert_eq!(before.service, "");
        let first = stream.map(element("svc", "i1", "b"));
        let unnamed = stream.map(element("", "", "c"));
        let other = stream.map(element("other", "i3", "d"));
        assert_eq!((first.service.as_str(), unnamed.service.as_str(), other.service.as_str()), ("svc", "svc", "svc"));
        assert_eq!((unnamed.service_instance.as_str(), other.service_instance.as_str()), ("", "i3"));
    }

    #[test]
    fn an_empty_element_maps_to_an_empty_log() {
        assert_eq!(to_log(wire::LogData::default()), LogData::default());
    }
}
