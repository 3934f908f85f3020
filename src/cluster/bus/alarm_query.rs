//! The alarm-record query messages' payloads: a peer's page of stored alarm records
//! (`BusResponse::Alarms`) for a cluster-wide `/query/alarms` (`BusRequest::QueryAlarms` carries
//! the `AlarmFilter` itself, plain serde data). A record crosses the bus as its store value
//! (`data::alarm_records::codec`), the same bytes the peer keeps, with its key's start time and
//! uuid and its recovery time; the asker decodes it as the store would.

use serde::{Deserialize, Serialize};

use crate::data::alarm_records::{AlarmRecord, codec};

/// One stored record of a peer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlarmRecordWire {
    pub start_time: i64,
    pub uuid: String,
    pub value: Vec<u8>,
    pub recovery_time: Option<i64>,
}

impl From<&AlarmRecord> for AlarmRecordWire {
    fn from(record: &AlarmRecord) -> AlarmRecordWire {
        AlarmRecordWire {
            start_time: record.start_time,
            uuid: record.uuid.clone(),
            value: codec::encode_record(record),
            recovery_time: record.recovery_time,
        }
    }
}

/// Why a peer's record could not be read back.
#[derive(Debug, thiserror::Error)]
#[error("alarm record {uuid} from the peer does not decode: {detail}")]
pub struct AlarmWireError {
    pub uuid: String,
    pub detail: String,
}

impl TryFrom<AlarmRecordWire> for AlarmRecord {
    type Error = AlarmWireError;

    fn try_from(wire: AlarmRecordWire) -> Result<AlarmRecord, AlarmWireError> {
        let AlarmRecordWire { start_time, uuid, value, recovery_time } = wire;
        match codec::decode_record(&value, start_time, &uuid) {
            Ok(record) => Ok(AlarmRecord { recovery_time, ..record }),
            Err(e) => Err(AlarmWireError { uuid, detail: e.to_string() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::alarms::hooks::message::Tag;

    #[test]
    fn records_survive_the_wire_form_and_garbage_is_an_error() {
        let record = AlarmRecord {
            scope_id: 2,
            scope: "SERVICE_INSTANCE".into(),
            name: "inst of svc".into(),
            id0: "c3Zj.1_aW5zdA==".into(),
            start_time: 1_795_608_000_000,
            alarm_message: "é".into(),
            rule_name: "instance_rule".into(),
            tags: vec![Tag::new("level", "WARNING")],
            expression: "sum(m > 1) >= 1".into(),
            metrics_snapshot: [("m".to_string(), "[]".to_string())].into(),
            uuid: "0b5c".into(),
            layers: vec!["GENERAL".into()],
            recovery_time: Some(1_795_608_060_000),
            ..AlarmRecord::default()
        };
        assert_eq!(AlarmRecord::try_from(AlarmRecordWire::from(&record)).expect("decodes"), record);
        let garbage = AlarmRecordWire { start_time: 1, uuid: "u9".into(), value: vec![1, 0], recovery_time: None };
        let error = AlarmRecord::try_from(garbage).expect_err("not a record value");
        assert!(error.to_string().contains("u9"), "{error}");
    }
}
