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
    // `tracing` caches each callsite's interest for the whole process, computed when the
    // callsite is first hit. While one dispatcher is registered, that is computed from the
    // hitting thread's default, so a sibling test thread with no subscriber can cache "never"
    // for a line this capture waits for. A second dispatcher, interested in everything and
    // held for the capture, makes every registration ask all live dispatchers (this one too).
    let anchor = tracing::Dispatch::new(
        tracing_subscriber::fmt().with_writer(io::sink).with_max_level(tracing::Level::TRACE).finish(),
    );
    let out = tracing::subscriber::with_default(subscriber, || {
        tracing::callsite::rebuild_interest_cache();
        f()
    });
    drop(anchor);
    let text = String::from_utf8_lossy(&sink.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned();
    (out, text)
}
