//! Subcommands kept out of `main.rs`.

pub(super) mod compare;
pub(super) mod fuzz;
pub(super) mod plans;
pub(super) mod rules;
