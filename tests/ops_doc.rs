//! docs/OPS.md, the list of supported operations, is what the engines say today (`funcfuse ops --markdown`), and the
//! probe behind it tells supported operations from unsupported ones.

use funcfuse::ops_doc::{markdown, probe_all};

#[test]
fn docs_ops_md_is_the_list_the_engines_give() {
    let want = markdown(&probe_all());
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/OPS.md");
    let have = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        have == want,
        "docs/OPS.md is stale: regenerate it with `cargo run --release -- ops --markdown > docs/OPS.md`"
    );
}

#[test]
fn the_probe_lists_implemented_operations_and_leaves_out_limits() {
    let probed = probe_all();
    let supported = |n: &str| probed.iter().find(|p| p.full == n).unwrap_or_else(|| panic!("{n} not probed")).supported;
    for n in [
        "torch.sigmoid",
        "torch.einsum",
        "torch.Tensor.index_copy_",
        "torch.nn.functional.relu",
        "torch.Tensor.T",
        "torch.polar",
    ] {
        assert!(supported(n), "{n} should be listed");
    }
    // No implementation; a data-dependent output shape the functional engines cannot express.
    for n in ["torch.stft", "torch.nonzero", "torch.masked_select"] {
        assert!(!supported(n), "{n} should not be listed");
    }
}
