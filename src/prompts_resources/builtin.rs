//! The resources the server computes: its health, the policy matrix, a tool's documentation.

use std::fmt::Write as _;

use serde_json::{Value, json};
use toolgate_domain::catalogue::{Catalogue, ToolMeta};
use toolgate_domain::groups::Reach;
use toolgate_policy::Decision;

use crate::services::Services;

/// The server as an operator's dashboard would show it, read now. Its counts (agents,
/// approvals, executions, sessions) are the whole server's: a reader whose grant reaches only
/// some groups gets `null` for each, never another team's numbers.
pub async fn server_health(services: &Services, sessions: usize, reach: &Reach) -> Value {
    let now = services.clock().now_ms();
    let store = match services.repositories().health.check_ready(now).await {
        Ok(()) => json!({"ready": true}),
        Err(e) => json!({"ready": false, "error": e.to_string()}),
    };
    let fleet_wide = reach.is_fleet();
    let gauges = match fleet_wide {
        true => services.repositories().health.gauges(services.clock().now_secs()).await.ok(),
        false => None,
    };
    let pending = gauges.map(|g| g.approvals_pending);
    let fleet = services.fleet();
    let agents = fleet_wide.then(|| json!({"enrolled": fleet.enrolled(), "connected": fleet.connected()}));
    json!({
        "status": if store["ready"] == true { "ok" } else { "degraded" },
        "version": env!("CARGO_PKG_VERSION"),
        "checked_at_ms": now,
        "store": store,
        "agents": agents,
        "approvals_pending": pending,
        "executions_in_flight": gauges.map(|g| g.executions_in_flight),
        "mcp_sessions": fleet_wide.then_some(sessions),
        "catalogue": {"tools": services.catalogue().tools.len(), "prompts": services.catalogue().prompts.len()},
    })
}

fn decision_word(decision: Decision) -> &'static str {
    match decision {
        Decision::Allow => "allowed",
        Decision::ApprovalRequired => "allowed after a person approves",
        Decision::ConfirmRequired => "allowed once the client's user confirms",
        Decision::Deny => "refused",
    }
}

/// One tool's page: what it does, what gates it at each tier, and its schemas.
pub fn tool_documentation(catalogue: &Catalogue, tool: &ToolMeta) -> String {
    let a = tool.annotations;
    let mut page = format!("# {} (`{}`)\n\n{}\n\n", tool.title, tool.name, tool.description);
    let _ = writeln!(page, "- Permission: `{}` ({:?}-class)", tool.pair(), tool.class);
    let _ = writeln!(
        page,
        "- Hints: readOnly={}, destructive={}, idempotent={}, openWorld={}",
        a.read_only, a.destructive, a.idempotent, a.open_world
    );
    for tier in catalogue.tiers {
        let _ = writeln!(page, "- Tier `{}`: {}", tier.name, decision_word(tool.decisions[tier.index]));
    }
    let pretty = |raw: &str| {
        serde_json::from_str::<Value>(raw).and_then(|v| serde_json::to_string_pretty(&v)).unwrap_or_else(|_| raw.into())
    };
    let _ = write!(page, "\n## Arguments (inputSchema)\n\n```json\n{}\n```\n", pretty(tool.input_schema));
    if let Some(output) = tool.output_schema {
        let _ = write!(page, "\n## Result (outputSchema)\n\n```json\n{}\n```\n", pretty(output));
    }
    if let Some(example) = tool.example_arguments {
        let _ = write!(page, "\n## Smallest valid call\n\n```json\n{example}\n```\n");
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_page_shows_its_pair_its_tiers_and_its_schema() {
        let catalogue = &crate::registry::CATALOGUE;
        let tool = catalogue.tools.iter().find(|t| t.name == "delete_tag").expect("delete_tag is in tools.yaml");
        let page = tool_documentation(catalogue, tool);
        assert!(page.starts_with(&format!("# {} (`delete_tag`)", tool.title)), "{page}");
        assert!(page.contains("- Permission: `Tag:Delete`"), "{page}");
        for tier in catalogue.tiers {
            assert!(page.contains(&format!("- Tier `{}`: {}", tier.name, decision_word(tool.decisions[tier.index]))));
        }
        assert!(page.contains("\"agent_id\""), "{page}");
    }
}
