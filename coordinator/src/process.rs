//! This process's CPU time and resident memory: what a node reports in its status and its
//! metrics (`process_cpu_seconds_total`, `process_resident_memory_bytes`) and what the
//! benches divide by the transactions they commit.
//!
//! CPU time is the user plus system time of every thread the process has run, dead ones
//! included: the total `getrusage(RUSAGE_SELF)` gives as `ru_utime + ru_stime`. It is read
//! from the process's CPU-time clock (`clock_gettime(CLOCK_PROCESS_CPUTIME_ID)` through
//! rustix, which has no `getrusage`), which the kernel keeps from the same per-thread run
//! times, at nanosecond resolution and without `unsafe` code here. Resident memory is the
//! second field of `/proc/self/statm` (resident pages) times the page size; it is unknown
//! where that file is missing (not Linux).
//!
//! In an embedded cluster every node shares the one process, so each reports the whole
//! process's figures.

use std::time::{Duration, Instant};

/// One reading of this process's resource use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessUsage {
    /// CPU time (user + system) of every thread since the process started.
    pub cpu: Duration,
    /// Resident set size in bytes; `None` where `/proc/self/statm` cannot be read.
    pub resident_bytes: Option<u64>,
}

impl ProcessUsage {
    /// Reads both figures now.
    pub fn now() -> ProcessUsage {
        ProcessUsage { cpu: cpu_time(), resident_bytes: resident_bytes() }
    }
}

/// CPU time (user + system) of every thread of this process since it started, dead threads
/// included (nanosecond resolution).
pub fn cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    // The clock never reads below zero; a negative field would be a kernel bug, read as 0.
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u32::try_from(t.tv_nsec).unwrap_or(0).min(999_999_999);
    Duration::new(secs, nanos)
}

/// This process's resident set size in bytes (`/proc/self/statm`'s resident pages times the
/// page size); `None` where the file cannot be read or does not parse.
pub fn resident_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/statm").ok()?;
    resident_from_statm(&text, rustix::param::page_size() as u64)
}

/// The resident set size in bytes that a `/proc/<pid>/statm` line `text` gives, with pages of
/// `page_bytes` bytes: its second field (resident pages) times the page size, saturating;
/// `None` if the line has no second field or it is not a number.
pub fn resident_from_statm(text: &str, page_bytes: u64) -> Option<u64> {
    let pages: u64 = text.split_ascii_whitespace().nth(1)?.parse().ok()?;
    Some(pages.saturating_mul(page_bytes))
}

/// CPU time spent over a stretch of wall-clock time: started with [`CpuWindow::start`], read
/// with [`CpuWindow::read`] as often as needed.
#[derive(Clone, Copy, Debug)]
pub struct CpuWindow {
    cpu: Duration,
    wall: Instant,
}

impl CpuWindow {
    /// Starts a window now.
    pub fn start() -> CpuWindow {
        CpuWindow { cpu: cpu_time(), wall: Instant::now() }
    }

    /// The process CPU time and the wall-clock time since the window started, in that order.
    pub fn read(&self) -> (Duration, Duration) {
        (cpu_time().saturating_sub(self.cpu), self.wall.elapsed())
    }
}

/// Cores busy on average: `cpu` seconds of CPU time per second of `wall` (0 for a zero
/// `wall`).
pub fn cores(cpu: Duration, wall: Duration) -> f64 {
    if wall.is_zero() {
        0.0
    } else {
        cpu.as_secs_f64() / wall.as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Burns CPU on this thread until the process's CPU clock moved by `at_least` (bounded
    /// by wall time, so a stuck clock fails the caller's assertion instead of hanging).
    fn burn(at_least: Duration) -> u64 {
        let start = cpu_time();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut x = 0u64;
        while cpu_time().saturating_sub(start) < at_least && Instant::now() < deadline {
            for i in 0..10_000u64 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
            }
        }
        x
    }

    #[test]
    fn cpu_time_grows_while_a_thread_burns_cpu() {
        let before = cpu_time();
        std::hint::black_box(burn(Duration::from_millis(50)));
        let spent = cpu_time().saturating_sub(before);
        assert!(spent >= Duration::from_millis(50), "the CPU clock moved {spent:?} over a 50 ms burn");
    }

    #[test]
    fn a_window_counts_the_cpu_of_other_threads() {
        let w = CpuWindow::start();
        std::thread::spawn(|| burn(Duration::from_millis(30))).join().expect("the burning thread ends");
        let (cpu, wall) = w.read();
        assert!(cpu >= Duration::from_millis(30), "{cpu:?} of CPU over a 30 ms burn on another thread");
        assert!(wall > Duration::ZERO);
    }

    #[test]
    fn resident_memory_is_read_on_linux() {
        let usage = ProcessUsage::now();
        if cfg!(target_os = "linux") {
            // A test binary maps at least its own code and stack: far more than one page.
            let rss = usage.resident_bytes.expect("/proc/self/statm is readable on Linux");
            assert!(rss > 4096, "resident {rss} bytes");
        }
        assert!(usage.cpu > Duration::ZERO);
    }

    #[test]
    fn statm_lines_parse_and_bad_ones_are_refused() {
        assert_eq!(resident_from_statm("765 442 414 5 0 123 0\n", 4096), Some(442 * 4096));
        assert_eq!(resident_from_statm("1 2", 65536), Some(2 * 65536));
        assert_eq!(resident_from_statm("1 18446744073709551615", 4096), Some(u64::MAX), "saturates");
        assert_eq!(resident_from_statm("", 4096), None);
        assert_eq!(resident_from_statm("765", 4096), None);
        assert_eq!(resident_from_statm("765 -3 1", 4096), None);
        assert_eq!(resident_from_statm("765 lots 1", 4096), None);
    }

    #[test]
    fn cores_divide_cpu_by_wall_time() {
        assert_eq!(cores(Duration::from_millis(1500), Duration::from_secs(1)), 1.5);
        assert_eq!(cores(Duration::from_secs(1), Duration::ZERO), 0.0);
        assert_eq!(cores(Duration::ZERO, Duration::from_secs(3)), 0.0);
    }
}
