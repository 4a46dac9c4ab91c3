//! The C backend's vectorized sines and cosines (`c.rs`, `with_trig_fixup`): the loop calls `vmath.h`'s
//! `ff_sinf`/`ff_cosf`, which hold for |x| < 2^30, and a second nest computes again every point whose argument is
//! not below 2^30 (or is NaN) with libm, so that large arguments stay exact.

mod common;

use funcfuse::lower::Policy;

const PROGRAMS: &str = r#"
def waves(x: f32[4, 50], scale: f32[50]) -> tuple[f32[4, 50], f32[4, 50]]:
    big = x * scale
    return torch.sin(big), torch.cos(big + 1.0)


def chosen(x: f32[4, 50], scale: f32[50]) -> f32[4, 50]:
    big = x * scale
    return torch.where(x > 0.0, torch.sin(big), torch.cos(x))
"#;

#[test]
fn large_arguments_are_computed_again_exactly() {
    let dir = common::scratch("trig", "large");
    let path = common::program(&dir, PROGRAMS);
    let module = funcfuse::frontend::load_module(&path).unwrap();
    for func in ["waves", "chosen"] {
        let f = common::optimized(&module, func).unwrap();
        let p = funcfuse::lower::plan(&f.term, &f.inputs, Policy::Fused).unwrap();
        let c = funcfuse::backend::c::render(&p);
        // The loop calls the vectorizable functions; the second nest, libm's wrappers where the argument is large.
        assert!(c.contains("ff_sinf(") && c.contains("ff_sin32(") && c.contains("< 0x1p30f)"), "{c}");
        let mut inputs = common::seeded_inputs(&module, func, 5);
        // Scales from 1 to 1e12: arguments from below 1 to far beyond 2^30 (about 1.07e9), and a NaN and an
        // infinity among them.
        let n = 50;
        let scale: Vec<f64> = (0..n)
            .map(|j| match j {
                7 => f64::NAN,
                11 => f64::INFINITY,
                _ => 10f64.powi(j as i32 % 13),
            })
            .collect();
        inputs.insert(
            "scale".into(),
            funcfuse::tensor::Tensor::from_f64(funcfuse::tensor::DType::F32, &[n], &scale).unwrap(),
        );
        common::check_plan_on(&module, func, &inputs, Policy::Fused, funcfuse::backend::Target::C)
            .unwrap_or_else(|e| panic!("{func}: {e}"));
    }
}
