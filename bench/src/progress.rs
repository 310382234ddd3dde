//! Progress bars for long runs (indicatif): a warm-up, a measured run, a load.

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `len` steps labelled `what` (`warm-up`, `run`, `load`), or a hidden one when
/// `show` is false (not a terminal, `--json`).
pub(crate) fn bar(show: bool, len: u64, what: &'static str) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(len);
    b.set_style(
        ProgressStyle::with_template("{prefix:>7} [{bar:40}] {percent:>3}% {elapsed_precise} {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    b.set_prefix(what);
    b
}
