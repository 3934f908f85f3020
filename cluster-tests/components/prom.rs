//! Reading Prometheus answers: the HTTP API's vector and matrix results (also what
//! `promtool query … -o json` prints), and sample lines of the text exposition format.

use std::collections::BTreeMap;

/// One sample of an instant vector.
#[derive(Debug, Clone, PartialEq)]
pub struct PromSample {
    pub labels: BTreeMap<String, String>,
    /// Unix seconds.
    pub time: f64,
    pub value: f64,
}

/// One series of a range matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct PromSeries {
    pub labels: BTreeMap<String, String>,
    /// (Unix seconds, value), in time order.
    pub values: Vec<(f64, f64)>,
}

impl PromSample {
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.get(name).map(String::as_str)
    }
}

impl PromSeries {
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.get(name).map(String::as_str)
    }
}

fn labels_of(metric: &serde_json::Value) -> Result<BTreeMap<String, String>, String> {
    let object = metric.as_object().ok_or_else(|| format!("\"metric\" is not an object: {metric}"))?;
    object
        .iter()
        .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())).ok_or_else(|| format!("label {k} is not a string: {v}")))
        .collect()
}

/// `[time, "value"]`: time a JSON number of seconds, value a string (`"1"`, `"+Inf"`, `"NaN"`).
fn point_of(pair: &serde_json::Value) -> Result<(f64, f64), String> {
    let time = pair[0].as_f64().ok_or_else(|| format!("no numeric time in {pair}"))?;
    let text = pair[1].as_str().ok_or_else(|| format!("the value is not a string in {pair}"))?;
    let value = match text {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        other => other.parse().map_err(|e| format!("value {other:?}: {e}"))?,
    };
    Ok((time, value))
}

/// An instant vector: `[{"metric": {…}, "value": [t, "v"]}, …]`.
pub fn parse_vector(result: &serde_json::Value) -> Result<Vec<PromSample>, String> {
    let items = result.as_array().ok_or_else(|| format!("a vector is an array, got {result}"))?;
    items
        .iter()
        .map(|item| {
            let (time, value) = point_of(&item["value"])?;
            Ok(PromSample { labels: labels_of(&item["metric"])?, time, value })
        })
        .collect()
}

/// A range matrix: `[{"metric": {…}, "values": [[t, "v"], …]}, …]`.
pub fn parse_matrix(result: &serde_json::Value) -> Result<Vec<PromSeries>, String> {
    let items = result.as_array().ok_or_else(|| format!("a matrix is an array, got {result}"))?;
    items
        .iter()
        .map(|item| {
            let values = item["values"].as_array().ok_or_else(|| format!("no \"values\" array in {item}"))?;
            Ok(PromSeries { labels: labels_of(&item["metric"])?, values: values.iter().map(point_of).collect::<Result<_, _>>()? })
        })
        .collect()
}

/// The values of the sample lines of `name` in a text exposition whose labels include every
/// `(label, value)` of `want`. Comments and other families are skipped.
fn matching_values<'t>(text: &'t str, name: &'t str, want: &'t [(&str, &str)]) -> impl Iterator<Item = f64> + 't {
    text.lines().filter(|line| !line.starts_with('#')).filter_map(move |line| {
        let rest = line.strip_prefix(name)?;
        let (labels, value) = match rest.chars().next()? {
            '{' => {
                let close = rest.rfind('}')?;
                (&rest[1..close], rest[close + 1..].trim())
            }
            ' ' => ("", rest.trim()),
            _ => return None,
        };
        let all = want.iter().all(|(k, v)| labels.split(',').any(|pair| pair.trim() == format!("{k}=\"{v}\"")));
        if !all {
            return None;
        }
        value.split_whitespace().next()?.parse().ok()
    })
}

/// The value of the first matching sample line (see [`matching_values`]).
pub fn exposition_value(text: &str, name: &str, want: &[(&str, &str)]) -> Option<f64> {
    matching_values(text, name, want).next()
}

/// The sum of every matching sample line (a counter family split by other labels).
pub fn exposition_sum(text: &str, name: &str, want: &[(&str, &str)]) -> f64 {
    matching_values(text, name, want).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_and_matrices_parse() {
        let vector = serde_json::json!([{"metric": {"__name__": "up", "job": "x"}, "value": [1795607161.722, "1"]}]);
        let parsed = parse_vector(&vector).expect("vector");
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].label("job"), Some("x"));
        assert_eq!(parsed[0].value, 1.0);
        let matrix = serde_json::json!([{"metric": {"__name__": "m"}, "values": [[1, "2"], [2, "+Inf"]]}]);
        let parsed = parse_matrix(&matrix).expect("matrix");
        assert_eq!(parsed[0].values, vec![(1.0, 2.0), (2.0, f64::INFINITY)]);
        assert!(parse_vector(&serde_json::json!({"x": 1})).is_err());
    }

    #[test]
    fn exposition_lines_are_found_by_name_and_labels() {
        let text = "# HELP a x\n# TYPE a gauge\na 3\nab 9\nc{mode=\"idle\",cpu=\"0\"} 7.5\nc{mode=\"user\",cpu=\"0\"} 2\n";
        assert_eq!(exposition_value(text, "a", &[]), Some(3.0));
        assert_eq!(exposition_value(text, "c", &[("mode", "user")]), Some(2.0));
        assert_eq!(exposition_value(text, "c", &[("mode", "nice")]), None);
        assert_eq!(exposition_sum(text, "c", &[("cpu", "0")]), 9.5);
    }
}
