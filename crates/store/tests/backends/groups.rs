//! Management groups on every backend: the tree's rules, explicit and rule membership kept in
//! step with facts and tags, roles on groups, and confinement applied in the queries.

use std::collections::HashSet;

use toolgate_domain::audit::{AuditEvent, AuditFilter, AuditOutcome};
use toolgate_domain::fleet::HostFacts;
use toolgate_domain::fleet::compliance::{ComplianceStatus, RuleResult};
use toolgate_domain::fleet::wire::RunResult;
use toolgate_domain::groups::{GroupRefusal, GroupRole, ROOT_GROUP, Reach, Visible};
use toolgate_domain::records::Change;
use toolgate_store::{
    DefinitionQuery, GroupOrder, GroupUpdate, NewGroup, Reader, Repositories, ResponseQuery, RowSource, RowsOf,
};

use crate::fleet::report;
use crate::fleet_work::{execution, row, succeeded};

crate::matrix!(
    the_tree_refuses_cycles_duplicates_and_the_root,
    rule_members_follow_facts_and_tags_in_the_same_write,
    explicit_members_and_descendants_make_a_groups_agents,
    roles_on_groups_are_part_of_the_principal,
    confined_queries_cut_pages_after_confinement,
    an_execution_is_read_by_its_submitter_or_a_reach_over_every_target,
    a_confined_reader_reads_its_own_audit_rows_and_those_about_its_agents,
);

fn by(at: i64) -> Change<'static> {
    Change { at, by: "admin" }
}

fn group<'a>(name: &'a str, parent: &'a str, rule: Option<&'a str>) -> NewGroup<'a> {
    NewGroup { name, description: "", parent_id: parent, rule, change: by(1) }
}

/// A group `name` just under the root, made through the store.
pub(crate) async fn top_group(r: &Repositories, name: &str) -> toolgate_domain::groups::ManagementGroup {
    r.groups.create_group(group(name, ROOT_GROUP, None)).await.unwrap().unwrap()
}

async fn enroll(r: &Repositories, n: usize) -> Vec<String> {
    let (_, secret) = r.fleet.create_enrollment_token(i64::MAX, n as i64, 0).await.unwrap();
    let mut ids = Vec::new();
    for _ in 0..n {
        ids.push(r.fleet.enroll(&secret, 0).await.unwrap().unwrap().0);
    }
    ids.sort();
    ids
}

fn facts(hostname: &str) -> HostFacts {
    HostFacts { hostname: hostname.into(), os_id: "debian".into(), ..HostFacts::default() }
}

async fn agents_of(r: &Repositories, groups: &[&str]) -> HashSet<String> {
    let reach = Reach::Groups(groups.iter().map(|g| g.to_string()).collect::<Vec<_>>().into());
    match r.groups.visible(&reach).await.unwrap() {
        Visible::Only(ids) => ids.iter().cloned().collect(),
        Visible::All => panic!("a reach of groups is never the whole fleet"),
    }
}

async fn the_tree_refuses_cycles_duplicates_and_the_root(r: Repositories) {
    let g = &r.groups;
    let a = g.create_group(group("Team A", ROOT_GROUP, None)).await.unwrap().unwrap();
    let child = g.create_group(group("A web", &a.id, None)).await.unwrap().unwrap();
    assert_eq!(child.parent_id.as_deref(), Some(a.id.as_str()));
    let taken = g.create_group(group("team a", ROOT_GROUP, None)).await.unwrap();
    assert_eq!(taken, Err(GroupRefusal::NameTaken("team a".into())), "names are unique case-insensitively");
    let orphan = g.create_group(group("B", "mg-nope", None)).await.unwrap();
    assert_eq!(orphan, Err(GroupRefusal::Unknown("mg-nope".into())));
    let cycle = GroupUpdate { parent_id: Some(&child.id), ..GroupUpdate::default() };
    assert!(matches!(g.update_group(&a.id, cycle, by(2)).await.unwrap(), Err(GroupRefusal::Cycle { .. })));
    let root = GroupUpdate { name: Some("Everything"), ..GroupUpdate::default() };
    assert_eq!(g.update_group(ROOT_GROUP, root, by(2)).await.unwrap(), Err(GroupRefusal::Root));
    assert_eq!(g.delete_group(ROOT_GROUP).await.unwrap(), Err(GroupRefusal::Root));
    assert!(matches!(g.delete_group(&a.id).await.unwrap(), Err(GroupRefusal::HasChildren { .. })));
    let renamed = GroupUpdate { name: Some("Team Alpha"), description: Some("the A team"), ..GroupUpdate::default() };
    let (before, after) = g.update_group(&a.id, renamed, by(3)).await.unwrap().unwrap();
    assert_eq!((before.name.as_str(), after.name.as_str(), after.updated_at), ("Team A", "Team Alpha", 3));
    let mut deep = a.id.clone();
    for level in 0..20 {
        match g.create_group(group(&format!("level {level}"), &deep, None)).await.unwrap() {
            Ok(made) => deep = made.id,
            Err(refusal) => {
                assert!(matches!(refusal, GroupRefusal::TooDeep(_)), "{refusal}");
                break;
            }
        }
    }
    assert_eq!(g.delete_group(&child.id).await.unwrap().unwrap().name, "A web");
    let names: Vec<String> = g.management_groups().await.unwrap().into_iter().map(|g| g.name).collect();
    assert_eq!(names[0], "All agents", "the root first");
    assert!(!names.contains(&"A web".to_string()));
}

async fn rule_members_follow_facts_and_tags_in_the_same_write(r: Repositories) {
    let ids = enroll(&r, 3).await;
    let web = r.groups.create_group(group("Web", ROOT_GROUP, Some(r#"hostname ~ "web-*""#))).await.unwrap().unwrap();
    let prod = r.groups.create_group(group("Prod", ROOT_GROUP, Some("tag:env = prod"))).await.unwrap().unwrap();
    assert!(agents_of(&r, &[&web.id]).await.is_empty(), "nobody has reported yet");
    r.fleet.save_facts(&ids[0], &facts("web-1"), 1).await.unwrap();
    r.fleet.save_facts(&ids[1], &facts("db-1"), 1).await.unwrap();
    assert_eq!(agents_of(&r, &[&web.id]).await, HashSet::from([ids[0].clone()]));
    r.tags.set_agent_tag(&ids[1], "env", "prod", by(2)).await.unwrap();
    r.tags.set_agent_tag(&ids[2], "env", "prod", by(2)).await.unwrap();
    assert_eq!(agents_of(&r, &[&prod.id]).await, HashSet::from([ids[1].clone(), ids[2].clone()]));
    r.tags.set_agent_tag(&ids[2], "env", "dev", by(3)).await.unwrap();
    r.tags.delete_agent_tag(&ids[1], "env").await.unwrap();
    assert!(agents_of(&r, &[&prod.id]).await.is_empty(), "retagged out of the group");
    // A new rule chooses again over every agent; an agent enrolled later is judged at once.
    let everyone = GroupUpdate { rule: Some(Some("os.id = debian")), ..GroupUpdate::default() };
    r.groups.update_group(&prod.id, everyone, by(4)).await.unwrap().unwrap();
    assert_eq!(agents_of(&r, &[&prod.id]).await, HashSet::from([ids[0].clone(), ids[1].clone()]));
    let all_ids = r.groups.create_group(group("Any", ROOT_GROUP, Some("agent_id exists"))).await.unwrap().unwrap();
    let late = enroll(&r, 1).await;
    assert!(agents_of(&r, &[&all_ids.id]).await.contains(&late[0]));
    let memberships = r.groups.memberships().await.unwrap();
    assert!(memberships.contains(&(ids[0].clone(), web.id.clone())));
}

async fn explicit_members_and_descendants_make_a_groups_agents(r: Repositories) {
    let ids = enroll(&r, 3).await;
    let team = r.groups.create_group(group("Team", ROOT_GROUP, Some("tag:team = a"))).await.unwrap().unwrap();
    let sub = r.groups.create_group(group("Team sub", &team.id, None)).await.unwrap().unwrap();
    assert_eq!(r.groups.add_member(&sub.id, &ids[0]).await.unwrap(), Ok(true));
    assert_eq!(r.groups.add_member(&sub.id, &ids[0]).await.unwrap(), Ok(false), "already a member");
    assert_eq!(
        r.groups.add_member(&sub.id, "agt-nope").await.unwrap(),
        Err(GroupRefusal::UnknownAgent("agt-nope".into()))
    );
    assert_eq!(r.groups.add_member(ROOT_GROUP, &ids[0]).await.unwrap(), Err(GroupRefusal::Root));
    r.tags.set_agent_tag(&ids[1], "team", "a", by(1)).await.unwrap();
    assert_eq!(
        agents_of(&r, &[&team.id]).await,
        HashSet::from([ids[0].clone(), ids[1].clone()]),
        "a child's agents are its parent's"
    );
    assert_eq!(agents_of(&r, &[&sub.id]).await, HashSet::from([ids[0].clone()]));
    // Explicit and rule membership are kept apart: removing one leaves the other.
    r.groups.add_member(&team.id, &ids[1]).await.unwrap().unwrap();
    assert_eq!(r.groups.remove_member(&team.id, &ids[1]).await.unwrap(), Ok(true));
    assert!(agents_of(&r, &[&team.id]).await.contains(&ids[1]), "still chosen by the rule");
    let members = r.groups.members(&team.id).await.unwrap().unwrap();
    assert_eq!((members.len(), members[0].explicit, members[0].by_rule), (1, false, true));
    assert_eq!(r.groups.remove_member(&team.id, &ids[1]).await.unwrap(), Ok(false), "not an explicit member");
    assert!(r.groups.visible(&Reach::Fleet).await.unwrap().is_all());
    let with_root = Reach::Groups(vec![sub.id.clone(), ROOT_GROUP.to_string()].into());
    assert!(r.groups.visible(&with_root).await.unwrap().is_all(), "a role on the root is fleet-wide");
    // Moving the child elsewhere takes its agents along.
    let other = r.groups.create_group(group("Other", ROOT_GROUP, None)).await.unwrap().unwrap();
    let moved = GroupUpdate { parent_id: Some(&other.id), ..GroupUpdate::default() };
    r.groups.update_group(&sub.id, moved, by(2)).await.unwrap().unwrap();
    assert_eq!(agents_of(&r, &[&other.id]).await, HashSet::from([ids[0].clone()]));
    assert_eq!(agents_of(&r, &[&team.id]).await, HashSet::from([ids[1].clone()]));
    r.groups.delete_group(&sub.id).await.unwrap().unwrap();
    assert!(agents_of(&r, &[&other.id]).await.is_empty(), "a deleted group's members go with it");
}

async fn roles_on_groups_are_part_of_the_principal(r: Repositories) {
    let team = r.groups.create_group(group("Team", ROOT_GROUP, None)).await.unwrap().unwrap();
    r.credentials.put_principal("alice", &["Viewer".into()], 0).await.unwrap();
    assert_eq!(r.credentials.assign_group_role("alice", &team.id, "Operator", by(1)).await.unwrap(), Ok(true));
    assert_eq!(r.credentials.assign_group_role("alice", &team.id, "Operator", by(1)).await.unwrap(), Ok(false));
    let unknown = r.credentials.assign_group_role("alice", "mg-nope", "Operator", by(1)).await.unwrap();
    assert_eq!(unknown, Err(GroupRefusal::Unknown("mg-nope".into())));
    let alice = r.credentials.principal("alice").await.unwrap().unwrap();
    assert_eq!(alice.group_roles, [GroupRole { group_id: team.id.clone(), role: "Operator".into() }]);
    assert_eq!(r.credentials.principals().await.unwrap()[0].group_roles.len(), 1);
    let held = r.groups.group_roles(Some(&team.id)).await.unwrap();
    assert_eq!((held[0].principal.as_str(), held[0].granted_by.as_str()), ("alice", "admin"));
    assert!(r.credentials.unassign_group_role("alice", &team.id, "Operator").await.unwrap());
    assert!(!r.credentials.unassign_group_role("alice", &team.id, "Operator").await.unwrap());
    r.credentials.assign_group_role("alice", &team.id, "Viewer", by(2)).await.unwrap().unwrap();
    r.groups.delete_group(&team.id).await.unwrap().unwrap();
    assert!(r.credentials.principal("alice").await.unwrap().unwrap().group_roles.is_empty(), "gone with the group");
}

async fn confined_queries_cut_pages_after_confinement(r: Repositories) {
    let ids = enroll(&r, 4).await;
    let team = r.groups.create_group(group("Team", ROOT_GROUP, None)).await.unwrap().unwrap();
    for id in &ids[2..] {
        r.groups.add_member(&team.id, id).await.unwrap().unwrap();
    }
    for id in &ids {
        r.fleet.save_inventory(id, report("listening_ports", &[22, 80]), 2).await.unwrap();
        r.work
            .save_compliance(
                id,
                vec![RuleResult { rule_id: "r1".into(), status: ComplianceStatus::Compliant, evidence: String::new() }],
                3,
            )
            .await
            .unwrap();
    }
    let reach = Reach::Groups(vec![team.id.clone()].into());
    let source = |agent_id: Option<&str>| RowSource {
        table: "listening_ports".into(),
        agent_id: agent_id.map(str::to_string),
        reach: reach.clone(),
    };
    // The first page of two rows is the team's, not the first two rows of the fleet.
    let page = r.fleet.inventory_rows(&source(None), &[], None, 0, 2).await.unwrap();
    let agents: Vec<&str> = page.rows.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!((agents, page.more), (vec![ids[2].as_str(), ids[2].as_str()], true));
    let all = r.fleet.inventory_rows(&source(None), &[], None, 0, 100).await.unwrap();
    assert_eq!(all.rows.len(), 4);
    assert!(
        r.fleet.inventory_rows(&source(Some(&ids[0])), &[], None, 0, 100).await.unwrap().rows.is_empty(),
        "another's agent has no rows for it"
    );
    assert_eq!(r.fleet.inventory_coverage(&reach).await.unwrap(), [("listening_ports".to_string(), 2, 0)]);
    assert_eq!(r.fleet.inventory_coverage(&Reach::Fleet).await.unwrap(), [("listening_ports".to_string(), 4, 0)]);
    let confined: Vec<String> = r.work.compliance(None, &reach).await.unwrap().into_iter().map(|(a, _, _)| a).collect();
    assert_eq!(confined, ids[2..].to_vec());
    assert_eq!(r.work.compliance(Some("r1"), &Reach::Fleet).await.unwrap().len(), 4);
}

async fn an_execution_is_read_by_its_submitter_or_a_reach_over_every_target(r: Repositories) {
    let ids = enroll(&r, 3).await;
    let team = r.groups.create_group(group("Team", ROOT_GROUP, None)).await.unwrap().unwrap();
    for id in &ids[..2] {
        r.groups.add_member(&team.id, id).await.unwrap().unwrap();
    }
    // alice submits one on the team's agents and one on all three.
    execution(&r, "exe-team", &ids[..2], 1_000).await;
    execution(&r, "exe-all", &ids, 1_000).await;
    r.work.mark_delivered("exe-team", ids[..2].to_vec(), 20).await.unwrap();
    let result = RunResult {
        execution_id: "exe-team".into(),
        steps: vec![succeeded(vec![row(serde_json::json!({"sha256": "aa"}))])],
    };
    r.work.save_result(&ids[0], result, 30).await.unwrap();
    let reader = |principal: &str, reach: Reach| Reader { principal: principal.into(), reach };
    let bob_on_team = reader("bob", Reach::Groups(vec![team.id.clone()].into()));
    let carol_nowhere = reader("carol", Reach::Groups(vec!["mg-other".to_string()].into()));
    let alice_nowhere = reader("alice", Reach::Groups(vec!["mg-other".to_string()].into()));
    let fleet = reader("dave", Reach::Fleet);
    let sees = |who: &Reader, id: &'static str| {
        let (work, who) = (r.work.clone(), who.clone());
        async move { work.execution(id, Some(&who)).await.unwrap().is_some() }
    };
    assert!(sees(&alice_nowhere, "exe-all").await, "the submitter reads its own wherever its targets are");
    assert!(sees(&bob_on_team, "exe-team").await, "every target within bob's reach");
    assert!(!sees(&bob_on_team, "exe-all").await, "one target outside it: no such execution for bob");
    assert!(!sees(&carol_nowhere, "exe-team").await);
    assert!(sees(&fleet, "exe-all").await);
    let listed = |who: &Reader| {
        let (work, who) = (r.work.clone(), who.clone());
        async move {
            work.executions(None, None, Some(&who), 0, 10)
                .await
                .unwrap()
                .into_iter()
                .map(|e| e.execution_id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(listed(&bob_on_team).await, ["exe-team"]);
    assert!(listed(&carol_nowhere).await.is_empty());
    assert_eq!(listed(&fleet).await.len(), 2);
    // Responses and their aggregates follow the execution.
    let rows = |who: &Reader| ResponseQuery {
        execution_id: "exe-team".into(),
        reader: Some(who.clone()),
        step: 0,
        limit: 10,
        ..ResponseQuery::default()
    };
    assert_eq!(r.work.responses(rows(&bob_on_team)).await.unwrap().rows.len(), 1);
    assert!(r.work.responses(rows(&carol_nowhere)).await.unwrap().rows.is_empty());
    let team_rows = RowsOf::Step { execution_id: "exe-team", step: 0 };
    assert_eq!(
        r.work.aggregate(team_rows, Some(&bob_on_team), "sha256", None, GroupOrder::Count, 10).await.unwrap().len(),
        1
    );
    assert!(
        r.work
            .aggregate(team_rows, Some(&carol_nowhere), "sha256", None, GroupOrder::Count, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // Every run of a definition, across executions, is confined the same way, in the query.
    let every_run = |who: &Reader| DefinitionQuery {
        definition: "file_hash".into(),
        reader: Some(who.clone()),
        limit: 10,
        ..DefinitionQuery::default()
    };
    assert_eq!(r.work.definition_responses(every_run(&bob_on_team)).await.unwrap().rows.len(), 1);
    assert!(r.work.definition_responses(every_run(&carol_nowhere)).await.unwrap().rows.is_empty());
    let all_runs = RowsOf::Definition("file_hash");
    assert_eq!(
        r.work.aggregate(all_runs, Some(&bob_on_team), "sha256", None, GroupOrder::Count, 10).await.unwrap().len(),
        1
    );
    assert!(
        r.work
            .aggregate(all_runs, Some(&carol_nowhere), "sha256", None, GroupOrder::Count, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Audit rows for a reader confined to a group: its own, and another principal's only when
/// every agent the row is about is the group's; before the limit, never after it.
async fn a_confined_reader_reads_its_own_audit_rows_and_those_about_its_agents(r: Repositories) {
    let ids = enroll(&r, 3).await;
    let team = r.groups.create_group(group("Team", ROOT_GROUP, None)).await.unwrap().unwrap();
    r.groups.add_member(&team.id, &ids[0]).await.unwrap().unwrap();
    r.groups.add_member(&team.id, &ids[1]).await.unwrap().unwrap();
    let row = |at: i64, who: &str, action: &str, agents: &[&String]| {
        AuditEvent::new(at, action, AuditOutcome::Success)
            .by_principal(who)
            .about_agents(agents.iter().map(|a| a.to_string()))
    };
    let rows = vec![
        row(1, "alice", "mine", &[]),
        row(2, "admin", "ours", &[&ids[0]]),
        row(3, "admin", "ours both", &[&ids[0], &ids[1]]),
        row(4, "admin", "theirs", &[&ids[2]]),
        row(5, "admin", "mixed", &[&ids[1], &ids[2]]),
        row(6, "admin", "nothing", &[]),
        row(7, "alice", "mine about theirs", &[&ids[2]]),
    ];
    // Many newer rows nobody confined reads: the limit must count the reader's rows only.
    let noise: Vec<AuditEvent> = (0..50).map(|n| row(100 + n, "admin", "noise", &[&ids[2]])).collect();
    r.audit.append(rows.into(), true).await.unwrap();
    r.audit.append(noise.into(), true).await.unwrap();
    let read = |reach: Reach, agent: Option<&str>, limit: i64| {
        let filter = AuditFilter {
            reader: Some(Reader { principal: "alice".into(), reach }),
            agent_id: agent.map(str::to_string),
            limit,
            ..AuditFilter::default()
        };
        let audit = r.audit.clone();
        async move { audit.query(&filter).await.unwrap().into_iter().map(|e| e.action).collect::<Vec<_>>() }
    };
    let confined = || Reach::Groups(vec![team.id.clone()].into());
    assert_eq!(read(confined(), None, 5).await, ["mine about theirs", "ours both", "ours", "mine"]);
    assert_eq!(read(confined(), Some(&ids[1]), 5).await, ["ours both"]);
    assert_eq!(read(confined(), None, 2).await, ["mine about theirs", "ours both"], "the limit counts what it reads");
    assert_eq!(read(Reach::Fleet, None, 100).await.len(), 57, "a fleet-wide reader reads every row");
    let about_first = AuditFilter { agent_id: Some(ids[0].clone()), limit: 10, ..AuditFilter::default() };
    let about = r.audit.query(&about_first).await.unwrap();
    assert_eq!(about.len(), 2);
    assert_eq!(about[0].agents, [ids[0].clone(), ids[1].clone()], "a row's agents come back sorted");
}
