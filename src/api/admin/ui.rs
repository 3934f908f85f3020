//! SkyWalking's UI on the admin port: `POST /graphql` (the query protocol, behind the admin
//! token like every read), `GET /healthcheck` (what the stock UI image's proxy probes: 200 when
//! `checkHealth` scores 0, 503 otherwise; open like `/healthz`), and with `ui.dir` a built UI
//! (booster-ui's `dist/`) served as static files on the same origin, unknown paths falling back
//! to `index.html` as a single-page app needs.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::{AdminState, NotReady};

/// The largest GraphQL document body read (the protocol's own limit is 1 MiB of query text).
pub const MAX_GRAPHQL_BODY_BYTES: usize = 2 * 1024 * 1024;

/// The node's health as OAP scores it: 0 when ready with every worker alive.
/// A node still booting scores 1; one with dead workers, how many died.
pub fn health(state: &AdminState) -> (i32, Option<String>) {
    match state.not_ready() {
        None => (0, None),
        Some(why) => {
            let score = match &why {
                NotReady::Booting => 1,
                NotReady::Dead(workers) => workers.len() as i32,
            };
            (score, Some(why.message()))
        }
    }
}

pub async fn graphql(State(state): State<Arc<AdminState>>, body: Bytes) -> Response {
    if body.len() > MAX_GRAPHQL_BODY_BYTES {
        let errors = json!({"errors": [{"message": format!("the request body is over {MAX_GRAPHQL_BODY_BYTES} bytes")}]});
        return (StatusCode::PAYLOAD_TOO_LARGE, axum::Json(errors)).into_response();
    }
    let started = std::time::Instant::now();
    let answer = state.graphql.execute(&body, health(&state)).await;
    if answer.outcome == crate::api::graphql::Outcome::DocumentError {
        tracing::debug!(errors = %String::from_utf8_lossy(&answer.body), "graphql request refused");
    }
    let telemetry = &state.telemetry;
    telemetry.graphql_requests.get_or_create(&crate::base::self_metrics::labels([("outcome", answer.outcome.as_str())])).inc();
    telemetry.graphql_seconds.get_or_create(&crate::base::self_metrics::labels([])).observe(started.elapsed().as_secs_f64());
    ([(axum::http::header::CONTENT_TYPE, "application/json")], answer.body).into_response()
}

pub async fn healthcheck(State(state): State<Arc<AdminState>>) -> Response {
    let (score, details) = health(&state);
    let status = if score == 0 { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, axum::Json(json!({"score": score, "details": details}))).into_response()
}

/// `GET` of anything no route took, with `ui.dir` set: the file under the dir, or `index.html`
/// for a path without a file extension (a route of the app); other misses are 404.
pub async fn static_file(dir: PathBuf, request: Request) -> Response {
    let path = request.uri().path().to_string();
    let Some(relative) = safe_relative(&path) else { return (StatusCode::NOT_FOUND, "not found").into_response() };
    let candidate = if relative.as_os_str().is_empty() { dir.join("index.html") } else { dir.join(&relative) };
    let file = if candidate.is_file() {
        candidate
    } else if relative.extension().is_none() {
        dir.join("index.html")
    } else {
        return (StatusCode::NOT_FOUND, "not found").into_response();
    };
    match tokio::fs::read(&file).await {
        Ok(bytes) => ([(header::CONTENT_TYPE, content_type(&file))], bytes).into_response(),
        Err(e) => {
            tracing::warn!(file = %file.display(), error = %e, "ui file unreadable");
            (StatusCode::NOT_FOUND, "not found").into_response()
        }
    }
}

/// The request path as a path under the UI dir: normal components only (no `..`, no root, no
/// prefix), so nothing outside the dir is reachable.
fn safe_relative(path: &str) -> Option<PathBuf> {
    let decoded = percent_decode(path.trim_start_matches('/'))?;
    let relative = Path::new(&decoded);
    relative.components().all(|c| matches!(c, Component::Normal(_))).then(|| relative.to_path_buf())
}

/// `%XX` decoding of a URL path; none when it is not valid UTF-8 afterwards or has a NUL.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let text = String::from_utf8(out).ok()?;
    (!text.contains('\0')).then_some(text)
}

fn content_type(file: &Path) -> &'static str {
    match file.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "ico" => "image/x-icon",
        "woff" => "font/woff",
        "woff2" => "font/woff2",
        "ttf" => "font/ttf",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_under_the_dir() {
        assert_eq!(safe_relative("/"), Some(PathBuf::new()));
        assert_eq!(safe_relative("/assets/a.js"), Some(PathBuf::from("assets/a.js")));
        assert_eq!(safe_relative("/dashboard/OS_LINUX/Service/aG9zdC0x.1/Linux-Service"), Some(PathBuf::from("dashboard/OS_LINUX/Service/aG9zdC0x.1/Linux-Service")));
        for bad in ["/../etc/passwd", "/a/../../b", "/%2e%2e/etc/passwd", "//etc/passwd", "/a/%00", "/%zz", "/%"] {
            assert!(safe_relative(bad).is_none_or(|p| !p.starts_with("..") && !p.has_root() && p.components().all(|c| matches!(c, Component::Normal(_)))), "{bad}");
        }
        assert_eq!(safe_relative("/%2e%2e/etc/passwd"), None);
        assert_eq!(safe_relative("/a/%00"), None);
        assert_eq!(content_type(Path::new("x/index.html")), "text/html; charset=utf-8");
    }
}
