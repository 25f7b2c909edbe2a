//! The resources that change while the server runs, and how their changes are heard: an
//! execution's (its agents answer) and an approval ticket's (a person decides, its call
//! consumes it). Templates are told apart by the values they list (tools.yaml `list`), so a
//! new template of either kind is followed without code here; a subscription (handshake era)
//! and a listen (2026-07-28) follow the same ones.

use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::RecvError;
use toolgate_domain::prompts_resources::CompletionSource;

use super::McpServer;
use crate::prompts_resources::uri;

/// What a followed resource is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Execution,
    Approval,
}

/// A followable template: its kind, URI template, and the variable that holds the id.
pub struct Followable {
    pub kind: Kind,
    pub template: String,
    pub variable: String,
}

pub fn followable(server: &McpServer) -> Vec<Followable> {
    let kind_of = |list: Option<CompletionSource>| match list? {
        CompletionSource::ExecutionIds => Some(Kind::Execution),
        CompletionSource::ApprovalIds => Some(Kind::Approval),
        _ => None,
    };
    server
        .prompts_resources
        .templates
        .iter()
        .filter_map(|t| {
            let kind = kind_of(t.spec.list)?;
            let variable = t.spec.variables().first()?.to_string();
            Some(Followable { kind, template: t.spec.uri_template.clone(), variable })
        })
        .collect()
}

/// The kind and id a URI names, when it is an instance of a followable template.
pub fn followed_by(templates: &[Followable], target: &str) -> Option<(Kind, String)> {
    templates.iter().find_map(|f| {
        let (_, id) = uri::matches(&f.template, target)?.into_iter().find(|(name, _)| *name == f.variable)?;
        Some((f.kind, id))
    })
}

/// Each template's URI for a changed resource of `kind`.
pub fn uris(templates: &[Followable], kind: Kind, id: &str) -> Vec<String> {
    templates.iter().filter(|f| f.kind == kind).map(|f| uri::expand(&f.template, &[(&f.variable, id)])).collect()
}

/// Hears both kinds of change, in the order they come.
pub struct Updates {
    executions: Receiver<String>,
    approvals: Receiver<String>,
}

impl Updates {
    pub fn new(server: &McpServer) -> Self {
        let fleet = server.services().fleet();
        Self { executions: fleet.execution_updates(), approvals: fleet.approval_updates() }
    }

    /// The next change; `Lagged` when some were missed, `Closed` once the server stops.
    pub async fn recv(&mut self) -> Result<(Kind, String), RecvError> {
        tokio::select! {
            update = self.executions.recv() => update.map(|id| (Kind::Execution, id)),
            update = self.approvals.recv() => update.map(|id| (Kind::Approval, id)),
        }
    }
}
