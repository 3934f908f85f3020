//! The metric-query messages' payloads: a read a node asks a peer for, and the peer's stored
//! series and metric descriptions, as plain serde data (the engine's types carry no serde).
//! A conversion exists both ways for each, so what crosses the bus is exactly what was read.

use hotrule_mal_engine::{DataType, DetectPoint, Downsampling, ScopeType};
use serde::{Deserialize, Serialize};

use crate::data::metrics::cells::codec::{decode_cell, encode_cell};
use crate::base::ids::NodeId;
use crate::data::metrics::partial::{InFlight, InFlightRecord};
use crate::data::metrics::{Entity, Granularity, MetricInfo, PartialSeries, Point, Series, SeriesFilter, Value};

/// One read of a peer's local metric store (`MetricReader::read`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetricQuery {
    /// Empty: every metric.
    pub metric: String,
    pub service: Option<String>,
    pub instance: Option<String>,
    pub endpoint: Option<String>,
    /// `MINUTE`, `HOUR` or `DAY`.
    pub granularity: String,
    pub start_ms: i64,
    pub end_ms: i64,
}

impl MetricQuery {
    pub fn new(filter: &SeriesFilter, granularity: Granularity, start_ms: i64, end_ms: i64) -> MetricQuery {
        MetricQuery {
            metric: filter.metric.clone(),
            service: filter.service.clone(),
            instance: filter.instance.clone(),
            endpoint: filter.endpoint.clone(),
            granularity: granularity.as_str().to_string(),
            start_ms,
            end_ms,
        }
    }

    pub fn filter(&self) -> SeriesFilter {
        SeriesFilter { metric: self.metric.clone(), service: self.service.clone(), instance: self.instance.clone(), endpoint: self.endpoint.clone() }
    }

    pub fn granularity(&self) -> Option<Granularity> {
        Granularity::parse(&self.granularity)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetricInfoWire {
    pub name: String,
    pub scope: ScopeType,
    pub data_type: DataType,
    pub downsampling: Downsampling,
}

impl From<&MetricInfo> for MetricInfoWire {
    fn from(info: &MetricInfo) -> MetricInfoWire {
        MetricInfoWire { name: info.name.clone(), scope: info.scope, data_type: info.data_type, downsampling: info.downsampling }
    }
}

impl From<MetricInfoWire> for MetricInfo {
    fn from(wire: MetricInfoWire) -> MetricInfo {
        MetricInfo { name: wire.name, scope: wire.scope, data_type: wire.data_type, downsampling: wire.downsampling }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntityWire {
    pub scope: ScopeType,
    /// service, instance, endpoint, process, source service, dest service, source instance,
    /// dest instance, source process id, dest process id, layer.
    pub names: [String; 11],
    /// 0 none, 1 client, 2 server, 3 proxy.
    pub detect_point: u8,
    pub component_id: i32,
    pub instance_properties: Option<Vec<(String, String)>>,
    pub attrs: [Option<String>; 6],
}

impl From<&Entity> for EntityWire {
    fn from(e: &Entity) -> EntityWire {
        EntityWire {
            scope: e.scope,
            names: [
                e.service_name.clone(),
                e.instance_name.clone(),
                e.endpoint_name.clone(),
                e.process_name.clone(),
                e.source_service_name.clone(),
                e.dest_service_name.clone(),
                e.source_instance_name.clone(),
                e.dest_instance_name.clone(),
                e.source_process_id.clone(),
                e.dest_process_id.clone(),
                e.layer.clone(),
            ],
            detect_point: match e.detect_point {
                None => 0,
                Some(DetectPoint::Client) => 1,
                Some(DetectPoint::Server) => 2,
                Some(DetectPoint::Proxy) => 3,
            },
            component_id: e.component_id,
            instance_properties: e.instance_properties.as_ref().map(|p| p.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
            attrs: e.attrs.clone(),
        }
    }
}

impl From<EntityWire> for Entity {
    fn from(wire: EntityWire) -> Entity {
        let [service, instance, endpoint, process, source_service, dest_service, source_instance, dest_instance, source_process, dest_process, layer] =
            wire.names;
        let mut e = Entity::new(wire.scope);
        e.service_name = service;
        e.instance_name = instance;
        e.endpoint_name = endpoint;
        e.process_name = process;
        e.source_service_name = source_service;
        e.dest_service_name = dest_service;
        e.source_instance_name = source_instance;
        e.dest_instance_name = dest_instance;
        e.source_process_id = source_process;
        e.dest_process_id = dest_process;
        e.layer = layer;
        e.detect_point = match wire.detect_point {
            1 => Some(DetectPoint::Client),
            2 => Some(DetectPoint::Server),
            3 => Some(DetectPoint::Proxy),
            _ => None,
        };
        e.component_id = wire.component_id;
        e.instance_properties = wire.instance_properties.map(|p| p.into_iter().collect());
        e.attrs = wire.attrs;
        e
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ValueWire {
    Single(i64),
    Labeled(Vec<(String, i64)>),
    Histogram { labels: String, buckets: Vec<(i64, i64)>, percentiles: Vec<u32> },
}

impl From<&Value> for ValueWire {
    fn from(value: &Value) -> ValueWire {
        match value {
            Value::Single(v) => ValueWire::Single(*v),
            Value::Labeled(entries) => ValueWire::Labeled(entries.clone()),
            Value::Histogram { labels, buckets, percentiles } => {
                ValueWire::Histogram { labels: labels.clone(), buckets: buckets.clone(), percentiles: percentiles.clone() }
            }
        }
    }
}

impl From<ValueWire> for Value {
    fn from(wire: ValueWire) -> Value {
        match wire {
            ValueWire::Single(v) => Value::Single(v),
            ValueWire::Labeled(entries) => Value::Labeled(entries),
            ValueWire::Histogram { labels, buckets, percentiles } => Value::Histogram { labels, buckets, percentiles },
        }
    }
}

/// One series: `(bucket, start_ms, value)` points in bucket order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeriesWire {
    pub metric: String,
    pub entity: EntityWire,
    pub points: Vec<(i64, i64, ValueWire)>,
}

impl From<&Series> for SeriesWire {
    fn from(series: &Series) -> SeriesWire {
        SeriesWire {
            metric: series.metric.clone(),
            entity: EntityWire::from(&series.entity),
            points: series.points.iter().map(|p| (p.bucket, p.start_ms, ValueWire::from(&p.value))).collect(),
        }
    }
}

impl From<SeriesWire> for Series {
    fn from(wire: SeriesWire) -> Series {
        Series {
            metric: wire.metric,
            entity: Entity::from(wire.entity),
            points: wire.points.into_iter().map(|(bucket, start_ms, value)| Point { bucket, start_ms, value: value.into() }).collect(),
        }
    }
}

/// One series' stored partial state: `(bucket, cell)` with each cell in the metric store's own
/// versioned encoding (`cells::codec`), so what crosses the bus is what the peer stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartialSeriesWire {
    pub metric: String,
    pub entity: EntityWire,
    pub group: String,
    pub cells: Vec<(i64, Vec<u8>)>,
}

impl From<&PartialSeries> for PartialSeriesWire {
    fn from(series: &PartialSeries) -> PartialSeriesWire {
        PartialSeriesWire {
            metric: series.metric.clone(),
            entity: EntityWire::from(&series.entity),
            group: series.group.clone(),
            cells: series.cells.iter().map(|(bucket, cell)| (*bucket, encode_cell(cell))).collect(),
        }
    }
}

impl PartialSeriesWire {
    /// The series back; a cell that does not decode (another build's format, or a peer's bug)
    /// is an error naming the metric and bucket.
    pub fn decode(self) -> Result<PartialSeries, String> {
        let mut cells = Vec::with_capacity(self.cells.len());
        for (bucket, bytes) in self.cells {
            let cell = decode_cell(&bytes).map_err(|e| format!("cell of {} at {bucket}: {e}", self.metric))?;
            cells.push((bucket, cell));
        }
        Ok(PartialSeries { metric: self.metric, entity: Entity::from(self.entity), group: self.group, cells })
    }
}

/// A node's partial state on its way to owners, and its applied marks ([`InFlight`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlightWire {
    /// (owner, sequence number, delivered, series).
    pub records: Vec<(NodeId, u64, bool, Vec<PartialSeriesWire>)>,
    pub applied: Vec<(NodeId, u64)>,
    pub generation: u64,
}

impl From<&InFlight> for InFlightWire {
    fn from(in_flight: &InFlight) -> InFlightWire {
        InFlightWire {
            records: in_flight
                .records
                .iter()
                .map(|r| (r.owner.clone(), r.seq, r.delivered, r.series.iter().map(PartialSeriesWire::from).collect()))
                .collect(),
            applied: in_flight.applied.iter().map(|(node, mark)| (node.clone(), *mark)).collect(),
            generation: in_flight.generation,
        }
    }
}

impl InFlightWire {
    pub fn decode(self) -> Result<InFlight, String> {
        let mut records = Vec::with_capacity(self.records.len());
        for (owner, seq, delivered, series) in self.records {
            let series = series.into_iter().map(PartialSeriesWire::decode).collect::<Result<Vec<_>, _>>()?;
            records.push(InFlightRecord { owner, seq, delivered, series });
        }
        Ok(InFlight { records, applied: self.applied.into_iter().collect(), generation: self.generation })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_survive_the_wire_form() {
        let mut entity = Entity::new(ScopeType::ServiceInstanceRelation);
        entity.source_service_name = "a".into();
        entity.dest_instance_name = "b".into();
        entity.detect_point = Some(DetectPoint::Server);
        entity.component_id = 49;
        entity.instance_properties = Some([("pod".to_string(), "p-1".to_string())].into_iter().collect());
        entity.attrs[2] = Some("x".into());
        let series = Series {
            metric: "m".into(),
            entity,
            points: vec![
                Point { bucket: 202_501_011_200, start_ms: 1, value: Value::Single(-3) },
                Point { bucket: 202_501_011_201, start_ms: 2, value: Value::Labeled(vec![("k=v".into(), 4)]) },
                Point {
                    bucket: 202_501_011_202,
                    start_ms: 3,
                    value: Value::Histogram { labels: "l=1".into(), buckets: vec![(100, 2)], percentiles: vec![50, 99] },
                },
            ],
        };
        assert_eq!(Series::from(SeriesWire::from(&series)), series);
    }

    #[test]
    fn partial_series_survive_the_wire_form_and_bad_cells_are_named() {
        use crate::data::metrics::cells::cell::Cell;
        let (latest, _) = Cell::from_value(&Value::Single(7), Downsampling::Latest, 1_700_000_000_000);
        let (hist, group) = Cell::from_value(
            &Value::Histogram { labels: "g=1".into(), buckets: vec![(100, 2)], percentiles: vec![] },
            Downsampling::Sum,
            0,
        );
        for (cell, group) in [(latest, String::new()), (hist, group)] {
            let series = PartialSeries { metric: "m".into(), entity: Entity::new(ScopeType::Service), group, cells: vec![(202_501_011_200, cell)] };
            assert_eq!(PartialSeriesWire::from(&series).decode(), Ok(series));
        }
        let bad = PartialSeriesWire { metric: "m".into(), entity: EntityWire::from(&Entity::new(ScopeType::Service)), group: String::new(), cells: vec![(5, vec![9])] };
        assert_eq!(bad.decode(), Err("cell of m at 5: format version 9, this build reads 2".to_string()));
    }
}
