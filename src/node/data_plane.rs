//! The data plane of a node: the metric, log and alarm-record stores (their own key spaces of the node's
//! database), the exporters, dispatch (evaluation under the runtime's gates) and the receivers.

use std::sync::Arc;

use crate::base::owner::LiveNodes;
use crate::base::self_metrics::SelfMetrics;
use crate::data::metrics::handoff::{AppliedMinutes, HandoffReceiver, StoreReceiver};
use crate::base::worker::WorkerRunner;
use crate::data::evaluation::{Dispatcher, NodeRegistry};
use crate::data::export::otlp_logs::OtlpLogExporter;
use crate::data::ingest::Ingest;
use crate::data::ingest::skywalking::SkyWalkingReceiver;
use crate::data::alarm_records::store::AlarmRecordStore;
use crate::data::logs::records::LogStore;
use crate::data::metrics::cells::MetricStore;
use crate::data::metrics::{MetricReader, MetricWriter};
use crate::data::seam::{BatchSink, LogSink};
use crate::store::kv::KvEngine;

use super::control_plane::ControlPlane;
use super::{NodeError, NodeSettings};

/// Where computed metrics and kept logs are written and read.
pub(super) struct DataStores {
    pub(super) metric_store: Arc<MetricStore>,
    pub(super) log_store: Arc<LogStore>,
    /// Alarm records (the `alarms` key space): the alarm worker writes them, `/query/alarms` reads.
    pub(super) alarm_store: Arc<AlarmRecordStore>,
    /// What queries and export read.
    pub(super) metric_reader: Arc<dyn MetricReader>,
    /// Where dispatch writes metric values: the store, then the remote-write exporter.
    pub(super) metric_writer: Arc<dyn MetricWriter>,
    /// The OTLP log exporter, when `export.otlp_logs` is set.
    pub(super) log_exporter: Option<Arc<OtlpLogExporter>>,
    /// The remote-write exporter, when `export.remote_write` is set.
    pub(super) exporter: Option<Arc<crate::data::export::Exporter>>,
}

/// Opens the metric, log and alarm-record stores on `kv` and wires the exporters (their workers on
/// `workers`). Queries read the node's store unless `metric_reader` is given (a test's).
pub(super) fn open_stores(
    kv: &Arc<dyn KvEngine>,
    settings: &NodeSettings,
    metric_reader: Option<Arc<dyn MetricReader>>,
    live: &Arc<dyn LiveNodes>,
    telemetry: &Arc<SelfMetrics>,
    workers: &mut WorkerRunner,
) -> Result<DataStores, NodeError> {
    let metric_store = Arc::new(MetricStore::open(kv.series(), settings.retention, telemetry.clone())?);
    let log_store = Arc::new(LogStore::open(kv.logs(), settings.retention.logs, telemetry.clone())?);
    let alarm_store = Arc::new(AlarmRecordStore::open(kv.alarms(), settings.retention.alarms));
    let metric_reader: Arc<dyn MetricReader> = metric_reader.unwrap_or_else(|| metric_store.clone());
    // Dispatch writes the store, then (when configured) the remote-write exporter, which
    // exports the entities this node owns.
    let (metric_writer, exporter) = crate::data::export::wire(
        settings.export.clone(),
        metric_store.clone(),
        metric_reader.clone(),
        live.clone(),
        telemetry.clone(),
        workers,
    )?;
    // Kept logs also go to the OTLP log exporter when `export.otlp_logs` is set: one more
    // log writer for dispatch, its worker on the node's runner.
    let log_exporter = crate::data::export::otlp_logs::wire(settings.otlp_logs_export.clone(), telemetry.clone(), workers)?;
    Ok(DataStores { metric_store, log_store, alarm_store, metric_reader, metric_writer, log_exporter, exporter })
}

/// Where peers' handoff records are applied: the metric store, then the exporter's marks (the
/// owner exports what it merged).
pub(super) fn handoff_receiver(stores: &DataStores, telemetry: &Arc<SelfMetrics>) -> Arc<dyn HandoffReceiver> {
    let on_applied: Option<AppliedMinutes> = stores.exporter.clone().map(|exporter| {
        let mark: AppliedMinutes = Arc::new(move |series: &[(String, crate::data::metrics::Entity, i64)]| exporter.mark_series(series));
        mark
    });
    Arc::new(StoreReceiver { store: stores.metric_store.clone(), on_applied, telemetry: telemetry.clone() })
}

/// Where the receivers hand what they decoded; none: the node's dispatcher.
#[derive(Default)]
pub(super) struct Sinks {
    pub(super) samples: Option<Arc<dyn BatchSink>>,
    pub(super) logs: Option<Arc<dyn LogSink>>,
}

/// Dispatch and the receivers that feed it.
pub(super) struct DataPlane {
    pub(super) dispatcher: Arc<Dispatcher>,
    pub(super) ingest: Arc<Ingest>,
    /// SkyWalking's native gRPC receivers (over `ingest`; management calls write instance
    /// traffic to the metric writer).
    pub(super) skywalking: Arc<SkyWalkingReceiver>,
}

/// Builds dispatch (batches from receivers, evaluated against the loaded rules under their
/// gates, written to the metric writers it is given) and the receivers.
pub(super) fn build(
    settings: &NodeSettings,
    control: &ControlPlane,
    stores: &DataStores,
    sinks: Sinks,
    telemetry: &Arc<SelfMetrics>,
) -> Result<DataPlane, NodeError> {
    let dispatcher = Arc::new(Dispatcher::new(
        settings.dispatch.clone(),
        control.runtime.clone(),
        Arc::new(NodeRegistry::new(control.store.clone(), control.runtime.clone())),
        telemetry.clone(),
        vec![stores.metric_writer.clone()],
    )?);
    let sink: Arc<dyn BatchSink> = match sinks.samples {
        Some(sink) => sink,
        None => dispatcher.clone(),
    };
    // Logs go to the dispatcher's LAL path unless a test hands the receivers another sink.
    let log_sink: Arc<dyn LogSink> = match sinks.logs {
        Some(sink) => sink,
        None => dispatcher.clone(),
    };
    // Kept logs are stored first, then go to the OTLP log exporter when one is configured.
    dispatcher.add_log_writer(stores.log_store.clone());
    if let Some(exporter) = &stores.log_exporter {
        dispatcher.add_log_writer(exporter.clone());
    }
    let ingest = Ingest::with_logs(sink, Some(log_sink), telemetry.clone(), settings.ingest.limits);
    let instances = Arc::new(InstanceTraffic { writer: stores.metric_writer.clone(), shaped: std::sync::OnceLock::new() });
    let skywalking = SkyWalkingReceiver::new(ingest.clone(), settings.ingest.grpc.clone(), Some(instances));
    Ok(DataPlane { dispatcher, ingest, skywalking })
}

/// Where management calls' instance traffic goes: the metric writer, as dispatch writes, the
/// metric's shape made known before its first value.
struct InstanceTraffic {
    writer: Arc<dyn MetricWriter>,
    shaped: std::sync::OnceLock<()>,
}

impl crate::data::seam::InstanceSink for InstanceTraffic {
    fn record(&self, value: crate::data::seam::MetricValue) -> Result<(), String> {
        if self.shaped.get().is_none() {
            let info = crate::data::metrics::MetricInfo {
                name: value.metric.clone(),
                scope: value.entity.scope,
                data_type: value.data_type,
                downsampling: value.downsampling,
            };
            self.writer.ensure_shape(&info).map_err(|e| e.to_string())?;
            let _ = self.shaped.set(());
        }
        self.writer.write(std::slice::from_ref(&value)).map_err(|e| e.to_string())
    }
}
