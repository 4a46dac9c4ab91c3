//! The methods a subclass of `torch.nn.Module` inherits from it (`module.py`, Python written for this tool):
//! `parameters`, `named_parameters`, `buffers`, `named_buffers`, `children`, `named_children`, `modules`,
//! `named_modules`, `apply`, `state_dict`, `load_state_dict`, `register_buffer`, `register_parameter`,
//! `add_module`, `register_module`, `requires_grad_`, `to`, `cpu`, `double`, `float` and `half`. `classes::expand`
//! adds those a class does not define to its direct `nn.Module` subclasses (the others inherit them from their base),
//! and `classes::finish` locates them at the class.

use ruff_python_ast as py;
use ruff_python_ast::visitor::transformer::{self, Transformer};

use crate::frontend::ast::{BUFFER, IS_MODULE, PARAMETERS, REFUSED};

const SOURCE: &str = include_str!("module.py");

/// The methods of `module.py` for class `class` (as the program file names it; a prelude class by PyTorch's name).
pub(super) fn module_methods(class: &str) -> Vec<py::StmtFunctionDef> {
    let shown = class.rsplit('·').next().unwrap_or(class);
    let source = SOURCE.replace("\"CLASS\"", &format!("\"{shown}\""));
    let parsed = ruff_python_parser::parse_module(&source).expect("module.py parses");
    let mut defs = Vec::new();
    for mut s in parsed.into_syntax().body {
        Builtins.visit_stmt(&mut s);
        if let py::Stmt::FunctionDef(f) = s {
            defs.push(f);
        }
    }
    defs
}

/// Renames `module.py`'s names for the engines' builtins to the builtins, which no Python code can name.
struct Builtins;

impl Transformer for Builtins {
    fn visit_expr(&self, e: &mut py::Expr) {
        if let py::Expr::Name(n) = e {
            let ours = match n.id.as_str() {
                "_parameters" => Some(PARAMETERS),
                "_buffer" => Some(BUFFER),
                "_refused" => Some(REFUSED),
                "_is_module" => Some(IS_MODULE),
                _ => None,
            };
            if let Some(b) = ours {
                n.id = b.into();
            }
        }
        transformer::walk_expr(self, e);
    }
}
