//! Functionalization as a user meets it: terms of small programs (snapshots), loops that stay loops whatever their
//! length, terms that print and parse back, and constructs that are reported instead of mistranslated.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use funcfuse::frontend;
use funcfuse::functionalize::{functionalize, Functional};
use funcfuse::interp::ScalarArg;
use funcfuse::ir::{display_dag, term_stats, verify, Term};

fn corpus_program(rel: &str, func: &str, args: &[(&str, ScalarArg)]) -> Functional {
    let path = Path::new(common::CORPUS).join(rel);
    let module = frontend::load_module(path.to_str().unwrap()).unwrap();
    let scalars: BTreeMap<String, ScalarArg> = args.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    functionalize(&module, func, &scalars).unwrap_or_else(|d| panic!("{d}"))
}

fn source_program(src: &str, func: &str) -> Result<Functional, String> {
    let module = frontend::parse_module("prog.py", &format!("import torch\n\n{src}")).map_err(|d| d.to_string())?;
    functionalize(&module, func, &BTreeMap::new()).map_err(|d| d.to_string())
}

#[test]
fn a_loop_stays_one_loop_whatever_its_length() {
    let short = corpus_program("micro/loops.py", "shift_rows_long", &[("n", ScalarArg::Int(10))]);
    let long = corpus_program("micro/loops.py", "shift_rows_long", &[("n", ScalarArg::Int(10000))]);
    let (s, l) = (term_stats(&short.term), term_stats(&long.term));
    assert_eq!(s.loops, 1);
    assert_eq!(s, l, "the term grows with the trip count");
    // Only the trip count differs between the two terms.
    assert_eq!(
        display_dag(&short.term).replace("(loop 0 10 1", "(loop 0 N 1"),
        display_dag(&long.term).replace("(loop 0 10000 1", "(loop 0 N 1")
    );
    // A trip count the buffers cannot hold is caught at functionalization, as the reference would raise.
    let path = Path::new(common::CORPUS).join("micro/loops.py");
    let module = frontend::load_module(path.to_str().unwrap()).unwrap();
    let scalars: BTreeMap<String, ScalarArg> = [("n".to_string(), ScalarArg::Int(100))].into();
    let e = functionalize(&module, "shift_rows", &scalars).unwrap_err();
    assert!(e.to_string().contains("index 99 is out of bounds for dimension 0 with size 64"), "{e}");
}

#[test]
fn the_prefix_sum_stays_a_loop_and_independent_rows_do_too() {
    assert_eq!(term_stats(&corpus_program("micro/loops.py", "prefix_sum", &[]).term).loops, 1);
    assert_eq!(term_stats(&corpus_program("micro/loops.py", "shift_rows_long", &[]).term).loops, 1);
    // Nested time and layer loops of the LSTM stay two nested loops.
    assert_eq!(term_stats(&corpus_program("workloads/lstm.py", "lstm", &[]).term).loops, 2);
}

#[test]
fn terms_print_parse_back_and_verify() {
    for (rel, func) in [
        ("micro/loops.py", "shift_rows"),
        ("micro/control.py", "view_before_data_branch"),
        ("micro/control.py", "while_data_dependent"),
    ] {
        let f = corpus_program(rel, func, &[]);
        let text = f.term.to_string();
        let back: Term = text.parse().unwrap_or_else(|e| panic!("{rel}::{func} does not parse back: {e}"));
        assert_eq!(back.to_string(), text);
        verify(&back, &f.inputs).unwrap_or_else(|e| panic!("{rel}::{func}: {e}"));
    }
}

#[test]
fn an_unknown_operator_does_not_parse() {
    let bad: Result<Term, _> = "(frobnicate (input %a))".parse();
    assert!(bad.is_err());
    let typo: Result<Term, _> = "(acess (input %a) (view (list 2) (list 1) 0))".parse();
    assert!(typo.is_err());
}

#[test]
fn verify_rejects_ill_shaped_terms() {
    let inputs = vec![
        ("a".to_string(), funcfuse::tensor::DType::F32, vec![4]),
        ("b".to_string(), funcfuse::tensor::DType::F32, vec![3]),
    ];
    let t: Term = "(tuple (add (input %a) (input %b)))".parse().unwrap();
    let e = verify(&t, &inputs).unwrap_err();
    assert!(e.contains("must match"), "{e}");
    let t: Term = "(tuple (add (input %a) (cast i64 (input %a))))".parse().unwrap();
    assert!(verify(&t, &inputs).unwrap_err().contains("cast them first"));
}

#[test]
fn small_program_terms() {
    for (rel, func) in [
        ("micro/loops.py", "shift_rows"),
        ("micro/loops.py", "prefix_sum"),
        ("micro/views.py", "write_through_t"),
        ("micro/views.py", "mutate_inputs"),
        ("micro/control.py", "view_before_data_branch"),
        ("micro/control.py", "while_data_dependent"),
        ("micro/indexing.py", "mask_write"),
    ] {
        let f = corpus_program(rel, func, &[]);
        insta::assert_snapshot!(format!("{}__{func}", rel.replace(['/', '.'], "_")), display_dag(&f.term));
    }
}

#[test]
fn what_cannot_be_functionalized_is_reported_with_its_location() {
    let cases = [
        ("def f(x: f32[8, 8]) -> f32[8]:\n    v = torch.einsum(\"ii->i\", x)\n    return v\n", "prog.py:4:9: einsum(): subscript i is repeated within one operand"),
        (
            "def f(x: f32[3000, 4]) -> f32[3000, 4]:\n    rows = [x[0]]\n    for i in range(2000):\n        rows.append(x[i])\n    return x\n",
            "prog.py:5:5: this loop cannot stay a loop (a list or dict that changes inside the loop",
        ),
        ("def f(x: f32[8]) -> f32[8]:\n    for i in range(8):\n        if x[i] > 0:\n            return x\n    return -x\n", "prog.py:5:9: `return` under an `if` on a run-time value is supported outside loops only"),
        // Through an integer index it is written as PyTorch writes it; through a boolean mask it is still refused.
        ("def f(b: f32[5]) -> f32[5]:\n    b.expand(2, 5).index_put_((torch.tensor([True, False]),), torch.ones(5))\n    return b\n", "prog.py:4:5: `index_put_` into a tensor whose elements share memory (an `expand`ed view) is not supported"),
        // (Offsets merged from the arms, overlapping at one arm only, are checked when the program runs: tests/engines.rs.)
        ("def f(x: f32[8]) -> f32[1]:\n    return x[x > 0][:1]\n", "prog.py:4:12: indexing with a boolean mask gives a data-dependent shape"),
        // An in-place op on a selection rebinds its name: refused where another name, a view or a caller holds it.
        ("def f(x: f32[6, 3]) -> f32[6, 3]:\n    (r,) = torch.where(x[:, 0] > 0.0)\n    a = x[r] * 2\n    b = a\n    a.clamp_(min=0.5)\n    x[r] = b\n    return x\n", "prog.py:7:5: an in-place op on a selection of data-dependent length that another name"),
        ("def f(x: f32[6, 3]) -> f32[6, 3]:\n    (r,) = torch.where(x[:, 0] > 0.0)\n    a = x[r] * 2\n    b = a[:, 1:]\n    a += 1.0\n    x[r, 1:] = b\n    return x\n", "prog.py:7:5: an in-place op on a selection of data-dependent length that another name"),
        ("def f(x: f32[6, 3]) -> f32[6, 3]:\n    (r,) = torch.where(x[:, 0] > 0.0)\n    a = x[r, 0] * 2\n    b = a\n    a[a > 0.5] = 0.0\n    x[r, 0] = b\n    return x\n", "prog.py:7:5: an in-place op on a selection of data-dependent length that another name"),
        ("def f(x: f32[6, 3]) -> f32[()]:\n    a = x[x[:, 0] > 0.0]\n    a.mul_(2.0).add_(1.0)\n    return a.sum()\n", "prog.py:5:5: an in-place op on a selection of data-dependent length is supported as a statement of its own"),
        ("def f(x: f32[6, 3]) -> f32[()]:\n    a = x[x[:, 0] > 0.0] * 1.0\n    b = a + a.mul_(2.0)\n    return b.sum()\n", "prog.py:5:13: an in-place op on a selection of data-dependent length is supported as a statement of its own"),
        ("def f(x: f32[6, 3]) -> f32[()]:\n    a = x[x[:, 0] > 0.0]\n    l = [a]\n    l[0] += 1.0\n    return a.sum()\n", "prog.py:6:5: an in-place op on a selection of data-dependent length that another name"),
        // Writes at index lists PyTorch or the dense form cannot take: into an expanded tensor, non-tensor indices
        // or values of index_put_, a value overlapping the destination.
        ("def f(x: f32[6, 3]) -> f32[6, 3]:\n    (r,) = torch.where(x[:, 0] > 0.0)\n    z = torch.zeros(1, 3).expand(6, 3)\n    z[r] = 1.0\n    return z\n", "prog.py:6:5: a write at an index list of data-dependent length into a tensor whose elements share memory"),
        ("def f(y: f32[6, 6]) -> f32[6, 6]:\n    (r,) = torch.where(y[:, 0] > 0.0)\n    y.index_put_((None, r), torch.tensor(5.0))\n    return y\n", "prog.py:5:5: expected Tensor as element 0 in argument 0, but got NoneType"),
        ("def f(y: f32[6, 6]) -> f32[6, 6]:\n    (r,) = torch.where(y[:, 0] > 0.0)\n    y.index_put_((r,), 5.0)\n    return y\n", "prog.py:5:5: index_put_(): argument 'values' (position 2) must be Tensor, not float"),
        ("def f(y: f32[6, 3]) -> f32[6, 3]:\n    (r,) = torch.where(y[:, 0] > 0.0)\n    y[r] = y[0]\n    return y\n", "prog.py:5:5: unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory location"),
        ("def g(a):\n    a.mul_(2.0)\n\ndef f(x: f32[6, 3]) -> f32[6, 3]:\n    (r,) = torch.where(x[:, 0] > 0.0)\n    a = x[r] * 2\n    g(a)\n    x[r] = a\n    return x\n", "prog.py:4:5: an in-place op on a selection of data-dependent length that another name"),
        // Masked assignments of several rows: the value must have the selection's shape, and a selection assigned
        // through another mask must agree with it on the dims around the masks.
        ("def f(x: f32[8]) -> f32[8]:\n    y = x.clone()\n    y[x > 0] = x[:3].unsqueeze(1)\n    return y\n", "prog.py:5:5: assigning a tensor through a boolean mask is supported for a value of the selection's shape"),
        ("def f(z: f32[4, 6], y: f32[6]) -> f32[4, 6]:\n    z[:, z[0] > 0] = y[y > 0]\n    return z\n", "prog.py:4:5: assigning a boolean-mask selection through a different mask is supported where the dims"),
        // `any()` stops at the first true item: over a generator whose items call something, refused.
        ("def f(x: f32[3]) -> f32[3]:\n    if any(t.sum() > 0 for t in [x, x]):\n        return x\n    return -x\n", "prog.py:4:12: a generator expression in any() or all() whose items call what may have effects (a function of the program, a method of its values, a random draw)"),
        // ... and over items that draw random numbers (drawing more than Python would changes later draws).
        ("def f(x: f32[3]) -> f32[3]:\n    if any(torch.rand(1) > 0.5 for t in [x, x]):\n        return x\n    return -x\n", "prog.py:4:12: a generator expression in any() or all() whose items call what may have effects"),
        // A module-level tensor was `None` to the functionalizer: `W is None` silently took the other path.
        ("W = torch.ones(3)\n\ndef f(x: f32[3]) -> f32[3]:\n    if W is None:\n        return x\n    return x * W\n", "prog.py:6:8: cannot functionalize: `W` is a module-level tensor"),
    ];
    let mut bad = Vec::new();
    for (src, want) in cases {
        match source_program(src, "f") {
            Err(m) => assert!(m.starts_with(want), "got {m:?}, want {want:?}"),
            Ok(_) => bad.push(src),
        }
    }
    assert!(bad.is_empty(), "functionalized what it should have reported: {bad:#?}");
}

/// What the two arms of an `if` on a run-time value leave differently and no term can join: views of different
/// shapes (the shape is data's; views of different strides merge, issue #12, and a name never read again is no
/// error: fuzz seeds 72836, 74333), a tensor made in an arm and also viewed by another name (copying it into the
/// merge would lose the alias), a list grown in one arm (entries replaced in either arm merge:
/// corpus/micro/python_reach4.py). The program follows the arm the sample inputs take, under a `fallback` guard.
#[test]
fn ifs_whose_arms_cannot_be_joined_follow_one_arm_under_a_guard() {
    for src in [
        "def f(x: f32[4, 4]) -> f32[4, 4]:\n    v = x[0]\n    if x.sum() > 0:\n        v = x[:2, 1]\n    v += 1.0\n    return x\n",
        "def f(a: f32[3], s: f32[2]) -> f32[3]:\n    if s[0] > 0.0:\n        t = a * 2.0\n        u = t[0:2]\n    else:\n        t = a + 1.0\n        u = t[1:3]\n    u += 10.0\n    return t\n",
        "def f(a: f32[3], s: f32[2]) -> f32[3]:\n    l = [a * 1.0]\n    if s[0] > 0.0:\n        l.append(a * 5.0)\n    return l[0]\n",
    ] {
        let f = source_program(src, "f").unwrap_or_else(|m| panic!("{src}: {m}"));
        assert_eq!(f.term.to_string().matches("(fallback ").count(), 1, "{src}\n{}", f.term);
    }
}

#[test]
fn views_rebound_in_branches_merge_their_offsets() {
    let f = source_program(
        "def f(x: f32[6, 4]) -> f32[6, 4]:\n    v = x[0]\n    if x.sum() > 0:\n        v = x[3]\n    v += 1.0\n    return x\n",
        "f",
    )
    .unwrap();
    let s = term_stats(&f.term);
    assert_eq!(s.ifs, 1);
    let inputs = common::seeded_inputs(
        &frontend::parse_module("p.py", "import torch\n\ndef f(x: f32[6, 4]) -> f32[6, 4]:\n    return x\n").unwrap(),
        "f",
        3,
    );
    let module = frontend::parse_module("prog.py", "import torch\n\ndef f(x: f32[6, 4]) -> f32[6, 4]:\n    v = x[0]\n    if x.sum() > 0:\n        v = x[3]\n    v += 1.0\n    return x\n").unwrap();
    common::check_functional(&module, "f", &inputs).unwrap();
}

#[test]
fn a_long_chain_of_early_returns_is_refused_rather_than_copied_exponentially() {
    // Lifting a `return` copies what follows its `if` into both arms: 24 such `if`s in a row would copy 2^24 tails.
    let mut src = String::from("def f(a: f32[3], s: f32[24]) -> f32[3]:\n");
    for i in 0..24 {
        src += &format!(
            "    if s[{i}] > 0.0:\n        if s[{i}] > 0.9:\n            return a * {i}.0\n        a.add_(1.0)\n"
        );
    }
    src += "    return a\n";
    match source_program(&src, "f") {
        Err(m) => assert!(m.contains("supported outside loops only"), "{m}"),
        Ok(_) => panic!("a 24-deep chain of early returns was functionalized"),
    }
}
