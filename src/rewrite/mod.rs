//! The e-graph over the term language (egg `=0.11.0`).
//!
//! This is the first part of the optimizer: an e-class analysis that knows every class's dtype and static shape (and
//! the literal a literal class holds), so that conditions on rewrites can ask for them. A union of two classes of
//! different types is recorded as a conflict (an unsound rewrite) and never panics.
//! Deliberately absent so far: rule files, saturation phases and extraction (issue #4).

mod analysis;
mod batch;
pub mod check;
mod compose;
mod cover;
pub mod interchange;
pub mod hoist;
pub mod rules;
pub mod saturate;
pub mod schedule;
pub mod usable;
pub mod vectorize;

pub use analysis::{AffineInt, ClassInfo, Lit, TermAnalysis};

/// The e-graph type used throughout.
pub type TermGraph = egg::EGraph<crate::ir::Node, TermAnalysis>;
