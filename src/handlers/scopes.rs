//! Scope expressions (docs/scope.md): validate, preview against the fleet, discover.

use std::collections::HashSet;

use serde_json::{Value, json};
use toolgate_domain::fleet::AgentStatus;
use toolgate_domain::fleet::scope::{self, ATTRIBUTES, MAX_EXPRESSION_CHARS, Scope};
use toolgate_domain::{ToolError, ToolOutput, ToolResult};
use toolgate_fleet::TagIndex;

use super::confined::{labels, visible};
use super::fleet::hostname;
use super::pages::Pager;
use crate::args;
use crate::services::ToolContext;

const GRAMMAR: &str = "expression := term { or term }; term := factor { and factor }; \
factor := not factor | ( expression ) | condition; condition := field op value | field in ( value, ... ) | field exists; \
field := attribute | tag:KEY (group: a management group's id or name); op := = | != | ~ (glob) | < | <= | > | >=; keywords are case-insensitive";

const EXAMPLES: &[&str] = &[
    r#"os.name = "Debian GNU/Linux" and tag:env in ("prod", "staging")"#,
    r#"status = online and hostname ~ "web-*""#,
    r#"kernel < "6.0" or not tag:owner exists"#,
];

/// Parses an expression and checks its tag keys against the fleet's.
fn parsed(expression: &str, tags: &TagIndex) -> Result<Scope, scope::ScopeError> {
    let scope = scope::parse(expression)?;
    scope.check_tag_keys(tags.keys())?;
    Ok(scope)
}

fn refused(expression: &str, e: &scope::ScopeError) -> ToolError {
    let shown: String = expression.chars().take(200).collect();
    ToolError::InvalidArguments(format!("scope `{shown}`: {e} (validate_scope explains; discover_scope_kinds lists the attributes)"))
}

/// The ids of the agents a scope chooses among those the caller may act on (a scope never
/// widens past them); an invalid scope is the caller's error.
pub(crate) async fn chosen_agents(ctx: &ToolContext, expression: &str) -> Result<HashSet<String>, ToolError> {
    let visible = visible(ctx).await?;
    let labels = labels(ctx, &visible).await?;
    let scope = parsed(expression, &labels.tags).map_err(|e| refused(expression, &e))?;
    Ok(ctx
        .services()
        .fleet()
        .each_labelled(&visible, &labels, |view| scope.matches(view).then(|| view.agent_id.to_string()))
        .into_iter()
        .collect())
}

pub async fn validate_scope(ctx: &ToolContext, args: args::ValidateScope) -> ToolResult {
    let tags = labels(ctx, &visible(ctx).await?).await?.tags;
    Ok(ToolOutput::Structured(match parsed(&args.expression, &tags) {
        Ok(scope) => json!({"valid": true, "canonical": scope.canonical(), "tree": scope, "error": null}),
        Err(e) => json!({"valid": false, "canonical": null, "tree": null, "error": e}),
    }))
}

pub async fn preview_scope_targets(ctx: &ToolContext, args: args::PreviewScopeTargets) -> ToolResult {
    let visible = visible(ctx).await?;
    let labels = labels(ctx, &visible).await?;
    let scope = parsed(&args.expression, &labels.tags).map_err(|e| refused(&args.expression, &e))?;
    let pager = Pager::of(&args, 20)?;
    let (start, limit) = (pager.start(), pager.limit());
    let (mut count, mut online) = (0usize, 0usize);
    let agents = ctx.services().fleet().each_labelled(&visible, &labels, |view| {
        if !scope.matches(view) {
            return None;
        }
        count += 1;
        online += usize::from(view.status == AgentStatus::Online);
        (count > start && count <= start + limit)
            .then(|| json!({"agent_id": view.agent_id, "hostname": hostname(view), "status": view.status}))
    });
    let envelope = json!({"canonical": scope.canonical(), "count": count, "online": online});
    pager.answer(ctx, envelope, "agents", agents, count)
}

pub async fn discover_scope_kinds(ctx: &ToolContext, _args: args::DiscoverScopeKinds) -> ToolResult {
    let tags = labels(ctx, &visible(ctx).await?).await?.tags;
    let attributes: Vec<Value> = ATTRIBUTES
        .iter()
        .map(|a| json!({"name": a.name, "kind": a.kind, "description": a.description, "operators": a.kind.operators()}))
        .collect();
    Ok(ToolOutput::Structured(json!({
        "attributes": attributes,
        "tag_keys": tags.keys(),
        "grammar": format!("{GRAMMAR}; at most {MAX_EXPRESSION_CHARS} characters"),
        "examples": EXAMPLES,
    })))
}
