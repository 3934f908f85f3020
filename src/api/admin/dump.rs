//! `GET /runtime/rule/dump[/{catalog}]`: a tar.gz backup of the stored entries.
//!
//! Layout: `runtime-rule-dump/<catalog>/<name>.yaml` for ACTIVE entries,
//! `runtime-rule-dump/inactive/<catalog>/<name>.yaml` for INACTIVE ones, and
//! `runtime-rule-dump/manifest.yaml`. Bundled-only rules are never included.
//!
//! Rule history (issue 26) is in the dump too: every kept revision of a rule file as
//! `runtime-rule-dump/history/<catalog>/<name>/<millis>.<counter>-<node>.yaml` (a delete's file is
//! empty), listed with its metadata under `history:` in the manifest.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::{AdminState, outcome_response};
use crate::base::clock::{iso8601, now_ms};
use crate::base::ids::Catalog;
use crate::control::outcome::{ApplyStatus, Outcome};
use crate::store::history::HistoryRecord;
use crate::store::{EntryStatus, RuleEntry};

pub async fn dump_all(State(state): State<Arc<AdminState>>) -> Response {
    dump(state, None).await
}

pub async fn dump_catalog(State(state): State<Arc<AdminState>>, Path(catalog): Path<String>) -> Response {
    match Catalog::parse(&catalog) {
        Some(c) => dump(state, Some(c)).await,
        None => outcome_response(
            &Outcome::new(ApplyStatus::InvalidCatalog, format!("unknown catalog {catalog:?}")),
            &catalog,
            "",
        ),
    }
}

async fn dump(state: Arc<AdminState>, filter: Option<Catalog>) -> Response {
    let entries = match state.store.read_all_entries().await {
        Ok(entries) => entries,
        Err(e) => return outcome_response(&Outcome::new(ApplyStatus::StorageUnavailable, e.to_string()), "", ""),
    };
    let entries: Vec<RuleEntry> = entries
        .into_iter()
        .filter(|e| e.is_live() && e.key.catalog.is_rule() && filter.is_none_or(|c| e.key.catalog == c))
        .collect();
    let history: Vec<HistoryRecord> = match state.store.read_all_history().await {
        Ok(records) => records.into_iter().filter(|r| r.key.catalog.is_rule() && filter.is_none_or(|c| r.key.catalog == c)).collect(),
        Err(e) => return outcome_response(&Outcome::new(ApplyStatus::StorageUnavailable, e.to_string()), "", ""),
    };
    let dumped_at = iso8601(now_ms());
    match build_archive(&entries, &history, filter, &dumped_at) {
        Ok(bytes) => {
            let filename = format!("runtime-rule-dump-{}.tar.gz", dumped_at.replace(':', "-"));
            let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{filename}\""))
                .unwrap_or_else(|_| HeaderValue::from_static("attachment"));
            (
                [(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream")), (header::CONTENT_DISPOSITION, disposition)],
                bytes,
            )
                .into_response()
        }
        Err(e) => outcome_response(&Outcome::new(ApplyStatus::DumpFailed, e.to_string()), "", ""),
    }
}

/// The archive path of one history record.
pub fn history_path(record: &HistoryRecord) -> String {
    let node: String = record
        .revision
        .node
        .0
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' })
        .collect();
    format!(
        "runtime-rule-dump/history/{}/{}/{:020}.{:010}-{node}.yaml",
        record.key.catalog, record.key.name, record.revision.millis, record.revision.counter
    )
}

/// Builds the archive in memory (entries are at most 1 MB each), with the history records of
/// the dumped catalogs.
pub fn build_archive(
    entries: &[RuleEntry],
    history: &[HistoryRecord],
    filter: Option<Catalog>,
    dumped_at: &str,
) -> std::io::Result<Vec<u8>> {
    let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut archive = tar::Builder::new(encoder);
    let mut manifest = format!(
        "dumpedAt: \"{dumped_at}\"\ncatalogFilter: \"{}\"\nentries:\n",
        filter.map_or("", |c| c.as_str())
    );
    for entry in entries {
        let folder = if entry.status == EntryStatus::Inactive { "inactive/" } else { "" };
        let path = format!("runtime-rule-dump/{folder}{}/{}.yaml", entry.key.catalog, entry.key.name);
        append(&mut archive, &path, &entry.content, entry.update_time_ms / 1000)?;
        manifest.push_str(&format!(
            "  - catalog: {}\n    name: \"{}\"\n    status: {}\n    updateTime: {}\n    sha256: \"{}\"\n",
            entry.key.catalog,
            entry.key.name,
            entry.status.as_str(),
            entry.update_time_ms,
            entry.content_hash
        ));
    }
    if entries.is_empty() {
        manifest = manifest.replace("entries:\n", "entries: []\n");
    }
    manifest.push_str(if history.is_empty() { "history: []\n" } else { "history:\n" });
    for record in history {
        let path = history_path(record);
        append(&mut archive, &path, &record.content, record.time_ms / 1000)?;
        let origin = &record.origin;
        manifest.push_str(&format!(
            "  - catalog: {}\n    name: \"{}\"\n    revision: \"{}\"\n    file: \"{}\"\n    status: {}\n    action: {}\n    \
             time: {}\n    committedBy: \"{}\"\n    takenBy: \"{}\"\n    client: \"{}\"\n    applyStatus: {}\n    sha256: \"{}\"\n",
            record.key.catalog,
            record.key.name,
            record.revision,
            path.trim_start_matches("runtime-rule-dump/"),
            record.status.as_str(),
            origin.action,
            record.time_ms,
            origin.committed_by,
            origin.taken_by.as_ref().map(|n| n.0.as_str()).unwrap_or(""),
            origin.client.as_deref().unwrap_or(""),
            origin.apply_status,
            record.content_hash
        ));
    }
    append(&mut archive, "runtime-rule-dump/manifest.yaml", manifest.as_bytes(), now_ms() / 1000)?;
    archive.into_inner()?.finish()
}

fn append<W: std::io::Write>(archive: &mut tar::Builder<W>, path: &str, data: &[u8], mtime: u64) -> std::io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(data.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(mtime);
    header.set_cksum();
    archive.append_data(&mut header, path, data)
}
