//! Subcommands kept out of `main.rs`.

pub(super) mod plans;
