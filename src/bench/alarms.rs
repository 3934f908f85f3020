//! `hotrule bench alarms` (issue 23): CPU per alarm check, N rules × E services.
//!
//! The rules are the shapes of SkyWalking's shipped `alarm-settings.yml`, cycled: `sum(m > x) >= k`
//! over `period` 10, a composite `sum((a > x) && (b > y)) >= k`, a trend
//! `sum(increase(m, 2) > x) >= k` (window 12) and a labeled `sum(m{p='50,99'} > x) >= k`. The
//! values come from an in-memory [`AlarmValues`] that answers every minute of every service
//! (generated, not stored: 10,000 services × 25 metrics × 12 minutes would be millions of owned
//! entities); one service in `trip_every` is above every threshold, so its rules fire, go
//! silent and fire again. Each check is one minute after the last, as the worker runs them.
//!
//! What is timed is `AlarmEngine::check` on this thread: wall clock and the thread's CPU time,
//! the reads (`minute_values`, which clone every entity as a store read would build it) timed
//! apart inside the values source.

use std::cell::Cell;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::control::alarms::engine::{AlarmEngine, AlarmValues};
use crate::control::alarms::entity::AlarmEntity;
use crate::control::alarms::settings::AlarmSettings;
use crate::control::alarms::state::AlarmUuid;
use crate::control::alarms::window::{EpochMinute, MetricValue};

use super::store::{load_average, percentile, thread_cpu_time};

/// What `hotrule bench alarms` runs.
#[derive(Debug, Clone, clap::Args)]
pub struct AlarmsArgs {
    /// Alarm rules (shapes cycled: threshold, composite &&, increase(m, 2), labeled p50/p99).
    #[arg(long, default_value_t = 100)]
    pub rules: usize,
    /// Services (alarm entities).
    #[arg(long, default_value_t = 10_000)]
    pub entities: usize,
    /// Common metrics the rules read (each rule reads one or two of them).
    #[arg(long, default_value_t = 20)]
    pub metrics: usize,
    /// Labeled (p=50, p=99) metrics the labeled rules read.
    #[arg(long, default_value_t = 5)]
    pub labeled_metrics: usize,
    /// One service in this many is above every threshold (its rules fire).
    #[arg(long, default_value_t = 100)]
    pub trip_every: usize,
    /// Checks run first and not timed.
    #[arg(long, default_value_t = 2)]
    pub warmup: usize,
    /// Timed checks, one minute apart.
    #[arg(long, default_value_t = 10)]
    pub checks: usize,
}

/// The first minute with values (2026-11-27 00:00 UTC).
const FIRST_MINUTE: i64 = 29_402_880;

/// Minute values generated on demand; the time spent in reads is summed in `read_cpu`.
struct BenchValues {
    services: Vec<AlarmEntity>,
    trip_every: usize,
    read_cpu: Cell<Duration>,
}

impl BenchValues {
    fn tripping(&self, index: usize) -> bool {
        index % self.trip_every == 0
    }

    /// A common metric's value: a tripping service climbs 60 a minute from 200 (above 100, and
    /// an increase over 2 minutes of 120); the others wander in 40..60.
    fn common(&self, index: usize, minute: i64) -> f64 {
        let rel = minute - FIRST_MINUTE;
        if self.tripping(index) { 200.0 + 60.0 * rel as f64 } else { 40.0 + ((index as i64 * 7 + rel) % 20) as f64 }
    }
}

impl AlarmValues for BenchValues {
    fn metric_scope(&self, _metric: &str) -> Option<String> {
        Some("SERVICE".to_string())
    }

    fn minute_values(&self, metric: &str, from: EpochMinute, to: EpochMinute) -> Result<Vec<(AlarmEntity, EpochMinute, MetricValue)>, String> {
        let begin = thread_cpu_time();
        let labeled = metric.starts_with("svc_pct");
        let from = from.0.max(FIRST_MINUTE);
        let minutes = usize::try_from(to.0 - from + 1).unwrap_or(0);
        let mut out = Vec::with_capacity(self.services.len() * minutes);
        for (index, service) in self.services.iter().enumerate() {
            for minute in from..=to.0 {
                let value = if labeled {
                    let p99 = if self.tripping(index) { 2000.0 } else { 500.0 + (index % 100) as f64 };
                    MetricValue::Labeled(vec![("p=50".to_string(), 100.0), ("p=99".to_string(), p99)])
                } else {
                    MetricValue::Single(self.common(index, minute))
                };
                out.push((service.clone(), EpochMinute(minute), value));
            }
        }
        self.read_cpu.set(self.read_cpu.get() + thread_cpu_time().saturating_sub(begin));
        Ok(out)
    }
}

/// `alarm-settings.yml` of `rules` rules over `metrics` common and `labeled` labeled metrics.
pub fn settings_text(rules: usize, metrics: usize, labeled: usize) -> String {
    let (metrics, labeled) = (metrics.max(1), labeled.max(1));
    let mut text = String::from("rules:\n");
    for i in 0..rules {
        let a = format!("svc_m{}", i % metrics);
        let expression = match i % 4 {
            0 => format!("sum({a} > 100) >= 3"),
            1 => format!("sum(({a} > 100) && (svc_m{} > 100)) >= 3", (i + 1) % metrics),
            2 => format!("sum(increase({a}, 2) > 100) >= 3"),
            _ => format!("sum(svc_pct{}{{p='50,99'}} > 1000) >= 3", i % labeled),
        };
        let _ = write!(
            text,
            "  bench_{i}_rule:\n    expression: \"{expression}\"\n    period: 10\n    silence-period: 5\n    recovery-observation-period: 2\n    message: \"rule {i} on {{name}}\"\n"
        );
    }
    text
}

pub fn run(args: &AlarmsArgs) -> Result<(), String> {
    if args.rules == 0 || args.entities == 0 || args.checks == 0 {
        return Err("--rules, --entities and --checks must be at least 1".into());
    }
    let settings = AlarmSettings::parse(
        &settings_text(args.rules, args.metrics, args.labeled_metrics),
        &crate::control::alarms::verify::verify,
    )
    .map_err(|e| format!("the generated settings: {e:?}"))?;
    let sizes: Vec<usize> = settings.rules.iter().map(|r| r.window_size()).collect();
    let (min_size, max_size) = (sizes.iter().min().copied().unwrap_or(0), sizes.iter().max().copied().unwrap_or(0));
    let values = BenchValues {
        services: (0..args.entities).map(|i| AlarmEntity::service(&format!("svc-{i}"))).collect(),
        trip_every: args.trip_every.max(1),
        read_cpu: Cell::new(Duration::ZERO),
    };
    let mut engine = AlarmEngine::new(settings);
    let mut next = 0u128;
    let mut mint = || {
        next += 1;
        AlarmUuid(next)
    };
    println!(
        "alarm checks: {} rules × {} services ({} common + {} labeled metrics, windows of {}–{} minutes), 1 service in {} tripping; {} warm-up + {} timed checks, one minute apart; load average {}",
        args.rules,
        args.entities,
        args.metrics,
        args.labeled_metrics,
        min_size,
        max_size,
        values.trip_every,
        args.warmup,
        args.checks,
        load_average()
    );
    let (mut wall, mut cpu, mut reads) = (Vec::new(), Vec::new(), Vec::new());
    let (mut windows, mut fires, mut recoveries) = (Vec::new(), 0usize, 0usize);
    // The first check sees full windows: its minute is the last of the longest window.
    let first_check = FIRST_MINUTE + max_size as i64 - 1;
    for k in 0..args.warmup + args.checks {
        let now_ms = (first_check + k as i64) * 60_000 + 20_000;
        values.read_cpu.set(Duration::ZERO);
        let (begin, begin_cpu) = (Instant::now(), thread_cpu_time());
        let checked = engine.check(now_ms, &values, &mut mint);
        let (spent_cpu, spent_wall) = (thread_cpu_time().saturating_sub(begin_cpu), begin.elapsed());
        if !checked.errors.is_empty() {
            return Err(format!("check errors: {:?}", checked.errors));
        }
        let kind = if k < args.warmup { "warm-up" } else { "timed" };
        println!(
            "  check {:>2} ({kind}): {} windows, {} fires, {} recoveries, {:.1} ms wall, {:.3} s CPU (reads {:.3} s)",
            k + 1,
            checked.windows,
            checked.firing.len(),
            checked.recoveries.len(),
            spent_wall.as_secs_f64() * 1000.0,
            spent_cpu.as_secs_f64(),
            values.read_cpu.get().as_secs_f64()
        );
        if k >= args.warmup {
            wall.push(spent_wall);
            cpu.push(spent_cpu);
            reads.push(values.read_cpu.get());
            windows.push(checked.windows);
            fires += checked.firing.len();
            recoveries += checked.recoveries.len();
        }
    }
    let mean_cpu = cpu.iter().sum::<Duration>().as_secs_f64() / cpu.len() as f64;
    let mean_reads = reads.iter().sum::<Duration>().as_secs_f64() / reads.len() as f64;
    wall.sort();
    cpu.sort();
    reads.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{} rules × {} entities: {} windows per check, {} fires and {} recoveries over {} timed checks, {} firing now",
        args.rules,
        args.entities,
        windows.iter().max().copied().unwrap_or(0),
        fires,
        recoveries,
        args.checks,
        engine.firing()
    );
    println!(
        "per check: wall p50 {:.1} ms, max {:.1} ms; CPU p50 {:.3} s, max {:.3} s, mean {:.3} s (reads: p50 {:.3} s, mean {:.3} s; engine alone: mean {:.3} s)",
        ms(percentile(&wall, 0.5)),
        ms(wall[wall.len() - 1]),
        percentile(&cpu, 0.5).as_secs_f64(),
        cpu[cpu.len() - 1].as_secs_f64(),
        mean_cpu,
        percentile(&reads, 0.5).as_secs_f64(),
        mean_reads,
        mean_cpu - mean_reads
    );
    println!(
        "goal (issue 23): under 1 s of CPU per check (one check a minute): {}",
        if cpu[cpu.len() - 1] < Duration::from_secs(1) { "met" } else { "NOT met" }
    );
    Ok(())
}
