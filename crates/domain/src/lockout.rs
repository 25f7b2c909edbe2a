//! How failed attempts to prove who one is (a console password, a TOTP code at sign-in or at
//! a step-up) lock further attempts, with a backoff. The store counts an attempt before it is
//! checked (see `SignInStore::count_attempt`), so a parallel burst cannot outrun the count.

/// Failed attempts in a row before attempts lock.
pub const LOCK_AFTER: i64 = 5;
const FIRST_LOCK_MS: i64 = 30_000;
const LONGEST_LOCK_MS: i64 = 15 * 60 * 1000;

/// Until when attempts are refused after `failed` in a row: not at all below [`LOCK_AFTER`],
/// then 30 s doubling with each further failure, at most 15 minutes.
pub fn locked_until(failed: i64, now_ms: i64) -> i64 {
    if failed < LOCK_AFTER {
        return 0;
    }
    let doublings = (failed - LOCK_AFTER).min(10) as u32;
    now_ms + (FIRST_LOCK_MS << doublings).min(LONGEST_LOCK_MS)
}

/// What counting an attempt found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// No such principal: nothing is counted (the caller answers as for a wrong password).
    Unknown,
    /// Attempts are locked until then: this one is refused without being checked.
    Locked { until_ms: i64 },
    /// Counted as failed until the caller records a success; failures in a row, this one
    /// included.
    Counted { failures: i64 },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lockouts_back_off() {
        assert_eq!(locked_until(4, 1000), 0);
        assert_eq!(locked_until(5, 1000), 31_000);
        assert_eq!(locked_until(6, 1000), 61_000);
        assert_eq!(locked_until(60, 1000), 1000 + 15 * 60 * 1000);
    }
}
