//! Stage logging, what `TORCH_LOGS` gives PyTorch users: with `FUNCFUSE_LOG=STAGES` (a comma-separated list of
//! `parse`, `functionalize`, `saturate`, `plan`, `compile`, `run`, or `all`) or the command line's `--verbose`, each
//! stage prints one line per event to stderr, `[funcfuse STAGE] ...`: sizes, choices and times. Nothing is logged
//! otherwise, and logging never changes an output file or standard output.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

/// A stage of the pipeline, as `FUNCFUSE_LOG` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Parse,
    Functionalize,
    Saturate,
    Plan,
    Compile,
    Run,
}

const STAGES: [(Stage, &str); 6] = [
    (Stage::Parse, "parse"),
    (Stage::Functionalize, "functionalize"),
    (Stage::Saturate, "saturate"),
    (Stage::Plan, "plan"),
    (Stage::Compile, "compile"),
    (Stage::Run, "run"),
];

impl Stage {
    pub fn name(self) -> &'static str {
        STAGES.iter().find(|(s, _)| *s == self).map_or("?", |(_, n)| n)
    }
    fn bit(self) -> u8 {
        1 << STAGES.iter().position(|(s, _)| *s == self).unwrap_or(0)
    }
}

/// Stages turned on by `--verbose` (set by the command line), on top of `FUNCFUSE_LOG`.
static FORCED: AtomicU8 = AtomicU8::new(0);

/// Parses a `FUNCFUSE_LOG` value into a set of stages; an unknown name is an error that lists the known ones.
pub fn parse(value: &str) -> Result<u8, String> {
    let mut bits = 0;
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        bits |= match name {
            "all" => u8::MAX,
            _ => STAGES.iter().find(|(_, n)| *n == name).map(|(s, _)| s.bit()).ok_or_else(|| {
                let known: Vec<&str> = STAGES.iter().map(|(_, n)| *n).collect();
                format!("FUNCFUSE_LOG: unknown stage `{name}` (known: {}, all)", known.join(", "))
            })?,
        };
    }
    Ok(bits)
}

fn from_env() -> u8 {
    static BITS: OnceLock<u8> = OnceLock::new();
    *BITS.get_or_init(|| match std::env::var("FUNCFUSE_LOG") {
        Ok(v) => parse(&v).unwrap_or_else(|e| {
            eprintln!("funcfuse: {e}; logging every stage");
            u8::MAX
        }),
        Err(_) => 0,
    })
}

/// Logs every stage from now on (`--verbose`).
pub fn enable_all() {
    FORCED.store(u8::MAX, Ordering::Relaxed);
}

pub fn enabled(stage: Stage) -> bool {
    (FORCED.load(Ordering::Relaxed) | from_env()) & stage.bit() & !QUIET.with(|q| q.get()) != 0
}

thread_local! {
    /// Stages silenced on this thread by [`quietly`].
    static QUIET: std::cell::Cell<u8> = const { std::cell::Cell::new(0) };
}

/// Runs `f` with `stage` not logged on this thread (planning each candidate while pricing them).
pub fn quietly<T>(stage: Stage, f: impl FnOnce() -> T) -> T {
    let before = QUIET.with(|q| q.replace(q.get() | stage.bit()));
    let r = f();
    QUIET.with(|q| q.set(before));
    r
}

/// Prints `[funcfuse STAGE] message` to stderr when `stage` is logged; the message is built only then.
pub fn log(stage: Stage, message: impl FnOnce() -> String) {
    if enabled(stage) {
        eprintln!("[funcfuse {}] {}", stage.name(), message());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_parse_by_name_and_unknown_ones_are_named() {
        assert_eq!(parse("parse,run").unwrap(), Stage::Parse.bit() | Stage::Run.bit());
        assert_eq!(parse("all").unwrap(), u8::MAX);
        assert_eq!(parse("").unwrap(), 0);
        let e = parse("parse,sat").unwrap_err();
        assert!(e.contains("unknown stage `sat`") && e.contains("saturate"), "{e}");
    }
}
