//! funcfuse: an e-graph optimizer for imperative tensor programs.
//!
//! The pipeline, one stage per module: [`frontend`] parses PyTorch-style Python into our AST; [`interp`] runs it with
//! PyTorch's exact aliasing semantics (the reference every later stage is checked against); [`tensor`] is the strided
//! runtime both use; [`io`] reads and writes `.npy` files and generates seeded inputs.

pub mod autotune;
pub mod backend;
pub mod batch;
pub mod compare;
pub mod cost;
pub mod diag;
pub mod embed;
pub mod explain;
pub mod extract;
pub mod frontend;
pub mod functionalize;
pub mod fuzz;
pub mod interp;
pub mod io;
pub mod ir;
pub mod limits;
pub mod log;
pub mod lower;
pub mod ops_doc;
pub mod optimize;
pub mod report;
pub mod rewrite;
pub mod roofline;
pub mod tensor;
pub mod torch;

pub use diag::{Diagnostic, Span};
