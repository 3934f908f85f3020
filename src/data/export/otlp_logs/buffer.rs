//! The logs between the writer and the worker: the batch being filled and a bounded queue of
//! cut batches. Pure: the caller passes the time; nothing here blocks or sends.

use std::time::Instant;

use crate::data::export::queue::BatchQueue;
use crate::data::logs::KeptLog;

#[derive(Debug)]
pub struct Buffer {
    filling: Vec<KeptLog>,
    /// When the first log of `filling` arrived.
    filling_since: Option<Instant>,
    queue: BatchQueue<Vec<KeptLog>>,
    batch_size: usize,
    /// Whether the worker holds a batch it is sending (for the depth gauge).
    in_flight: bool,
    /// The worker has stopped: writes are refused and counted.
    closed: bool,
}

/// What one write did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pushed {
    /// Oldest batches pushed out of a full queue.
    pub dropped_oldest: u64,
    /// Batches' worth of logs refused because the worker has stopped.
    pub refused_closed: u64,
    /// The worker has something new to look at (a cut batch, or a first log to time).
    pub wake: bool,
    /// Queued batches plus the one in flight.
    pub depth: usize,
}

/// What the worker takes next.
#[derive(Debug, PartialEq)]
pub enum Next {
    Batch(Vec<KeptLog>),
    /// Nothing is ready; the filling batch is due at this instant (none: nothing is waiting).
    WaitUntil(Option<Instant>),
}

impl Buffer {
    pub fn new(batch_size: usize, queue_bound: usize) -> Buffer {
        Buffer {
            filling: Vec::new(),
            filling_since: None,
            queue: BatchQueue::new(queue_bound),
            batch_size: batch_size.max(1),
            in_flight: false,
            closed: false,
        }
    }

    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    pub fn depth(&self) -> usize {
        self.queue.len() + usize::from(self.in_flight)
    }

    pub fn set_in_flight(&mut self, in_flight: bool) {
        self.in_flight = in_flight;
    }

    /// Appends `logs`, cutting a batch each time `batch_size` are waiting.
    pub fn push(&mut self, logs: &[KeptLog], now: Instant) -> Pushed {
        let mut pushed = Pushed::default();
        if self.closed {
            pushed.refused_closed = logs.len().div_ceil(self.batch_size) as u64;
            pushed.depth = self.depth();
            return pushed;
        }
        if self.filling.is_empty() {
            self.filling_since = Some(now);
            pushed.wake = true;
        }
        for log in logs {
            self.filling.push(log.clone());
            if self.filling.len() >= self.batch_size {
                pushed.dropped_oldest += u64::from(self.cut());
                pushed.wake = true;
                self.filling_since = Some(now);
            }
        }
        if self.filling.is_empty() {
            self.filling_since = None;
        }
        pushed.depth = self.depth();
        pushed
    }

    /// Moves the filling batch to the queue; true when the queue was full and lost its oldest.
    fn cut(&mut self) -> bool {
        let batch = std::mem::take(&mut self.filling);
        self.filling_since = None;
        self.queue.push(batch).is_some()
    }

    /// The next batch to send: the oldest queued one, else the filling one once its first log
    /// has waited `max_delay` (or at once when `flush_all`).
    pub fn next(&mut self, now: Instant, max_delay: std::time::Duration, flush_all: bool) -> Next {
        if let Some(batch) = self.queue.pop() {
            return Next::Batch(batch);
        }
        let Some(since) = self.filling_since else { return Next::WaitUntil(None) };
        let due = since + max_delay;
        if flush_all || due <= now {
            self.filling_since = None;
            return Next::Batch(std::mem::take(&mut self.filling));
        }
        Next::WaitUntil(Some(due))
    }

    /// Refuses further writes; returns the batches still waiting (queued, then the filling one).
    pub fn close(&mut self) -> usize {
        self.closed = true;
        self.queue.len() + usize::from(!self.filling.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn logs(n: usize) -> Vec<KeptLog> {
        (0..n)
            .map(|i| KeptLog { rule: format!("r{i}"), file: "f".into(), record: Default::default(), received_ms: i as i64 })
            .collect()
    }

    #[test]
    fn batches_are_cut_at_batch_size_and_the_queue_drops_its_oldest() {
        let now = Instant::now();
        let mut buffer = Buffer::new(2, 2);
        assert_eq!(buffer.push(&logs(1), now), Pushed { wake: true, depth: 0, ..Pushed::default() });
        let pushed = buffer.push(&logs(6), now);
        // 7 logs: three batches of 2 cut (the first pushed out), 1 filling.
        assert_eq!(pushed.dropped_oldest, 1);
        assert_eq!(buffer.queued(), 2);
        let Next::Batch(first) = buffer.next(now, Duration::from_secs(1), false) else { panic!("a queued batch") };
        assert_eq!(first.iter().map(|l| l.rule.as_str()).collect::<Vec<_>>(), vec!["r1", "r2"], "the oldest kept batch");
        assert!(matches!(buffer.next(now, Duration::from_secs(1), false), Next::Batch(_)));
        assert_eq!(buffer.next(now, Duration::from_secs(1), false), Next::WaitUntil(Some(now + Duration::from_secs(1))));
    }

    #[test]
    fn the_filling_batch_goes_after_max_delay_or_at_flush() {
        let start = Instant::now();
        let delay = Duration::from_millis(100);
        let mut buffer = Buffer::new(10, 4);
        assert_eq!(buffer.next(start, delay, false), Next::WaitUntil(None));
        buffer.push(&logs(3), start);
        let later = start + Duration::from_millis(50);
        assert!(!buffer.push(&logs(1), later).wake, "the batch was already timed");
        assert_eq!(buffer.next(later, delay, false), Next::WaitUntil(Some(start + delay)));
        let Next::Batch(batch) = buffer.next(start + delay, delay, false) else { panic!("due") };
        assert_eq!(batch.len(), 4);
        buffer.push(&logs(1), later);
        assert!(matches!(buffer.next(later, delay, true), Next::Batch(b) if b.len() == 1), "flush_all takes it at once");
    }

    #[test]
    fn a_closed_buffer_refuses_and_counts() {
        let now = Instant::now();
        let mut buffer = Buffer::new(2, 4);
        buffer.push(&logs(3), now);
        assert_eq!(buffer.close(), 2, "one queued, one filling");
        assert_eq!(buffer.push(&logs(5), now).refused_closed, 3);
    }
}
