//! PyTorch eager behaviours from `docs/pytorch-semantics.md`, each run through the reference interpreter.
//!
//! Every case is a program body run after `x = arange(12.).reshape(3, 4)`, `x3 = arange(24.).reshape(2, 3, 4)` and
//! `e = zeros(3).expand(2, 3)`; it returns one tensor (or number), compared as `dtype[shape] values`, or fails with a
//! message containing the expected text.

use std::collections::BTreeMap;

use funcfuse::frontend;
use funcfuse::interp::{self, ScalarArg};
use funcfuse::tensor::{Scalar, Tensor};

fn render(t: &Tensor) -> String {
    let vals: Vec<String> = t
        .scalars()
        .iter()
        .map(|s| match s {
            Scalar::B(b) => {
                if *b {
                    "T".into()
                } else {
                    "F".into()
                }
            }
            Scalar::I(i) => i.to_string(),
            Scalar::F(f) => format!("{}", *f as f32),
        })
        .collect();
    format!("{}{:?} {}", t.dtype().annotation(), t.shape, vals.join(","))
}

fn run(body: &str) -> Result<String, String> {
    let mut src = String::from("import torch\n\ndef f():\n    x = torch.arange(12.).reshape(3, 4).clone()\n    x3 = torch.arange(24.).reshape(2, 3, 4).clone()\n    e = torch.zeros(3).expand(2, 3)\n");
    for line in body.split(" ⏎ ") {
        src.push_str("    ");
        src.push_str(line);
        src.push('\n');
    }
    let module = frontend::parse_module("case.py", &src).map_err(|d| d.to_string())?;
    let out = interp::run_program(&module, "f", &BTreeMap::new(), &BTreeMap::<String, ScalarArg>::new())
        .map_err(|d| d.to_string())?;
    Ok(out.returns.iter().map(render).collect::<Vec<_>>().join(" | "))
}

fn check(cases: &[(&str, &str)]) {
    let mut failures = Vec::new();
    for (body, want) in cases {
        let got = run(body);
        let ok = match (&got, want.strip_prefix("ERR ")) {
            (Err(m), Some(w)) => m.contains(w),
            (Ok(v), None) => v == want,
            _ => false,
        };
        if !ok {
            failures.push(format!("  {body}\n    want: {want}\n    got:  {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[test]
fn views_and_copies() {
    check(&[
        ("return x[1]", "f32[4] 4,5,6,7"),
        ("return x[:, 1::2]", "f32[3, 2] 1,3,5,7,9,11"),
        ("return x[-2:]", "f32[2, 4] 4,5,6,7,8,9,10,11"),
        ("return x[::-1]", "ERR step must be greater than zero"),
        ("return torch.tensor(x[5:10].shape)", "i64[2] 0,4"),
        ("return x[-10:1]", "f32[1, 4] 0,1,2,3"),
        ("return x[3]", "ERR index 3 is out of bounds for dimension 0 with size 3"),
        ("return torch.tensor(x[None].shape)", "i64[3] 1,3,4"),
        ("return x[..., 1]", "f32[3] 1,5,9"),
        ("return x[torch.tensor(1)]", "f32[4] 4,5,6,7"),
        ("return x.t().view(-1)", "ERR view size is not compatible with input tensor's size and stride"),
        ("return x[:, :2].view(-1)", "ERR view size is not compatible"),
        ("return x.view(5, -1)", "ERR shape '[5, -1]' is invalid for input of size 12"),
        ("return x.view(-1, -1)", "ERR only one dimension can be inferred"),
        ("y = x.reshape(-1) ⏎ y += 1 ⏎ return x[0]", "f32[4] 1,2,3,4"),
        ("y = x.t().reshape(-1) ⏎ y += 1 ⏎ return x[0]", "f32[4] 0,1,2,3"),
        ("y = x.t().reshape(2, 2, 3) ⏎ y += 1 ⏎ return x[0]", "f32[4] 1,2,3,4"),
        ("z = torch.zeros(3, 1) ⏎ r = z.expand(3, 4).reshape(3, 2, 2) ⏎ z += 1 ⏎ return r[1]", "f32[2, 2] 1,1,1,1"),
        ("return x3.t()", "ERR t() expects a tensor with <= 2 dimensions, but self is 3D"),
        ("return x.unsqueeze(-1)[2]", "f32[4, 1] 8,9,10,11"),
        ("return x.expand(2, 3, 4)[1, 2]", "f32[4] 8,9,10,11"),
        ("return x.narrow(0, -1, 1)", "f32[1, 4] 8,9,10,11"),
        ("return x.select(1, -1)", "f32[3] 3,7,11"),
        ("a, b, c = x.unbind(0) ⏎ c += 1 ⏎ return x[2]", "f32[4] 9,10,11,12"),
        ("p, q = x.chunk(2, 1) ⏎ q.zero_() ⏎ return x[0]", "f32[4] 0,1,0,0"),
        ("for r in x: ⏎     r += 1 ⏎ return x[:, 0]", "f32[3] 1,5,9"),
        ("return x.diagonal()", "f32[3] 0,5,10"),
        ("return x.diagonal(1)", "f32[3] 1,6,11"),
        ("y = x.float() ⏎ y += 1 ⏎ return x[0]", "f32[4] 1,2,3,4"),
        ("y = x.contiguous() ⏎ y += 1 ⏎ return x[0]", "f32[4] 1,2,3,4"),
        ("y = x.t().contiguous() ⏎ y += 1 ⏎ return x[0]", "f32[4] 0,1,2,3"),
        ("a = x[0] ⏎ x[0] = torch.full((4,), 9.) ⏎ return a", "f32[4] 9,9,9,9"),
        ("return torch.tensor(x.t().flatten().shape)", "i64[1] 12"),
    ]);
}

#[test]
fn results_keep_the_layout_of_their_inputs() {
    check(&[
        ("return (x.t() + 1).view(-1)", "ERR view size is not compatible"),
        ("return x.t().clone().view(-1)", "ERR view size is not compatible"),
        ("return torch.zeros_like(x.t()).view(-1)", "ERR view size is not compatible"),
        ("return x.t().exp().view(-1)", "ERR view size is not compatible"),
        ("return torch.tensor((x.t() + 1).view(2, 2, 3).shape)", "i64[3] 2,2,3"),
        ("return (torch.ones(4, 3) + x.t()).view(-1)[:3]", "f32[3] 1,5,9"),
        ("return (torch.zeros(4, 1).expand(4, 3) + x.t()).view(-1)", "ERR view size is not compatible"),
        ("return (x[:, ::2] + 1).view(-1)", "f32[6] 1,3,5,7,9,11"),
        ("return (x.expand(2, 3, 4) + 0).view(-1)[12:14]", "f32[2] 0,1"),
        ("return (x3.permute(2, 0, 1) * 2).view(-1)", "ERR view size is not compatible"),
        ("z = x.t() + 1 ⏎ y = z.reshape(-1) ⏎ y += 100 ⏎ return z[0]", "f32[3] 1,5,9"),
        ("z = x + 1 ⏎ y = z.reshape(-1) ⏎ y += 100 ⏎ return z[0]", "f32[4] 101,102,103,104"),
        ("return x.t().to(torch.float64).view(-1)", "ERR view size is not compatible"),
        ("return torch.zeros(3).expand(2, 3).clone().view(-1)", "f32[6] 0,0,0,0,0,0"),
    ]);
}

#[test]
fn setitem_and_augmented_assignment() {
    check(&[
        ("x[1] += 1 ⏎ return x[1]", "f32[4] 5,6,7,8"),
        ("x[:, ::2] += 100 ⏎ return x[0]", "f32[4] 100,1,102,3"),
        ("x[1:3][0] += 100 ⏎ return x[1]", "f32[4] 104,105,106,107"),
        ("x[x > 5] += 1 ⏎ return x", "f32[3, 4] 0,1,2,3,4,5,7,8,9,10,11,12"),
        ("v = torch.zeros(5) ⏎ v[torch.tensor([0, 0, 2])] += 1 ⏎ return v", "f32[5] 1,0,1,0,0"),
        ("v = torch.zeros(5) ⏎ v[[0, 0, 2]] += torch.tensor([1., 2., 3.]) ⏎ return v", "f32[5] 2,0,3,0,0"),
        ("v = torch.zeros(5) ⏎ v.index_put_((torch.tensor([0, 0, 2]),), torch.tensor(1.), accumulate=True) ⏎ return v", "f32[5] 2,0,1,0,0"),
        ("x[[0, 2]] *= -1 ⏎ return x[:, 0]", "f32[3] -0,4,-8"),
        ("y = x[[0, 2]] ⏎ y += 1 ⏎ return x[0]", "f32[4] 0,1,2,3"),
        ("x[[0, 2]][:, 0] = -1 ⏎ return x[0]", "f32[4] 0,1,2,3"),
        ("x[x > 5][0] = -1 ⏎ return x[2]", "f32[4] 8,9,10,11"),
        ("x[0][[0, 2]] = -1 ⏎ return x[0]", "f32[4] -1,1,-1,3"),
        ("x[:, 0][x[:, 0] > 3] = -1 ⏎ return x[:, 0]", "f32[3] 0,-1,-1"),
        ("a = x[0] ⏎ a += 1 ⏎ return x[0]", "f32[4] 1,2,3,4"),
        ("a = x[0] ⏎ a = a + 1 ⏎ return x[0]", "f32[4] 0,1,2,3"),
        ("lst = [x[0]] ⏎ lst[0] += 1 ⏎ return x[0]", "f32[4] 1,2,3,4"),
        ("outs = [] ⏎ h = torch.zeros(2) ⏎ outs.append(h) ⏎ h += 1 ⏎ return outs[0]", "f32[2] 1,1"),
        ("out = torch.zeros(2, 2) ⏎ h = torch.zeros(2) ⏎ out[0] = h ⏎ h += 1 ⏎ return out[0]", "f32[2] 0,0"),
        ("x[0], x[1] = x[1], x[0] ⏎ return x[:2]", "f32[2, 4] 4,5,6,7,4,5,6,7"),
        ("x[[0, 1]] = x[[1, 0]] ⏎ return x[:2]", "f32[2, 4] 4,5,6,7,0,1,2,3"),
        ("x[:, [0, 1]] = x[:, [1, 0]] ⏎ return x[0]", "f32[4] 1,0,2,3"),
        ("x[x > 5] = torch.arange(6.) ⏎ return x", "f32[3, 4] 0,1,2,3,4,5,0,1,2,3,4,5"),
        ("x[x > 5] = torch.tensor([1., 2.]) ⏎ return x", "ERR shape mismatch: value tensor of shape [2] cannot be broadcast to indexing result of shape [6]"),
        ("x[0:1] = torch.ones(3, 4) ⏎ return x", "ERR The expanded size of the tensor (1) must match the existing size (3) at non-singleton dimension 0"),
        ("x[0] = torch.ones(1, 1, 4) ⏎ return x[0]", "f32[4] 1,1,1,1"),
        ("x[0].copy_(torch.ones(1, 4)) ⏎ return x", "ERR output with shape [4] doesn't match the broadcast shape [1, 4]"),
        ("x[0:1] += torch.ones(3, 4) ⏎ return x", "ERR output with shape [1, 4] doesn't match the broadcast shape [3, 4]"),
        ("x[0] = [1., 2., 3., 4.] ⏎ return x", "ERR can't assign a list to a torch.FloatTensor"),
        ("i = torch.zeros(2, dtype=torch.int64) ⏎ i[0] = 2.7 ⏎ return i", "i64[2] 2,0"),
        ("z = torch.zeros(3) ⏎ z[torch.tensor([0])] = torch.tensor([7]) ⏎ return z", "ERR Index put requires the source and destination dtypes match, got Float for the destination and Long for the source."),
        ("x[x > 9] = torch.tensor(7) ⏎ return x[2]", "f32[4] 8,9,7,7"),
    ]);
}

#[test]
fn overlap_and_inplace_dtype_rules() {
    check(&[
        ("e += 1 ⏎ return e", "ERR more than one element of the written-to tensor refers to a single memory location"),
        ("e.copy_(torch.ones(2, 3)) ⏎ return e", "ERR more than one element"),
        ("e.clamp_(min=1) ⏎ return e", "ERR more than one element"),
        ("e[:, 1] += 1 ⏎ return e", "ERR more than one element"),
        ("e.fill_(1) ⏎ return e", "f32[2, 3] 1,1,1,1,1,1"),
        ("e[:, 0] = 5 ⏎ return e", "f32[2, 3] 5,0,0,5,0,0"),
        ("e2 = torch.ones(3).expand(2, 3) ⏎ e2.triu_(1) ⏎ return e2", "f32[2, 3] 0,0,1,0,0,1"),
        ("e[0] += 1 ⏎ return e", "f32[2, 3] 1,1,1,1,1,1"),
        ("e[1] = 7 ⏎ return e", "f32[2, 3] 7,7,7,7,7,7"),
        (
            "v = torch.arange(16.) ⏎ a = v[0:8] ⏎ b = v[4:12] ⏎ a += b ⏎ return v",
            "ERR some elements of the input tensor and the written-to tensor refer to a single memory location",
        ),
        ("v = torch.arange(16.) ⏎ v[4:12] = v[0:8] ⏎ return v", "ERR some elements of the input tensor"),
        ("x[1:3] += x[0:2] ⏎ return x", "ERR some elements of the input tensor"),
        ("v = torch.arange(4.) ⏎ v -= v[0] ⏎ return v", "ERR some elements of the input tensor"),
        ("x.clamp_(min=x[0]) ⏎ return x", "ERR some elements of the input tensor"),
        ("s = torch.arange(9.).reshape(3, 3) ⏎ s += s.t() ⏎ return s", "ERR some elements of the input tensor"),
        ("x[torch.tensor([1, 2])] = x[0:2] ⏎ return x", "ERR some elements of the input tensor"),
        ("v = torch.arange(16.) ⏎ a = v[0:8] ⏎ a += a ⏎ return v[:8]", "f32[8] 0,2,4,6,8,10,12,14"),
        ("v = torch.arange(4.) ⏎ v[0:2] = v[0:2] ⏎ return v", "f32[4] 0,1,2,3"),
        ("x[1:] -= x[0] ⏎ return x[2]", "f32[4] 8,8,8,8"),
        ("x -= x[0].clone() ⏎ return x[1]", "f32[4] 4,4,4,4"),
        ("x -= x.max() ⏎ return x[0]", "f32[4] -11,-10,-9,-8"),
        ("x[:, 1] -= x[0, 1] ⏎ return x", "ERR depends on the CPU"),
        (
            "i = torch.tensor([1, 2]) ⏎ i += torch.tensor([0.5, 0.5]) ⏎ return i",
            "ERR result type Float can't be cast to the desired output type Long",
        ),
        (
            "i = torch.tensor([1, 2]) ⏎ i /= 2 ⏎ return i",
            "ERR result type Float can't be cast to the desired output type Long",
        ),
        ("i = torch.tensor([1, 2]) ⏎ i.sigmoid_() ⏎ return i", "ERR result type Float can't be cast"),
        ("i = torch.tensor([1, 2]) ⏎ i //= 2 ⏎ return i", "i64[2] 0,1"),
        ("i = torch.tensor([1, 2]) ⏎ i += True ⏎ return i", "i64[2] 2,3"),
        ("return torch.tensor([-1, 2]).relu_()", "i64[2] 0,2"),
        (
            "b = torch.tensor([True, False]) ⏎ b += 1 ⏎ return b",
            "ERR result type Long can't be cast to the desired output type Bool",
        ),
        ("b = torch.tensor([True, False]) ⏎ b += True ⏎ return b", "bool[2] T,T"),
        ("f = torch.ones(3) ⏎ f *= torch.tensor([True, False, True]) ⏎ return f", "f32[3] 1,0,1"),
        ("f = torch.ones(2) ⏎ f += torch.tensor([1., 2.], dtype=torch.float64) ⏎ return f", "f32[2] 2,3"),
        ("i = torch.ones(2, dtype=torch.int32) ⏎ i += torch.tensor([1, 2**40]) ⏎ return i", "i32[2] 2,1"),
    ]);
}

#[test]
fn promotion_and_arithmetic() {
    check(&[
        ("return torch.tensor([1, 2]) + 1.5", "f32[2] 2.5,3.5"),
        ("return torch.tensor([1, 2]) + True", "i64[2] 2,3"),
        ("return torch.tensor([1, 2]) / 2", "f32[2] 0.5,1"),
        ("return torch.tensor([-7, 7]) // 2", "i64[2] -4,3"),
        ("return torch.tensor([-7.5, 7.5]) // 2", "f32[2] -4,3"),
        ("return torch.tensor([-7, 7]) % 3", "i64[2] 2,1"),
        ("return torch.tensor([-7, 7]) % -3", "i64[2] -1,-2"),
        ("return torch.tensor([-7.5]) % 2", "f32[1] 0.5"),
        ("return torch.fmod(torch.tensor([-7, 7]), 3)", "i64[2] -1,1"),
        ("return torch.div(torch.tensor([-7, 7]), 2, rounding_mode='trunc')", "i64[2] -3,3"),
        ("return torch.div(torch.tensor([-7, 7]), 2, rounding_mode='floor')", "i64[2] -4,3"),
        ("return torch.tensor([1, 0]) / 0", "f32[2] inf,NaN"),
        ("return torch.tensor([1]) // 0", "ERR ZeroDivisionError"),
        ("return torch.tensor([True]) + torch.tensor([True])", "bool[1] T"),
        ("return torch.tensor([True]) - torch.tensor([True])", "ERR Subtraction, the `-` operator, with two bool tensors is not supported"),
        ("return -torch.tensor([True])", "ERR Negation, the `-` operator, on a bool tensor is not supported"),
        ("return ~torch.tensor([True, False])", "bool[2] F,T"),
        ("return ~torch.tensor([0, 5])", "i64[2] -1,-6"),
        ("return ~torch.tensor([1.])", "ERR ~ (operator.invert) is only implemented on integer and Boolean-type tensors"),
        ("return torch.tensor([True]) + 1.0", "f32[1] 2"),
        ("return torch.tensor([True, False]) * torch.tensor([2.5, 2.5])", "f32[2] 2.5,0"),
        ("return torch.tensor([1., 2.]) == torch.tensor([1, 3])", "bool[2] T,F"),
        ("return torch.tensor([1, 2]) == 1.5", "bool[2] F,F"),
        ("c = torch.tensor([True, False]) ⏎ return torch.where(c, torch.tensor([1, 2]), 0.5)", "f32[2] 1,0.5"),
        ("c = torch.tensor([True, False]) ⏎ return torch.where(c, 1, 0)", "i64[2] 1,0"),
        ("c = torch.tensor([True, False]) ⏎ return torch.where(c, 1.0, 0)", "f32[2] 1,0"),
        ("c = torch.tensor([True, False]) ⏎ return torch.where(c, torch.tensor([1., 2.]), torch.tensor(0., dtype=torch.float64))", "f32[2] 1,0"),
        ("return torch.where(torch.tensor([1, 0]), 1., 0.)", "ERR where expected condition to be a boolean tensor, but got a tensor with dtype Long"),
        ("return torch.ones(2) + torch.tensor(1., dtype=torch.float64)", "f32[2] 2,2"),
        ("return torch.ones(2) + torch.tensor([1.], dtype=torch.float64)", "f64[2] 2,2"),
        ("return torch.ones(2, dtype=torch.int64) + torch.tensor(1.5, dtype=torch.float64)", "f64[2] 2.5,2.5"),
        ("return torch.tensor(3) + 1.5", "f32[] 4.5"),
        ("return torch.tensor([3]) * torch.tensor(1.5)", "f32[1] 4.5"),
        ("return torch.ones(2) + 1e40", "f32[2] inf,inf"),
        ("i = torch.ones(2, dtype=torch.int32) ⏎ return i + 5", "i32[2] 6,6"),
        ("i = torch.ones(2, dtype=torch.int32) ⏎ return i + torch.tensor([1, 2])", "i64[2] 2,3"),
        ("i = torch.ones(2, dtype=torch.int32) ⏎ return i + torch.tensor(1, dtype=torch.int64)", "i32[2] 2,2"),
        ("return torch.tensor([2**62]) * 4", "i64[1] 0"),
        ("return torch.tensor([2]) ** 2", "i64[1] 4"),
        ("return torch.tensor([2]) ** -1", "ERR Integers to negative integer powers are not allowed."),
        ("return 2 ** torch.tensor([3])", "i64[1] 8"),
        ("return torch.tensor([4]).sqrt()", "f32[1] 2"),
        ("return torch.relu(torch.tensor([-1, 2]))", "i64[2] 0,2"),
        ("return torch.maximum(torch.tensor([1, 5]), torch.tensor([2.5, 2.5]))", "f32[2] 2.5,5"),
        ("return torch.tensor([1, 5]).clamp(min=2.5)", "f32[2] 2.5,5"),
        ("return torch.tensor([1, 5]).clamp(min=2)", "i64[2] 2,5"),
        ("return torch.tensor(0.1) == 0.1", "bool[] T"),
        ("return torch.tensor(16777217) == 16777216.0", "bool[] T"),
        ("return torch.tensor([2**24 + 1]) + 0.0", "f32[1] 16777216"),
        ("return torch.round(torch.tensor([0.5, 1.5, 2.5, -0.5]))", "f32[4] 0,2,2,-0"),
        ("return torch.tensor([2.7, -2.7]).int()", "i32[2] 2,-2"),
        ("return torch.tensor([0.0, 0.2, -3.0]).bool()", "bool[3] F,T,T"),
        ("return torch.cat([torch.ones(1), torch.ones(1, dtype=torch.int64)])", "f32[2] 1,1"),
    ]);
}

#[test]
fn fills_and_inplace_methods() {
    check(&[
        ("return torch.zeros(2, 3).copy_(torch.tensor([1, 2, 3]))", "f32[2, 3] 1,2,3,1,2,3"),
        (
            "return torch.zeros(2, 3).copy_(torch.ones(3, 2))",
            "ERR The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 1",
        ),
        ("return torch.zeros(2, dtype=torch.int64).copy_(torch.tensor([1.7, -1.7]))", "i64[2] 1,-1"),
        ("return torch.zeros(3).copy_(5.)", "f32[3] 5,5,5"),
        ("return torch.zeros(2, dtype=torch.int64).fill_(-2.7)", "i64[2] -2,-2"),
        (
            "return torch.zeros(2).fill_(torch.tensor([3.]))",
            "ERR fill_ only supports 0-dimension value tensor but got tensor with 1 dimensions.",
        ),
        ("x.masked_fill_(torch.tensor([True, False, False, True]), -1.) ⏎ return x[0]", "f32[4] -1,1,2,-1"),
        ("x.masked_fill_(torch.tensor([[True], [False], [True]]), -1.) ⏎ return x[:, 1]", "f32[3] -1,5,-1"),
        (
            "x.masked_fill_(torch.tensor([True, False, True]), -1.) ⏎ return x",
            "ERR The size of tensor a (4) must match the size of tensor b (3) at non-singleton dimension 1",
        ),
        (
            "return torch.zeros(4).masked_fill_(torch.zeros(3, 4, dtype=torch.bool), 1.)",
            "ERR output with shape [4] doesn't match the broadcast shape [3, 4]",
        ),
        (
            "return torch.zeros(3).masked_fill_(torch.tensor([1, 0, 1]), 2.)",
            "ERR masked_fill_ only supports boolean masks, but got mask with dtype long int",
        ),
        (
            "return torch.zeros(3, dtype=torch.int64).masked_fill_(torch.tensor([True, False, True]), 2.5)",
            "i64[3] 2,0,2",
        ),
        (
            "return torch.zeros(5).index_put_((torch.tensor([0, 0, 2]),), torch.tensor([1., 2., 3.]))",
            "f32[5] 2,0,3,0,0",
        ),
        (
            "return torch.zeros(5).index_put_((torch.tensor([0, 0, 2]),), torch.tensor([1., 2., 3.]), accumulate=True)",
            "f32[5] 3,0,3,0,0",
        ),
        (
            "return torch.zeros(2, 3).index_put_((torch.tensor([0, 1]), torch.tensor([2, 0])), torch.tensor(9.))",
            "f32[2, 3] 0,0,9,9,0,0",
        ),
        (
            "return torch.zeros(2, 3).index_put_((torch.tensor([True, False]),), torch.tensor([1., 2., 3.]))",
            "f32[2, 3] 1,2,3,0,0,0",
        ),
        (
            "return torch.zeros(3).index_put_((torch.tensor([0]),), 1.)",
            "ERR index_put_(): argument 'values' (position 2) must be Tensor, not float",
        ),
        ("x.clamp_(min=5., max=2.) ⏎ return x[1]", "f32[4] 2,2,2,2"),
        ("return x.clamp_()", "ERR At least one of 'min' or 'max' must not be None"),
        ("x.clamp_(min=torch.tensor([1., 2., 3., 40.])) ⏎ return x[0]", "f32[4] 1,2,3,40"),
        ("return torch.tensor([float('nan'), 1.]).clamp(0., 0.5)", "f32[2] NaN,0.5"),
        ("return x.triu_(1)", "f32[3, 4] 0,1,2,3,0,0,6,7,0,0,0,11"),
        ("return x.triu_(-1)", "f32[3, 4] 0,1,2,3,4,5,6,7,0,9,10,11"),
        ("return x.tril_(-1)", "f32[3, 4] 0,0,0,0,4,0,0,0,8,9,0,0"),
        ("return torch.ones(2, 2, 3).triu_(1)[1]", "f32[2, 3] 0,1,1,0,0,1"),
        ("return torch.ones(3).triu_()", "ERR triu: input tensor must have at least 2 dimensions"),
        ("x.t().triu_() ⏎ return x", "f32[3, 4] 0,0,0,0,4,5,0,0,8,9,10,0"),
        ("y = x.add_(1) ⏎ y += 1 ⏎ return x[0]", "f32[4] 2,3,4,5"),
    ]);
}

#[test]
fn reductions_and_matmul() {
    check(&[
        ("return torch.tensor([1, 3, 3, 2]).max(dim=0).indices", "i64[] 1"),
        ("return torch.tensor([2, 1, 1, 3]).min(0).indices", "i64[] 1"),
        ("return torch.tensor([[1, 3], [3, 1]]).argmax()", "i64[] 1"),
        ("return torch.ones(3, 1000).argmax(1)", "i64[3] 0,0,0"),
        ("return torch.tensor([1., float('nan'), 3., float('nan')]).max(0).indices", "i64[] 1"),
        ("return torch.tensor([1., float('nan'), 3.]).argmin()", "i64[] 1"),
        ("return torch.maximum(torch.tensor([1., float('nan')]), torch.tensor([float('nan'), 2.]))", "f32[2] NaN,NaN"),
        ("return x.max(dim=1, keepdim=True).indices", "i64[3, 1] 3,3,3"),
        ("v, i = x.max(1) ⏎ return i", "i64[3] 3,3,3"),
        ("return torch.max(x, 0)[0]", "f32[4] 8,9,10,11"),
        ("return torch.max(x, torch.tensor(5.))[0]", "f32[4] 5,5,5,5"),
        ("return x.amax(dim=(0, 1))", "f32[] 11"),
        ("return torch.zeros(0).max()", "ERR max(): Expected reduction dim to be specified for input.numel() == 0."),
        ("return torch.zeros(0, 3).max(0)", "ERR max(): Expected reduction dim 0 to have non-zero size."),
        ("return torch.zeros(0).sum()", "f32[] 0"),
        ("return torch.tensor([True, True, False]).sum()", "i64[] 2"),
        ("return torch.ones(2, dtype=torch.int32).sum()", "i64[] 2"),
        ("return x.sum(dim=[])", "f32[] 66"),
        ("return x.sum(-1, keepdim=True)", "f32[3, 1] 6,22,38"),
        ("return torch.tensor([1, 2]).mean()", "ERR mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Long"),
        ("return torch.tensor([1, 2]).mean(dtype=torch.float32)", "f32[] 1.5"),
        ("return torch.tensor([1., 2.]).softmax(0)", "f32[2] 0.26894143,0.7310586"),
        ("return torch.softmax(torch.tensor([1, 2]), 0)", "ERR not implemented for 'Long'"),
        ("return torch.softmax(torch.tensor([1., 2.]))", "ERR missing 1 required positional arguments"),
        ("return torch.tensor([True, True]).cumsum(0)", "i64[2] 1,2"),
        ("return torch.tensor([1, 0]).any()", "bool[] T"),
        ("return torch.tensor([[True, False]]).any(1)", "bool[1] T"),
        ("return torch.ones(3) @ torch.ones(3)", "f32[] 3"),
        ("return torch.tensor((torch.ones(4, 1, 2, 3) @ torch.ones(6, 3, 5)).shape)", "i64[4] 4,6,2,5"),
        ("return torch.tensor((torch.ones(3) @ torch.ones(4, 3, 5)).shape)", "i64[2] 4,5"),
        ("return torch.ones(2, 3) @ torch.ones(4, 5)", "ERR mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
        ("return torch.tensor(2.) @ torch.ones(2)", "ERR both arguments to matmul need to be at least 1D, but they are 0D and 1D"),
        ("return torch.tensor([[1, 2]]) @ torch.tensor([[3], [4]])", "i64[1, 1] 11"),
        ("return torch.ones(1, 2) @ torch.ones(2, 1, dtype=torch.int64)", "ERR expected m1 and m2 to have the same dtype, but got: float != long int"),
        ("return torch.mm(torch.ones(3), torch.ones(3, 2))", "ERR mm: self must be a matrix, got 1-D tensor"),
        ("return torch.bmm(torch.ones(2, 2, 3), torch.ones(1, 3, 4))", "ERR Expected size for first two dimensions of batch2 tensor to be: [2, 3] but got: [1, 3]."),
    ]);
}

#[test]
fn indexing_shapes_creation_and_python_scalars() {
    check(&[
        ("return torch.tensor(x3[:, [0, 1], [0, 1]].shape)", "i64[2] 2,2"),
        ("return torch.tensor(x3[[0, 1], :, [0, 1]].shape)", "i64[2] 2,3"),
        ("return torch.tensor(x3[0, :, [0, 1]].shape)", "i64[2] 3,2"),
        ("return torch.tensor(x3[:, 0, [0, 1]].shape)", "i64[2] 2,2"),
        ("return torch.tensor(x3[..., [0, 1]].shape)", "i64[3] 2,3,2"),
        ("return torch.tensor(x3[None, [0, 1]].shape)", "i64[4] 1,2,3,4"),
        ("return torch.tensor(x3[[[0], [1]], [0, 1, 2]].shape)", "i64[3] 2,3,4"),
        ("return torch.tensor(x3[x3[:, :, 0] > 5].shape)", "i64[2] 4,4"),
        ("return torch.tensor(x3[x3[:, 0, 0] > 5, 1:3].shape)", "i64[3] 1,2,4"),
        ("return x[[0, 1], [1, 2]]", "f32[2] 1,6"),
        ("return x[:, torch.tensor([3, -1])]", "f32[3, 2] 3,3,7,7,11,11"),
        ("return torch.tensor(x[[True, False, True]].shape)", "i64[2] 2,4"),
        ("return x[torch.tensor([3])]", "ERR index 3 is out of bounds for dimension 0 with size 3"),
        ("return x[torch.tensor([0.])]", "ERR tensors used as indices must be long, int, byte or bool tensors"),
        ("return x[torch.tensor([True, False])]", "ERR The shape of the mask [2] at index 0 does not match the shape of the indexed tensor [3, 4] at index 0"),
        ("return x[[0, 1], [0, 1, 2]]", "ERR shape mismatch: indexing tensors could not be broadcast together with shapes [2], [3]"),
        ("return x[1, 2, 3]", "ERR too many indices for tensor of dimension 2"),
        ("return x[1.0]", "ERR only integers, slices"),
        ("return torch.tensor(len(torch.arange(6).chunk(4)))", "i64[] 3"),
        ("return torch.tensor([t.shape[0] for t in torch.arange(5).split([1, 4])])", "i64[2] 1,4"),
        ("return torch.arange(5).split([1, 3])", "ERR split_with_sizes expects split_sizes to sum exactly to 5"),
        ("return torch.tensor(torch.zeros(1, 3, 1).squeeze((0, 2)).shape)", "i64[1] 3"),
        ("return x.unsqueeze(3)", "ERR Dimension out of range (expected to be in range of [-3, 2], but got 3)"),
        ("return x.expand(5, 4)", "ERR The expanded size of the tensor (5) must match the existing size (3) at non-singleton dimension 0.  Target sizes: [5, 4].  Tensor sizes: [3, 4]"),
        ("return x.permute(1, 1)", "ERR permute(): duplicate dims are not allowed."),
        ("return x.select(0, 3)", "ERR index 3 is out of bounds for dimension 0 with size 3"),
        ("return torch.tensor(torch.cat([x, torch.tensor([])]).shape)", "i64[2] 3,4"),
        ("return torch.cat([torch.tensor(1.), torch.tensor(2.)])", "ERR zero-dimensional tensor (at position 0) cannot be concatenated"),
        ("return torch.stack([torch.ones(2), torch.ones(3)])", "ERR stack expects each tensor to be equal size, but got [2] at entry 0 and [3] at entry 1"),
        ("return torch.arange(5)", "i64[5] 0,1,2,3,4"),
        ("return torch.arange(0.0, 1.0, 0.25)", "f32[4] 0,0.25,0.5,0.75"),
        ("return torch.tensor(torch.arange(0, 1, 0.1).shape)", "i64[1] 10"),
        ("return torch.arange(5, 0, -2)", "i64[3] 5,3,1"),
        ("return torch.arange(5, 0)", "ERR upper bound and lower bound inconsistent with step sign"),
        ("return torch.tensor([1, 2.0])", "f32[2] 1,2"),
        ("return torch.tensor([True, 1])", "i64[2] 1,1"),
        ("return torch.tensor([[1], [2, 3]])", "ERR expected sequence of length 1 at dim 1 (got 2)"),
        ("return torch.full((2, 2), 3)", "i64[2, 2] 3,3,3,3"),
        ("return torch.full((2,), 1.5, dtype=torch.int64)", "i64[2] 1,1"),
        ("return torch.full_like(torch.tensor([1, 2]), 2.7)", "i64[2] 2,2"),
        ("return torch.zeros(2, 3.0)", "ERR type must be tuple of ints,but got float"),
        ("return torch.tensor(torch.tensor(0.1).item() == 0.1)", "bool[] F"),
        ("return torch.tensor(int(torch.tensor(-3.7)))", "i64[] -3"),
        ("return float(torch.tensor([1., 2.]))", "ERR only one element tensors can be converted to Python scalars"),
        ("return torch.tensor(1 if torch.tensor([0.5]) > 0 else 0)", "i64[] 1"),
        ("return torch.tensor(1 if torch.tensor([0.5, -1.]) > 0 else 0)", "ERR Boolean value of Tensor with more than one value is ambiguous"),
        ("n = 0 ⏎ t = torch.tensor(0.) ⏎ while t < 3: ⏎     t += 1 ⏎     n += 1 ⏎ return torch.tensor(n)", "i64[] 3"),
        ("return torch.tensor(list(range(torch.tensor(3))))", "i64[3] 0,1,2"),
        ("return torch.tensor(list(range(0, 3, 0)))", "ERR range() arg 3 must not be zero"),
        ("return torch.tensor(1 if 2 < 2.5 <= 2.5 else 0)", "i64[] 1"),
        ("return x[torch.tensor(1):]", "f32[2, 4] 4,5,6,7,8,9,10,11"),
        ("return torch.tensor([x.shape[0], x.size(1), x.shape[-1] // 3, len(x), x.numel(), x.dim(), x.ndim])", "i64[7] 3,4,1,3,12,2,2"),
        ("return torch.tensor(x.shape == (3, 4))", "bool[] T"),
        ("return sum([torch.ones(2), torch.ones(2)])", "f32[2] 2,2"),
        ("return max(torch.tensor(1.), torch.tensor(2.))", "f32[] 2"),
        ("return round(torch.tensor(2.5))", "ERR type Tensor doesn't define __round__ method"),
    ]);
}

#[test]
fn transcendental_functions_at_special_points() {
    check(&[
        ("return torch.nn.functional.gelu(torch.zeros(2))", "f32[2] 0,0"),
        ("return torch.erf(torch.tensor([0.0, 3.0, -3.0]))", "f32[3] 0,0.9999779,-0.9999779"),
        ("return torch.sigmoid(torch.tensor([0.0]))", "f32[1] 0.5"),
    ]);
}
