//! Subcommands kept out of `main.rs`.

pub(super) mod compare;
pub(super) mod fuzz;
pub(super) mod optimize;
pub(super) mod plans;
pub(super) mod rules;

/// Loads a program file for a command, printing its warnings (what Python would not run as written) to stderr.
pub(super) fn load_module(path: &str) -> Result<funcfuse::frontend::Module, funcfuse::diag::Diagnostic> {
    let module = funcfuse::frontend::load_module(path)?;
    for w in &module.warnings {
        eprintln!("{w}");
    }
    Ok(module)
}
