//! Limits that stop work: the stack every stage runs on, how deeply a program may nest, and the wall-clock deadline
//! that long-running loops check (cooperative cancellation).
//!
//! The deadline is per thread: [`with_deadline`] sets it for the work it runs, and the interpreter, the functional
//! interpreter, the plan executor, functionalization, saturation, extraction and planning call [`check`] (or
//! [`expired`]) in their loops, so a program past its time limit stops within a statement, an iteration or a rule
//! application and its memory is freed, rather than running on in the background.

use std::cell::Cell;
use std::fmt;
use std::time::{Duration, Instant};

use crate::diag::Diagnostic;

/// The stack each stage runs on (the main command and every program of a batch): 1 GiB of address space, of which
/// only the pages a deep program touches are used. It holds programs within [`MAX_NESTING`] and chains of 10,000
/// statements through every stage.
pub const STACK_BYTES: usize = 1 << 30;

/// How deeply brackets (`(`, `[`, `{`) may nest in a program file (CPython's own parser stops at 200).
pub const MAX_NESTING: usize = 10_000;

/// How deeply expressions and statement blocks may nest once parsed (operators, calls, subscripts, attributes,
/// `if`/`for` bodies), e.g. `x + x + ... + x` with this many terms.
pub const MAX_EXPR_DEPTH: usize = 20_000;

/// The largest `--time-limit` accepted, in seconds (about 11.6 days).
pub const MAX_TIME_LIMIT_S: f64 = 1e6;

/// The default wall-clock limit of `funcfuse run`, in seconds.
pub const RUN_TIME_LIMIT_S: f64 = 600.0;

/// The default per-program limit of `funcfuse optimize`, in seconds.
pub const OPTIMIZE_TIME_LIMIT_S: f64 = 60.0;

/// A `while` loop that runs this often is reported rather than left to spin (by every engine: the interpreter, the
/// functional interpreter and the plan executor).
pub const MAX_WHILE_ITERATIONS: u64 = 10_000_000;

/// The most items a Python-level combination builder (`itertools.product`) may make before the program is refused:
/// far above any shape-sized loop, far below what would exhaust memory.
pub const MAX_LIST_ITEMS: usize = 10_000_000;

/// Parses a `--time-limit` value: a finite number of seconds, above zero and at most [`MAX_TIME_LIMIT_S`].
pub fn parse_time_limit(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !v.is_finite() || v <= 0.0 || v > MAX_TIME_LIMIT_S {
        return Err(format!("`{s}`: expected a number of seconds above 0 and at most {MAX_TIME_LIMIT_S:.0}"));
    }
    Ok(v)
}

/// The work ran past its deadline.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeUp {
    /// The limit that was set, in seconds.
    pub seconds: f64,
}

impl fmt::Display for TimeUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "time limit exceeded ({} s)", self.seconds)
    }
}

impl From<TimeUp> for Diagnostic {
    fn from(t: TimeUp) -> Self {
        Diagnostic::new(t.to_string())
    }
}

impl From<TimeUp> for String {
    fn from(t: TimeUp) -> Self {
        t.to_string()
    }
}

thread_local! {
    static DEADLINE: Cell<Option<(Instant, f64)>> = const { Cell::new(None) };
}

/// Runs `f` with a deadline `limit` from now on this thread (none: no deadline), restoring the previous one after.
pub fn with_deadline<R>(limit: Option<Duration>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<(Instant, f64)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            DEADLINE.with(|d| d.set(self.0));
        }
    }
    let now = Instant::now();
    let new = limit.map(|l| (now.checked_add(l).unwrap_or(now + Duration::from_secs(1 << 40)), l.as_secs_f64()));
    let _restore = Restore(DEADLINE.with(|d| d.replace(new)));
    f()
}

/// `Err` once this thread's deadline has passed.
pub fn check() -> Result<(), TimeUp> {
    match DEADLINE.with(Cell::get) {
        Some((at, seconds)) if Instant::now() >= at => Err(TimeUp { seconds }),
        _ => Ok(()),
    }
}

/// Whether this thread's deadline has passed.
pub fn expired() -> bool {
    check().is_err()
}

/// The time left before this thread's deadline (`None`: no deadline).
pub fn remaining() -> Option<Duration> {
    DEADLINE.with(Cell::get).map(|(at, _)| at.saturating_duration_since(Instant::now()))
}

/// Runs `f` on a fresh thread with a [`STACK_BYTES`] stack and returns its result; a panic in `f` is resumed here.
/// The caller's deadline carries over.
pub fn on_big_stack<R: Send>(f: impl FnOnce() -> R + Send) -> std::io::Result<R> {
    let inherited = DEADLINE.with(Cell::get);
    std::thread::scope(|s| {
        let h = std::thread::Builder::new().stack_size(STACK_BYTES).spawn_scoped(s, move || {
            DEADLINE.with(|d| d.set(inherited));
            f()
        })?;
        Ok(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_limits_are_finite_positive_and_bounded() {
        assert_eq!(parse_time_limit("2.5"), Ok(2.5));
        for bad in ["inf", "1e30", "-1", "0", "NaN", "x", ""] {
            assert!(parse_time_limit(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_deadline_is_checked_and_restored() {
        assert!(check().is_ok());
        with_deadline(Some(Duration::ZERO), || {
            assert_eq!(check(), Err(TimeUp { seconds: 0.0 }));
            with_deadline(None, || assert!(check().is_ok()));
            assert!(expired());
            assert!(on_big_stack(expired).unwrap());
        });
        assert!(check().is_ok() && remaining().is_none());
    }
}
