//! The decision table by role (docs/policy-roles.md, generated from tools.yaml and
//! policy.yaml) is what the gate does: every tool, at every tier, for every role held
//! fleet-wide and on a management group, asked of the real gate over a real store.

use std::fmt::Write as _;

use serde_json::Value;
use toolgate::registry::{CATALOGUE, POLICY_ROLES_MD, Tier, ToolId};
use toolgate_domain::denial::Denial;
use toolgate_domain::groups::{GroupRole, ROOT_GROUP};
use toolgate_domain::records::Change;
use toolgate_domain::{Caller, Clock, Principal};
use toolgate_gate::{Deciders, Gate};
use toolgate_store::{NewGroup, SqliteStore};

/// What the gate answers one call: the cell of the table. A precondition on the live state
/// is judged after the tier and the grant: refused by it, the call had passed both, and the
/// cell is the tier's decision.
fn cell(answer: Result<toolgate_gate::Passed, Denial>, tier_decision: &'static str) -> &'static str {
    match answer {
        Err(Denial::Precondition { .. }) => tier_decision,
        Ok(passed) if passed.approval.is_some() || passed.planning.is_some() => "approval",
        Ok(passed) if passed.confirm => "confirm",
        Ok(_) => "allow",
        Err(Denial::ApprovalPending { .. }) => "approval",
        Err(Denial::Tier { .. }) => "deny",
        Err(Denial::NotGranted { .. } | Denial::RoleRequired { .. }) => "-",
        Err(other) => panic!("the gate answered neither a decision nor a refusal of the grant: {other:?}"),
    }
}

#[tokio::test]
async fn the_decisions_by_role_are_the_gates() {
    // The headings and rows the gate's answers make; the doc's prose is the generator's.
    let mut out = String::new();
    let tiers: Vec<&str> = Tier::ALL.iter().map(|t| t.name()).collect();
    for (r, role) in CATALOGUE.roles.iter().enumerate() {
        // A store per role: its approval tickets stay under the per-server cap.
        let store = SqliteStore::open_in_memory().unwrap().repositories();
        let group = NewGroup {
            name: "g",
            description: "",
            parent_id: ROOT_GROUP,
            rule: None,
            change: Change { at: 0, by: "t" },
        };
        let group = store.groups.create_group(group).await.unwrap().unwrap().id;
        let deciders = Deciders {
            catalogue: &CATALOGUE,
            credentials: store.credentials.clone(),
            groups: store.groups.clone(),
            work: store.work.clone(),
        };
        let gate =
            Gate::new(&CATALOGUE, store.approvals.clone(), Clock::default(), false).unwrap().with_deciders(deciders);
        let _ = writeln!(out, "## {}", role.name);
        let columns: Vec<String> = tiers.iter().flat_map(|t| [format!("{t} fleet"), format!("{t} group")]).collect();
        let _ = writeln!(out, "| tool | {} |", columns.join(" | "));
        for (n, id) in ToolId::ALL.iter().enumerate() {
            let meta = id.meta();
            let mut arguments: Value =
                meta.example_arguments.map_or(Value::Object(Default::default()), |a| serde_json::from_str(a).unwrap());
            if arguments.get("group_id").is_some() {
                arguments["group_id"] = group.clone().into();
            }
            let mut cells = Vec::new();
            for tier in Tier::ALL {
                for on_group in [false, true] {
                    // A principal of its own per cell: tickets stay under the per-submitter cap.
                    let name = format!("p{r}-{n}-{}-{on_group}", tier.index());
                    let (roles, group_roles) = match on_group {
                        false => (vec![role.name.to_string()], vec![]),
                        true => (vec![], vec![GroupRole { group_id: group.clone(), role: role.name.to_string() }]),
                    };
                    store.credentials.put_principal(&name, &roles, 0).await.unwrap();
                    let principal = Principal { name, roles, group_roles, kind: Default::default() };
                    let caller = Caller {
                        principal,
                        token_id: "tok".into(),
                        tier: Some(tier.rules()),
                        tier_name: tier.name().into(),
                        credential: Default::default(),
                        toolsets: None,
                    };
                    let tier_decision = match CATALOGUE.decision(meta, Some(tier.rules())) {
                        toolgate_policy::Decision::ApprovalRequired => "approval",
                        toolgate_policy::Decision::ConfirmRequired => "confirm",
                        _ => "allow",
                    };
                    cells.push(cell(gate.pass(&caller, meta, arguments.clone()).await, tier_decision));
                }
            }
            let _ = writeln!(out, "| `{}` | {} |", meta.name, cells.join(" | "));
        }
    }
    let table: String = POLICY_ROLES_MD
        .lines()
        .filter(|l| l.starts_with("## ") || (l.starts_with("| ") && !l.starts_with("|---")))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(out, table, "the gate decides otherwise than docs/policy-roles.md says");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/policy-roles.md");
    let ensured = toolgate_catalogue::bless::ensure_file_contents(
        &path,
        POLICY_ROLES_MD,
        "cargo test --test suite decision_table",
    );
    ensured.unwrap_or_else(|stale| panic!("{stale}"));
}
