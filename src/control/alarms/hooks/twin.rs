//! The in-memory twin of [`HookSender`]: it records every attempt (URL, headers, body) and
//! answers as it is told, per URL or for every URL: a status (200, 500, 400, ...), unreachable,
//! or a hang that lasts until the caller's timeout. A script of answers is used first, one per
//! attempt. Tests wait on [`MemHookSender::wait_for_attempts`], a condition with a bound.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, StatusCode, Uri};
use bytes::Bytes;
use tokio::sync::watch;

use super::sender::{HookError, HookSender};

/// How the twin answers one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    Answer(StatusCode),
    /// As a refused connection.
    Unreachable,
    /// No answer: the attempt ends with the caller's timeout, as the real sender's does.
    Hang,
    /// No answer and no end: a sender that ignores its timeout (the worker's own bound ends it).
    HangForever,
}

/// One attempt the twin saw.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
    /// How it was answered.
    pub behaviour: Behaviour,
}

impl Recorded {
    /// The body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    pub fn delivered(&self) -> bool {
        matches!(self.behaviour, Behaviour::Answer(status) if status.is_success())
    }
}

#[derive(Debug)]
struct TwinState {
    script: VecDeque<Behaviour>,
    per_url: BTreeMap<String, Behaviour>,
    default: Behaviour,
    recorded: Vec<Recorded>,
}

/// Records bodies and answers as told; 200 unless told otherwise.
pub struct MemHookSender {
    state: Mutex<TwinState>,
    attempts_tx: watch::Sender<usize>,
}

impl Default for MemHookSender {
    fn default() -> Self {
        MemHookSender::new()
    }
}

impl MemHookSender {
    pub fn new() -> MemHookSender {
        let state = TwinState { script: VecDeque::new(), per_url: BTreeMap::new(), default: Behaviour::Answer(StatusCode::OK), recorded: Vec::new() };
        MemHookSender { state: Mutex::new(state), attempts_tx: watch::Sender::new(0) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, TwinState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How every URL without its own behaviour is answered once the script is used up.
    pub fn answer_all(&self, behaviour: Behaviour) {
        self.state().default = behaviour;
    }

    /// How `url` is answered once the script is used up.
    pub fn answer_url(&self, url: &str, behaviour: Behaviour) {
        self.state().per_url.insert(url.to_string(), behaviour);
    }

    /// The next attempts (any URL) are answered with these, in order.
    pub fn script(&self, behaviours: impl IntoIterator<Item = Behaviour>) {
        self.state().script.extend(behaviours);
    }

    /// Every attempt so far.
    pub fn recorded(&self) -> Vec<Recorded> {
        self.state().recorded.clone()
    }

    /// The attempts that were answered with a 2xx.
    pub fn delivered(&self) -> Vec<Recorded> {
        self.recorded().into_iter().filter(Recorded::delivered).collect()
    }

    /// Waits until at least `count` attempts were made, at most `bound`; whether they were.
    pub async fn wait_for_attempts(&self, count: usize, bound: Duration) -> bool {
        let mut attempts_rx = self.attempts_tx.subscribe();
        tokio::time::timeout(bound, attempts_rx.wait_for(|made| *made >= count)).await.is_ok_and(|seen| seen.is_ok())
    }
}

#[async_trait::async_trait]
impl HookSender for MemHookSender {
    async fn post(&self, url: &Uri, headers: &[(HeaderName, HeaderValue)], body: Bytes, timeout: Duration) -> Result<StatusCode, HookError> {
        let url = url.to_string();
        let behaviour = {
            let mut state = self.state();
            let behaviour = match state.script.pop_front() {
                Some(scripted) => scripted,
                None => state.per_url.get(&url).copied().unwrap_or(state.default),
            };
            let headers = headers.iter().map(|(k, v)| (k.to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned())).collect();
            state.recorded.push(Recorded { url: url.clone(), headers, body, behaviour });
            behaviour
        };
        self.attempts_tx.send_modify(|made| *made += 1);
        match behaviour {
            Behaviour::Answer(status) => Ok(status),
            Behaviour::Unreachable => Err(HookError::Unreachable { url, reason: "connection refused (twin)".to_string() }),
            Behaviour::Hang => {
                tokio::time::sleep(timeout).await;
                Err(HookError::Timeout { url, timeout })
            }
            Behaviour::HangForever => std::future::pending().await,
        }
    }
}
