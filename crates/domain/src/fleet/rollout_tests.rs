use serde_json::json;

use super::*;
use TargetStatus::{Failed, PlanChanged, Running, Succeeded};

fn rollout(batch: serde_json::Value, max_failures: u32, pause_ms: u64) -> Rollout {
    Rollout::from_argument(&json!({"batch": batch, "max_failures": max_failures, "pause_ms": pause_ms})).unwrap()
}

#[test]
fn batches_are_hosts_or_a_share_rounded_up() {
    let by_two = rollout(json!(2), 0, 0);
    assert_eq!((by_two.wave_size(5), by_two.waves(5)), (2, 3));
    assert_eq!((0..5).map(|i| by_two.wave_of(i, 5)).collect::<Vec<_>>(), [0, 0, 1, 1, 2]);
    let quarter = rollout(json!("25%"), 0, 0);
    assert_eq!((quarter.wave_size(10), quarter.waves(10)), (3, 4));
    assert_eq!(quarter.wave_size(1), 1, "at least one host a wave");
    assert_eq!(rollout(json!("100%"), 0, 0).waves(7), 1);
}

#[test]
fn a_bad_rollout_says_what_is_wrong() {
    for (bad, says) in [
        (json!({}), "rollout.batch is required"),
        (json!({"batch": 0}), "not a whole number of hosts"),
        (json!({"batch": "0%"}), "1% to 100%"),
        (json!({"batch": "half"}), "neither a number"),
        (json!({"batch": 1, "pause_ms": -1}), "rollout.pause_ms must be a whole number"),
    ] {
        let error = Rollout::from_argument(&bad).unwrap_err();
        assert!(error.contains(says), "{bad}: {error}");
    }
}

#[test]
fn the_next_wave_waits_for_the_last_to_end_and_for_the_pause() {
    let paced = rollout(json!(1), 0, 500);
    assert_eq!(paced.next(0, &[(Running, 100)], 10_000), Next::Wait);
    assert_eq!(paced.next(0, &[(Succeeded, 100)], 599), Next::Wait, "paused");
    assert_eq!(paced.next(0, &[(Succeeded, 100)], 600), Next::Release(1));
}

#[test]
fn past_the_failure_budget_the_rest_is_skipped() {
    let one_may_fail = rollout(json!(1), 1, 0);
    assert_eq!(one_may_fail.next(0, &[(Failed, 1)], 2), Next::Release(1), "within the budget");
    match one_may_fail.next(1, &[(Failed, 1), (PlanChanged, 2)], 3) {
        Next::Stop(reason) => assert!(reason.contains("2 host(s)") && reason.contains("wave(s) 1-2"), "{reason}"),
        other => panic!("{other:?}"),
    }
}
