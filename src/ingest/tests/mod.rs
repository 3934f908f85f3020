//! Receiver tests.
