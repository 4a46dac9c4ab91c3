//! Diagnostics: every error a user can cause is a `Diagnostic` with a source location when one is known.
//!
//! Invariant: stages return `Result<_, Diagnostic>`; nothing in the library panics on bad input.

use std::fmt;

/// A position in a program file: 1-based line and column (column counted in characters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    pub line: u32,
    pub col: u32,
}

/// An error with an optional `file:line:col` location, printed as `file:line:col: message`.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    pub file: Option<String>,
    pub span: Option<Span>,
    pub message: String,
}

impl Diagnostic {
    /// An error with no location yet; callers attach one with [`Diagnostic::at`] or [`Diagnostic::in_file`].
    pub fn new(message: impl Into<String>) -> Self {
        Diagnostic { file: None, span: None, message: message.into() }
    }

    /// Attaches a span unless a more precise one is already there.
    pub fn at(mut self, span: Span) -> Self {
        if self.span.is_none() {
            self.span = Some(span);
        }
        self
    }

    /// Attaches a file name unless one is already there.
    pub fn in_file(mut self, file: &str) -> Self {
        if self.file.is_none() {
            self.file = Some(file.to_string());
        }
        self
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.span) {
            (Some(file), Some(s)) => write!(f, "{}:{}:{}: {}", file, s.line, s.col, self.message),
            (Some(file), None) => write!(f, "{}: {}", file, self.message),
            (None, Some(s)) => write!(f, "{}:{}: {}", s.line, s.col, self.message),
            (None, None) => write!(f, "{}", self.message),
        }
    }
}

impl std::error::Error for Diagnostic {}

/// Shorthand for a located error.
pub fn err<T>(span: Span, message: impl Into<String>) -> Result<T, Diagnostic> {
    Err(Diagnostic::new(message).at(span))
}
