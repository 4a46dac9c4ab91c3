//! Writes and reads through index tensors run as kernels, not host fallbacks: `index_put` with and without
//! accumulate, `index_copy_`, `x[:, :, pos] = v`, and gathers with several index tensors. The writes go in place
//! where the base is dead (only the indexed elements are written), and every plan matches the reference on the C
//! backend and the CUDA emulator, duplicate indices included.

mod common;

use funcfuse::backend::Target;
use funcfuse::lower::{How, Policy};

const SRC: &str = r#"
import torch

def kv_setitem(k_out: f32[2, 8, 32, 64], key_states: f32[2, 8, 4, 64], pos: i64[4]) -> f32[2, 8, 32, 64]:
    k_out[:, :, pos.abs() % 32] = key_states
    return k_out

def kv_index_copy(k_out: f32[2, 8, 32, 64], key_states: f32[2, 8, 4, 64], start: i64[()]) -> f32[2, 8, 32, 64]:
    pos = torch.arange(4) + start.abs() % 28
    k_out.index_copy_(2, pos, key_states)
    return k_out

def put_accumulate(x: f32[6, 5], i: i64[7], j: i64[7], v: f32[7]) -> f32[6, 5]:
    y = x * 2.0
    y.index_put_((i.abs() % 6, j.abs() % 5), v, accumulate=True)
    return y + x

def put_separated(x: f32[6, 5, 3], i: i64[4], j: i64[4], v: f32[5]) -> f32[6, 5, 3]:
    x[i.abs() % 6, :, j.abs() % 3] = v * 3.0
    return x

def put_int_accumulate(x: i32[9], i: i64[12]) -> i32[9]:
    x.index_put_((i % 9,), torch.ones(12, dtype=torch.int32), accumulate=True)
    return x

def gather_two(x: f32[6, 5, 3], i: i64[4], j: i64[2, 4]) -> f32[2, 4, 3]:
    return x[i.abs() % 6, j % 5] * 2.0

def gather_middle(x: f32[6, 5, 3], i: i64[2, 4]) -> f32[6, 2, 4, 3]:
    return x[:, i.abs() % 5] + 1.0
"#;

/// Every program of `SRC` that writes or reads through index tensors.
const INDEXED: [&str; 7] = [
    "kv_setitem",
    "kv_index_copy",
    "put_accumulate",
    "put_separated",
    "put_int_accumulate",
    "gather_two",
    "gather_middle",
];

fn plan(func: &str) -> funcfuse::lower::Plan {
    let module = funcfuse::frontend::parse_module("test.py", SRC).unwrap();
    let f = common::optimized(&module, func).unwrap();
    funcfuse::lower::plan(&f.term, &f.inputs, Policy::Fused).unwrap()
}

#[test]
fn index_writes_and_gathers_plan_no_host_fallback() {
    for func in INDEXED {
        let p = plan(func);
        assert!(!p.how.contains(&How::Fallback), "{func}: {}", p.describe());
    }
}

#[test]
fn a_kv_cache_write_goes_in_place_over_the_written_rows_only() {
    let p = plan("kv_setitem");
    let in_place: Vec<usize> = p
        .how
        .iter()
        .filter_map(|h| match h {
            How::InPlace(k) => Some(p.kernels[*k].domain.iter().product()),
            _ => None,
        })
        .collect();
    assert_eq!(in_place, vec![2 * 8 * 4 * 64], "{}", p.describe());
    // The only other kernel computes the 4 positions; none copies or selects over the cache.
    let big = p.kernels.iter().filter(|k| k.domain.iter().product::<usize>() > 4).count();
    assert_eq!(big, 1, "{}", p.describe());
    // index_copy_ goes in place too (its expanded index is still a buffer of the written rows' size).
    let q = plan("kv_index_copy");
    assert!(q.how.iter().any(|h| matches!(h, How::InPlace(_))), "{}", q.describe());
    assert!(!q.how.iter().any(|h| matches!(h, How::CopyInPlace(_))), "{}", q.describe());
}

#[test]
fn index_writes_and_gathers_match_the_reference_on_c_and_the_emulator() {
    let module = funcfuse::frontend::parse_module("test.py", SRC).unwrap();
    for func in INDEXED {
        for seed in 0..4 {
            let inputs = common::seeded_inputs(&module, func, seed);
            for target in [Target::C, Target::CudaEmu] {
                common::check_plan_on(&module, func, &inputs, Policy::Fused, target)
                    .unwrap_or_else(|e| panic!("{func} seed {seed} {target:?}: {e}"));
            }
        }
    }
}

#[test]
fn a_scatter_that_reads_its_own_base_writes_into_a_copy() {
    // Hugging Face's top-p: `mask.scatter(1, sorted_indices, mask)` reads the mask at positions other points write.
    let src = r#"
import torch
def f(x: f32[3, 40]) -> bool[3, 40]:
    s, i = torch.sort(x)
    m = s > 0.0
    return m.scatter(1, i, m)
"#;
    let module = funcfuse::frontend::parse_module("test.py", src).unwrap();
    let f = common::optimized(&module, "f").unwrap();
    let p = funcfuse::lower::plan(&f.term, &f.inputs, Policy::Fused).unwrap();
    assert!(p.how.iter().any(|h| matches!(h, How::CopyInPlace(_))), "{}", p.describe());
    for seed in 0..3 {
        let inputs = common::seeded_inputs(&module, "f", seed);
        for target in [Target::C, Target::CudaEmu] {
            common::check_plan_on(&module, "f", &inputs, Policy::Fused, target).unwrap();
        }
    }
}
