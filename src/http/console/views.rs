//! Read-only views for reviewers: the audit log with filters, and the fleet (agents and their
//! state, recent executions and their progress, compliance by rule).

use std::collections::BTreeMap;
use std::sync::Arc;
use toolgate_domain::groups::{Reach, Visible};

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;
use toolgate_domain::audit::AuditFilter;
use toolgate_domain::fleet::compliance::ComplianceStatus;

use super::{AppState, Fields, SignedIn, html as respond, pages};

/// The rows a page shows at most.
const PAGE_ROWS: i64 = 200;

pub async fn audit(State(state): State<Arc<AppState>>, who: SignedIn, Query(q): Query<Fields>) -> Response {
    if let Some(refused) = who.reviewer_refusal(&state) {
        return refused;
    }
    let text = |k: &str| q.get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let filter = AuditFilter {
        since_ms: None,
        until_ms: None,
        principal: text("principal"),
        action_prefix: text("action"),
        result: text("result"),
        correlation_id: text("correlation_id"),
        target_type: text("target_type"),
        agent_id: text("agent_id"),
        reader: Some(crate::http::api::audit_reader(&state, who.1.clone())),
        limit: PAGE_ROWS,
        before_id: None,
    };
    let rows = match state.services.audit_log().query(&filter).await {
        Ok(rows) => rows,
        Err(e) => {
            return who.unavailable(e);
        }
    };
    let value = |k: &str| text(k).unwrap_or_default();
    let body = html! {
        form method="get" action="/console/audit" {
            label { "Principal " input type="text" name="principal" value=(value("principal")); }
            label { "Action starts with " input type="text" name="action" value=(value("action")) placeholder="mcp.delete_tag"; }
            label { "Result " input type="text" name="result" value=(value("result")) placeholder="denied"; }
            label { "Correlation id " input type="text" name="correlation_id" value=(value("correlation_id")); }
            label { "Agent " input type="text" name="agent_id" value=(value("agent_id")); }
            button type="submit" { "Filter" }
        }
        p.muted { (rows.len()) " rows, newest first (at most " (PAGE_ROWS) ")." }
        table #audit {
            tr { th { "When" } th { "Principal" } th { "Action" } th { "Target" } th { "Agents" } th { "Result" } th { "Detail" } th { "Correlation" } }
            @for r in &rows {
                tr {
                    td { (pages::when_ms(r.at_ms)) } td { (r.principal.as_deref().unwrap_or("")) } td { code { (r.action) } }
                    td { (r.target.as_deref().unwrap_or("")) } td { (r.agents.join(" ")) } td { (r.result) } td { (r.detail.as_deref().unwrap_or("")) }
                    td { code { (r.correlation_id.as_deref().unwrap_or("")) } }
                }
            }
        }
    };
    respond(StatusCode::OK, pages::layout("Audit log", &who.chrome(), body))
}

pub async fn fleet(State(state): State<Arc<AppState>>, who: SignedIn) -> Response {
    if let Some(refused) = who.fleet_reviewer_refusal(&state) {
        return refused;
    }
    let services = &state.services;
    let hub = services.fleet();
    // `fleet_reviewer_refusal` reads fleet-wide roles only: a principal whose roles are all
    // on groups never gets here.
    let all = Visible::All;
    let agents: Vec<_> = hub.agent_ids(&all).iter().filter_map(|id| hub.summary(&all, id)).collect();
    let work = &services.repositories().work;
    let (executions, compliance) =
        match (work.executions(None, None, None, 0, 50).await, work.compliance(None, &Reach::Fleet).await) {
            (Ok(e), Ok(c)) => (e, c),
            (Err(e), _) | (_, Err(e)) => {
                return who.unavailable(e);
            }
        };
    let mut by_rule: BTreeMap<&str, [usize; 3]> = BTreeMap::new();
    for (_, result, _) in &compliance {
        let counts = by_rule.entry(result.rule_id.as_str()).or_default();
        counts[match result.status {
            ComplianceStatus::Compliant => 0,
            ComplianceStatus::NonCompliant => 1,
            ComplianceStatus::Unknown => 2,
        }] += 1;
    }
    let body = html! {
        h2 { "Agents (" (agents.len()) ")" }
        table #agents {
            tr { th { "Agent" } th { "State" } th { "Host" } th { "OS" } th { "Last seen" } }
            @for a in &agents {
                tr {
                    td { code { (a.agent_id) } } td { (a.status.as_str()) }
                    td { (a.facts.as_ref().map_or("", |f| f.hostname.as_str())) }
                    td { (a.facts.as_ref().map_or("", |f| f.os_pretty_name.as_str())) }
                    td { (a.last_seen_ms.map_or("never".to_string(), pages::when_ms)) }
                }
            }
        }
        h2 { "Executions (newest 50)" }
        table #executions {
            tr { th { "Execution" } th { "Kind" } th { "Requested by" } th { "Created" } th { "Targets by status" } }
            @for e in &executions {
                tr {
                    td { code { (e.execution_id) } } td { (e.kind) } td { (e.requested_by) } td { (pages::when_ms(e.created_at_ms)) }
                    td { @for (status, n) in &e.counts { @if *n > 0 { (status.as_str()) ": " (n) " " } } }
                }
            }
        }
        h2 { "Compliance" }
        table #compliance {
            tr { th { "Rule" } th { "Compliant" } th { "Non-compliant" } th { "Unknown" } }
            @for (rule, [ok, bad, unknown]) in &by_rule {
                tr { td { code { (rule) } } td { (ok) } td { (bad) } td { (unknown) } }
            }
        }
    };
    respond(StatusCode::OK, pages::layout("Fleet", &who.chrome(), body))
}
