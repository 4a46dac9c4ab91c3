"""Tests of the funcfuse Python package: NumPy always, PyTorch where it is importable.

Run with `python -m unittest discover -s python/tests -v` once the package is installed (`pip install ./python`);
`cargo test --test python_api` does that for CI. With FUNCFUSE_BIN (the CLI binary) set, `explain` is compared with
the CLI's output.
"""

from __future__ import annotations  # `torch.Tensor` annotations below are never evaluated (torch may be missing)

import inspect
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import unittest
import warnings

import numpy as np

import funcfuse

try:
    import torch
except ImportError:  # the torch tests are skipped
    torch = None

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.abspath(__file__)


def shift(x, y):
    y[1:] += x[:-1] * 2.0
    return torch.relu(y).sum(0)


def shift_numpy(x, y):
    y[1:] += x[:-1] * 2.0
    return np.maximum(y, 0).sum(0)


def rows(a, b, n: int = 3, scale=0.5):
    for i in range(n):
        b[i] += 1.0
        a[i].copy_(b[i + 1] * scale)
    return a.sum(), b


def counts(x, mask, k):
    y = torch.where(mask, x + k, x * 2)
    return y, (y > 3).sum()


def flip_mask(mask, x):
    mask[0] = x[0] > 1.0
    return x.sum()


def annotated(x: torch.Tensor, k: float = 2.0) -> torch.Tensor:
    return x * k


def only_writes(x):
    x.mul_(3)


def count_or_total(x):
    if x.sum() > 100.0:
        return (x > 0.5).sum()
    return x.sum() * 2.0


def uses_try(x):
    try:
        y = x * 2.0
    except ValueError as e:
        y = x
    return y


def gather_item(x, idx):
    return x[idx[0].item()] * 2.0


SCALE = 3.0
LIMIT = 2


def _clip_row(t, hi):
    t.clamp_(0.0, hi)
    return t


def uses_helper_and_constants(x):
    for i in range(LIMIT):
        _clip_row(x[i], SCALE)
    return x * SCALE


def helper_with_error(t):
    return t.frobnicate_(1)


def locate_call(src_line_marker):
    """(line, col) of the first occurrence of a marker in this file, 1-based."""
    with open(HERE) as f:
        for i, line in enumerate(f, 1):
            j = line.find(src_line_marker)
            if j >= 0 and "locate_call" not in line:
                return i, j + len(src_line_marker) - len(src_line_marker.lstrip()) + 1
    raise AssertionError(src_line_marker)


class NumpyTests(unittest.TestCase):
    def setUp(self):
        warnings.simplefilter("error", funcfuse.FallbackWarning)  # an unexpected fallback fails the test

    def test_readme_example_runs_as_written(self):
        with open(os.path.join(ROOT, "README.md")) as f:
            readme = f.read()
        blocks = re.findall(r"```python\n(import numpy as np, funcfuse\n.*?)```", readme, re.S)
        self.assertEqual(len(blocks), 1, "README.md has one Python example that starts `import numpy as np, funcfuse`")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "example.py")
            with open(path, "w") as f:
                f.write(blocks[0])
            r = subprocess.run([sys.executable, "-W", "error::UserWarning", path], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        # The example states its output in its last comment.
        expected = blocks[0].rstrip().splitlines()[-1].split("# prints ")[1]
        self.assertEqual(r.stdout.strip(), expected)

    def test_matches_numpy_and_writes_back(self):
        g = funcfuse.optimize(shift, np.ones((4, 3), np.float32), np.zeros((4, 3), np.float32))
        self.assertIsInstance(g, funcfuse.Optimized)
        rng = np.random.default_rng(0)
        a = rng.standard_normal((4, 3)).astype(np.float32)
        b = rng.standard_normal((4, 3)).astype(np.float32)
        a2, b2 = a.copy(), b.copy()
        out = g(a, b)
        want = shift_numpy(a2, b2)
        np.testing.assert_allclose(out, want, rtol=1e-6)
        np.testing.assert_array_equal(b, b2)  # written in place, as PyTorch would
        np.testing.assert_array_equal(a, a2)  # not written
        self.assertEqual(out.dtype, np.float32)
        self.assertEqual(out.shape, (3,))

    def test_non_contiguous_and_big_endian_arguments(self):
        g = funcfuse.optimize(shift, np.ones((4, 3), np.float32), np.zeros((4, 3), np.float32))
        base = np.arange(24, dtype=np.float32).reshape(4, 6)
        y = base[:, ::2]  # a strided view: the write must land in `base`
        x = np.arange(12, dtype=">f4").reshape(4, 3)  # big-endian
        want_y = y.copy()
        want = shift_numpy(x.astype(np.float32), want_y)
        out = g(x, y)
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(base[:, ::2], want_y)
        np.testing.assert_array_equal(base[:, 1::2], np.arange(24, dtype=np.float32).reshape(4, 6)[:, 1::2])

    def test_arrays_read_in_place_and_written_back_in_every_layout(self):
        # A read-only array the function only reads is read in place; Fortran order is copied in row-major order.
        g = funcfuse.optimize(shift, np.ones((4, 3), np.float32), np.zeros((4, 3), np.float32))
        x = np.arange(12, dtype=np.float32).reshape(4, 3)
        x.setflags(write=False)
        y = np.asfortranarray(np.ones((4, 3), np.float32))
        want_y = y.copy()
        want = shift_numpy(x, want_y)
        np.testing.assert_array_equal(g(x, y), want)
        np.testing.assert_array_equal(y, want_y)
        np.testing.assert_array_equal(x, np.arange(12, dtype=np.float32).reshape(4, 3))
        # A big-endian parameter the function writes gets its new values in its own byte order.
        yb = np.ones((4, 3), dtype=">f4")
        g(np.array(x), yb)
        np.testing.assert_array_equal(yb, want_y)
        self.assertEqual(yb.dtype, np.dtype(">f4"))
        # A bool parameter written in place, as a strided view.
        h = funcfuse.optimize(flip_mask, np.zeros((2, 3), np.bool_), np.zeros((2, 3), np.float32))
        base = np.zeros((2, 6), np.bool_)
        xs = np.array([[0.0, 2.0, 3.0], [9.0, 9.0, 9.0]], np.float32)
        self.assertEqual(float(h(base[:, ::2], xs)), 32.0)
        np.testing.assert_array_equal(base, [[False, False, True, False, True, False], [False] * 6])

    def test_zero_d_and_misaligned_arrays(self):
        # A 0-d array (the buffer protocol gives it no shape) read and written in place.
        g = funcfuse.optimize(only_writes, np.array(2.0))
        x = np.array(2.0)
        self.assertIsNone(g(x))
        self.assertEqual(float(x), 6.0)
        # Misaligned arrays (a float32 view at an odd byte offset): the input is copied, the written parameter
        # gets its new values all the same.
        h = funcfuse.optimize(shift, np.ones((4, 3), np.float32), np.zeros((4, 3), np.float32))
        xa = np.frombuffer(bytearray(49), np.float32, offset=1, count=12).reshape(4, 3)
        ya = np.frombuffer(bytearray(49), np.float32, offset=1, count=12).reshape(4, 3)
        self.assertFalse(xa.flags.aligned or ya.flags.aligned)
        xa[:] = np.arange(12, dtype=np.float32).reshape(4, 3)
        want_y = ya.copy()
        want = shift_numpy(xa.copy(), want_y)
        np.testing.assert_array_equal(h(xa, ya), want)
        np.testing.assert_array_equal(ya, want_y)

    def test_scalars_defaults_and_tuple_returns(self):
        a, b = np.zeros((5, 4), np.float32), np.arange(20, dtype=np.float32).reshape(5, 4)
        g = funcfuse.optimize(rows, a, b, 2)  # n = 2, scale defaults to 0.5
        a1, b1 = a.copy(), b.copy()
        total, b_out = g(a1, b1, 2)
        a2, b2 = a.copy(), b.copy()
        for i in range(2):
            b2[i] += 1.0
            a2[i] = b2[i + 1] * 0.5
        np.testing.assert_array_equal(a1, a2)
        np.testing.assert_array_equal(b1, b2)
        np.testing.assert_array_equal(b_out, b2)
        self.assertEqual(total.shape, ())
        self.assertAlmostEqual(float(total), float(a2.sum()), places=4)
        self.assertIn("n: int 2", g.signature)
        self.assertIn("scale: float 0.5", g.signature)

    def test_int_and_bool_tensors(self):
        x = np.arange(6, dtype=np.int64).reshape(2, 3)
        mask = np.array([[True, False, True], [False, True, False]])
        g = funcfuse.optimize(counts, x, mask, 1)
        y, n = g(x, mask, 1)
        want = np.where(mask, x + 1, x * 2)
        np.testing.assert_array_equal(y, want)
        self.assertEqual(y.dtype, np.int64)
        self.assertEqual(int(n), int((want > 3).sum()))

    def test_torch_tensor_annotations_are_accepted(self):
        x = np.arange(3, dtype=np.float64)
        g = funcfuse.optimize(annotated, x)
        np.testing.assert_array_equal(g(x), x * 2.0)
        self.assertEqual(g.signature, "x: f64[3], k: float 2.0")

    def test_specialized_if_falls_back_to_the_reference(self):
        # The arms return different dtypes: the plan follows the arm the example takes, and a call that takes the
        # other runs on the reference interpreter, with the same results.
        x = np.ones(4, np.float32)
        g = funcfuse.optimize(count_or_total, x)
        self.assertEqual(float(g(x)), 8.0)
        big = np.array([60.0, 50.0, 0.25, 1.0], np.float32)
        n = g(big)
        self.assertEqual((n.dtype, int(n)), (np.int64, 3))
        self.assertEqual(float(g(x)), 8.0)

    def test_function_without_return_gives_none(self):
        x = np.arange(4, dtype=np.float64)
        g = funcfuse.optimize(only_writes, x.copy())
        self.assertIsNone(g(x))
        np.testing.assert_array_equal(x, np.arange(4) * 3.0)

    def test_signature_checked_on_every_call(self):
        g = funcfuse.optimize(shift, np.ones((4, 3), np.float32), np.zeros((4, 3), np.float32))
        with self.assertRaisesRegex(TypeError, r"argument `x` is f32\[5, 3\], but the plan was made for f32\[4, 3\]"):
            g(np.ones((5, 3), np.float32), np.zeros((4, 3), np.float32))
        with self.assertRaisesRegex(TypeError, r"argument `y` is f64\[4, 3\]"):
            g(np.ones((4, 3), np.float32), np.zeros((4, 3), np.float64))
        h = funcfuse.optimize(rows, np.zeros((5, 4), np.float32), np.zeros((5, 4), np.float32), 2)
        with self.assertRaisesRegex(TypeError, r"argument `n` is int 3, but the plan was made for int 2"):
            h(np.zeros((5, 4), np.float32), np.zeros((5, 4), np.float32), 3)
        with self.assertRaises(TypeError):
            g(np.ones((4, 3), np.float32))  # a missing argument

    def test_read_only_destination_is_refused_before_any_write(self):
        g = funcfuse.optimize(shift, np.ones((4, 3), np.float32), np.zeros((4, 3), np.float32))
        y = np.zeros((4, 3), np.float32)
        y.setflags(write=False)
        with self.assertRaisesRegex(ValueError, "read-only"):
            g(np.ones((4, 3), np.float32), y)

    def test_fallback_warns_with_the_located_message(self):
        x = np.arange(3, dtype=np.float32)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            g = funcfuse.optimize(uses_try, x)
        self.assertEqual(len(w), 1)
        self.assertIs(w[0].category, funcfuse.FallbackWarning)
        # The refusal points at the handler's exception (only `except NotImplementedError` is supported).
        line, col = locate_call("    except ValueError as e:")
        self.assertIn(f"{HERE}:{line}:{col}: ", str(w[0].message))
        self.assertEqual(w[0].filename, HERE)  # the warning points at the caller of optimize
        self.assertNotIsInstance(g, funcfuse.Optimized)
        np.testing.assert_array_equal(np.asarray(g(x)), x * 2.0)

    def test_strict_raises_unsupported(self):
        self.assertTrue(issubclass(funcfuse.Unsupported, Exception))
        # The refusal points at the handler's exception (only `except NotImplementedError` is supported).
        line, col = locate_call("    except ValueError as e:")
        with self.assertRaisesRegex(funcfuse.Unsupported, re.escape(f"{HERE}:{line}:{col}: ")):
            funcfuse.optimize(uses_try, np.zeros(3, np.float32), strict=True)
        with self.assertRaisesRegex(funcfuse.Unsupported, "argument `x` is a list"):
            funcfuse.optimize(shift, [1.0, 2.0], np.zeros(3, np.float32), strict=True)
        with self.assertRaisesRegex(funcfuse.Unsupported, "dtype float16"):
            funcfuse.optimize(shift, np.zeros(3, np.float16), np.zeros(3, np.float16), strict=True)
        with self.assertRaisesRegex(funcfuse.Unsupported, "lambdas are not supported"):
            funcfuse.optimize(lambda x: x * 2, np.zeros(3, np.float32), strict=True)

    def test_located_error_in_a_nested_function_gives_the_files_line_and_column(self):
        def inner(x):
            y = x + 1.0
            return y.frobnicate_(2)

        line, col = locate_call("y.frobnicate_(2)")
        with self.assertRaises(funcfuse.Unsupported) as cm:
            funcfuse.optimize(inner, np.zeros(3, np.float32), strict=True)
        self.assertTrue(str(cm.exception).startswith(f"{HERE}:{line}:{col}: "), str(cm.exception))

    def test_module_helpers_and_constants_are_visible_and_guarded(self):
        global SCALE
        x = np.arange(-3, 9, dtype=np.float32).reshape(3, 4)
        g = funcfuse.optimize(uses_helper_and_constants, x.copy())
        want = x.copy()
        want[:2] = np.clip(want[:2], 0.0, 3.0)
        x1 = x.copy()
        np.testing.assert_array_equal(g(x1), want * 3.0)
        np.testing.assert_array_equal(x1, want)
        j = funcfuse.jit(uses_helper_and_constants)
        np.testing.assert_array_equal(j(x.copy()), want * 3.0)
        try:
            SCALE = 4.0
            with self.assertRaisesRegex(TypeError, "global `SCALE` was 3.0 when uses_helper_and_constants was planned"):
                g(x.copy())
            want4 = x.copy()
            want4[:2] = np.clip(want4[:2], 0.0, 4.0)
            np.testing.assert_array_equal(j(x.copy()), want4 * 4.0)  # jit plans again
            self.assertEqual(len(j.plans), 1)
        finally:
            SCALE = 3.0

    def test_error_in_a_helper_is_located_at_the_helpers_line_and_column(self):
        def outer(x):
            return helper_with_error(x) + 1.0

        line, col = locate_call("t.frobnicate_(1)")
        with self.assertRaises(funcfuse.Unsupported) as cm:
            funcfuse.optimize(outer, np.zeros(3, np.float32), strict=True)
        self.assertTrue(str(cm.exception).startswith(f"{HERE}:{line}:{col}: "), str(cm.exception))

    def test_aliased_arguments_fall_back(self):
        x = np.zeros((4, 3), np.float32)
        with self.assertRaisesRegex(funcfuse.Unsupported, "share memory"):
            funcfuse.optimize(shift, x, x, strict=True)
        g = funcfuse.optimize(shift, np.zeros((4, 3), np.float32), np.zeros((4, 3), np.float32))
        with self.assertRaisesRegex(funcfuse.Unsupported, "share memory"):
            g(x, x)

    def test_run_time_index_error_is_located(self):
        x = np.arange(12, dtype=np.float32).reshape(4, 3)
        g = funcfuse.optimize(gather_item, x, np.array([1], np.int64))
        np.testing.assert_array_equal(g(x, np.array([2], np.int64)), x[2] * 2.0)
        line, _ = locate_call("return x[idx[0].item()] * 2.0")
        with self.assertRaisesRegex(RuntimeError, rf"{re.escape(HERE)}:{line}:\d+: index 7 is out of bounds"):
            g(x, np.array([7], np.int64))

    def test_cuda_emulator_backend_agrees(self):
        x, y = np.ones((4, 3), np.float32), np.zeros((4, 3), np.float32)
        c = funcfuse.optimize(shift, x, y)
        e = funcfuse.optimize(shift, x, y, backend="cuda-emu")
        y1, y2 = y.copy(), y.copy()
        np.testing.assert_array_equal(c(x, y1), e(x, y2))
        np.testing.assert_array_equal(y1, y2)
        with self.assertRaisesRegex(ValueError, "backend"):
            funcfuse.optimize(shift, x, y, backend="tpu")

    def test_explain_is_the_clis_explanation(self):
        text = funcfuse.explain(rows, np.zeros((64, 512), np.float32), np.zeros((64, 512), np.float32), 10)
        self.assertIn("fired    1 x loops/vectorize", text)
        self.assertIn("ours vs eager:", text)
        self.assertTrue(text.startswith(f"{HERE}::rows\n"))
        self.assertEqual(text.data["rules_fired"]["loops/vectorize"], 1)
        self.assertEqual(text.data["program"], f"{HERE}::rows")
        ours, eager = text.data["plans"]["ours"], text.data["plans"]["eager"]
        self.assertLess(ours["kernels"], eager["kernels"])
        self.assertIn(f"{ours['predicted_s'] * 1e3:.4f} ms", text)  # the text's figures are the data's
        with self.assertRaises(funcfuse.Unsupported):
            funcfuse.explain(uses_try, np.zeros(3, np.float32))
        binary = os.environ.get("FUNCFUSE_BIN")
        if not binary:
            return
        with tempfile.TemporaryDirectory() as d:
            prog = os.path.join(d, "rows.py")
            src = textwrap.dedent(inspect.getsource(rows)).replace(
                "def rows(a, b, n: int = 3, scale=0.5):",
                "def rows(a: f32[64, 512], b: f32[64, 512], n: int = 10, scale: float = 0.5):",
            )
            with open(prog, "w") as f:
                f.write("from __future__ import annotations\nimport torch\n\n" + src)
            r = subprocess.run([binary, "explain", prog + "::rows"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines()[1:], text.splitlines()[1:])

    def test_rules_are_checked_before_use(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "mine.rules"), "w") as f:
                f.write("# exp(log(x)) = x (wrong for x <= 0)\nmine/exp-log: (exp (log ?x)) => ?x if float(?x)\n")
            with self.assertRaisesRegex(ValueError, "failed the rule checker"):
                funcfuse.optimize(shift, np.ones((4, 3), np.float32), np.zeros((4, 3), np.float32), rules=d)
            with self.assertRaisesRegex(ValueError, "no such rules file"):
                funcfuse.optimize(shift, np.ones(3, np.float32), np.ones(3, np.float32), rules=os.path.join(d, "x"))

    def test_jit_plans_per_signature(self):
        @funcfuse.jit
        def step(x, y, k: int = 1):
            y[1:] += x[:-1] * k
            return y.sum()

        self.assertEqual(step.__name__, "step")
        for shape in [(4, 3), (4, 3), (6, 2), (4, 3)]:
            x, y = np.ones(shape, np.float32), np.zeros(shape, np.float32)
            self.assertAlmostEqual(float(step(x, y)), (shape[0] - 1) * shape[1])
            self.assertEqual(float(y[1, 0]), 1.0)
        self.assertEqual(len(step.plans), 2)
        step(np.ones((4, 3), np.float32), np.zeros((4, 3), np.float32), k=2)
        self.assertEqual(len(step.plans), 3)  # a new scalar value is a new signature
        step(np.ones((4, 3), np.float64), np.zeros((4, 3), np.float64))
        self.assertEqual(len(step.plans), 4)
        self.assertTrue(all(isinstance(p, funcfuse.Optimized) for p in step.plans.values()))  # none fell back

    def test_jit_falls_back_per_signature(self):
        @funcfuse.jit(strict=False)
        def f(x):
            return x * 2.0

        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = f(np.zeros(3, np.float16))  # unsupported dtype: runs as written
        self.assertEqual(len(w), 1)
        self.assertIn("dtype float16", str(w[0].message))
        np.testing.assert_array_equal(np.asarray(out), np.zeros(3, np.float16))
        np.testing.assert_array_equal(f(np.ones(3, np.float32)), np.full(3, 2.0, np.float32))

        @funcfuse.jit(strict=True)
        def g(x):
            return x * 2.0

        with self.assertRaises(funcfuse.Unsupported):
            g(np.zeros(3, np.float16))


@unittest.skipIf(torch is None, "PyTorch is not importable")
class TorchTests(unittest.TestCase):
    def setUp(self):
        warnings.simplefilter("error", funcfuse.FallbackWarning)

    def test_torch_tensors_in_and_out_match_pytorch(self):
        gen = torch.Generator().manual_seed(0)
        x, y = torch.randn(4, 3, generator=gen), torch.randn(4, 3, generator=gen)
        g = funcfuse.optimize(shift, x, y)
        x1, y1, x2, y2 = x.clone(), y.clone(), x.clone(), y.clone()
        out = g(x1, y1)
        want = shift(x2, y2)
        self.assertIsInstance(out, torch.Tensor)
        torch.testing.assert_close(out, want, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(y1, y2, rtol=0, atol=0)
        torch.testing.assert_close(x1, x2, rtol=0, atol=0)

    def test_loop_program_matches_pytorch(self):
        a, b = torch.zeros(5, 4), torch.arange(20.0).reshape(5, 4)
        g = funcfuse.optimize(rows, a, b, 3, 0.25)
        a1, b1, a2, b2 = a.clone(), b.clone(), a.clone(), b.clone()
        t1, r1 = g(a1, b1, 3, 0.25)
        t2, r2 = rows(a2, b2, 3, 0.25)
        torch.testing.assert_close(t1, t2)
        torch.testing.assert_close(r1, r2)
        torch.testing.assert_close(a1, a2)
        torch.testing.assert_close(b1, b2)

    def test_strided_tensor_written_back(self):
        base = torch.zeros(4, 6)
        y = base[:, ::2]
        g = funcfuse.optimize(shift, torch.ones(4, 3), y)
        g(torch.ones(4, 3), y)
        self.assertEqual(base[1:, ::2].tolist(), [[2.0] * 3] * 3)
        self.assertEqual(base[:, 1::2].abs().sum().item(), 0.0)

    def test_requires_grad_and_fallback_run_in_pytorch(self):
        x = torch.ones(4, 3, requires_grad=True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            g = funcfuse.optimize(lambda x: x * 2, x)
        self.assertIn("requires grad", str(w[0].message))
        self.assertTrue(torch.equal(g(x), x * 2))
        with self.assertRaisesRegex(funcfuse.Unsupported, "requires grad"):
            funcfuse.optimize(shift, x, torch.zeros(4, 3), strict=True)
        with self.assertRaisesRegex(funcfuse.Unsupported, "dtype torch.bfloat16"):
            funcfuse.optimize(shift, torch.zeros(4, 3, dtype=torch.bfloat16), torch.zeros(4, 3), strict=True)

    def test_fallback_with_numpy_arguments_runs_the_torch_code(self):
        def f(x, y):
            try:
                pass
            except ValueError:
                pass
            y[1:] += x[:-1] * 2.0
            return torch.relu(y).sum(0)

        x, y = np.ones((4, 3), np.float32), np.zeros((4, 3), np.float32)
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            g = funcfuse.optimize(f, x, y)
        out = g(x, y)
        self.assertIsInstance(out, np.ndarray)
        np.testing.assert_array_equal(out, np.full(3, 6.0, np.float32))
        np.testing.assert_array_equal(y[1], np.full(3, 2.0, np.float32))  # written through torch.from_numpy


if __name__ == "__main__":
    unittest.main()
