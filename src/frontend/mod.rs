//! The frontend: Python source text to our AST ([`ast`]), through `ruff_python_parser`.
//!
//! Only the parser crate's syntax tree is used, and only in `convert`; everything after works on [`ast`].
//! Invariant: unsupported syntax is rejected here with `file:line:col: message`, never passed on.

pub mod ast;
mod convert;
pub mod cpython;
pub mod torch_api;

use crate::diag::Diagnostic;
pub use ast::Module;
/// The name of the class of the file the conversion makes for `MODULE.NAME`: a `torch.nn` module or a `torch.optim`
/// optimizer (`convert::prelude`).
pub use convert::prelude::class_name as module_class;
pub use convert::prelude::function_name as module_function;
pub use convert::prelude::static_owner;

/// Parses a program file's text. `path` is used in messages only.
pub fn parse_module(path: &str, source: &str) -> Result<Module, Diagnostic> {
    convert::convert_module(path, source).map_err(|d| d.in_file(path))
}

/// Reads and parses a program file.
pub fn load_module(path: &str) -> Result<Module, Diagnostic> {
    let t = std::time::Instant::now();
    let source = crate::io::read_text(std::path::Path::new(path))
        .map_err(|e| Diagnostic::new(format!("cannot read program file: {e}")).in_file(path))?;
    let m = parse_module(path, &source)?;
    crate::log::log(crate::log::Stage::Parse, || {
        let ms = t.elapsed().as_secs_f64() * 1e3;
        format!("{path}: {} functions, {} outside the subset, in {ms:.2} ms", m.functions.len(), m.failed.len())
    });
    Ok(m)
}
