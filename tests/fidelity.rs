//! Fidelity: what the served surface promises, held to the seeds and the reference, one test
//! per finding of the review (issue "Fidelity"), against the real binary.

mod common;

use common::{call_as, start};
use serde_json::json;

/// The seeds: `query_audit_log` refuses an `until` of 0 or less (it would match nothing, and
/// says nothing about why); an `until` of 1 and more is taken.
#[test]
fn query_audit_log_refuses_an_until_of_zero_or_less() {
    let s = start(&[]);
    for until in [0, -5] {
        let refused = call_as(&s, &s.token, "query_audit_log", json!({"until": until})).json();
        let text = refused.to_string();
        assert!(
            text.contains("until") && (refused.get("error").is_some() || refused["result"]["isError"] == true),
            "{refused}"
        );
    }
    let taken = call_as(&s, &s.token, "query_audit_log", json!({"until": 1})).json();
    assert_eq!(taken["result"]["isError"], false, "{taken}");
}
