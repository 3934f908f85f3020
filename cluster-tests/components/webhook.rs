//! A webhook receiver for the alarm tests: `POST /{path}` on 127.0.0.1 port 0, every JSON body
//! kept by path.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use serde_json::Value;

/// What the receiver got: path → bodies.
#[derive(Clone, Default)]
pub struct Received(Arc<Mutex<BTreeMap<String, Vec<Value>>>>);

impl Received {
    /// Every message that arrived at `path`, flattened (a body is a JSON array of messages).
    pub fn messages(&self, path: &str) -> Vec<Value> {
        let received = self.0.lock().unwrap_or_else(|p| p.into_inner());
        received.get(path).map(|bodies| bodies.iter().flat_map(|b| b.as_array().cloned().unwrap_or_default()).collect()).unwrap_or_default()
    }

    /// The messages at `path` of rule `rule`.
    pub fn of_rule(&self, path: &str, rule: &str) -> Vec<Value> {
        self.messages(path).into_iter().filter(|m| m["ruleName"] == rule).collect()
    }
}

async fn receive(State(received): State<Received>, UrlPath(path): UrlPath<String>, body: Bytes) -> &'static str {
    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    received.0.lock().unwrap_or_else(|p| p.into_inner()).entry(path).or_default().push(json);
    "ok"
}

/// Starts a receiver; its base URL (`http://127.0.0.1:port`) and what it receives.
pub async fn start() -> (String, Received) {
    let received = Received::default();
    let app = Router::new().route("/{path}", axum::routing::post(receive)).with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}"), received)
}
