//! Captures the log lines code emits on the current thread (tests only), so a test can check
//! what an operator would read.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};

/// The bytes written so far, shared between the subscriber's writers and the test.
#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Runs `f` with a subscriber that records every event at every level on this thread, and
/// returns its result with the lines logged (plain text, no ANSI colours).
pub(crate) fn capture<T>(f: impl FnOnce() -> T) -> (T, String) {
    let sink = Sink::default();
    let writer = sink.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::TRACE)
        .finish();
    let out = tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8_lossy(&sink.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned();
    (out, text)
}
