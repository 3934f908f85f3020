//! `GET /runtime/rule/dump[/{catalog}]`: a tar.gz backup of the stored entries.
//!
//! Layout: `runtime-rule-dump/<catalog>/<name>.yaml` for ACTIVE entries,
//! `runtime-rule-dump/inactive/<catalog>/<name>.yaml` for INACTIVE ones, and
//! `runtime-rule-dump/manifest.yaml`. Bundled-only rules are never included.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::{AdminState, outcome_response};
use crate::base::clock::{iso8601, now_ms};
use crate::base::ids::Catalog;
use crate::control::outcome::{ApplyStatus, Outcome};
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
    let dumped_at = iso8601(now_ms());
    match build_archive(&entries, filter, &dumped_at) {
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

/// Builds the archive in memory (entries are at most 1 MB each).
pub fn build_archive(entries: &[RuleEntry], filter: Option<Catalog>, dumped_at: &str) -> std::io::Result<Vec<u8>> {
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
