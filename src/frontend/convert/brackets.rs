//! The nesting check that runs before the parser (which recurses per bracket).

/// The byte offset of the first bracket that opens more than `limit` levels deep, if any (brackets in strings and
/// comments do not count).
pub(super) fn too_deep_brackets(source: &str, limit: usize) -> Option<(usize, usize)> {
    let b = source.as_bytes();
    let (mut i, mut depth) = (0, 0usize);
    while i < b.len() {
        match b[i] {
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            q @ (b'\'' | b'"') => {
                let triple = b.len() >= i + 3 && b[i + 1] == q && b[i + 2] == q;
                i += if triple { 3 } else { 1 };
                while i < b.len() {
                    if b[i] == b'\\' {
                        i += 2;
                    } else if triple && b.len() >= i + 3 && b[i] == q && b[i + 1] == q && b[i + 2] == q {
                        i += 2;
                        break;
                    } else if !triple && (b[i] == q || b[i] == b'\n') {
                        break;
                    } else {
                        i += 1;
                    }
                }
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return Some((i, depth));
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::too_deep_brackets;

    #[test]
    fn brackets_in_strings_and_comments_do_not_nest() {
        assert_eq!(too_deep_brackets("f((x))", 2), None);
        assert_eq!(too_deep_brackets("f(((x)))", 2), Some((3, 3)));
        assert_eq!(too_deep_brackets("x = '((('  # (((\ny = \"\"\"(((\n\"\"\" + \"\\\"(\"\n", 1), None);
        assert_eq!(too_deep_brackets("a = [[1]]\n", 1), Some((5, 2)));
    }
}
