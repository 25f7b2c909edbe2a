//! Executions, responses, quarantine and compliance, on every backend.

use serde_json::{Map, Value, json};
use toolgate_domain::fleet::compliance::{ComplianceStatus, RuleResult};
use toolgate_domain::fleet::instruction::{ActionClass, ExecutionState, StepStatus, TargetStatus};
use toolgate_domain::fleet::wire::{RunResult, RunStep, StepResult};
use toolgate_domain::groups::Reach;
use toolgate_store::{
    ColumnCondition, ColumnValue, DefinitionQuery, GroupOrder, NewExecution, Repositories, ResponseQuery, RowsOf, Taken,
};

crate::matrix!(
    results_are_stored_once_and_read_back_filtered_paged_and_grouped,
    deadlines_cancellation_and_listing,
    every_run_of_a_definition_is_read_across_executions,
    quarantine_and_compliance_are_kept_per_agent,
    one_result_is_taken_when_the_same_upload_arrives_at_once,
    presence_and_undelivered_runs,
    refused_targets_are_final_and_never_due,
    a_result_is_taken_only_for_a_target_sent_the_run_and_still_open,
    an_idempotency_key_creates_one_execution_per_principal,
);

fn step(definition: &str) -> RunStep {
    RunStep {
        definition: definition.into(),
        plugin: "files".into(),
        action: "sha256".into(),
        class: ActionClass::Read,
        diagnostic: true,
        params: Map::new(),
        timeout_ms: 1000,
        secret_names: Vec::new(),
        config: Default::default(),
        secrets: Default::default(),
        mode: Default::default(),
        approved_plan: None,
        approved_plans: Default::default(),
    }
}

pub(crate) fn row(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

pub(crate) fn succeeded(rows: Vec<Map<String, Value>>) -> StepResult {
    StepResult { status: StepStatus::Succeeded, error: None, rows }
}

pub(crate) async fn with_agents(r: &Repositories, n: i64) -> Vec<String> {
    let (_, secret) = r.fleet.create_enrollment_token(i64::MAX, n, 0).await.unwrap();
    let mut ids = Vec::new();
    for _ in 0..n {
        ids.push(r.fleet.enroll(&secret, 0).await.unwrap().unwrap().0);
    }
    ids.sort();
    ids
}

pub(crate) async fn execution(r: &Repositories, id: &str, targets: &[String], deadline_ms: i64) {
    let e = NewExecution {
        execution_id: id.into(),
        kind: "bundle".into(),
        steps: vec![step("file_hash"), step("os_facts")],
        scope: Some("status = online".into()),
        requested_by: "alice".into(),
        created_at_ms: 10,
        deadline_ms,
        targets: targets.to_vec(),
        idempotency: None,
        rollout: None,
    };
    r.work.create_execution(e).await.unwrap();
}
async fn results_are_stored_once_and_read_back_filtered_paged_and_grouped(r: Repositories) {
    let ids = with_agents(&r, 3).await;
    let store = &r.work;
    execution(&r, "exe-01", &ids, 1_000).await;
    assert_eq!(store.due_for(&ids[0], 20).await.unwrap().len(), 1);
    store.mark_delivered("exe-01", vec![ids[0].clone(), ids[1].clone()], 20).await.unwrap();
    let result = |agent: usize, hash: &str| RunResult {
        execution_id: "exe-01".into(),
        steps: vec![
            succeeded(vec![row(json!({"path": "/f", "sha256": hash, "size_bytes": agent}))]),
            StepResult { status: StepStatus::Failed, error: Some(format!("broken {agent}")), rows: Vec::new() },
        ],
    };
    assert_eq!(store.save_result(&ids[0], result(0, "aa"), 30).await.unwrap(), Taken::Stored);
    assert_eq!(
        store.save_result(&ids[0], result(0, "zz"), 31).await.unwrap(),
        Taken::AlreadyFinal,
        "the first answer stands"
    );
    assert_eq!(store.save_result(&ids[1], result(1, "aa"), 32).await.unwrap(), Taken::Stored);
    assert_eq!(store.save_result("agt-nobody", result(1, "aa"), 32).await.unwrap(), Taken::Unknown);

    let targets = store.targets("exe-01").await.unwrap();
    let statuses: Vec<TargetStatus> = targets.iter().map(|t| t.status).collect();
    assert_eq!(statuses, [TargetStatus::Failed, TargetStatus::Failed, TargetStatus::Pending]);
    assert_eq!(targets[0].error.as_deref(), Some("broken 0"));
    let failed = store.targets_page("exe-01", Some(TargetStatus::Failed), 1, 10).await.unwrap();
    assert_eq!(
        failed.iter().map(|t| t.agent_id.as_str()).collect::<Vec<_>>(),
        [ids[1].as_str()],
        "paged and filtered in SQL"
    );
    assert_eq!(store.targets_page("exe-01", None, 0, 2).await.unwrap().len(), 2);
    let header = store.execution("exe-01", None).await.unwrap().unwrap();
    assert_eq!(header.counts, [(TargetStatus::Failed, 2), (TargetStatus::Pending, 1)]);
    assert_eq!(header.steps.len(), 2);

    let query = |conditions: Vec<ColumnCondition>, after, limit| ResponseQuery {
        execution_id: "exe-01".into(),
        step: 0,
        conditions,
        after,
        limit,
        ..ResponseQuery::default()
    };
    let all = store.responses(query(Vec::new(), 0, 1)).await.unwrap();
    assert_eq!((all.rows.len(), all.more), (1, true));
    let aa = ColumnCondition { column: "sha256".into(), equal: true, value: ColumnValue::Text("aa".into()) };
    assert_eq!(store.responses(query(vec![aa], 0, 10)).await.unwrap().rows.len(), 2);
    let size1 = ColumnCondition { column: "size_bytes".into(), equal: true, value: ColumnValue::Integer(1) };
    let one = store.responses(query(vec![size1], 0, 10)).await.unwrap();
    assert_eq!(one.rows[0].agent_id, ids[1]);
    let groups = store
        .aggregate(
            RowsOf::Step { execution_id: "exe-01", step: 0 },
            None,
            "sha256",
            Some("size_bytes"),
            GroupOrder::Count,
            10,
        )
        .await
        .unwrap();
    assert_eq!(
        (groups[0].value.clone(), groups[0].count, groups[0].min.clone(), groups[0].max.clone()),
        (json!("aa"), 2, json!(0), json!(1))
    );
    assert_eq!((groups[0].sum.clone(), groups[0].avg.clone()), (json!(1), json!(0.5)), "over size_bytes 0 and 1");
    assert!(
        store
            .aggregate(
                RowsOf::Step { execution_id: "exe-01", step: 0 },
                None,
                "sha256'); DROP TABLE response; --",
                None,
                GroupOrder::Count,
                10
            )
            .await
            .is_err(),
        "a column is never spliced raw"
    );
    let steps = store.steps("exe-01").await.unwrap();
    assert_eq!(steps.len(), 4);
    assert_eq!((steps[1].status.as_str(), steps[1].row_count), ("failed", 0));
}

/// Every run of a definition: its rows across executions, in each bundle at the step that
/// ran it, paged by place so that each row comes once, and grouped across executions.
async fn every_run_of_a_definition_is_read_across_executions(r: Repositories) {
    let ids = with_agents(&r, 2).await;
    let store = &r.work;
    for (execution_id, agent, hashes) in [("exe-a", 0, vec![("aa", 1), ("bb", 10)]), ("exe-b", 1, vec![("aa", 2)])] {
        execution(&r, execution_id, &ids, 1_000).await;
        store.mark_delivered(execution_id, vec![ids[agent].clone()], 20).await.unwrap();
        let rows = hashes.iter().map(|(h, size)| row(json!({"sha256": h, "size_bytes": size}))).collect();
        let facts = succeeded(vec![row(json!({"hostname": format!("host-{agent}")}))]);
        let result = RunResult { execution_id: execution_id.into(), steps: vec![succeeded(rows), facts] };
        assert_eq!(store.save_result(&ids[agent], result, 30).await.unwrap(), Taken::Stored);
    }
    let mut after = None;
    let mut seen = Vec::new();
    loop {
        let query =
            DefinitionQuery { definition: "file_hash".into(), after: after.clone(), limit: 1, ..Default::default() };
        let page = store.definition_responses(query).await.unwrap();
        for row in &page.rows {
            seen.push((row.place.execution_id.clone(), row.place.step, row.values["sha256"].clone()));
            after = Some(row.place.clone());
        }
        if !page.more {
            break;
        }
    }
    let want = [("exe-a", 0, json!("aa")), ("exe-a", 0, json!("bb")), ("exe-b", 0, json!("aa"))];
    assert_eq!(seen, want.map(|(e, s, v)| (e.to_string(), s, v)), "each row once, in order");
    let facts = DefinitionQuery { definition: "os_facts".into(), limit: 10, ..Default::default() };
    let facts = store.definition_responses(facts).await.unwrap();
    let steps: Vec<usize> = facts.rows.iter().map(|r| r.place.step).collect();
    assert_eq!(steps, [1, 1], "a bundle's rows count for the definition its step ran");
    let one_agent = DefinitionQuery {
        definition: "file_hash".into(),
        agent_id: Some(ids[1].clone()),
        limit: 10,
        ..Default::default()
    };
    assert_eq!(store.definition_responses(one_agent).await.unwrap().rows.len(), 1);
    let groups =
        store.aggregate(RowsOf::Definition("file_hash"), None, "sha256", None, GroupOrder::Count, 10).await.unwrap();
    let counts: Vec<(Value, i64)> = groups.into_iter().map(|g| (g.value, g.count)).collect();
    assert_eq!(counts, [(json!("aa"), 2), (json!("bb"), 1)]);
    // Ordered by the size column's statistic instead: bb's 10 outweighs aa's 1 and 2 but for
    // the count and the smallest minimum.
    let all_runs = RowsOf::Definition("file_hash");
    for (order, first, statistic) in [
        (GroupOrder::Sum, "bb", json!(10)),
        (GroupOrder::Avg, "bb", json!(10)),
        (GroupOrder::Max, "bb", json!(10)),
        (GroupOrder::Min, "aa", json!(1)),
    ] {
        let groups = store.aggregate(all_runs, None, "sha256", Some("size_bytes"), order, 10).await.unwrap();
        let got = match order {
            GroupOrder::Sum => &groups[0].sum,
            GroupOrder::Avg => &groups[0].avg,
            GroupOrder::Max => &groups[0].max,
            _ => &groups[0].min,
        };
        assert_eq!((&groups[0].value, got), (&json!(first), &statistic), "{order:?}");
    }
    let aa = store.aggregate(all_runs, None, "sha256", Some("size_bytes"), GroupOrder::Count, 10).await.unwrap();
    assert_eq!((aa[0].sum.clone(), aa[0].avg.clone()), (json!(3), json!(1.5)));
    assert!(
        store
            .aggregate(RowsOf::Definition("nothing"), None, "sha256", None, GroupOrder::Count, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn deadlines_cancellation_and_listing(r: Repositories) {
    let ids = with_agents(&r, 3).await;
    let store = &r.work;
    execution(&r, "exe-02", &ids, 1_000).await;
    store.mark_delivered("exe-02", vec![ids[0].clone()], 20).await.unwrap();
    let cancelled = store.cancel("exe-02", 50).await.unwrap().unwrap();
    assert_eq!(cancelled.stopped, 2, "the two never delivered");
    assert_eq!(store.cancel("exe-02", 60).await.unwrap().unwrap().stopped, 0);
    assert!(store.cancel("exe-nope", 60).await.unwrap().is_none());
    assert!(store.due_for(&ids[0], 60).await.unwrap().is_empty(), "a cancelled execution is never sent again");

    execution(&r, "exe-03", &ids, 100).await;
    store.mark_delivered("exe-03", vec![ids[0].clone()], 20).await.unwrap();
    assert_eq!(store.expire(99).await.unwrap(), 0);
    assert!(store.expire(100).await.unwrap() >= 3);
    let statuses: Vec<TargetStatus> = store.targets("exe-03").await.unwrap().iter().map(|t| t.status).collect();
    assert_eq!(statuses, [TargetStatus::TimedOut, TargetStatus::Offline, TargetStatus::Offline]);
    let errors: Vec<Option<String>> = store.targets("exe-03").await.unwrap().into_iter().map(|t| t.error).collect();
    assert_eq!(errors, [Some(toolgate_store::SILENT_PAST_DEADLINE.to_string()), None, None], "the silent one says so");
    // exe-02's delivered target waits for its own deadline, cancelled or not.
    assert_eq!(store.targets("exe-02").await.unwrap()[0].status, TargetStatus::Running);
    store.expire(1_000).await.unwrap();
    assert_eq!(store.targets("exe-02").await.unwrap()[0].status, TargetStatus::TimedOut);
    let listed = store.executions(Some("file_hash"), None, None, 0, 10).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert!(store.executions(Some("nothing"), None, None, 0, 10).await.unwrap().is_empty());
    // Both ended now: none running. A new one is running until its targets end.
    let ids_of = |h: Vec<toolgate_store::ExecutionHeader>| h.into_iter().map(|h| h.execution_id).collect::<Vec<_>>();
    let running = Some(ExecutionState::Running);
    assert!(store.executions(None, running, None, 0, 10).await.unwrap().is_empty());
    execution(&r, "exe-04", &ids, 5_000).await;
    assert_eq!(ids_of(store.executions(None, running, None, 0, 10).await.unwrap()), ["exe-04"]);
    let finished = ids_of(store.executions(None, Some(ExecutionState::Finished), None, 0, 10).await.unwrap());
    assert_eq!(finished.len(), 2, "{finished:?}");
    assert!(!finished.contains(&"exe-04".to_string()), "{finished:?}");
    store.cancel("exe-04", 60).await.unwrap();
    assert!(store.executions(None, running, None, 0, 10).await.unwrap().is_empty(), "cancelled before delivery: ended");
}

async fn quarantine_and_compliance_are_kept_per_agent(r: Repositories) {
    let ids = with_agents(&r, 2).await;
    let store = &r.work;
    store.set_quarantine(&ids[0], true, Some("why")).await.unwrap();
    store.quarantine_reported(&ids[0], true, None).await.unwrap();
    let q = store.quarantines().await.unwrap();
    assert_eq!((q.len(), q[0].wanted, q[0].reason.as_deref(), q[0].reported), (1, true, Some("why"), Some(true)));
    // Issue 43, 16: how the agent holds a quarantine is kept (an older agent's silence keeps
    // what was said before), and read within the caller's reach only.
    use toolgate_domain::fleet::wire::{QuarantineEnforcement, QuarantineMode};
    assert_eq!(store.quarantine_enforcement(&ids[0], &Reach::Fleet).await.unwrap(), Some(None), "never said");
    let soft = QuarantineEnforcement { mode: QuarantineMode::Soft, why: "no isolation".into() };
    store.quarantine_reported(&ids[0], true, Some(&soft)).await.unwrap();
    store.quarantine_reported(&ids[0], true, None).await.unwrap();
    assert_eq!(store.quarantines().await.unwrap()[0].enforcement.as_ref(), Some(&soft));
    assert_eq!(store.quarantine_enforcement(&ids[0], &Reach::Fleet).await.unwrap(), Some(Some(soft)));
    assert_eq!(store.quarantine_enforcement("agt-none", &Reach::Fleet).await.unwrap(), None);
    let team = crate::groups::top_group(&r, "Team").await;
    let elsewhere = Reach::Groups(vec![team.id].into());
    assert_eq!(store.quarantine_enforcement(&ids[0], &elsewhere).await.unwrap(), None, "outside the reach");
    let result = |rule: &str, status| RuleResult { rule_id: rule.into(), status, evidence: "seen".into() };
    store
        .save_compliance(
            &ids[0],
            vec![result("r1", ComplianceStatus::Compliant), result("r2", ComplianceStatus::Unknown)],
            5,
        )
        .await
        .unwrap();
    store.save_compliance(&ids[0], vec![result("r1", ComplianceStatus::NonCompliant)], 6).await.unwrap();
    store.save_compliance(&ids[1], vec![result("r1", ComplianceStatus::Compliant)], 6).await.unwrap();
    let all = store.compliance(None, &Reach::Fleet).await.unwrap();
    assert_eq!(all.len(), 2, "a new evaluation replaces the agent's last");
    let r1 = store.compliance(Some("r1"), &Reach::Fleet).await.unwrap();
    let mine = r1.iter().find(|(a, _, _)| a == &ids[0]).unwrap();
    assert_eq!((mine.1.status, mine.2), (ComplianceStatus::NonCompliant, 6));
}

async fn one_result_is_taken_when_the_same_upload_arrives_at_once(r: Repositories) {
    let ids = with_agents(&r, 1).await;
    execution(&r, "exe-04", &ids, 1_000).await;
    r.work.mark_delivered("exe-04", ids.clone(), 15).await.unwrap();
    let uploads = (0..8).map(|i| {
        let (store, agent) = (r.work.clone(), ids[0].clone());
        let result = RunResult {
            execution_id: "exe-04".into(),
            steps: vec![succeeded(vec![row(json!({"n": i}))]), succeeded(Vec::new())],
        };
        tokio::spawn(async move { store.save_result(&agent, result, 20).await.unwrap() })
    });
    let taken = futures_util::future::join_all(uploads).await;
    let stored = taken.iter().filter(|t| *t.as_ref().unwrap() == Taken::Stored).count();
    assert_eq!(stored, 1, "the first result stands, the others are repeats: {taken:?}");
    assert_eq!(r.work.steps("exe-04").await.unwrap().len(), 2);
}

async fn presence_and_undelivered_runs(r: Repositories) {
    let ids = with_agents(&r, 2).await;
    r.fleet.agent_connected(&ids[0], "replica-a", 100).await.unwrap();
    r.fleet.agent_connected(&ids[1], "replica-b", 100).await.unwrap();
    assert_eq!(
        r.fleet.connected_elsewhere("replica-a", 50).await.unwrap(),
        [(ids[1].clone(), "replica-b".into(), 100)]
    );
    assert!(r.fleet.connected_elsewhere("replica-a", 101).await.unwrap().is_empty(), "not seen since");
    r.fleet.agent_disconnected(&ids[1], "replica-a", 110).await.unwrap();
    assert_eq!(r.fleet.connected_elsewhere("replica-a", 50).await.unwrap().len(), 1, "only its own replica ends it");
    r.fleet.agent_disconnected(&ids[1], "replica-b", 110).await.unwrap();
    assert!(r.fleet.connected_elsewhere("replica-a", 50).await.unwrap().is_empty());

    execution(&r, "exe-05", &ids, 1_000).await;
    r.work.mark_delivered("exe-05", vec![ids[0].clone()], 20).await.unwrap();
    let (order, pending) = r.work.undelivered("exe-05", 20).await.unwrap().unwrap();
    assert_eq!((order.steps.len(), pending), (2, vec![ids[1].clone()]));
    assert!(r.work.undelivered("exe-05", 1_000).await.unwrap().is_none(), "past its deadline");
    r.work.cancel("exe-05", 30).await.unwrap();
    assert!(r.work.undelivered("exe-05", 40).await.unwrap().is_none(), "cancelled");
}

async fn refused_targets_are_final_and_never_due(r: Repositories) {
    let ids = with_agents(&r, 3).await;
    let store = &r.work;
    execution(&r, "exe-09", &ids, 1_000).await;
    store.mark_delivered("exe-09", vec![ids[1].clone(), ids[2].clone()], 20).await.unwrap();
    let result = RunResult { execution_id: "exe-09".into(), steps: vec![succeeded(Vec::new()), succeeded(Vec::new())] };
    assert_eq!(store.save_result(&ids[2], result, 25).await.unwrap(), Taken::Stored);
    store.refuse("exe-09", ids.clone(), "quarantined", 30).await.unwrap();
    let targets = store.targets("exe-09").await.unwrap();
    let statuses: Vec<TargetStatus> = targets.iter().map(|t| t.status).collect();
    assert_eq!(
        statuses,
        [TargetStatus::Refused, TargetStatus::Refused, TargetStatus::Succeeded],
        "pending and running are refused; a finished one stands"
    );
    assert_eq!(targets[0].error.as_deref(), Some("quarantined"));
    assert!(
        store.due_for(&ids[0], 40).await.unwrap().is_empty() && store.due_for(&ids[1], 40).await.unwrap().is_empty()
    );
    let header = store.execution("exe-09", None).await.unwrap().unwrap();
    assert_eq!(header.counts, [(TargetStatus::Refused, 2), (TargetStatus::Succeeded, 1)]);
}

/// Issue 27, LOW 12: a result was accepted for a target never sent (a cancelled one became
/// `succeeded`). Now only a target sent the run and still open takes one.
async fn a_result_is_taken_only_for_a_target_sent_the_run_and_still_open(r: Repositories) {
    let ids = with_agents(&r, 3).await;
    let store = &r.work;
    let result =
        |id: &str| RunResult { execution_id: id.into(), steps: vec![succeeded(Vec::new()), succeeded(Vec::new())] };
    execution(&r, "exe-0a", &ids, 1_000).await;
    assert_eq!(store.save_result(&ids[0], result("exe-0a"), 20).await.unwrap(), Taken::NotOpen, "pending: never sent");
    store.cancel("exe-0a", 30).await.unwrap();
    assert_eq!(store.save_result(&ids[0], result("exe-0a"), 40).await.unwrap(), Taken::NotOpen, "cancelled");
    execution(&r, "exe-0b", &ids, 100).await;
    store.mark_delivered("exe-0b", vec![ids[1].clone()], 20).await.unwrap();
    store.expire(100).await.unwrap();
    assert_eq!(store.save_result(&ids[1], result("exe-0b"), 120).await.unwrap(), Taken::NotOpen, "timed out");
    assert_eq!(store.save_result(&ids[2], result("exe-0b"), 120).await.unwrap(), Taken::NotOpen, "offline");
    let statuses: Vec<TargetStatus> = store.targets("exe-0a").await.unwrap().iter().map(|t| t.status).collect();
    assert_eq!(statuses, [TargetStatus::Cancelled; 3], "nothing changed");
    assert!(store.steps("exe-0a").await.unwrap().is_empty() && store.steps("exe-0b").await.unwrap().is_empty());
}

/// Fidelity: an idempotency key names one execution per principal, on every backend, and a
/// burst of the same retry creates it once.
async fn an_idempotency_key_creates_one_execution_per_principal(r: Repositories) {
    use toolgate_store::{Created, Idempotency};
    let ids = with_agents(&r, 1).await;
    let keyed = |id: &str, by: &str, digest: &str| NewExecution {
        execution_id: id.into(),
        kind: "instruction".into(),
        steps: vec![step("file_hash")],
        scope: None,
        requested_by: by.into(),
        created_at_ms: 10,
        deadline_ms: 1_000,
        targets: ids.clone(),
        idempotency: Some(Idempotency { key: "retry-1".into(), arguments_digest: digest.into() }),
        rollout: None,
    };
    let store = &r.work;
    assert_eq!(store.create_execution(keyed("exe-k1", "alice", "d1")).await.unwrap(), Created::New);
    assert_eq!(
        store.create_execution(keyed("exe-k2", "alice", "d1")).await.unwrap(),
        Created::Existing { execution_id: "exe-k1".into(), same_arguments: true }
    );
    assert_eq!(
        store.create_execution(keyed("exe-k3", "alice", "d2")).await.unwrap(),
        Created::Existing { execution_id: "exe-k1".into(), same_arguments: false }
    );
    assert_eq!(
        store.create_execution(keyed("exe-k4", "bob", "d1")).await.unwrap(),
        Created::New,
        "keys are per principal"
    );
    assert!(
        store.execution("exe-k2", None).await.unwrap().is_none()
            && store.execution("exe-k3", None).await.unwrap().is_none()
    );
    let burst = (0..8).map(|i| {
        let (store, e) = (r.work.clone(), keyed(&format!("exe-c{i}"), "carol", "d1"));
        tokio::spawn(async move { store.create_execution(e).await.unwrap() })
    });
    let created = futures_util::future::join_all(burst).await;
    let new = created.iter().filter(|c| *c.as_ref().unwrap() == Created::New).count();
    assert_eq!(new, 1, "{created:?}");
}
