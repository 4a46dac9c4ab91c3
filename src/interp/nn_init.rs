//! `torch.nn.init`'s functions, for both engines: the fills (`constant_`, `zeros_`, `ones_`), the random
//! initializers (which draw: `super::drawn`) with PyTorch's checks of their arguments, and `calculate_gain`.

/// What a `torch.nn.init` function does ([`nn_init`]).
pub enum Init<V> {
    /// `tensor.fill_(V)`: `constant_`, `zeros_`, `ones_`.
    Fill(V),
    /// Draws every element of the tensor at random (`crate::interp::drawn`).
    Draw,
    /// `calculate_gain`'s number.
    Gain(f64),
}

/// The parameters of the `torch.nn.init` functions supported, in order (`generator` is accepted: nothing random is
/// ever read).
const INIT_PARAMS: &[(&str, &[&str])] = &[
    ("constant_", &["tensor", "val"]),
    ("zeros_", &["tensor"]),
    ("ones_", &["tensor"]),
    ("uniform_", &["tensor", "a", "b", "generator"]),
    ("normal_", &["tensor", "mean", "std", "generator"]),
    ("trunc_normal_", &["tensor", "mean", "std", "a", "b", "generator"]),
    ("xavier_uniform_", &["tensor", "gain", "generator"]),
    ("xavier_normal_", &["tensor", "gain", "generator"]),
    ("kaiming_uniform_", &["tensor", "a", "mode", "nonlinearity", "generator"]),
    ("kaiming_normal_", &["tensor", "a", "mode", "nonlinearity", "generator"]),
    ("orthogonal_", &["tensor", "gain", "generator"]),
    ("sparse_", &["tensor", "sparsity", "std", "generator"]),
    ("calculate_gain", &["nonlinearity", "param"]),
];

/// The function a `torch.nn.init` name calls: the deprecated names without the trailing underscore
/// (`nn.init.constant(w, 0.5)`, `uniform`, `xavier_uniform`, ..., which PyTorch keeps as wrappers that warn and
/// call the in-place one with the same arguments) are the in-place functions; other names are themselves.
pub fn canonical(name: &str) -> std::borrow::Cow<'_, str> {
    const DEPRECATED: &[&str] = &[
        "uniform",
        "normal",
        "constant",
        "xavier_uniform",
        "xavier_normal",
        "kaiming_uniform",
        "kaiming_normal",
        "orthogonal",
        "sparse",
    ];
    if DEPRECATED.contains(&name) {
        format!("{name}_").into()
    } else {
        name.into()
    }
}

/// The arguments of `torch.nn.init.NAME(...)` by parameter, as Python binds them; the first is the tensor (or
/// `calculate_gain`'s nonlinearity).
pub fn nn_init_args<V: Clone>(name: &str, pos: &[V], kw: &[(String, V)]) -> Result<Vec<Option<V>>, String> {
    let Some((_, params)) = INIT_PARAMS.iter().find(|(n, _)| *n == name) else {
        return Err(format!(
            "`torch.nn.init.{name}` is not supported (supported: {})",
            INIT_PARAMS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        ));
    };
    if pos.len() > params.len() {
        return Err(format!("{name}() takes {} positional arguments but {} were given", params.len(), pos.len()));
    }
    let mut out: Vec<Option<V>> = params.iter().enumerate().map(|(i, _)| pos.get(i).cloned()).collect();
    for (k, v) in kw {
        let Some(i) = params.iter().position(|p| p == k) else {
            return Err(format!("{name}() got an unexpected keyword argument '{k}'"));
        };
        if out[i].is_some() {
            return Err(format!("{name}() got multiple values for argument '{k}'"));
        }
        out[i] = Some(v.clone());
    }
    match (name, &out[..]) {
        (_, [None, ..]) => Err(format!("{name}() missing 1 required positional argument: '{}'", params[0])),
        ("constant_" | "sparse_", [_, None, ..]) => {
            Err(format!("{name}() missing 1 required positional argument: '{}'", params[1]))
        }
        _ => Ok(out),
    }
}

/// `torch.nn.init.NAME` of a tensor of `shape`, its arguments bound by [`nn_init_args`], with PyTorch's checks:
/// `constant_`, `zeros_` and `ones_` fill; the random initializers draw (their elements may be written, never read);
/// `calculate_gain` is a number.
pub fn nn_init<V: super::pyvalue::PyValue>(name: &str, args: &[Option<V>], shape: &[usize]) -> Result<Init<V>, String> {
    use super::pyvalue::Py;
    let arg = |i: usize| args.get(i).and_then(|a| a.as_ref());
    let text = |i: usize, default: &str| -> Result<String, String> {
        match arg(i).map(|v| v.py()) {
            None => Ok(default.to_string()),
            Some(Py::Str(s)) => Ok(s.to_string()),
            Some(_) => Err(format!("torch.nn.init.{name}(): `{}` must be a string", init_param_name(name, i))),
        }
    };
    let fans = || {
        if shape.len() < 2 {
            return Err("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions".to_string());
        }
        Ok(())
    };
    match name {
        "constant_" => Ok(Init::Fill(arg(1).expect("bound").clone())),
        "zeros_" => Ok(Init::Fill(V::make(super::pyvalue::Made::Float(0.0)))),
        "ones_" => Ok(Init::Fill(V::make(super::pyvalue::Made::Float(1.0)))),
        "calculate_gain" => {
            let slope = match arg(1) {
                None => None,
                Some(v) if matches!(v.py(), Py::None) => None,
                Some(v) => match (v.py(), v.number()) {
                    (Py::Bool(_), _) | (_, None) => {
                        return Err(format!("negative_slope {} not a valid number", v.type_name()))
                    }
                    (_, Some(x)) => Some(x),
                },
            };
            calculate_gain(&text(0, "")?, slope).map(Init::Gain)
        }
        "xavier_uniform_" | "xavier_normal_" => fans().map(|_| Init::Draw),
        "kaiming_uniform_" | "kaiming_normal_" => {
            if shape.contains(&0) {
                return Ok(Init::Draw);
            }
            let mode = text(2, "fan_in")?;
            if mode != "fan_in" && mode != "fan_out" {
                return Err(format!("Mode {mode} not supported, please use one of fan_in, fan_out"));
            }
            fans()?;
            let nonlinearity = text(3, "leaky_relu")?;
            let a = arg(1).and_then(|v| v.number()).unwrap_or(0.0);
            calculate_gain(&nonlinearity, Some(a)).map(|_| Init::Draw)
        }
        "orthogonal_" if shape.len() < 2 => Err("Only tensors with 2 or more dimensions are supported".into()),
        "sparse_" if shape.len() != 2 => Err("Only tensors with 2 dimensions are supported".into()),
        _ => Ok(Init::Draw),
    }
}

fn init_param_name(name: &str, i: usize) -> &'static str {
    INIT_PARAMS.iter().find(|(n, _)| *n == name).and_then(|(_, p)| p.get(i).copied()).unwrap_or("argument")
}

/// `torch.nn.init.calculate_gain(nonlinearity, param)`.
fn calculate_gain(nonlinearity: &str, param: Option<f64>) -> Result<f64, String> {
    const LINEAR: &[&str] = &[
        "linear",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "sigmoid",
    ];
    Ok(match nonlinearity {
        n if LINEAR.contains(&n) => 1.0,
        "tanh" => 5.0 / 3.0,
        "relu" => 2f64.sqrt(),
        "leaky_relu" => {
            let slope = param.unwrap_or(0.01);
            (2.0 / (1.0 + slope * slope)).sqrt()
        }
        "selu" => 3.0 / 4.0,
        other => return Err(format!("Unsupported nonlinearity {other}")),
    })
}

/// Whether `torch.nn.init.NAME` is one of the functions supported (a value programs may pass around).
pub fn is_init(name: &str) -> bool {
    INIT_PARAMS.iter().any(|(n, _)| *n == name)
}
