//! The data plane, in the order a sample travels: `ingest` decodes a protocol into samples or
//! logs and hands them across the `seam`; `evaluation` runs the active MAL/LAL files behind the
//! runtime gates; `metrics` and `logs` hold what evaluation writes (both stores over the
//! `series_store` helpers); `export` sends it on.

pub mod alarm_records;
pub mod alarms;
pub mod evaluation;
pub mod export;
pub mod ingest;
pub mod logs;
pub mod metrics;
pub mod seam;
pub mod series_store;
