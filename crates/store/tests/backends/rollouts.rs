//! Rollouts on every backend: only released waves are ever due, a wave is released once,
//! the waves not released are skipped (by the sweep's decision, or at the deadline).

use serde_json::json;
use toolgate_domain::fleet::instruction::TargetStatus;
use toolgate_domain::fleet::rollout::Rollout;
use toolgate_domain::fleet::wire::RunResult;
use toolgate_store::{NewExecution, Repositories, UNRELEASED_AT_DEADLINE};

use crate::fleet_work::{execution, succeeded, with_agents};

crate::matrix!(
    waves_are_due_only_once_released_and_the_rest_can_be_skipped,
    unreleased_waves_are_skipped_at_the_deadline,
);

async fn rolling(r: &Repositories, id: &str, targets: &[String], batch: u32, deadline_ms: i64) {
    execution(r, "exe-template", targets, deadline_ms).await;
    let template = r.work.execution("exe-template", None).await.unwrap().unwrap();
    let rollout = Rollout::from_argument(&json!({"batch": batch})).unwrap();
    let e = NewExecution {
        execution_id: id.into(),
        kind: "instruction".into(),
        steps: template.steps,
        scope: None,
        requested_by: "alice".into(),
        created_at_ms: 10,
        deadline_ms,
        targets: targets.to_vec(),
        idempotency: None,
        rollout: Some(rollout),
    };
    assert_eq!(e.first_wave(), targets[..batch as usize].to_vec());
    r.work.create_execution(e).await.unwrap();
    r.work.cancel("exe-template", 10).await.unwrap();
}

async fn waves_are_due_only_once_released_and_the_rest_can_be_skipped(r: Repositories) {
    let ids = with_agents(&r, 3).await;
    let store = &r.work;
    rolling(&r, "exe-r1", &ids, 1, 10_000).await;
    let (_, unsent) = store.undelivered("exe-r1", 20).await.unwrap().unwrap();
    assert_eq!(unsent, [ids[0].clone()], "only the first wave may be sent");
    assert!(store.due_for(&ids[1], 20).await.unwrap().is_empty(), "a reconnecting agent of a later wave gets nothing");
    let header = store.execution("exe-r1", None).await.unwrap().unwrap();
    let state = header.rollout.unwrap();
    assert_eq!((state.released_wave, state.waves), (0, 3));

    let under_way = store.rollouts_under_way(20).await.unwrap();
    assert_eq!(under_way.len(), 1);
    assert_eq!(under_way[0].released, [(TargetStatus::Pending, 10)]);
    store.mark_delivered("exe-r1", vec![ids[0].clone()], 30).await.unwrap();
    let result = RunResult { execution_id: "exe-r1".into(), steps: vec![succeeded(vec![]), succeeded(vec![])] };
    store.save_result(&ids[0], result, 40).await.unwrap();
    assert_eq!(store.rollouts_under_way(50).await.unwrap()[0].released, [(TargetStatus::Succeeded, 40)]);

    assert!(store.release_wave("exe-r1", 1).await.unwrap());
    assert!(!store.release_wave("exe-r1", 1).await.unwrap(), "released once, whoever asks again");
    assert!(!store.release_wave("exe-r1", 3).await.unwrap(), "never past the next wave");
    assert_eq!(store.due_for(&ids[1], 60).await.unwrap().len(), 1, "the second wave is due now");
    assert!(store.due_for(&ids[2], 60).await.unwrap().is_empty());

    assert_eq!(store.skip_unreleased("exe-r1", "skipped: a test", 70).await.unwrap(), 1);
    let targets = store.targets("exe-r1").await.unwrap();
    let by_agent = |i: usize| targets.iter().find(|t| t.agent_id == ids[i]).unwrap().clone();
    assert_eq!(by_agent(1).status, TargetStatus::Pending, "a released wave is not skipped");
    assert_eq!((by_agent(2).status, by_agent(2).error.as_deref()), (TargetStatus::Skipped, Some("skipped: a test")));
    assert!(store.rollouts_under_way(80).await.unwrap().is_empty(), "nothing left to release");
}

async fn unreleased_waves_are_skipped_at_the_deadline(r: Repositories) {
    let ids = with_agents(&r, 3).await;
    let store = &r.work;
    rolling(&r, "exe-r2", &ids, 2, 100).await;
    assert!(store.expire(100).await.unwrap() >= 3);
    let targets = store.targets("exe-r2").await.unwrap();
    let statuses: Vec<_> = targets.iter().map(|t| t.status).collect();
    assert_eq!(statuses, [TargetStatus::Offline, TargetStatus::Offline, TargetStatus::Skipped]);
    assert_eq!(targets[2].error.as_deref(), Some(UNRELEASED_AT_DEADLINE));
    assert!(store.rollouts_under_way(50).await.unwrap().is_empty(), "nothing pending is left");
}
