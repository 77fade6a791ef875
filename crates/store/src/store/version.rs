//! Ordering of upstream resourceVersions, for the store's "never move back" rule.
//!
//! Decision: Kubernetes documents resourceVersions as opaque strings, but etcd3-backed
//! apiservers (every apiserver there is) hand out etcd's global revision, a monotonic
//! integer, and client-go's watch cache relies on that ordering as well. The store compares
//! two resourceVersions as integers when both parse as one; otherwise it cannot order them and
//! treats the incoming one as current (what an apiserver sends is the truth, unless we know it
//! is older).

use super::scalar::parse_uint_str;

/// Whether resourceVersion `a` is known to be older than `b`: both are the apiserver's
/// integers and `a < b`. `false` whenever either is missing or not an integer.
pub fn is_older(a: Option<&str>, b: Option<&str>) -> bool {
    match (a.and_then(parse_uint_str), b.and_then(parse_uint_str)) {
        (Some(a), Some(b)) => a < b,
        _ => false,
    }
}

/// Whether the cache's resourceVersion `have` is `want` or later, for `min_resource_version`:
/// integers compare as numbers; a resourceVersion that is not a number must match exactly.
pub fn at_least(have: &str, want: &str) -> bool {
    match (parse_uint_str(have), parse_uint_str(want)) {
        (Some(have), Some(want)) => have >= want,
        _ => have == want,
    }
}

/// The newer of two resourceVersions (`a` when they cannot be ordered).
pub fn newer<'a>(a: Option<&'a str>, b: Option<&'a str>) -> Option<&'a str> {
    if is_older(a, b) || a.is_none() {
        b
    } else {
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_compare_as_numbers_and_anything_else_is_unordered() {
        assert!(is_older(Some("99"), Some("120")));
        assert!(!is_older(Some("120"), Some("99")));
        assert!(!is_older(Some("120"), Some("120")));
        assert!(!is_older(Some("abc"), Some("120")));
        assert!(!is_older(None, Some("120")));
        assert_eq!(newer(Some("99"), Some("120")), Some("120"));
        assert_eq!(newer(Some("120"), Some("99")), Some("120"));
        assert_eq!(newer(Some("x"), Some("120")), Some("x"));
        assert_eq!(newer(None, Some("7")), Some("7"));
        assert_eq!(newer(Some("7"), None), Some("7"));
    }

    #[test]
    fn at_least_compares_integers_as_numbers_and_anything_else_by_equality() {
        assert!(at_least("120", "99"));
        assert!(at_least("120", "120"));
        assert!(!at_least("99", "120"));
        assert!(at_least("abc", "abc"));
        assert!(!at_least("abc", "abd"));
    }
}
