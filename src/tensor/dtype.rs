//! Dtypes, scalars and PyTorch's type promotion.

/// Element types, ordered so that promotion within our set is the maximum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    Bool,
    U8,
    I8,
    I16,
    I32,
    I64,
    F16,
    BF16,
    F32,
    F64,
}

/// The kind of a dtype, ordered as PyTorch's promotion categories.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Bool,
    Int,
    Float,
}

impl DType {
    /// Every dtype, in promotion order.
    pub const ALL: [DType; 10] = [
        DType::Bool,
        DType::U8,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// The dtype named by a program annotation (`f32`, `i64`, ...).
    pub fn from_annotation(name: &str) -> Option<DType> {
        Some(match name {
            "f32" => DType::F32,
            "f64" => DType::F64,
            "f16" => DType::F16,
            "bf16" => DType::BF16,
            "i64" => DType::I64,
            "i32" => DType::I32,
            "i16" => DType::I16,
            "i8" => DType::I8,
            "u8" => DType::U8,
            "bool" => DType::Bool,
            _ => return None,
        })
    }

    /// The dtype named by `torch.NAME`.
    pub fn from_torch_name(name: &str) -> Option<DType> {
        Some(match name {
            "float32" | "float" => DType::F32,
            "float64" | "double" => DType::F64,
            "float16" | "half" => DType::F16,
            "bfloat16" => DType::BF16,
            "int64" | "long" => DType::I64,
            "int32" | "int" => DType::I32,
            "int16" | "short" => DType::I16,
            "int8" => DType::I8,
            "uint8" => DType::U8,
            "bool" => DType::Bool,
            _ => return None,
        })
    }

    /// The dtype of a conversion method (`x.float()`, `x.long()`, ...).
    pub fn of_method(name: &str) -> Option<DType> {
        Some(match name {
            "float" => DType::F32,
            "double" => DType::F64,
            "half" => DType::F16,
            "bfloat16" => DType::BF16,
            "long" => DType::I64,
            "int" => DType::I32,
            "short" => DType::I16,
            "char" => DType::I8,
            "byte" => DType::U8,
            "bool" => DType::Bool,
            _ => return None,
        })
    }

    pub fn annotation(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "u8",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }

    /// PyTorch's C++ name, as in its error messages (`Float`, `Long`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "Bool",
            DType::U8 => "Byte",
            DType::I8 => "Char",
            DType::I16 => "Short",
            DType::I32 => "Int",
            DType::I64 => "Long",
            DType::F16 => "Half",
            DType::BF16 => "BFloat16",
            DType::F32 => "Float",
            DType::F64 => "Double",
        }
    }

    /// The legacy tensor type name that `x.type()` returns on the CPU (`torch.FloatTensor`, `torch.LongTensor`, ...).
    pub fn legacy_type_name(self) -> String {
        format!("torch.{}Tensor", self.name())
    }

    /// The dtype of a legacy tensor type name (`x.type('torch.FloatTensor')`, `x.type(y.type())`).
    pub fn from_legacy_type_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.legacy_type_name() == name)
    }

    /// `torch.float32` and so on.
    pub fn torch_name(self) -> &'static str {
        match self {
            DType::Bool => "torch.bool",
            DType::U8 => "torch.uint8",
            DType::I8 => "torch.int8",
            DType::I16 => "torch.int16",
            DType::I32 => "torch.int32",
            DType::I64 => "torch.int64",
            DType::F16 => "torch.float16",
            DType::BF16 => "torch.bfloat16",
            DType::F32 => "torch.float32",
            DType::F64 => "torch.float64",
        }
    }

    pub fn kind(self) -> Kind {
        match self {
            DType::Bool => Kind::Bool,
            DType::U8 | DType::I8 | DType::I16 | DType::I32 | DType::I64 => Kind::Int,
            _ => Kind::Float,
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::F32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        self.kind() == Kind::Float
    }

    /// `torch.promote_types` restricted to our dtypes.
    pub fn promote(a: DType, b: DType) -> DType {
        if (a == DType::F16 && b == DType::BF16) || (a == DType::BF16 && b == DType::F16) {
            return DType::F32;
        }
        if (a == DType::U8 && b == DType::I8) || (a == DType::I8 && b == DType::U8) {
            return DType::I16;
        }
        a.max(b)
    }

    /// Whether an in-place op may store a result of dtype `from` into `self` (`torch.can_cast`).
    pub fn can_cast_from(self, from: DType) -> bool {
        from.kind() <= self.kind()
    }
}

/// One element value, in the widest type of its kind.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    B(bool),
    I(i64),
    F(f64),
}

impl Scalar {
    pub fn kind(self) -> Kind {
        match self {
            Scalar::B(_) => Kind::Bool,
            Scalar::I(_) => Kind::Int,
            Scalar::F(_) => Kind::Float,
        }
    }

    /// The dtype PyTorch gives a Python number of this kind (the default dtype for floats).
    pub fn default_dtype(self) -> DType {
        match self {
            Scalar::B(_) => DType::Bool,
            Scalar::I(_) => DType::I64,
            Scalar::F(_) => DType::F32,
        }
    }

    #[inline]
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::B(b) => b as u8 as f64,
            Scalar::I(i) => i as f64,
            Scalar::F(f) => f,
        }
    }

    /// Float-to-integer conversion as x86 performs C++'s static_cast: truncation, and i64::MIN when out of range.
    #[inline]
    pub fn to_i64_trunc(self) -> i64 {
        match self {
            Scalar::B(b) => b as i64,
            Scalar::I(i) => i,
            Scalar::F(f) => {
                if f.is_finite() && f > -9.223372036854775808e18 && f < 9.223372036854775808e18 {
                    f.trunc() as i64
                } else {
                    i64::MIN
                }
            }
        }
    }

    #[inline]
    pub fn to_i32_wrapping(self) -> i32 {
        match self {
            Scalar::F(f) => {
                if f.is_finite() && f > -2147483649.0 && f < 2147483648.0 {
                    f.trunc() as i32
                } else {
                    i32::MIN
                }
            }
            other => other.to_i64_trunc() as i32,
        }
    }

    #[inline]
    pub fn to_bool(self) -> bool {
        match self {
            Scalar::B(b) => b,
            Scalar::I(i) => i != 0,
            Scalar::F(f) => f != 0.0,
        }
    }

    /// The value rounded into `dtype` and widened back (what a cast to `dtype` keeps).
    #[inline]
    pub fn cast(self, dtype: DType) -> Scalar {
        match dtype {
            DType::Bool => Scalar::B(self.to_bool()),
            DType::U8 => Scalar::I(self.to_i32_wrapping() as u8 as i64),
            DType::I8 => Scalar::I(self.to_i32_wrapping() as i8 as i64),
            DType::I16 => Scalar::I(self.to_i32_wrapping() as i16 as i64),
            DType::I32 => Scalar::I(self.to_i32_wrapping() as i64),
            DType::I64 => Scalar::I(self.to_i64_trunc()),
            DType::F32 | DType::F16 | DType::BF16 => Scalar::F(self.to_f64() as f32 as f64),
            DType::F64 => Scalar::F(self.to_f64()),
        }
    }
}

/// The checks of the legacy `x.new(...)` that both engines run: no keywords; either sizes (ints) or one list of data.
/// `kind(i)` says what positional argument `i` (1 up; 0 is the tensor) is: `Some(true)` a list, `Some(false)` anything
/// else a size may be, `None` a tuple or a tensor, which PyTorch reads as data or as sizes by a type (`torch.Size`)
/// that looks like a tuple here, so they are refused.
pub fn legacy_new_check(nkw: usize, npos: usize, kind: impl Fn(usize) -> Option<bool>) -> Result<(), String> {
    if nkw > 0 {
        return Err(
            "new(): keyword arguments are not supported (PyTorch's legacy constructor takes only device)".into()
        );
    }
    for i in 1..npos {
        match kind(i) {
            None => {
                return Err(
                    "x.new(tuple or tensor) is not supported: PyTorch reads a torch.Size as sizes and a tuple or a \
                            tensor as data, and a torch.Size looks like a tuple here; write x.new_empty(size) or \
                            x.new_tensor(data)"
                        .into(),
                )
            }
            Some(true) if npos > 2 => return Err("new(): a list of data must be the only argument".into()),
            _ => {}
        }
    }
    Ok(())
}

/// The refusal of a PyTorch dtype that no tensor here has (`torch.uint8`), given where a dtype is taken; None for
/// any other string.
pub fn unsupported_torch_dtype(s: &str) -> Option<String> {
    OTHER_TORCH_DTYPES.contains(&s).then(|| {
        format!(
            "dtype {s} is not supported: tensors here are float32, float64, float16, bfloat16, int64, int32, int16, int8, uint8 or bool"
        )
    })
}

/// The refusal of a float16 or bfloat16 tensor: the dtypes are named, but no engine computes in them yet (the
/// kernels would hold them as float32 without rounding, a silently different result).
pub fn half_unsupported(d: DType) -> String {
    format!(
        "dtype {} is not supported yet: tensors here are float32, float64, int64, int32, int16, int8, uint8 or bool (convert with \
         `.float()`)",
        d.torch_name()
    )
}

/// PyTorch's dtypes that no tensor here has (`torch.uint8` and friends are values that equal no dtype of ours, `interp::python::module_attr`).
#[rustfmt::skip]
pub const OTHER_TORCH_DTYPES: &[&str] = &["torch.uint16",
    "torch.uint32", "torch.uint64", "torch.complex32", "torch.complex64", "torch.complex128", "torch.cfloat",
    "torch.cdouble", "torch.float8_e4m3fn", "torch.float8_e5m2"];
