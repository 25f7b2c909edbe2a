//! Compliance: the rules in force (compliance.yaml) and what agents found on their hosts.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Value, json};
use toolgate_domain::fleet::AgentStatus;
use toolgate_domain::fleet::compliance::{ComplianceStatus, Rule, RuleResult};
use toolgate_domain::groups::Visible;
use toolgate_domain::{ToolError, ToolOutput, ToolResult};
use toolgate_policy::did_you_mean;

use super::confined::visible;
use super::executions::resolve_targets;
use super::fleet::DEFAULT_LIMIT;
use super::pages::Pager;
use crate::args;
use crate::services::ToolContext;

/// Counts per status for one rule: compliant, non_compliant, unknown.
fn tally<'a>(results: impl Iterator<Item = &'a RuleResult>) -> [i64; 3] {
    let mut counts = [0; 3];
    for r in results {
        counts[ComplianceStatus::ALL.iter().position(|s| *s == r.status).unwrap_or(2)] += 1;
    }
    counts
}

fn rule<'a>(rules: &'a [Rule], id: &str) -> Result<&'a Rule, ToolError> {
    rules.iter().find(|r| r.id == id).ok_or_else(|| {
        let hint = if rules.is_empty() {
            "no rules are loaded (compliance.yaml in the data dir, or --compliance FILE)".into()
        } else {
            did_you_mean(id, rules.iter().map(|r| r.id.as_str()))
        };
        ToolError::NotFound(format!("no compliance policy `{id}`: {hint}; list_policies lists them"))
    })
}

/// Enrolled, unrevoked agents the caller may see: those a rule applies to, for it.
async fn active_agents(ctx: &ToolContext) -> Result<Vec<String>, ToolError> {
    let visible = visible(ctx).await?;
    Ok(ctx.services().fleet().each(&visible, |v| (v.status != AgentStatus::Revoked).then(|| v.agent_id.to_string())))
}

pub async fn list_policies(ctx: &ToolContext, args: args::ListPolicies) -> ToolResult {
    let pager = Pager::of(&args, usize::MAX)?;
    let set = ctx.services().fleet().rules();
    let results = ctx.services().work().compliance(None, ctx.reach()).await?;
    let policies: Vec<Value> = set
        .rules
        .iter()
        .filter(|r| args.enabled.is_none_or(|e| e == r.enabled))
        .map(|r| {
            let [compliant, non_compliant, unknown] = tally(results.iter().filter(|(_, x, _)| x.rule_id == r.id).map(|(_, x, _)| x));
            json!({
                "id": r.id,
                "description": r.description,
                "enabled": r.enabled,
                "check": r.check,
                "compliant": compliant,
                "non_compliant": non_compliant,
                "unknown": unknown,
            })
        })
        .collect();
    let (policies, count) = pager.window(policies);
    pager.answer(ctx, json!({"source": set.source}), "policies", policies, count)
}

pub async fn get_compliance_summary(ctx: &ToolContext, args: args::GetComplianceSummary) -> ToolResult {
    let set = ctx.services().fleet().rules();
    let rule = rule(&set.rules, &args.policy_id)?;
    let wanted = args.status.as_deref().and_then(ComplianceStatus::parse);
    let results = ctx.services().work().compliance(Some(&rule.id), ctx.reach()).await?;
    let active: HashSet<String> = active_agents(ctx).await?.into_iter().collect();
    let results: Vec<_> = results.into_iter().filter(|(agent, _, _)| active.contains(agent)).collect();
    let [compliant, non_compliant, unknown] = tally(results.iter().map(|(_, r, _)| r));
    let pager = Pager::of(&args, DEFAULT_LIMIT as usize)?;
    let fleet = ctx.services().fleet();
    let matching: Vec<_> = results.iter().filter(|(_, r, _)| wanted.is_none_or(|w| r.status == w)).collect();
    let (page, count) = pager.window(matching);
    let agents: Vec<Value> = page
        .iter()
        .map(|(agent_id, r, at)| {
            json!({"agent_id": agent_id, "hostname": fleet.hostname(&Visible::All, agent_id), "status": r.status, "evidence": r.evidence, "evaluated_at_ms": at})
        })
        .collect();
    let envelope = json!({
        "policy_id": rule.id,
        "description": rule.description,
        "counts": {"compliant": compliant, "non_compliant": non_compliant, "unknown": unknown},
        "not_evaluated": active.len() as i64 - results.len() as i64,
    });
    pager.answer(ctx, envelope, "agents", agents, count)
}

pub async fn get_fleet_compliance(ctx: &ToolContext, args: args::GetFleetCompliance) -> ToolResult {
    let pager = Pager::of(&args, usize::MAX)?;
    let set = ctx.services().fleet().rules();
    let rules: Vec<&Rule> = set.rules.iter().filter(|r| r.enabled).collect();
    let active: HashSet<String> = active_agents(ctx).await?.into_iter().collect();
    let results = ctx.services().work().compliance(None, ctx.reach()).await?;
    // Per agent: how many enabled rules it was found compliant with, and whether any failed.
    let mut per_agent: BTreeMap<&str, (usize, bool)> = BTreeMap::new();
    let per_rule: Vec<Value> = rules
        .iter()
        .map(|rule| {
            let mine: Vec<&(String, RuleResult, i64)> =
                results.iter().filter(|(a, r, _)| r.rule_id == rule.id && active.contains(a)).collect();
            for (agent, r, _) in &mine {
                let entry = per_agent.entry(agent.as_str()).or_default();
                entry.0 += usize::from(r.status == ComplianceStatus::Compliant);
                entry.1 |= r.status == ComplianceStatus::NonCompliant;
            }
            let [compliant, non_compliant, unknown] = tally(mine.iter().map(|(_, r, _)| r));
            json!({
                "id": rule.id,
                "compliant": compliant,
                "non_compliant": non_compliant,
                "unknown": unknown,
                "not_evaluated": active.len() as i64 - mine.len() as i64,
            })
        })
        .collect();
    let fully = per_agent.values().filter(|(ok, _)| *ok == rules.len()).count();
    let violations = per_agent.values().filter(|(_, bad)| *bad).count();
    let (per_rule, count) = pager.window(per_rule);
    let envelope = json!({
        "rules": rules.len(),
        "agents": active.len(),
        "fully_compliant": if rules.is_empty() { 0 } else { fully },
        "with_violations": violations,
    });
    pager.answer(ctx, envelope, "per_rule", per_rule, count)
}

pub async fn evaluate_compliance(ctx: &ToolContext, args: args::EvaluateCompliance) -> ToolResult {
    let set = ctx.services().fleet().rules();
    if set.rules.is_empty() {
        return Err(ToolError::InvalidArguments(format!(
            "no compliance rules are loaded ({}): add rules to compliance.yaml and send the server SIGHUP",
            set.source
        )));
    }
    let targets = match (&args.agent_ids, &args.scope) {
        (None, None) => active_agents(ctx).await?,
        _ => resolve_targets(ctx, args.agent_ids, args.scope).await?.0,
    };
    let asked = ctx.services().fleet().evaluate_now(&targets);
    Ok(ToolOutput::Structured(json!({"rules": set.rules.len(), "asked": asked, "offline": targets.len() - asked})))
}
