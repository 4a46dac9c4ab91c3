//! funcfuse: an e-graph optimizer for imperative tensor programs.
//!
//! # Stages
//!
//! Every command runs the same chain, held by one [`pipeline::Session`] (rules, saturation limits, cost profile,
//! backend), one method per stage:
//!
//! 1. **parse** ([`frontend`]): PyTorch-style Python into our AST. Anything outside the subset is refused here with
//!    `file:line:col`; nesting stays within [`limits`], so every later stage's recursion fits its stack.
//! 2. **functionalize** ([`functionalize`]): the AST into one pure term ([`ir`]) over the tensor parameters. The
//!    term type-checks ([`ir::verify`]); promotion has happened (binary elementwise operands share a dtype); views
//!    are `(view shape strides offset)` with offsets affine in loop variables; in-place writes are `assign` versions.
//! 3. **saturate and extract** ([`rewrite`], [`extract`]): the term in an e-graph under the rules, within limits
//!    that are always honoured; the candidate whose plan the profile predicts cheapest is extracted. The functional
//!    term is always a candidate, so the extracted term is it or something proven equal to it; every rule is checked
//!    (`rules check`) before use.
//! 4. **plan** ([`lower`]): a term into host structure plus kernels in one kernel IR, under a policy: ours (fused,
//!    from the extracted term) and the two baselines, eager and unfunctionalized (from the functional term),
//!    [`pipeline::PLANS`]. A plan computes the term's outputs; what no kernel can express runs as a host fallback.
//! 5. **run** ([`backend`]): a plan's kernels rendered (C, CUDA), compiled, loaded and run; the outputs are the
//!    returns and every mutated parameter's final contents, as the reference engine reports them.
//!
//! [`interp`] runs the AST with PyTorch's exact aliasing semantics: the reference every stage's output is checked
//! against (the corpus tests, `compare`, the fuzzer); [`tensor`] is the strided runtime both engines use; [`io`]
//! reads and writes `.npy` files and generates seeded inputs; [`cost`] prices plans. Every stage is deterministic:
//! the same input gives byte-identical terms, plans, kernels and reports. ARCHITECTURE.md has the module map and
//! the import directions between the modules (kept by `tests/layering.rs`).

pub mod autotune;
pub mod backend;
pub mod batch;
pub mod calibrate;
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
pub mod pipeline;
pub mod report;
pub mod rewrite;
pub mod roofline;
pub mod tensor;
pub mod torch;

pub use diag::{Diagnostic, Span};
