//! The e-graph over the term language (egg `=0.11.0`).
//!
//! An e-class analysis that knows every class's dtype and static shape (and the literal a literal class holds), so
//! that conditions on rewrites can ask for them; a union of two classes of different types is recorded as a conflict
//! (an unsound rewrite) and never panics. Around it: the text rules and their loader and checker (`rules`, `check`,
//! `usable`), the Rust rewrites on loops and views (`vectorize`, `hoist`, `interchange`,
//! `promote`, `compose`, `cover`), and
//! saturation in phases with extraction among candidate terms and a search of the last e-graph (`saturate`).

mod analysis;
mod batch;
pub mod check;
mod compose;
mod cover;
pub mod hoist;
pub mod interchange;
pub mod promote;
pub mod reassoc;
pub mod rules;
pub mod saturate;
pub mod schedule;
pub mod usable;
pub mod vectorize;

pub use analysis::{AffineInt, ClassInfo, Lit, TermAnalysis};

/// The e-graph type used throughout.
pub type TermGraph = egg::EGraph<crate::ir::Node, TermAnalysis>;
