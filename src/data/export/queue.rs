//! The bounded queue of cut batches waiting to be sent, for both exporters (remote-write's
//! encoded requests, OTLP logs' records). Full: the oldest batch is pushed out and handed back,
//! for the caller to count; memory never grows past the bound.

use std::collections::VecDeque;

#[derive(Debug)]
pub struct BatchQueue<T> {
    batches: VecDeque<T>,
    bound: usize,
}

impl<T> BatchQueue<T> {
    pub fn new(bound: usize) -> BatchQueue<T> {
        BatchQueue { batches: VecDeque::new(), bound: bound.max(1) }
    }

    /// Queues `batch`; returns the oldest batch when the queue was full.
    pub fn push(&mut self, batch: T) -> Option<T> {
        let dropped = (self.batches.len() >= self.bound).then(|| self.batches.pop_front()).flatten();
        self.batches.push_back(batch);
        dropped
    }

    pub fn pop(&mut self) -> Option<T> {
        self.batches.pop_front()
    }

    pub fn len(&self) -> usize {
        self.batches.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::export::batch::EncodedBatch;
    use bytes::Bytes;

    fn batch(n: usize) -> EncodedBatch {
        EncodedBatch { body: Bytes::from(vec![0; n]), samples: n }
    }

    #[test]
    fn a_full_queue_drops_its_oldest_batch() {
        let mut queue = BatchQueue::new(2);
        assert!(queue.push(batch(1)).is_none());
        assert!(queue.push(batch(2)).is_none());
        let dropped = queue.push(batch(3)).expect("the oldest is pushed out");
        assert_eq!(dropped.samples, 1);
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.pop().map(|b| b.samples), Some(2));
        assert_eq!(queue.pop().map(|b| b.samples), Some(3));
        assert!(queue.is_empty());
    }
}
