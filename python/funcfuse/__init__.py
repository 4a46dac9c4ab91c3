"""funcfuse from Python: optimize an imperative PyTorch-style function without writing a program file.

    import numpy as np, funcfuse
    def f(x, y):
        y[1:] += x[:-1] * 2.0
        return torch.relu(y).sum(0)
    g = funcfuse.optimize(f, np.ones((4, 3), np.float32), np.zeros((4, 3), np.float32))
    out = g(a, b)          # runs the optimized plan; b is updated in place as PyTorch would

* ``optimize(fn, *example_inputs)`` plans ``fn`` for the dtypes and shapes of the examples (and the values of its
  int, float and bool arguments) and returns a callable that runs the plan.
* ``@jit`` plans on the first call and again whenever the signature (dtypes, shapes, scalar values) changes; plans
  are cached by signature.
* ``explain(fn, *example_inputs)`` returns what ``funcfuse explain`` prints.

A function funcfuse cannot optimize runs unchanged, with a ``FallbackWarning`` that gives funcfuse's located message;
``strict=True`` raises ``Unsupported`` instead. See README.md ("From Python") for what is supported.
"""

import ast
import inspect
import json
import math
import sys
import textwrap
import types
import warnings

import numpy as np

from . import _native

__all__ = ["optimize", "jit", "explain", "Unsupported", "FallbackWarning", "Optimized", "Explanation"]
__version__ = "0.1.0"

#: Raised (with ``strict=True``, and by ``explain``) when funcfuse cannot optimize a function; the message says why,
#: at ``file:line:col`` where the function's source has a place.
Unsupported = _native.Unsupported

#: How many signatures one ``@jit`` function plans before it runs new ones unoptimized (with a warning).
MAX_PLANS = 64


class Explanation(str):
    """What ``funcfuse explain`` prints (this string), with the same as data in ``data``: the function's record in
    ``funcfuse optimize``'s report.json (term sizes, rules fired, extraction's candidates, and ``plans``: kernels,
    bytes and predicted seconds of eager, unfunctionalized and ours)."""

    data: dict

    @staticmethod
    def of(plan):
        e = Explanation(plan.explanation)
        e.data = json.loads(plan.record)
        return e


class FallbackWarning(UserWarning):
    """Warned when a function runs unoptimized (as written) because funcfuse cannot optimize it."""


_NP_DTYPES = {
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
    np.dtype(np.int64): "i64",
    np.dtype(np.int32): "i32",
    np.dtype(np.int16): "i16",
    np.dtype(np.int8): "i8",
    np.dtype(np.uint8): "u8",
    np.dtype(np.bool_): "bool",
}
_NP_OF = {v: k for k, v in _NP_DTYPES.items()}
_I64 = (-(2**63), 2**63 - 1)
_MISSING = object()


def _torch_module():
    """torch, if the caller has imported it (a torch tensor argument means it has); never imported here."""
    return sys.modules.get("torch")


def _is_torch_tensor(v):
    torch = _torch_module()
    return torch is not None and isinstance(v, torch.Tensor)


def _piece(fn):
    """(path, def line in its file, the `def` and its body dedented as lines, columns removed, the `def` node) of a
    plain function; decorators left out."""
    if not inspect.isfunction(fn):
        raise Unsupported(f"{fn!r} is not a Python function (funcfuse optimizes functions defined with `def`)")
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise Unsupported(f"the source of `{fn.__qualname__}` is not available ({e})") from None
    path = inspect.getsourcefile(fn) or fn.__code__.co_filename
    text = textwrap.dedent("".join(lines))
    head = next((l for l in lines if l.strip()), "")
    indent = len(head.expandtabs()) - len(head.expandtabs().lstrip())
    lambdas = f"{path}:{first}: `{fn.__qualname__}` is not a `def` statement (lambdas are not supported)"
    try:
        tree = ast.parse(text)
    except SyntaxError:
        raise Unsupported(lambdas) from None
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef) or node.name != fn.__name__:
        raise Unsupported(lambdas)
    body = text.splitlines(True)[node.lineno - 1 :]
    if body and not body[-1].endswith("\n"):
        body[-1] += "\n"
    return path, max(first, 1) + node.lineno - 1, body, indent, node


def _code_names(code):
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _code_names(c)
    return names


def _source(fn):
    """(path, text, name, indents, returns a value, guards) of a function: its source from its file, and the module-level
    functions (from the same file) and int, float and bool constants it uses, each function at its own lines of the
    file (dedented; `indents` says by how much) so that messages give the file's lines and columns. `guards` are the
    constants as (globals, name, value): a plan holds while each is unchanged."""
    fn = inspect.unwrap(fn)
    path, line, body, indent, node = _piece(fn)
    placed = {}  # file line -> text
    indents = []

    def place(line, body, indent):
        for i, text in enumerate(body):
            placed[line + i] = text
        indents.append((line, line + len(body) - 1, indent))

    place(line, body, indent)
    consts, seen, todo = {}, {fn.__name__}, [fn]
    while todo:
        f = todo.pop()
        g = f.__globals__
        for name in sorted(_code_names(f.__code__)):
            if name in seen or name not in g:
                continue
            seen.add(name)
            v = g[name]
            if (type(v) in (int, bool) and _I64[0] <= v <= _I64[1]) or (type(v) is float and math.isfinite(v)):
                consts[name] = (g, v)
            elif inspect.isfunction(v) and v.__name__ == name:
                try:
                    hpath, hline, hbody, hindent, _ = _piece(v)
                except Unsupported:
                    continue  # not visible: a use is a located "not defined" error
                if hpath == path and not any(hline + i in placed for i in range(len(hbody))):
                    place(hline, hbody, hindent)
                    todo.append(v)
    last = max(placed)
    text = "".join(placed.get(i, "\n") for i in range(1, last + 1))
    text += "".join(f"{k} = {v!r}\n" for k, (_, v) in sorted(consts.items()))
    guards = [(g, k, v) for k, (g, v) in sorted(consts.items())]
    return path, text, fn.__name__, indents, _returns_value(node), guards


def _returns_value(func):
    """Whether a function has a `return` with a value (else the plan's empty result is Python's None)."""
    todo = list(func.body)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Return) and n.value is not None:
            return True
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(n))
    return False


class _Arg:
    """One bound argument: a tensor (``kind`` its dtype, ``array`` a NumPy view of it) or a scalar."""

    __slots__ = ("name", "kind", "shape", "value", "array", "torch")

    def __init__(self, name, value):
        self.name, self.value, self.array, self.torch, self.shape = name, value, None, False, ()
        if isinstance(value, (bool, np.bool_)):
            self.kind, self.value = "pybool", bool(value)
        elif isinstance(value, (int, np.integer)):
            if not _I64[0] <= int(value) <= _I64[1]:
                raise Unsupported(f"argument `{name}` = {value} does not fit in 64 bits")
            self.kind, self.value = "int", int(value)
        elif isinstance(value, (float, np.floating)):
            self.kind, self.value = "float", float(value)
        elif isinstance(value, np.ndarray):
            self._array(value, value.dtype)
        elif _is_torch_tensor(value):
            if value.device.type != "cpu":
                raise Unsupported(f"argument `{name}` is on {value.device}; funcfuse takes CPU tensors")
            if value.requires_grad:
                raise Unsupported(f"argument `{name}` requires grad; funcfuse plans have no autograd")
            if value.is_conj() or value.is_neg() or value.layout != _torch_module().strided:
                raise Unsupported(f"argument `{name}`: only plain strided tensors are supported")
            self.torch = True
            try:
                arr = value.detach().numpy()
            except (TypeError, RuntimeError):  # bfloat16 and others NumPy has no dtype for
                raise Unsupported(
                    f"argument `{name}` has dtype {value.dtype}; supported: float32, float64, int64, int32, int16, int8, uint8, bool"
                ) from None
            self._array(arr, arr.dtype)
        else:
            raise Unsupported(
                f"argument `{name}` is a {type(value).__name__}; funcfuse takes NumPy arrays, torch CPU tensors, "
                "int, float and bool"
            )

    def _array(self, arr, dtype):
        kind = _NP_DTYPES.get(np.dtype(dtype).newbyteorder("="))
        if kind is None:
            raise Unsupported(f"argument `{self.name}` has dtype {dtype}; supported: float32, float64, int64, int32, int16, int8, uint8, bool")
        self.kind, self.shape, self.array = kind, tuple(int(d) for d in arr.shape), arr

    def spec(self):
        """What a plan depends on: the dtype and shape of a tensor, the type and value of a scalar."""
        if self.array is not None:
            return (self.name, self.kind, self.shape)
        return (self.name, self.kind, self.value)

    def describe(self):
        if self.array is not None:
            return f"{self.kind}[{', '.join(map(str, self.shape))}]"
        return f"{self.kind.replace('pybool', 'bool')} {self.value!r}"


def _bind(fn, args, kwargs):
    """The call's arguments as ``_Arg``s in signature order (defaults applied)."""
    sig = inspect.signature(inspect.unwrap(fn))
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise Unsupported(f"`{fn.__qualname__}` has a `*{p.name}` parameter; funcfuse needs fixed parameters")
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{fn.__qualname__}(): {e}") from None
    bound.apply_defaults()
    return [_Arg(n, v) for n, v in bound.arguments.items()]


def _check_no_aliasing(args):
    arrays = [a for a in args if a.array is not None]
    for i, a in enumerate(arrays):
        for b in arrays[i + 1 :]:
            if np.may_share_memory(a.array, b.array):
                raise Unsupported(
                    f"arguments `{a.name}` and `{b.name}` share memory; plans assume distinct tensors (pass a copy)"
                )


def _rules_list(rules):
    if rules is None:
        return []
    if isinstance(rules, (str, bytes)) or hasattr(rules, "__fspath__"):
        return [str(rules)]
    return [str(r) for r in rules]


def _compile(fn, args, rules, backend):
    """The native plan, whether the function returns a value, the guards on the constants it read, and whether it
    asks `torch.is_grad_enabled()` (planned as True: the text given has no grad mode of its own, so a call made with
    grad disabled is refused; a decorated function's decorators, which may set a mode, are refused here)."""
    path, text, name, indents, returns, guards = _source(fn)
    asks_grad_mode = "is_grad_enabled" in text
    if asks_grad_mode and inspect.unwrap(fn) is not fn:
        raise Unsupported(
            f"`{fn.__qualname__}` asks torch.is_grad_enabled() under decorators, whose grad mode is not followed"
        )
    params = [(a.name, a.kind, list(a.shape), a.value if a.array is None else None) for a in args]
    plan = _native.Plan(path, text, name, indents, params, _rules_list(rules), backend)
    return plan, returns, guards, asks_grad_mode


def _grad_enabled():
    """PyTorch's grad mode now (True where torch was never imported)."""
    torch = sys.modules.get("torch")
    return torch is None or torch.is_grad_enabled()


def _to_torch(v):
    torch = _torch_module()
    return torch.from_numpy(v) if isinstance(v, np.ndarray) else v


class Optimized:
    """A function's optimized plan for one signature; calling it runs the plan.

    ``explanation`` is what ``funcfuse explain`` prints; ``signature`` the dtypes, shapes and scalar values it was
    planned for. Arguments must match that signature (``TypeError`` otherwise; ``jit`` re-plans instead). Parameters
    the function writes in place are written back into the caller's arrays or tensors; returned tensors are new
    NumPy arrays, or torch tensors when any argument was a torch tensor.
    """

    def __init__(self, fn, compiled, args):
        self.__wrapped__ = fn
        self._plan, self._returns, self._guards, self._asks_grad_mode = compiled
        self._spec = [a.spec() for a in args]
        self.signature = ", ".join(f"{a.name}: {a.describe()}" for a in args)
        self.__name__ = getattr(fn, "__name__", "optimized")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__doc__ = getattr(fn, "__doc__", None)

    @property
    def explanation(self):
        """The plan's ``Explanation`` (what ``funcfuse explain`` prints; ``.data`` has it as a dict)."""
        return Explanation.of(self._plan)

    def __repr__(self):
        return f"<funcfuse.Optimized {self.__qualname__}({self.signature})>"

    def __call__(self, *args, **kwargs):
        return self._call(_bind(self.__wrapped__, args, kwargs))

    def changed_global(self):
        """The first module-level constant the plan read whose value has changed since (a message), or None."""
        for g, name, v in self._guards:
            now = g.get(name, _MISSING)
            if type(now) is not type(v) or now != v:
                shown = "deleted" if now is _MISSING else f"now {now!r}"
                return f"global `{name}` was {v!r} when {self.__qualname__} was planned and is {shown}"
        return None

    def _call(self, args):
        changed = self.changed_global()
        if changed:
            raise TypeError(f"{self.__qualname__}(): {changed} (funcfuse.jit plans again when a global changes)")
        if self._asks_grad_mode and not _grad_enabled():
            raise TypeError(
                f"{self.__qualname__}(): planned for torch.is_grad_enabled() True, called with grad disabled "
                "(torch.no_grad or inference_mode around the call)"
            )
        for a, want in zip(args, self._spec):
            if a.spec() != want:
                planned = _describe_spec(want)
                raise TypeError(
                    f"{self.__qualname__}(): argument `{a.name}` is {a.describe()}, but the plan was made for "
                    f"{planned} (funcfuse.jit plans again when the signature changes)"
                )
        _check_no_aliasing(args)
        by_name = {a.name: a for a in args}
        for name in self._plan.mutated:
            if not by_name[name].array.flags.writeable:
                raise ValueError(f"{self.__qualname__}(): argument `{name}` is written in place but is read-only")
        # C-contiguous arrays in native byte order are read in place (no copy); the plan writes parameters it
        # mutates straight into the caller's arrays once it has run.
        data = [_native_order(by_name[name].array) for name, _, _ in self._plan.inputs]
        dests = [(n, _as_buffer(by_name[n].array)) for n in self._plan.mutated if _writable_in_place(by_name[n].array)]
        returns, is_tuple, mutated = self._plan.run(data, dests)
        for name, out in mutated:  # parameters in another byte order, or misaligned
            dest = by_name[name].array
            # (in the shape the parameter was declared with: `squeeze_` on it changes only the shape PyTorch reports)
            np.copyto(dest, _array(out).reshape(dest.shape), casting="unsafe")
        results = [_array(r) for r in returns]
        if any(a.torch for a in args):
            results = [_to_torch(r) for r in results]
        if not self._returns:
            return None
        if is_tuple:
            return tuple(results)
        return results[0] if results else None


def _describe_spec(spec):
    _, kind, v = spec
    if kind in _NP_OF:
        return f"{kind}[{', '.join(map(str, v))}]"
    return f"{kind.replace('pybool', 'bool')} {v!r}"


def _as_buffer(arr):
    """A view of the array as the native module takes it: bools as their bytes (it checks every byte), a 0-d array
    as one element (the buffer protocol gives a 0-d array no shape)."""
    if arr.ndim == 0:
        arr = arr.reshape(1)
    return arr.view(np.uint8) if arr.dtype == np.bool_ else arr


def _writable_in_place(arr):
    """Whether the native module can write a parameter's new values straight into the array."""
    return arr.dtype.isnative and arr.flags.aligned


def _native_order(arr):
    """The array as the native module reads it: in native byte order and aligned (copied only when it is not)."""
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    elif not arr.flags.aligned:
        arr = arr.copy()
    return _as_buffer(arr)


def _array(out):
    dtype, shape, data = out
    return np.frombuffer(data, dtype=_NP_OF[dtype]).reshape(shape)


class _Unchanged:
    """Runs a function as written (the fallback). NumPy arguments are handed to it as torch tensors sharing their
    memory when torch is installed (so in-place writes reach the caller's arrays), and torch results come back as
    NumPy arrays when no argument was a torch tensor."""

    def __init__(self, fn, reason):
        self.__wrapped__ = fn
        self.reason = reason
        self.explanation = None
        self.__name__ = getattr(fn, "__name__", "unchanged")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)

    def __repr__(self):
        return f"<funcfuse fallback {self.__qualname__}: {self.reason}>"

    def __call__(self, *args, **kwargs):
        fn = self.__wrapped__
        has_numpy = any(isinstance(v, np.ndarray) for v in list(args) + list(kwargs.values()))
        has_torch = any(_is_torch_tensor(v) for v in list(args) + list(kwargs.values()))
        if not has_numpy:
            return fn(*args, **kwargs)
        try:
            import torch  # noqa: F401  (the function is PyTorch code: it needs torch to run as written)
        except ImportError:
            return fn(*args, **kwargs)
        out = fn(*[_to_torch(v) for v in args], **{k: _to_torch(v) for k, v in kwargs.items()})
        return out if has_torch else _to_numpy(out)


def _to_numpy(v):
    if _is_torch_tensor(v):
        return v.detach().numpy()
    if isinstance(v, tuple):
        return tuple(_to_numpy(x) for x in v)
    if isinstance(v, list):
        return [_to_numpy(x) for x in v]
    return v


def _fallback(fn, reason, strict, stacklevel):
    if strict:
        raise Unsupported(reason) from None
    name = getattr(fn, "__qualname__", repr(fn))
    warnings.warn(f"funcfuse: running {name} unoptimized: {reason}", FallbackWarning, stacklevel=stacklevel + 1)
    return _Unchanged(fn, reason)


def optimize(fn, *example_inputs, rules=None, backend="c", strict=False):
    """Plans ``fn`` for its example inputs and returns a callable that runs the optimized plan.

    Tensor parameters take dtype and shape from the examples (NumPy arrays, or torch CPU tensors); int, float and
    bool arguments become scalar parameters with those values; parameters not given take their defaults. ``rules``:
    a rules file or folder (or a list of them) used beside the shipped rules, checked by the rule checker first.
    ``backend``: ``"c"`` (default), ``"cuda"`` or ``"cuda-emu"``. When funcfuse cannot optimize ``fn`` the result runs
    ``fn`` unchanged, with a ``FallbackWarning`` saying why; ``strict=True`` raises ``Unsupported`` instead.
    """
    try:
        args = _bind(fn, example_inputs, {})
        _check_no_aliasing(args)
        return Optimized(fn, _compile(fn, args, rules, backend), args)
    except Unsupported as e:
        if strict:
            raise
        return _fallback(fn, str(e), strict, 2)


def explain(fn, *example_inputs, rules=None):
    """What ``funcfuse explain`` prints for ``fn`` planned for these example inputs, as an ``Explanation`` (a string:
    term sizes, rules fired, extraction's candidates and the plan against the baselines; ``.data``: the same as a
    dict). Raises ``Unsupported`` when funcfuse cannot optimize ``fn``."""
    args = _bind(fn, example_inputs, {})
    return Explanation.of(_compile(fn, args, rules, None)[0])


def jit(fn=None, *, rules=None, backend="c", strict=False):
    """Decorator: plans the function on its first call, for that call's dtypes, shapes and scalar values, and again
    whenever they change (one plan per signature, cached; at most ``MAX_PLANS``). A signature funcfuse cannot
    optimize runs the function unchanged, with a ``FallbackWarning`` (``strict=True``: raises ``Unsupported``).

        @funcfuse.jit
        def step(x, h):
            ...

    ``step.plans`` maps each signature seen to its ``Optimized`` plan (or the fallback that ran).
    """
    if fn is None:
        return lambda f: jit(f, rules=rules, backend=backend, strict=strict)
    plans = {}

    def wrapper(*args, **kwargs):
        try:
            bound = _bind(fn, args, kwargs)
        except Unsupported as e:
            key = ("unsupported", str(e))
            if key not in plans:
                plans[key] = _fallback(fn, str(e), strict, 2)
            return plans[key](*args, **kwargs)
        key = tuple(a.spec() for a in bound)
        entry = plans.get(key)
        if isinstance(entry, Optimized) and entry.changed_global():
            entry = None  # a constant it read changed: plan again
        if entry is None:
            if len(plans) >= MAX_PLANS and key not in plans:
                entry = _fallback(fn, f"more than {MAX_PLANS} signatures planned (funcfuse.MAX_PLANS)", strict, 2)
            else:
                try:
                    _check_no_aliasing(bound)
                    entry = Optimized(fn, _compile(fn, bound, rules, backend), bound)
                except Unsupported as e:
                    entry = _fallback(fn, str(e), strict, 2)
            plans[key] = entry
        if isinstance(entry, Optimized):
            try:
                _check_no_aliasing(bound)
            except Unsupported as e:
                return _fallback(fn, str(e), strict, 2)(*args, **kwargs)
            return entry._call(bound)
        return entry(*args, **kwargs)

    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        setattr(wrapper, attr, getattr(fn, attr, None))
    wrapper.__wrapped__ = fn
    wrapper.plans = plans
    return wrapper
