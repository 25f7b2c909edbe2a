//! Responses paged by arrival, on every backend: a cursor walk neither skips nor repeats a
//! row while results keep arriving, including results stored at the same time as the walk.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolgate_domain::fleet::instruction::{StepStatus, TargetStatus};
use toolgate_domain::fleet::wire::{RunResult, StepResult};
use toolgate_store::{Repositories, ResponsePage, ResponseQuery, Taken};

use crate::fleet_work::{execution, row, succeeded, with_agents};

crate::matrix!(
    a_cursor_walk_neither_skips_nor_repeats_while_results_arrive,
    a_walk_beside_concurrent_results_sees_each_row_once,
);

/// Three rows from agent `agent` for step 0 (step 1 failed, with no rows).
fn result(execution_id: &str, agent: usize) -> RunResult {
    let rows = (0..3).map(|n| row(json!({"agent": agent, "n": n}))).collect();
    RunResult {
        execution_id: execution_id.into(),
        steps: vec![succeeded(rows), StepResult { status: StepStatus::Failed, error: None, rows: Vec::new() }],
    }
}

async fn page(r: &Repositories, execution_id: &str, after: i64, limit: usize) -> ResponsePage {
    let query = ResponseQuery { execution_id: execution_id.into(), step: 0, after, limit, ..ResponseQuery::default() };
    r.work.responses(query).await.unwrap()
}

/// Walks every page after `after`, adding each row's (agent, n) to `seen`; a row seen twice
/// fails. Returns where the walk stopped.
async fn walk(r: &Repositories, execution_id: &str, mut after: i64, seen: &mut BTreeSet<(u64, u64)>) -> i64 {
    loop {
        let found = page(r, execution_id, after, 2).await;
        for row in &found.rows {
            assert!(row.arrival > after, "arrival order: {} after {after}", row.arrival);
            after = row.arrival;
            let key = (row.values["agent"].as_u64().unwrap(), row.values["n"].as_u64().unwrap());
            assert!(seen.insert(key), "{key:?} repeated");
        }
        if !found.more {
            return after;
        }
    }
}

async fn a_cursor_walk_neither_skips_nor_repeats_while_results_arrive(r: Repositories) {
    let ids = with_agents(&r, 6).await;
    execution(&r, "exe-10", &ids, 1_000_000).await;
    r.work.mark_delivered("exe-10", ids.clone(), 20).await.unwrap();
    let store = |agent: usize| {
        let r = r.clone();
        let id = ids[agent].clone();
        async move { assert_eq!(r.work.save_result(&id, result("exe-10", agent), 30).await.unwrap(), Taken::Stored) }
    };
    // The last agents answer first; the first page is cut by its limit.
    store(5).await;
    store(3).await;
    let first = page(&r, "exe-10", 0, 4).await;
    assert_eq!((first.rows.len(), first.more), (4, true));
    let mut seen = BTreeSet::new();
    for row in &first.rows {
        seen.insert((row.values["agent"].as_u64().unwrap(), row.values["n"].as_u64().unwrap()));
    }
    let mut after = first.rows.last().unwrap().arrival;
    // Agents whose ids sort before the rows already read answer between pages: an agent-id
    // order (or an offset) would skip them or show a row twice.
    store(0).await;
    store(1).await;
    after = walk(&r, "exe-10", after, &mut seen).await;
    store(2).await;
    store(4).await;
    walk(&r, "exe-10", after, &mut seen).await;
    let every: BTreeSet<(u64, u64)> = (0..6).flat_map(|a| (0..3).map(move |n| (a, n))).collect();
    assert_eq!(seen, every, "every row once");
    let targets = r.work.targets("exe-10").await.unwrap();
    assert!(targets.iter().all(|t| t.status == TargetStatus::Failed), "step 1 failed everywhere");
}

async fn a_walk_beside_concurrent_results_sees_each_row_once(r: Repositories) {
    const AGENTS: usize = 24;
    let ids = with_agents(&r, AGENTS as i64).await;
    execution(&r, "exe-11", &ids, 1_000_000).await;
    r.work.mark_delivered("exe-11", ids.clone(), 20).await.unwrap();
    let r = Arc::new(r);
    let writers: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(agent, id)| {
            let (r, id) = (r.clone(), id.clone());
            tokio::spawn(async move { r.work.save_result(&id, result("exe-11", agent), 30).await.unwrap() })
        })
        .collect();
    let (mut seen, mut after) = (BTreeSet::new(), 0);
    let deadline = Instant::now() + Duration::from_secs(120);
    while seen.len() < AGENTS * 3 {
        assert!(Instant::now() < deadline, "a row was skipped: {} of {} seen", seen.len(), AGENTS * 3);
        after = walk(&r, "exe-11", after, &mut seen).await;
        tokio::task::yield_now().await;
    }
    for writer in writers {
        assert_eq!(writer.await.unwrap(), Taken::Stored);
    }
    assert!(page(&r, "exe-11", after, 10).await.rows.is_empty(), "nothing after the last row");
}
