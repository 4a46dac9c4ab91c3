//! The README and ARCHITECTURE point only at files a clone of the repository has: every Markdown link that is not a
//! web address, and every backticked `docs/...` path, names a tracked file.

use std::path::Path;

#[test]
fn documents_link_only_to_files_in_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut missing = Vec::new();
    let mut checked = 0;
    for doc in ["README.md", "ARCHITECTURE.md"] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        assert!(!text.contains("../shared"), "{doc} points outside the repository (../shared)");
        // Markdown links `](target)` that are not web addresses or anchors.
        for part in text.split("](").skip(1) {
            let target = part.split(')').next().unwrap_or("");
            if target.starts_with("http") || target.starts_with('#') || target.is_empty() {
                continue;
            }
            checked += 1;
            if !root.join(target.split('#').next().unwrap()).exists() {
                missing.push(format!("{doc}: link to {target}"));
            }
        }
        // Backticked paths under docs/.
        for part in text.split("`docs/").skip(1) {
            let name = part.split('`').next().unwrap_or("");
            checked += 1;
            if !root.join("docs").join(name).exists() {
                missing.push(format!("{doc}: `docs/{name}`"));
            }
        }
    }
    assert!(checked >= 4, "the check found only {checked} references: it no longer reads the documents");
    assert!(missing.is_empty(), "documents point at files the repository does not have:\n{}", missing.join("\n"));
}
