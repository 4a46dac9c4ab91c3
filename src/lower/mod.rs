//! Lowering: an extracted term becomes a plan (host structure plus kernels in one kernel IR) that a backend runs.
//!
//! `plan` decides what fuses; `exec` runs a plan on any [`exec::Device`] (the C backend, the CUDA backend), with
//! host loops, branches and fallbacks, counting launches and bytes. Which device runs a plan is the backend's choice
//! (`crate::backend::Loaded`): lowering knows no backend.

mod chain;
pub mod class;
pub mod coalesce;
mod dots;
pub mod estimate;
pub mod exec;
mod fuse;
pub mod group;
mod host;
pub use host::scalar_op as host_scalar_op;
pub mod index;
mod inplace;
pub mod kernel;
mod order;
pub mod plan;
mod pre;
mod prepare;
pub mod profile;
mod scatter;
mod show;
pub mod sorts;
pub mod specialize;
mod why;

pub use plan::{plan, plan_for, How, Plan, Policy};
