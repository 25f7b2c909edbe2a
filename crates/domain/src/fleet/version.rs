//! Software versions compare by their packaging system's rules. Debian's (dpkg's) are
//! implemented by the `deb-version` crate, which is tested against libapt: epochs first, then
//! the upstream version and the revision, where `~` sorts before everything (even the end).

use std::cmp::Ordering;

/// Compares two package versions the way dpkg does.
pub fn compare_debian(a: &str, b: &str) -> Ordering {
    deb_version::compare_versions(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Ordering::{Equal, Greater, Less};

    #[test]
    fn debian_rules() {
        let cases = [
            ("1:1.0~rc1", "1:1.0", Less),
            ("2.0-1", "2.0-1+deb12u1", Less),
            ("1.0", "1:0.1", Less),  // an epoch outweighs everything after it
            ("0:1.0", "1.0", Equal), // a missing epoch is 0
            ("1.0~~", "1.0~", Less),
            ("1.0~", "1.0", Less),
            ("1.0", "1.0a", Less),
            ("1.0a", "1.0+", Less),       // letters sort before non-letters
            ("1.2.10", "1.2.9", Greater), // digits compare as numbers
            ("3.0.11-1~deb12u2", "3.0.15-1~deb12u1", Less),
            ("3.0.15-1~deb12u1", "3.0.15-1", Less),
            ("1.0-1", "1.0-1", Equal),
            ("2:1.0", "1:9.9", Greater),
            ("1.0-2", "1.0-10", Less),
            ("1.0", "1.0-0", Equal), // a missing revision is 0
        ];
        for (a, b, expected) in cases {
            assert_eq!(compare_debian(a, b), expected, "{a} vs {b}");
            assert_eq!(compare_debian(b, a), expected.reverse(), "{b} vs {a}");
        }
    }
}
