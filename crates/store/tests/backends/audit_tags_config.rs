//! Plugin configuration, kill switches, tags, groups, the audit log and health, on every backend.

use toolgate_domain::audit::{AuditEvent, AuditFilter, AuditOutcome, TargetType};
use toolgate_domain::groups::Reach;
use toolgate_domain::records::Change;
use toolgate_store::Repositories;

crate::matrix!(
    config_round_trip,
    kill_switch_defaults_off,
    tags_groups_and_health,
    audit_rows_are_kept_and_filtered,
    a_large_batch_keeps_every_row_in_order,
    retention_deletes_every_old_row_and_no_young_one
);

fn by(at: i64) -> Change<'static> {
    Change { at, by: "admin" }
}

async fn config_round_trip(r: Repositories) {
    let store = &r.plugin_config;
    assert_eq!(store.set("p", "k", "v1", by(1)).await.unwrap(), None);
    assert_eq!(store.set("p", "k", "v2", by(2)).await.unwrap(), Some("v1".into()));
    assert_eq!(store.get("p", "k").await.unwrap().unwrap().value, "v2");
    assert_eq!(store.list(Some("p")).await.unwrap().len(), 1);
    assert_eq!(store.list(Some("q")).await.unwrap().len(), 0);
    assert_eq!(store.list(None).await.unwrap().len(), 1);
    assert_eq!(store.delete("p", "k").await.unwrap(), Some("v2".into()));
    assert_eq!(store.delete("p", "k").await.unwrap(), None);
}

async fn kill_switch_defaults_off(r: Repositories) {
    let store = &r.plugin_config;
    assert!(!store.kill_switch("p", None).await.unwrap().enabled);
    let s = store.set_kill_switch("p", Some("sync"), true, Some("incident"), by(5)).await.unwrap();
    assert!(s.enabled && s.reason.as_deref() == Some("incident") && s.updated_at == Some(5));
    assert!(!store.kill_switch("p", None).await.unwrap().enabled);
    assert!(store.kill_switch("p", Some("sync")).await.unwrap().enabled);
    assert!(!store.set_kill_switch("p", Some("sync"), false, None, by(6)).await.unwrap().enabled);
    // What every replica refuses: the engaged ones only, the whole plugin's with no action.
    assert!(store.engaged_kill_switches().await.unwrap().is_empty());
    store.set_kill_switch("q", None, true, Some("incident 42"), by(7)).await.unwrap();
    store.set_kill_switch("p", Some("other"), true, None, by(8)).await.unwrap();
    let engaged = store.engaged_kill_switches().await.unwrap();
    let names: Vec<(&str, Option<&str>)> = engaged.iter().map(|s| (s.plugin.as_str(), s.action.as_deref())).collect();
    assert_eq!(names, [("p", Some("other")), ("q", None)]);
    assert!(engaged[1].stops("q", "anything") && !engaged[0].stops("p", "sync"));
    assert_eq!((engaged[1].reason.as_deref(), engaged[1].updated_by.as_deref()), (Some("incident 42"), Some("admin")));
}

async fn tags_groups_and_health(r: Repositories) {
    assert_eq!(r.tags.set_agent_tag("agt-1", "env", "prod", by(1)).await.unwrap(), None);
    assert_eq!(r.tags.set_agent_tag("agt-1", "env", "dev", by(2)).await.unwrap(), Some("prod".into()));
    r.tags.set_agent_tag("agt-2", "role", "db", by(2)).await.unwrap();
    let tags = r.tags.agent_tags("agt-1").await.unwrap();
    assert_eq!((tags.len(), tags[0].value.as_str(), tags[0].updated_at), (1, "dev", 2));
    assert_eq!(r.fleet.all_tags(&Reach::Fleet).await.unwrap().len(), 2);
    let enrolled = crate::fleet_work::with_agents(&r, 1).await.remove(0);
    r.tags.set_agent_tag(&enrolled, "env", "prod", by(3)).await.unwrap();
    let mut env = r.fleet.tag_values(&Reach::Fleet, "env").await.unwrap();
    // The order is the backend's collation's; the enrolled id is random, either side of `agt-1`.
    env.sort();
    let mut expected = vec![("agt-1".to_string(), "dev".to_string()), (enrolled.clone(), "prod".to_string())];
    expected.sort();
    assert_eq!(env, expected);
    assert!(r.fleet.tag_values(&Reach::Fleet, "nope").await.unwrap().is_empty());
    // Confined in the query: a reader of one group reads its members' tags only.
    let team = crate::groups::top_group(&r, "Team").await;
    let reach = Reach::Groups(vec![team.id.clone()].into());
    assert!(
        r.fleet.tag_values(&reach, "env").await.unwrap().is_empty()
            && r.fleet.all_tags(&reach).await.unwrap().is_empty()
    );
    r.groups.add_member(&team.id, &enrolled).await.unwrap().unwrap();
    assert_eq!(r.fleet.tag_values(&reach, "env").await.unwrap(), [(enrolled.clone(), "prod".to_string())]);
    assert_eq!(r.fleet.all_tags(&reach).await.unwrap(), [(enrolled.clone(), "env".to_string(), "prod".to_string())]);
    r.groups.remove_member(&team.id, &enrolled).await.unwrap().unwrap();
    r.groups.delete_group(&team.id).await.unwrap().unwrap();
    assert_eq!(r.tags.delete_agent_tag("agt-1", "env").await.unwrap(), Some("dev".into()));
    assert_eq!(r.tags.delete_agent_tag("agt-1", "env").await.unwrap(), None);
    let groups = r.groups.management_groups().await.unwrap();
    assert_eq!(groups.iter().map(|g| g.id.as_str()).collect::<Vec<_>>(), ["all"]);
    r.health.check_ready(1).await.unwrap();
    r.health.check_ready(2).await.unwrap();
    let gauges = r.health.gauges(0).await.unwrap();
    assert_eq!((gauges.approvals_pending, gauges.executions_in_flight), (0, 0));
}

async fn audit_rows_are_kept_and_filtered(r: Repositories) {
    let event = |at_ms, action: &str, principal: &str| AuditEvent {
        principal: Some(principal.into()),
        correlation_id: Some(format!("c{at_ms}")),
        ..AuditEvent::new(at_ms, action, AuditOutcome::Success)
    };
    r.audit.append([event(1, "mcp.set_tag", "alice"), event(2, "mcp.get_tags", "bob")].into(), true).await.unwrap();
    let session = event(3, "session.open", "alice").target(TargetType::McpSession, "s-1");
    r.audit.append([session].into(), false).await.unwrap();
    let all = r.audit.query(&AuditFilter { limit: 10, ..AuditFilter::default() }).await.unwrap();
    assert_eq!(all.iter().map(|e| e.at_ms).collect::<Vec<_>>(), [3, 2, 1], "newest first");
    let mcp = AuditFilter { action_prefix: Some("mcp.".into()), limit: 10, ..AuditFilter::default() };
    assert_eq!(r.audit.query(&mcp).await.unwrap().len(), 2);
    let alice = AuditFilter { principal: Some("alice".into()), since_ms: Some(2), limit: 10, ..AuditFilter::default() };
    assert_eq!(r.audit.query(&alice).await.unwrap()[0].action, "session.open");
    let sessions = AuditFilter { target_type: Some("McpSession".into()), limit: 10, ..AuditFilter::default() };
    let sessions = r.audit.query(&sessions).await.unwrap();
    assert_eq!(sessions.len(), 1, "the target type is kept and filtered on");
    assert_eq!((sessions[0].target.as_deref(), sessions[0].target_type.as_deref()), (Some("s-1"), Some("McpSession")));
    let replica = r.shared.as_ref().map(|s| s.replica.to_string());
    assert!(all.iter().all(|e| e.replica == replica), "each row names the replica that wrote it (none when alone)");
    let one = AuditFilter { correlation_id: Some("c2".into()), limit: 10, ..AuditFilter::default() };
    assert_eq!(r.audit.query(&one).await.unwrap()[0].principal.as_deref(), Some("bob"));
    assert_eq!(r.audit.prune(3).await.unwrap(), 2);
    assert_eq!(r.audit.query(&AuditFilter { limit: 10, ..AuditFilter::default() }).await.unwrap().len(), 1);
}

/// A batch as the audit writer gathers them under load (up to 512 rows): every row, every
/// column, in the order given.
async fn a_large_batch_keeps_every_row_in_order(r: Repositories) {
    let rows: Vec<AuditEvent> = (0..75)
        .map(|i| {
            let mut event = AuditEvent::new(i, format!("mcp.tool_{i}"), AuditOutcome::Success)
                .detail(format!("row {i}"))
                .correlation(format!("req-{i}"))
                .about_agents(vec![format!("agt-{i}")]);
            event.principal = Some(format!("p{}", i % 3));
            event.target(TargetType::ToolArguments, format!("{{\"n\":{i}}}"))
        })
        .collect();
    r.audit.append(rows.clone().into(), false).await.unwrap();
    let mut stored = r.audit.query(&AuditFilter { limit: 100, ..AuditFilter::default() }).await.unwrap();
    stored.reverse();
    // Every column a row is written with (the replica is the store's own).
    let columns = |e: &AuditEvent| {
        let texts =
            [&e.principal, &e.token_id, &e.target, &e.detail, &e.correlation_id, &e.target_type].map(Clone::clone);
        (e.at_ms, e.action.clone(), e.result.clone(), texts, e.agents.clone())
    };
    assert_eq!(stored.iter().map(columns).collect::<Vec<_>>(), rows.iter().map(columns).collect::<Vec<_>>());
}

/// Retention over more rows than one of SQLite's chunks, with one row stamped far in the
/// future among the oldest (a clock that was set back): every row older than the cut goes,
/// every younger one stays, and the odd row holds nothing up.
async fn retention_deletes_every_old_row_and_no_young_one(r: Repositories) {
    const ROWS: i64 = 25_000;
    const CUT: i64 = 20_000;
    let stamp = |i: i64| if i == 5 { 1_000_000_000 } else { i };
    let rows: Vec<AuditEvent> =
        (0..ROWS).map(|i| AuditEvent::new(stamp(i), "mcp.tools/call", AuditOutcome::Success)).collect();
    for batch in rows.chunks(5_000) {
        r.audit.append(batch.to_vec().into(), false).await.unwrap();
    }
    assert_eq!(r.audit.prune(CUT).await.unwrap(), CUT as u64 - 1, "every row before the cut but the future one");
    let kept = r.audit.query(&AuditFilter { limit: 10_000, ..AuditFilter::default() }).await.unwrap();
    let mut stamps: Vec<i64> = kept.iter().map(|e| e.at_ms).collect();
    stamps.sort_unstable();
    let expected: Vec<i64> = (CUT..ROWS).chain([stamp(5)]).collect();
    assert_eq!(stamps, expected);
    assert_eq!(r.audit.prune(CUT).await.unwrap(), 0, "nothing left to delete");
}
