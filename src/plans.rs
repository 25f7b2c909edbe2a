//! The plans of a held change (docs/instructions.md, "Plan, then apply"): when its ticket was
//! minted the call ran once as a plan; the person deciding sees each host's plan, identical
//! plans grouped, and approving binds the ticket to exactly those plans (each agent's digest).
//! The console, its REST twin and the break-glass CLI all bind through here; the recall then
//! sends each agent its own digest, and an agent whose plan changed meanwhile changes nothing.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use toolgate_domain::StoreError;
use toolgate_domain::fleet::instruction::{Definition, TargetStatus};
use toolgate_domain::fleet::wire::plan_digest;
use toolgate_domain::groups::Reader;
use toolgate_store::{Repositories, ResponseQuery};

/// At most this many rows of one execution's plans are read (a plan is a few rows per host).
const MAX_PLAN_ROWS: usize = 100_000;

/// Hosts with one and the same plan.
#[derive(Clone, Debug)]
pub struct PlanGroup {
    pub digest: String,
    pub rows: Vec<Map<String, Value>>,
    pub agents: Vec<String>,
}

/// Every target of a plan execution as it stands now.
#[derive(Clone, Debug, Default)]
pub struct HostPlans {
    pub execution_id: String,
    /// The change's definition (what it touches and how it is undone).
    pub definition: Option<&'static Definition>,
    /// Each agent that planned, and its plan's digest.
    pub by_agent: BTreeMap<String, String>,
    /// Identical plans together, the most common first.
    pub groups: Vec<PlanGroup>,
    /// The agents without a plan: their status and why.
    pub unplanned: Vec<(String, TargetStatus, Option<String>)>,
    /// How many were sent the plan and have not answered yet.
    pub still_planning: usize,
}

impl HostPlans {
    /// The digest of the whole set the person sees: which agent has which plan.
    pub fn set_digest(&self) -> String {
        toolgate_domain::secrets::sha256_hex(&serde_json::to_string(&self.by_agent).unwrap_or_default())
    }
}

/// The plans of the execution `execution_id`, as `reader` may read them (None: the server
/// itself, for the break-glass CLI): None when it may not (a target lies outside its reach),
/// the store's confinement deciding. A host sent its plan that has not answered is still
/// planning while `online` says it is connected; gone offline, it has no plan (it answers
/// when it is back, too late for this decision).
pub async fn read(
    store: &Repositories,
    execution_id: &str,
    reader: Option<&Reader>,
    online: &(dyn Fn(&str) -> bool + Sync),
) -> Result<Option<HostPlans>, StoreError> {
    let Some(header) = store.work.execution(execution_id, reader).await? else { return Ok(None) };
    let definition =
        header.steps.first().and_then(|step| crate::instructions::instructions().definition(&step.definition).ok());
    let query = ResponseQuery {
        execution_id: execution_id.to_string(),
        reader: reader.cloned(),
        step: 0,
        agent_id: None,
        status: None,
        conditions: Vec::new(),
        after: 0,
        limit: MAX_PLAN_ROWS,
    };
    // The targets before their rows: an agent's rows and its final status are stored in one
    // transaction, so a target read as succeeded has its rows in the read after. The other
    // way round, a plan stored between the two reads was bound as an empty plan, and the
    // approved change then refused as `plan_changed`.
    let targets = store.work.targets(execution_id).await?;
    let mut rows: BTreeMap<String, Vec<Map<String, Value>>> = BTreeMap::new();
    for row in store.work.responses(query).await?.rows {
        rows.entry(row.agent_id).or_default().push(row.values);
    }
    let mut plans = HostPlans { execution_id: execution_id.to_string(), definition, ..HostPlans::default() };
    let mut groups: BTreeMap<String, PlanGroup> = BTreeMap::new();
    for target in targets {
        match target.status {
            TargetStatus::Succeeded => {
                let planned = rows.remove(&target.agent_id).unwrap_or_default();
                let digest = plan_digest(&planned);
                plans.by_agent.insert(target.agent_id.clone(), digest.clone());
                let group =
                    groups.entry(digest.clone()).or_insert_with(|| PlanGroup { digest, rows: planned, agents: vec![] });
                group.agents.push(target.agent_id);
            }
            TargetStatus::Running if online(&target.agent_id) => plans.still_planning += 1,
            TargetStatus::Running => {
                let why = "sent its plan, it went offline before it answered".to_string();
                plans.unplanned.push((target.agent_id, TargetStatus::Running, Some(why)));
            }
            status => plans.unplanned.push((target.agent_id, status, target.error)),
        }
    }
    plans.groups = groups.into_values().collect();
    plans.groups.sort_by(|a, b| b.agents.len().cmp(&a.agents.len()).then(a.digest.cmp(&b.digest)));
    Ok(Some(plans))
}

/// Why a ticket's plans were not bound.
#[derive(Debug, thiserror::Error)]
pub enum BindRefusal {
    #[error("{0} host(s) are still planning: decide once they have answered (reload the page)")]
    StillPlanning(usize),
    #[error(
        "the plans changed since they were shown (a host answered, or the call was submitted again): look at them again"
    )]
    Changed,
    #[error("no host has a plan to approve: {0}")]
    NothingPlanned(String),
    #[error("the ticket is no longer pending")]
    NotPending,
    #[error("its plans are not yours to read: a host it would change lies outside your groups")]
    NotReadable,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Before an approval: binds the ticket to its plans as they are now, read as `reader` (the
/// reviewer; None for the break-glass CLI), which must be the set the person saw (`shown`, its [`HostPlans::set_digest`]) when they say which. Nothing to do
/// for a ticket without a plan (a read, or one minted before plans existed).
pub async fn bind(
    store: &Repositories,
    approval_id: &str,
    shown: Option<&str>,
    reader: Option<&Reader>,
    online: &(dyn Fn(&str) -> bool + Sync),
) -> Result<(), BindRefusal> {
    let Some(binding) = store.approvals.plan_of(approval_id).await? else { return Ok(()) };
    let plans = read(store, &binding.execution_id, reader, online).await?.ok_or(BindRefusal::NotReadable)?;
    if plans.still_planning > 0 {
        return Err(BindRefusal::StillPlanning(plans.still_planning));
    }
    if shown.is_some_and(|shown| shown != plans.set_digest()) {
        return Err(BindRefusal::Changed);
    }
    if plans.by_agent.is_empty() {
        let why: Vec<String> = plans
            .unplanned
            .iter()
            .map(|(agent, status, error)| format!("{agent} {} {}", status.as_str(), error.as_deref().unwrap_or("")))
            .collect();
        return Err(BindRefusal::NothingPlanned(why.join("; ")));
    }
    match store.approvals.bind_plans(approval_id, &plans.by_agent).await? {
        true => Ok(()),
        false => Err(BindRefusal::NotPending),
    }
}

/// Whether an agent is connected (to any replica), as the server's fleet view says.
pub fn online_in(fleet: &toolgate_fleet::Hub) -> impl Fn(&str) -> bool + Sync + '_ {
    |agent_id| {
        let all = toolgate_domain::groups::Visible::All;
        fleet.with_agent(&all, agent_id, |v| v.status == toolgate_domain::fleet::AgentStatus::Online).unwrap_or(false)
    }
}
