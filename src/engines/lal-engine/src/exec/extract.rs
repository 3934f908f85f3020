//! The `extractor` block: standard fields, tags, output-type fields, `metrics {}` samples, and
//! the record as it would be stored (extracted fields over the log's own).

use hotrule_mal_engine::Sample;
use hotrule_rule_compiler::ast::{Arg, Call};
use serde_json::Value as Json;

use super::{Ctx, MetricBuilder, Run};
use crate::error::EvalError;
use crate::log::ContentType;
use crate::value::Val;
use crate::{LogRecord, Warning};

impl Run<'_> {
    pub(super) fn extractor_statement(&mut self, call: &Call, name: &str) -> Result<(), EvalError> {
        match name {
            "service" | "instance" | "endpoint" | "layer" | "traceId" | "segmentId" => {
                let Some(text) = self.value(call, "extractor")?.into_str() else {
                    return Ok(());
                };
                if text.is_empty() {
                    return Ok(());
                }
                let slot = match name {
                    "service" => &mut self.out.service,
                    "instance" => &mut self.out.instance,
                    "endpoint" => &mut self.out.endpoint,
                    "layer" => &mut self.out.layer,
                    "traceId" => &mut self.out.trace_id,
                    _ => &mut self.out.segment_id,
                };
                *slot = Some(text);
                Ok(())
            }
            "spanId" => {
                let value = self.value(call, "spanId")?;
                if value.is_null() || value == Val::Str(String::new()) {
                    return Ok(());
                }
                let span = value.to_int()?;
                self.out.span_id = i32::try_from(span).ok();
                Ok(())
            }
            "timestamp" => {
                let value = self.value(call, "timestamp")?;
                let format = match call.args.get(1) {
                    Some(arg) => Some(self.env.eval(&arg.value)?.display()),
                    None => None,
                };
                if let Some(ts) = timestamp_of(&value, format.as_deref())? {
                    self.out.timestamp_ms = Some(ts);
                }
                Ok(())
            }
            "tag" => {
                for (key, value) in self.pairs(&call.args)? {
                    if let Some(value) = value.into_str()
                        && !key.is_empty()
                        && !value.is_empty()
                    {
                        self.out.tags.push((key, value));
                    }
                }
                Ok(())
            }
            "metrics" => {
                self.metric = MetricBuilder::default();
                self.sub_block(call, Ctx::Metrics)?;
                let metric = std::mem::take(&mut self.metric);
                self.emit(metric)
            }
            // `slowSql { }` / `sampledTrace { }` (older scripts) set output fields like the
            // extractor's own field statements do.
            "slowSql" | "sampledTrace" => self.sub_block(call, Ctx::Extractor),
            field => {
                let value = self.value(call, "extractor")?;
                self.out.fields.insert(field.to_owned(), value.to_json());
                Ok(())
            }
        }
    }

    pub(super) fn metrics_statement(&mut self, call: &Call, name: &str) -> Result<(), EvalError> {
        match name {
            "name" => self.metric.name = self.value(call, "name")?.into_str(),
            "value" => self.metric.value = Some(self.value(call, "value")?.to_double()?),
            "timestamp" => {
                self.metric.timestamp_ms = timestamp_of(&self.value(call, "timestamp")?, None)?;
            }
            "labels" => {
                for (key, value) in self.pairs(&call.args)? {
                    if let Some(value) = value.into_str()
                        && !key.trim().is_empty()
                    {
                        self.metric.labels.insert(key, value);
                    }
                }
            }
            _ => {
                return Err(EvalError::Unsupported {
                    what: "statement in metrics",
                });
            }
        }
        Ok(())
    }

    /// Named arguments (`k: v, ...`) or one map argument, as key / value pairs.
    fn pairs(&mut self, args: &[Arg]) -> Result<Vec<(String, Val)>, EvalError> {
        let mut out = Vec::with_capacity(args.len());
        for arg in args {
            match &arg.name {
                Some(name) => out.push((name.name.clone(), self.env.eval(&arg.value)?)),
                None => {
                    if let Val::Json(Json::Object(map)) = self.env.eval(&arg.value)? {
                        out.extend(map.iter().map(|(k, v)| (k.clone(), Val::from_json(v))));
                    }
                }
            }
        }
        Ok(out)
    }

    fn emit(&mut self, metric: MetricBuilder) -> Result<(), EvalError> {
        let name = metric
            .name
            .filter(|n| !n.is_empty())
            .ok_or(EvalError::Missing {
                statement: "metrics",
                part: "name",
            })?;
        let value = metric.value.ok_or(EvalError::Missing {
            statement: "metrics",
            part: "value",
        })?;
        match metric.timestamp_ms.filter(|ts| *ts > 0) {
            Some(timestamp_ms) => self.samples.push(Sample::new(
                name,
                std::sync::Arc::new(metric.labels),
                value,
                timestamp_ms,
            )),
            // SkyWalking sends it with timestamp 0 (1970), which storage drops at TTL.
            None => self.warnings.push(Warning::MetricWithoutTimestamp {
                rule: self.rule_key.to_owned(),
                metric: name,
            }),
        }
        Ok(())
    }

    /// The record as it would be stored now: extracted fields over the log's own.
    pub(super) fn record(&self) -> LogRecord {
        let log = self.env.log;
        let out = &self.out;
        let pick = |value: &Option<String>, fallback: &str| {
            value.clone().unwrap_or_else(|| fallback.to_owned())
        };
        let segment_id = pick(&out.segment_id, &log.trace_context.trace_segment_id);
        let span_id =
            (!segment_id.is_empty()).then(|| out.span_id.unwrap_or(log.trace_context.span_id));
        let (content_type, content) = if out.json_from_text {
            (ContentType::Json, log.body.content().to_owned())
        } else {
            (log.body.content_type(), log.body.content().to_owned())
        };
        // Sized once for the log's tags and the extracted ones.
        let mut tags = Vec::with_capacity(log.tags.len() + out.tags.len());
        tags.extend(log.tags.iter().cloned());
        tags.extend(out.tags.iter().cloned());
        LogRecord {
            service: pick(&out.service, &log.service),
            instance: pick(&out.instance, &log.service_instance),
            endpoint: pick(&out.endpoint, &log.endpoint),
            layer: pick(&out.layer, &log.layer),
            timestamp_ms: out
                .timestamp_ms
                .filter(|ts| *ts > 0)
                .unwrap_or(log.timestamp_ms),
            trace_id: pick(&out.trace_id, &log.trace_context.trace_id),
            segment_id,
            span_id,
            content_type,
            content,
            tags,
            output_type: self.output_type.map(str::to_owned),
            fields: out.fields.clone(),
        }
    }
}

/// `timestamp v[, "pattern"]`: a number or numeric string is epoch ms (a non-numeric string
/// fails the rule); with a pattern, a string that does not match gives 0 (the log's own
/// timestamp is used at the sink). Null or empty sets nothing.
fn timestamp_of(value: &Val, format: Option<&str>) -> Result<Option<i64>, EvalError> {
    // A string is read in place; only other values are rendered.
    let text = match value {
        Val::Null => return Ok(None),
        Val::Int(i) => return Ok(Some(*i)),
        Val::Float(f) => return Ok(Some(*f as i64)),
        other => other.display_cow(),
    };
    if text.is_empty() {
        return Ok(None);
    }
    match format {
        None => text
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| EvalError::NotANumber {
                text: text.into_owned(),
            }),
        Some(format) => Ok(Some(crate::time::parse(&text, format).unwrap_or(0))),
    }
}
