#!/usr/bin/env python3
"""Runs every program of a folder of program files on every engine against its PyTorch goldens and prints a table.

Usage: real_code_check.py [FOLDER] [--goldens DIR] [--binary PATH] [--engines LIST] [--isolate] [--markdown FILE]
                          [FILTER...]

For each top-level function (not starting with `_`) of each `*.py` file under FOLDER (files under the goldens folder
are skipped), and each engine (reference, functional, optimized), it runs
`funcfuse run FILE.py::FUNC --engine E --seed SEED --output TMP`, with SEED from the golden's meta.json, and sorts the
result into one of:

  ok       exit status 0 and every output file equal to PyTorch's within the tolerance of src/tensor/close.rs
  WRONG    exit status 0 but outputs that differ from PyTorch's (a silently wrong answer: the worst kind of result)
  refused  exit status 1 with a message (its first line is shown)
  CRASH    a signal, a timeout or any other exit status (never acceptable)
  no-golden  PyTorch's outputs are missing (run scripts/make_goldens.py --corpus FOLDER --out GOLDENS)

The goldens folder defaults to FOLDER/goldens (tests/real_pending) or, for a folder under corpus/, to
corpus/goldens/<folder below corpus>. Functions are found with Python's own parser, so a file funcfuse cannot parse
still lists its functions. The totals count, per engine, programs accepted (exit 0) and correct, and the silently
wrong results over all engines. The exit status is 1 when any result is WRONG or CRASH, else 0. Needs numpy.
"""
import argparse
import ast
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ENGINES = ("reference", "functional", "optimized")
TOL = {np.dtype(np.float64): (1e-9, 1e-12), np.dtype(np.float32): (1e-5, 1e-6), np.dtype(np.float16): (1e-5, 1e-6)}


def functions(path):
    """(name, original) for each program of a file: the comment lines right above its def name the original."""
    text = path.read_text()
    lines = text.splitlines()
    out = []
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            comment = []
            i = first - 1
            while i >= 0 and lines[i].lstrip().startswith("#"):
                comment.insert(0, lines[i].lstrip()[1:].strip())
                i -= 1
            out.append((node.name, " ".join(comment)))
    return out


def isolated_source(path, keep):
    """The file's text with every other program blanked out (lines kept, so locations stay the same); programs that
    `keep` calls by name stay."""
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text)
    body = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    wanted = {keep}
    todo = [keep]
    while todo:
        node = body[todo.pop()]
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in body and sub.id not in wanted:
                wanted.add(sub.id)
                todo.append(sub.id)
    dropped = set()
    for name, node in body.items():
        if name.startswith("_") or name in wanted:
            continue
        dropped.add(name)
        first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
        for i in range(first, node.end_lineno):
            lines[i] = ""
    # Imports that only the blanked programs use go too (`import numpy as np` for one program of the file).
    used = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.FunctionDef) and node.name in dropped:
            continue
        used.update(sub.id for sub in ast.walk(node) if isinstance(sub, ast.Name))
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound = {(a.asname or a.name).split(".")[0] for a in node.names}
            if not bound & used:
                for i in range(node.lineno - 1, node.end_lineno):
                    lines[i] = ""
    return "\n".join(lines) + "\n"


def npy_files(folder):
    return {p.name: p for p in sorted(Path(folder).glob("*.npy"))}


def rounding_scale(g, w):
    """The median magnitude among the finite elements where g and w differ, the smaller of the two at each (0 where
    none differ; the upper median): the relative tolerance applies to the larger of an element and this
    (src/tensor/close.rs)."""
    differ = (g != w) & np.isfinite(g) & np.isfinite(w)
    if not differ.any():
        return 0.0
    m = np.sort(np.minimum(np.abs(g[differ]), np.abs(w[differ])))
    return float(m[len(m) // 2])


def compare(name, got, want):
    """None when equal within tolerance, else a one-line reason (as src/tensor/close.rs words it)."""
    if got.dtype != want.dtype:
        return f"{name}: dtype {got.dtype} but expected {want.dtype}"
    if got.shape != want.shape:
        return f"{name}: shape {list(got.shape)} but expected {list(want.shape)}"
    rtol, atol = TOL.get(got.dtype, (0.0, 0.0))
    g = got.astype(np.float64).ravel()
    w = want.astype(np.float64).ravel()
    nan = np.isnan(g) | np.isnan(w)
    inf = np.isinf(g) | np.isinf(w)
    with np.errstate(invalid="ignore"):
        close = np.abs(g - w) <= atol + rtol * np.maximum(np.abs(w), rounding_scale(g, w))
    ok = np.where(nan, np.isnan(g) & np.isnan(w), np.where(inf, g == w, close))
    if ok.all():
        return None
    bad = np.flatnonzero(~ok)
    i = int(bad[0])
    return f"{name}: {len(bad)} of {g.size} elements differ (first at flat index {i}: got {g[i]}, expected {w[i]})"


def run_one(binary, program, engine, seed, golden_dir, timeout, isolate):
    with tempfile.TemporaryDirectory(prefix="real_check_") as tmp:
        out_dir = Path(tmp) / "out"
        target = program
        file, func = program.rsplit("::", 1)
        if isolate:
            copy = Path(tmp) / "src" / Path(file).name
            copy.parent.mkdir()
            copy.write_text(isolated_source(Path(file), func))
            target = f"{copy}::{func}"
        cmd = [binary, "run", target, "--engine", engine, "--seed", str(seed), "--output", str(out_dir)]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "CRASH", f"timed out after {timeout} s"
        # Warnings (what Python would not run as written: an isolated copy may lose `import torch`) are not the error.
        errors = "\n".join(l for l in p.stderr.splitlines() if ": warning: " not in l).strip()
        if p.returncode == 1:
            msg = (errors or p.stdout.strip() or "(no message)").splitlines()[0]
            if isolate:
                msg = msg.replace(str(copy), file)
            return "refused", msg
        if p.returncode != 0:
            return "CRASH", f"exit status {p.returncode}: {(errors or '(no message)').splitlines()[0]}"
        got, want = npy_files(out_dir), npy_files(golden_dir)
        if sorted(got) != sorted(want):
            return "WRONG", f"output files {sorted(got)} but PyTorch wrote {sorted(want)}"
        for name in sorted(want):
            why = compare(name, np.load(got[name]), np.load(want[name]))
            if why:
                return "WRONG", why
        return "ok", ""


def default_goldens(folder):
    parts = folder.resolve().parts
    if "corpus" in parts:
        k = len(parts) - 1 - parts[::-1].index("corpus")
        return Path(*parts[: k + 1]) / "goldens" / Path(*parts[k + 1 :])
    return folder / "goldens"


def cell(status, msg):
    if status == "ok":
        return "ok"
    text = msg.replace("|", "\\|")
    return f"{status}: {text}" if text else status


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", default="tests/real_pending")
    ap.add_argument("filter", nargs="*", help="only programs whose FILE::FUNC contains one of these")
    ap.add_argument("--goldens", help="the goldens folder (see above for the default)")
    ap.add_argument("--binary", default="target/release/funcfuse")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--timeout", type=int, default=120, help="seconds per run")
    ap.add_argument("--markdown", help="also write the table as Markdown to this file")
    ap.add_argument(
        "--isolate",
        action="store_true",
        help="run each program from a copy of its file with the other programs (and imports only they use) blanked out "
        "(locations unchanged), so that a construct refused while parsing another program of the file does not hide "
        "this one's result",
    )
    a = ap.parse_intermixed_args()
    folder = Path(a.folder)
    goldens = Path(a.goldens) if a.goldens else default_goldens(folder)
    engines = [e for e in a.engines.split(",") if e]
    for e in engines:
        if e not in ENGINES:
            ap.error(f"unknown engine {e!r} (expected one of {', '.join(ENGINES)})")
    if not Path(a.binary).is_file():
        ap.error(f"no funcfuse binary at {a.binary} (cargo build --release, or give --binary)")
    files = sorted(p for p in folder.rglob("*.py") if goldens.resolve() not in p.resolve().parents)
    rows = []
    for path in files:
        rel = path.relative_to(folder).with_suffix("")
        for name, original in functions(path):
            program = f"{path.as_posix()}::{name}"
            if a.filter and not any(f in program for f in a.filter):
                continue
            gdir = goldens / rel / name
            results = {}
            if not (gdir / "meta.json").is_file():
                results = {e: ("no-golden", str(gdir)) for e in engines}
            else:
                seed = json.loads((gdir / "meta.json").read_text())["seed"]
                for e in engines:
                    results[e] = run_one(a.binary, program, e, seed, gdir, a.timeout, a.isolate)
            rows.append((program, original, results))
            line = "  ".join(f"{e}={results[e][0]}" for e in engines)
            print(f"{program}: {line}", file=sys.stderr)

    header = "| program | original | " + " | ".join(engines) + " |"
    table = [header, "|" + " --- |" * (2 + len(engines))]
    for program, original, results in rows:
        cells = " | ".join(cell(*results[e]) for e in engines)
        table.append(f"| `{program}` | {original} | {cells} |")
    n = len(rows)
    totals = []
    for e in engines:
        accepted = sum(1 for _, _, r in rows if r[e][0] in ("ok", "WRONG"))
        correct = sum(1 for _, _, r in rows if r[e][0] == "ok")
        totals.append(f"{e}: {accepted}/{n} accepted, {correct}/{n} correct")
    wrong = sum(1 for _, _, r in rows for e in engines if r[e][0] == "WRONG")
    crash = sum(1 for _, _, r in rows for e in engines if r[e][0] == "CRASH")
    all_ok = sum(1 for _, _, r in rows if all(r[e][0] == "ok" for e in engines))
    totals.append(f"correct on every engine: {all_ok}/{n}")
    totals.append(f"silently wrong: {wrong}; crashes or timeouts: {crash}")
    text = "\n".join(table) + "\n\n" + "\n".join(f"- {t}" for t in totals) + "\n"
    print(text)
    if a.markdown:
        Path(a.markdown).write_text(text)
    sys.exit(1 if wrong or crash else 0)


if __name__ == "__main__":
    main()
