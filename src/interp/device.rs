//! Devices and the keywords that only say where or how a tensor lives, for both engines: the CPU is the one
//! device (`device=`, `.to(device)`, `torch.device(...)`, `x.device.type`), default memory formats, the strided
//! layout (`layout=x.layout`), and a factory's `requires_grad=False` / `pin_memory=False`.

use super::pyvalue::{Py, PyValue};
use super::value::Value;

/// Whether a string names the CPU as a device (`"cpu"`, `"cpu:0"`).
pub(crate) fn is_cpu_name(s: &str) -> bool {
    s == "cpu" || s.strip_prefix("cpu:").is_some_and(|n| n.parse::<u32>().is_ok())
}

/// The refusal of a device other than the CPU.
pub(crate) fn not_cpu(what: &str) -> String {
    format!("device {what}: programs run with CPU semantics; use `x.device` or \"cpu\"")
}

/// How the device helpers both engines share see a value: a device, `None`, a string, an int, a bool, or another
/// value (the functionalizer's values known only at run time are others).
enum Lit<'v> {
    Device,
    None,
    Str(&'v str),
    Int,
    Bool(bool),
    Other,
}

/// A value as the device helpers see it (an engine's values known only at run time are others).
fn lit<V: PyValue>(v: &V) -> Lit<'_> {
    match v.py() {
        Py::Device => Lit::Device,
        Py::None => Lit::None,
        Py::Str(s) => Lit::Str(s),
        Py::Int(_) => Lit::Int,
        Py::Bool(b) => Lit::Bool(b),
        _ => Lit::Other,
    }
}

/// Takes the device arguments out of a call to `name` (`device=` anywhere; for `.to`, a device or device name in
/// first position): the CPU is the only device, so they change nothing; another device is refused. `non_blocking`
/// and `copy=False` go with them for `.to`, `non_blocking` for `copy_`. Both engines call it.
pub(crate) fn strip_device<V: PyValue>(name: &str, pos: &mut Vec<V>, kw: &mut Vec<(String, V)>) -> Result<(), String> {
    let check = |v: &V| match lit(v) {
        Lit::Device | Lit::None => Ok(()),
        Lit::Str(s) if is_cpu_name(s) => Ok(()),
        Lit::Str(s) => Err(crate::tensor::unsupported_torch_dtype(s).unwrap_or_else(|| not_cpu(&format!("'{s}'")))),
        _ => Err(format!("{name}(): argument 'device' must be torch.device, not {}", v.type_name())),
    };
    if let Some(k) = kw.iter().position(|(k, _)| k == "device") {
        check(&kw[k].1)?;
        kw.remove(k);
    }
    kw.retain(|(k, v)| !(k == "memory_format" && matches!(lit(v), Lit::Str(f) if default_memory_format(name, f))));
    if FACTORIES.contains(&name) {
        // `requires_grad=False` and `pin_memory=False` are what every tensor here is; True asks for what is not run.
        for key in ["requires_grad", "pin_memory"] {
            if let Some(k) = kw.iter().position(|(k, _)| k == key) {
                match lit(&kw[k].1) {
                    Lit::Bool(false) => {
                        kw.remove(k);
                    }
                    Lit::Bool(true) if key == "requires_grad" => {
                        return Err(format!("{name}(requires_grad=True): autograd is not supported"));
                    }
                    Lit::Bool(true) => return Err(format!("{name}(pin_memory=True): {}", not_cpu("'pinned memory'"))),
                    _ => return Err(format!("{name}(): argument '{key}' must be bool, not {}", kw[k].1.type_name())),
                }
            }
        }
    }
    // `layout=torch.strided` (DINO's `torch.zeros(..., layout=x.layout)`) is every tensor's layout here.
    if let Some(k) = kw.iter().position(|(k, _)| k == "layout") {
        match lit(&kw[k].1) {
            Lit::Str(STRIDED) | Lit::None => {
                kw.remove(k);
            }
            Lit::Str(other) => {
                return Err(format!("{name}(layout={other}): only dense (strided) tensors are supported"))
            }
            _ => return Err(format!("{name}(): argument 'layout' must be torch.layout, not {}", kw[k].1.type_name())),
        }
    }
    if name == "copy_" {
        // A copy between devices may be asynchronous; on the one device it is an ordinary copy.
        kw.retain(|(k, v)| !(k == "non_blocking" && matches!(lit(v), Lit::Bool(_))));
    }
    if matches!(name, "to" | "cpu") {
        kw.retain(|(k, v)| !(k == "non_blocking" || (k == "copy" && matches!(lit(v), Lit::Bool(false)))));
        // `x.to(device)`, `x.to(device, dtype)`, `x.to("cpu")` (position 1: position 0 is the tensor).
        if name == "to" && matches!(pos.get(1).map(&lit), Some(Lit::Device | Lit::Str(_))) {
            check(&pos[1])?;
            pos.remove(1);
        }
    }
    Ok(())
}

/// The layout of every tensor here, as a value (`x.layout`, `torch.strided`).
pub(crate) const STRIDED: &str = "torch.strided";

/// The calls that make a tensor and so take `requires_grad=` and `pin_memory=` (as `torch.X` or `x.X`).
const FACTORIES: &[&str] = &[
    "zeros",
    "ones",
    "full",
    "empty",
    "empty_strided",
    "tensor",
    "arange",
    "range",
    "linspace",
    "logspace",
    "eye",
    "rand",
    "randn",
    "randint",
    "randperm",
    "zeros_like",
    "ones_like",
    "full_like",
    "empty_like",
    "rand_like",
    "randn_like",
    "randint_like",
    "new_zeros",
    "new_ones",
    "new_full",
    "new_empty",
    "new_tensor",
    "scalar_tensor",
];

/// The memory formats a program may name: PyTorch's defaults, so passing them changes nothing.
pub(crate) const MEMORY_FORMATS: &[&str] = &["torch.preserve_format", "torch.contiguous_format"];

/// Whether `memory_format=FORMAT` in a call to `name` is that call's default (`preserve_format` for copies,
/// `contiguous_format` for `contiguous`), which may then be dropped.
pub(crate) fn default_memory_format(name: &str, format: &str) -> bool {
    match format {
        "torch.preserve_format" => name != "contiguous",
        "torch.contiguous_format" => name == "contiguous",
        _ => false,
    }
}

/// `torch.device(...)` of its arguments `pos`: `Ok` where they name the CPU, the one device (both engines).
pub(crate) fn torch_device<V: PyValue>(pos: &[V]) -> Result<(), String> {
    let lits: Vec<Lit> = pos.iter().map(lit).collect();
    match lits.as_slice() {
        [Lit::Device] => Ok(()),
        [Lit::Str(s)] if is_cpu_name(s) => Ok(()),
        [Lit::Str("cpu"), Lit::Int] => Ok(()),
        [Lit::Str(s), ..] => Err(not_cpu(&format!("'{s}'"))),
        _ => Err("torch.device() takes a device name such as \"cpu\"".into()),
    }
}

/// `device.NAME` of the one device, the CPU (both engines).
pub(crate) fn device_attr(name: &str) -> Result<Value, String> {
    match name {
        "type" => Ok(Value::Str("cpu".into())),
        "index" => Ok(Value::None),
        _ => Err(format!("'torch.device' object has no attribute '{name}'")),
    }
}
