//! The logs `bench logs-query` loads: one hour of varied logs (mostly nginx access lines, some
//! application lines), each a pure function of its index, so every store and every run gets the
//! same logs and a writer can make its batch on its own thread without holding the hour in
//! memory.
//!
//! Rare **needles** are planted at known indices, spread over the hour: [`KEYWORD_NEEDLES`]
//! keywords that no other log contains, [`TAG_NEEDLES`] values of the `user` tag (which most
//! application logs carry with ordinary values), and the [`QUIET_LOGS`] logs of a quiet service.
//! Every query's answer is therefore known from the corpus alone, without reading a store.
//!
//! Timestamps: batch `b` of [`Corpus::batch`] logs owns the milliseconds
//! `[start + b·hour/batches, start + (b+1)·hour/batches)` and spreads its logs evenly over them.
//! No two batches share a millisecond, so however concurrent writers interleave their batches,
//! the stores' order (timestamp, then arrival) is the corpus order, and two stores agree on
//! which logs a page of 100 holds.

use std::collections::BTreeMap;

use hotrule_lal_engine::{ContentType, LogRecord};

use crate::data::logs::KeptLog;

pub const HOUR_MS: i64 = 3_600_000;
/// Distinct rare keywords planted.
pub const KEYWORD_NEEDLES: usize = 10;
/// Distinct rare values of [`NEEDLE_TAG`] planted.
pub const TAG_NEEDLES: usize = 10;
/// Logs of [`QUIET_SERVICE`] in the hour.
pub const QUIET_LOGS: usize = 20;
pub const QUIET_SERVICE: &str = "quiet-reconciler";
/// The tag whose rare values are planted; ordinary application logs carry it too.
pub const NEEDLE_TAG: &str = "user";
/// Fewer logs than this cannot spread the needles apart.
pub const MIN_LOGS: usize = 1_000;

/// How many logs needle `n` is planted in: 8 to 12, 10 on average.
pub fn planted(n: usize) -> usize {
    8 + n % 5
}

/// Rare keyword `n`: the application lines' `txn-<hex> committed` never end in `-failed`.
pub fn keyword(n: usize) -> String {
    format!("txn-{:06x}-failed", mix(0x5eed_0000 + n as u64) & 0xff_ffff)
}

/// Rare tag value `n` (ordinary values are `u-<number>`).
pub fn tag_value(n: usize) -> String {
    format!("vip-{}", 4000 + n * 37)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plant {
    Keyword(usize),
    Tag(usize),
    Quiet,
}

/// One hour of logs ending at `end_ms` (exclusive), `batch` per write call.
#[derive(Debug, Clone)]
pub struct Corpus {
    logs: usize,
    services: Vec<String>,
    start_ms: i64,
    batch: usize,
    plants: BTreeMap<usize, Plant>,
}

impl Corpus {
    pub fn new(logs: usize, services: usize, end_ms: i64, batch: usize) -> Result<Corpus, String> {
        if logs < MIN_LOGS || services == 0 || batch == 0 {
            return Err(format!("--logs must be at least {MIN_LOGS}, --services and the batch at least 1"));
        }
        if logs.div_ceil(batch) > HOUR_MS as usize {
            return Err(format!("{logs} logs in batches of {batch} need more than one batch per millisecond"));
        }
        let mut corpus = Corpus {
            logs,
            services: (0..services).map(|s| format!("service-{s:02}")).collect(),
            start_ms: end_ms - HOUR_MS,
            batch,
            plants: BTreeMap::new(),
        };
        corpus.plant(1, &spread(KEYWORD_NEEDLES), Plant::Keyword);
        corpus.plant(2, &spread(TAG_NEEDLES), Plant::Tag);
        corpus.plant(3, &vec![0; QUIET_LOGS], |_| Plant::Quiet);
        Ok(corpus)
    }

    /// Plants `needles[s]` at slot `s` of `needles.len()` even slots of the hour, at a
    /// pseudo-random place within the slot (the next free index when taken).
    fn plant(&mut self, salt: u64, needles: &[usize], plant: impl Fn(usize) -> Plant) {
        let slot = self.logs / needles.len();
        for (s, needle) in needles.iter().enumerate() {
            let mut index = s * slot + (mix((salt << 32) | s as u64) % slot as u64) as usize;
            while self.plants.contains_key(&index) {
                index = (index + 1) % self.logs;
            }
            self.plants.insert(index, plant(*needle));
        }
    }

    pub fn count(&self) -> usize {
        self.logs
    }

    pub fn start_ms(&self) -> i64 {
        self.start_ms
    }

    /// The last millisecond of the hour (inclusive).
    pub fn end_ms(&self) -> i64 {
        self.start_ms + HOUR_MS - 1
    }

    pub fn services(&self) -> &[String] {
        &self.services
    }

    pub fn batches(&self) -> usize {
        self.logs.div_ceil(self.batch)
    }

    /// Batch `b`: logs `b·batch ..`, in time order.
    pub fn batch(&self, b: usize) -> Vec<KeptLog> {
        let first = b * self.batch;
        (first..(first + self.batch).min(self.logs)).map(|i| self.log(i)).collect()
    }

    fn batch_start_ms(&self, b: usize) -> i64 {
        self.start_ms + (b as u128 * HOUR_MS as u128 / self.batches() as u128) as i64
    }

    pub fn timestamp_ms(&self, i: usize) -> i64 {
        let b = i / self.batch;
        let first = b * self.batch;
        let len = self.batch.min(self.logs - first);
        let (lo, hi) = (self.batch_start_ms(b), self.batch_start_ms(b + 1));
        lo + ((i - first) as u128 * (hi - lo) as u128 / len as u128) as i64
    }

    pub fn service_of(&self, i: usize) -> &str {
        match self.plants.get(&i) {
            Some(Plant::Quiet) => QUIET_SERVICE,
            _ => &self.services[i % self.services.len()],
        }
    }

    /// The indices keyword `n` is planted at, in order.
    pub fn keyword_indices(&self, n: usize) -> Vec<usize> {
        self.indices(|p| p == Plant::Keyword(n))
    }

    /// The indices tag value `n` is planted at, in order.
    pub fn tag_indices(&self, n: usize) -> Vec<usize> {
        self.indices(|p| p == Plant::Tag(n))
    }

    pub fn quiet_indices(&self) -> Vec<usize> {
        self.indices(|p| p == Plant::Quiet)
    }

    fn indices(&self, wanted: impl Fn(Plant) -> bool) -> Vec<usize> {
        self.plants.iter().filter(|(_, p)| wanted(**p)).map(|(i, _)| *i).collect()
    }

    /// Log `i`.
    pub fn log(&self, i: usize) -> KeptLog {
        let h = mix(i as u64);
        let timestamp_ms = self.timestamp_ms(i);
        let service = self.service_of(i);
        let plant = self.plants.get(&i).copied();
        let mut log = match plant {
            Some(Plant::Keyword(n)) => app_line(h, timestamp_ms, service, Some(&keyword(n))),
            Some(Plant::Quiet) => app_line(h, timestamp_ms, service, None),
            _ if h % 5 == 0 => app_line(h, timestamp_ms, service, None),
            _ => access_line(h, timestamp_ms, service),
        };
        if let Some(Plant::Tag(n)) = plant {
            log.record.tags.retain(|(key, _)| key != NEEDLE_TAG);
            log.record.tags.push((NEEDLE_TAG.into(), tag_value(n)));
        }
        log
    }
}

/// Needle ids in the order their slots come: round-robin, each `planted(n)` times.
fn spread(needles: usize) -> Vec<usize> {
    let most = (0..needles).map(planted).max().unwrap_or(0);
    (0..most).flat_map(|round| (0..needles).filter(move |n| round < planted(*n))).collect()
}

/// splitmix64: a well-mixed pseudo-random value of `x`.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

const AGENTS: [&str; 5] = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148",
    "curl/8.5.0",
    "okhttp/4.12.0",
    "kube-probe/1.29",
];
const WORDS: [&str; 8] = ["shoes", "laptop", "coffee", "garden", "phone", "jacket", "lamp", "books"];

fn instance(service: &str, h: u64) -> String {
    format!("{service}-7d9f{}-{}", h % 4, ["kx2p", "m8qz", "t4vn", "w9rc"][(h % 4) as usize])
}

/// `(year, month, day, hour, minute, second, millisecond)` of `ms` in UTC.
fn civil(ms: i64) -> (i64, i64, i64, i64, i64, i64, i64) {
    let (year, month, day) = hotrule_mal_engine::civil_from_days(ms.div_euclid(86_400_000));
    let in_day = ms.rem_euclid(86_400_000);
    let seconds = in_day / 1000;
    (year, month, day, seconds / 3600, seconds / 60 % 60, seconds % 60, in_day % 1000)
}

fn access_line(h: u64, timestamp_ms: i64, service: &str) -> KeptLog {
    let (y, mo, d, hh, mi, s, _) = civil(timestamp_ms);
    let month = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"][(mo - 1).clamp(0, 11) as usize];
    let ip = format!("{}.{}.{}.{}", [10, 172, 192, 203][(h % 4) as usize], (h >> 8) % 256, (h >> 16) % 256, (h >> 24) % 254 + 1);
    let id = (h >> 20) % 1_000_000;
    let (method, path, route) = match (h >> 40) % 8 {
        0..=2 => ("GET", format!("/api/v1/orders/{id}"), "/api/v1/orders/{id}"),
        3 => ("POST", "/api/v1/orders".to_string(), "/api/v1/orders"),
        4 => ("GET", format!("/api/v1/users/{}/cart", id % 50_000), "/api/v1/users/{id}/cart"),
        5 => ("GET", format!("/static/js/app.{:08x}.js", (h >> 12) & 0xffff_ffff), "/static"),
        6 => ("GET", format!("/api/v2/search?q={}&page={}", WORDS[(h >> 5) as usize % WORDS.len()], 1 + (h >> 9) % 20), "/api/v2/search"),
        _ => ("GET", "/healthz".to_string(), "/healthz"),
    };
    let status = match (h >> 48) % 100 {
        0..=69 => 200,
        70..=74 => 201,
        75..=79 => 304,
        80..=83 => 301,
        84..=88 => 404,
        89..=91 => 400,
        92..=93 => 401,
        94 => 403,
        95 => 499,
        96..=97 => 500,
        98 => 502,
        _ => 503,
    };
    let level = match status {
        500.. => "ERROR",
        400.. => "WARN",
        _ => "INFO",
    };
    let size = if status == 304 { 0 } else { 120 + (h >> 28) % 48_000 };
    let referer = if (h >> 3) % 3 == 0 { "-".to_string() } else { format!("https://shop.example.com/p/{}", id % 9_000) };
    let content = format!(
        "{ip} - - [{d:02}/{month}/{y}:{hh:02}:{mi:02}:{s:02} +0000] \"{method} {path} HTTP/1.1\" {status} {size} \"{referer}\" \"{}\" rt={}.{:03}",
        AGENTS[(h >> 56) as usize % AGENTS.len()],
        (h >> 33) % 3,
        (h >> 36) % 1000
    );
    let tags = vec![("status".to_string(), status.to_string()), ("level".to_string(), level.to_string()), ("method".to_string(), method.to_string())];
    kept("NGINX:nginx", "lal/nginx", "NGINX", service, instance(service, h), format!("{method}:{route}"), timestamp_ms, h, content, tags)
}

fn app_line(h: u64, timestamp_ms: i64, service: &str, needle: Option<&str>) -> KeptLog {
    let (y, mo, d, hh, mi, s, ms) = civil(timestamp_ms);
    let id = (h >> 20) % 1_000_000;
    let took = 1 + (h >> 10) % 2_000;
    let user = (h >> 44) % 200_000;
    let (level, message) = match needle {
        Some(keyword) => ("ERROR", format!("payment {keyword}: card declined for order {id} after {took}ms")),
        None => match (h >> 36) % 5 {
            0 => ("INFO", format!("order {id} created for user u-{user} in {took}ms")),
            1 => ("DEBUG", format!("txn-{:06x} committed in {took}ms", (h >> 8) & 0xff_ffff)),
            2 => ("INFO", format!("cache miss for key product:{id}, loaded in {took}ms")),
            3 => ("WARN", format!("request failed: upstream timeout after {took}ms (attempt {})", 1 + h % 3)),
            _ => ("ERROR", format!("connection to db-{}.internal:5432 reset, pool={} waiting={}", h % 4, (h >> 5) % 64, (h >> 50) % 9)),
        },
    };
    let content = format!(
        "{y}-{mo:02}-{d:02}T{hh:02}:{mi:02}:{s:02}.{ms:03}Z {level:<5} [worker-{}] {}.{} - {message}",
        (h >> 14) % 16,
        ["com.shop.orders", "com.shop.payments", "com.shop.catalog"][(h >> 22) as usize % 3],
        ["Service", "Handler", "Repository"][(h >> 24) as usize % 3]
    );
    let mut tags = vec![("level".to_string(), level.to_string())];
    if (h >> 2) % 2 == 0 {
        tags.push((NEEDLE_TAG.to_string(), format!("u-{user}")));
    }
    kept("GENERAL:default", "lal/default", "GENERAL", service, instance(service, h), String::new(), timestamp_ms, h, content, tags)
}

#[allow(clippy::too_many_arguments)]
fn kept(
    rule: &str,
    file: &str,
    layer: &str,
    service: &str,
    instance: String,
    endpoint: String,
    timestamp_ms: i64,
    h: u64,
    content: String,
    tags: Vec<(String, String)>,
) -> KeptLog {
    KeptLog {
        rule: rule.into(),
        file: file.into(),
        record: LogRecord {
            service: service.to_string(),
            instance,
            endpoint,
            layer: layer.into(),
            timestamp_ms,
            trace_id: String::new(),
            segment_id: String::new(),
            span_id: None,
            content_type: ContentType::Text,
            content,
            tags,
            output_type: None,
            fields: Default::default(),
        },
        received_ms: timestamp_ms + (h >> 58) as i64 * 7,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const END_MS: i64 = 1_790_000_000_000;

    #[test]
    fn the_same_index_gives_the_same_log() {
        let a = Corpus::new(20_000, 5, END_MS, 1000).unwrap();
        let b = Corpus::new(20_000, 5, END_MS, 1000).unwrap();
        for i in [0, 1, 777, 19_999] {
            assert_eq!(a.log(i), b.log(i));
        }
        assert_ne!(a.log(1).record.content, a.log(2).record.content);
    }

    #[test]
    fn exactly_the_planted_logs_hold_each_needle() {
        let corpus = Corpus::new(20_000, 5, END_MS, 1000).unwrap();
        let logs: Vec<KeptLog> = (0..corpus.batches()).flat_map(|b| corpus.batch(b)).collect();
        assert_eq!(logs.len(), 20_000);
        for n in 0..KEYWORD_NEEDLES {
            let word = keyword(n);
            let holding: Vec<usize> = (0..logs.len()).filter(|i| logs[*i].record.content.contains(&word)).collect();
            assert_eq!(holding, corpus.keyword_indices(n), "keyword {word}");
            assert_eq!(holding.len(), planted(n));
        }
        for n in 0..TAG_NEEDLES {
            let value = tag_value(n);
            let holding: Vec<usize> = (0..logs.len()).filter(|i| logs[*i].record.tag(NEEDLE_TAG) == Some(value.as_str())).collect();
            assert_eq!(holding, corpus.tag_indices(n), "tag value {value}");
            assert_eq!(holding.len(), planted(n));
        }
        let quiet: Vec<usize> = (0..logs.len()).filter(|i| logs[*i].record.service == QUIET_SERVICE).collect();
        assert_eq!(quiet, corpus.quiet_indices());
        assert_eq!(quiet.len(), QUIET_LOGS);
        // Spread over the hour, not bunched at one end.
        let first_half = quiet.iter().filter(|i| **i < logs.len() / 2).count();
        assert_eq!(first_half, QUIET_LOGS / 2);
        // The tag key itself is common: only its values are rare.
        assert!(logs.iter().filter(|l| l.record.tag(NEEDLE_TAG).is_some()).count() > 1000);
    }

    #[test]
    fn batches_own_disjoint_milliseconds_within_the_hour() {
        let corpus = Corpus::new(25_000, 3, END_MS, 1000).unwrap();
        let mut previous_last = i64::MIN;
        for b in 0..corpus.batches() {
            let batch = corpus.batch(b);
            let first = batch[0].record.timestamp_ms;
            let last = batch[batch.len() - 1].record.timestamp_ms;
            assert!(first > previous_last, "batch {b} shares a millisecond with the one before");
            assert!(batch.windows(2).all(|w| w[0].record.timestamp_ms <= w[1].record.timestamp_ms));
            previous_last = last;
        }
        assert!(corpus.timestamp_ms(0) >= corpus.start_ms());
        assert!(previous_last <= corpus.end_ms());
    }

    #[test]
    fn too_few_logs_or_too_many_batches_are_refused() {
        assert!(Corpus::new(10, 5, END_MS, 1000).is_err());
        assert!(Corpus::new(10_000_000, 5, END_MS, 1).is_err());
    }
}
