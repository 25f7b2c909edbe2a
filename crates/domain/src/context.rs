//! What a handler receives: the caller, the correlation id, the services (behind accessors of
//! `S`, which the server composes), a progress sink and a cancellation token. Handlers never
//! see HTTP, JSON-RPC or SQL. Tests build one with [`ToolContext::builder`].

use std::sync::{Arc, Mutex};

pub use tokio_util::sync::CancellationToken;
use toolgate_policy::TierRules;

use crate::{Caller, Principal};

/// One progress report, as `notifications/progress` carries it.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
    /// The execution this progress is of, when it is one (`_meta["toolgate/execution_id"]`).
    pub execution_id: Option<String>,
}

type Deliver = dyn Fn(Progress) + Send + Sync;

struct Reporter {
    last: Mutex<Option<f64>>,
    deliver: Box<Deliver>,
}

/// Where a handler reports progress. A no-op when the client asked for none.
#[derive(Clone, Default)]
pub struct ProgressSink(Option<Arc<Reporter>>);

impl std::fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "ProgressSink(active)" } else { "ProgressSink(none)" })
    }
}

impl ProgressSink {
    pub fn none() -> Self {
        Self(None)
    }

    pub fn new(deliver: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(Reporter { last: Mutex::new(None), deliver: Box::new(deliver) })))
    }

    /// Whether anyone listens (a handler may skip work that only feeds progress).
    pub fn is_active(&self) -> bool {
        self.0.is_some()
    }

    /// Reports progress. MCP requires it to increase: a value not above the last one is
    /// dropped, and so is everything when nobody listens. Returns whether it was delivered.
    pub fn report(&self, progress: f64, total: Option<f64>, message: Option<&str>) -> bool {
        self.deliver(progress, total, message, None)
    }

    /// [`ProgressSink::report`] for execution `execution_id`, which the notification names, so
    /// a client following several executions on one stream can tell them apart.
    pub fn report_execution(
        &self,
        execution_id: &str,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> bool {
        self.deliver(progress, total, message, Some(execution_id))
    }

    fn deliver(&self, progress: f64, total: Option<f64>, message: Option<&str>, execution_id: Option<&str>) -> bool {
        let Some(reporter) = &self.0 else { return false };
        {
            let mut last = reporter.last.lock().unwrap_or_else(|e| e.into_inner());
            if last.is_some_and(|l| progress <= l) || !progress.is_finite() {
                return false;
            }
            *last = Some(progress);
        }
        let (message, execution_id) = (message.map(str::to_string), execution_id.map(str::to_string));
        (reporter.deliver)(Progress { progress, total, message, execution_id });
        true
    }
}

/// Everything a handler may use.
pub struct ToolContext<S> {
    caller: Caller,
    correlation_id: String,
    services: Arc<S>,
    progress: ProgressSink,
    log: crate::LogSink,
    client: crate::ClientRequests,
    task: crate::TaskStarter,
    cancellation: CancellationToken,
    reach: crate::groups::Reach,
    listing: crate::toolsets::ToolListing,
    /// The approval ticket this call consumed, if it needed one.
    approval_id: Option<String>,
}

impl<S> Clone for ToolContext<S> {
    fn clone(&self) -> Self {
        Self {
            caller: self.caller.clone(),
            correlation_id: self.correlation_id.clone(),
            services: self.services.clone(),
            progress: self.progress.clone(),
            log: self.log.clone(),
            client: self.client.clone(),
            task: self.task.clone(),
            cancellation: self.cancellation.clone(),
            reach: self.reach.clone(),
            listing: self.listing.clone(),
            approval_id: self.approval_id.clone(),
        }
    }
}

impl<S> std::fmt::Debug for ToolContext<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("caller", &self.caller)
            .field("correlation_id", &self.correlation_id)
            .field("progress", &self.progress)
            .finish_non_exhaustive()
    }
}

impl<S> ToolContext<S> {
    pub fn builder(services: Arc<S>) -> ToolContextBuilder<S> {
        ToolContextBuilder {
            services,
            caller: Caller {
                principal: Principal {
                    name: "test".into(),
                    roles: Vec::new(),
                    group_roles: Vec::new(),
                    kind: Default::default(),
                },
                token_id: "tok_test".into(),
                tier: None,
                tier_name: String::new(),
                credential: Default::default(),
                toolsets: None,
            },
            correlation_id: "req-test".into(),
            progress: ProgressSink::none(),
            log: crate::LogSink::none(),
            client: crate::ClientRequests::default(),
            task: crate::TaskStarter::default(),
            cancellation: CancellationToken::new(),
            // No agent until the gate (or a test) says which: forgetting it must hide, never show.
            reach: crate::groups::Reach::Groups(Vec::new().into()),
            listing: Default::default(),
            approval_id: None,
        }
    }

    pub fn caller(&self) -> &Caller {
        &self.caller
    }

    pub fn principal(&self) -> &Principal {
        &self.caller.principal
    }

    pub fn correlation_id(&self) -> &str {
        &self.correlation_id
    }

    pub fn services(&self) -> &S {
        &self.services
    }

    pub fn progress(&self) -> &ProgressSink {
        &self.progress
    }

    /// Log lines for the client (none unless it asked for a level).
    pub fn log(&self) -> &crate::LogSink {
        &self.log
    }

    /// Questions for the client: elicitation, sampling, roots (see [`crate::client`]).
    pub fn client(&self) -> &crate::ClientRequests {
        &self.client
    }

    /// How a task-supporting tool's handler becomes a task (see [`crate::TaskStarter`]).
    pub fn task(&self) -> &crate::TaskStarter {
        &self.task
    }

    /// Fires when the client cancels the request or goes away.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancellation
    }

    /// The agents the caller's grant of this tool's pair covers: every read and write of
    /// agents, inventory, executions and responses is confined to it.
    pub fn reach(&self) -> &crate::groups::Reach {
        &self.reach
    }

    /// The approval ticket this call consumed (a person approved it), if any.
    /// What the client's tool list holds (tools.yaml `toolsets`), and how to add to it.
    pub fn listing(&self) -> &crate::toolsets::ToolListing {
        &self.listing
    }

    pub fn approval_id(&self) -> Option<&str> {
        self.approval_id.as_deref()
    }
}

/// Builds a [`ToolContext`]; every field but the services has a default, so adding one
/// breaks no caller.
pub struct ToolContextBuilder<S> {
    services: Arc<S>,
    caller: Caller,
    correlation_id: String,
    progress: ProgressSink,
    log: crate::LogSink,
    client: crate::ClientRequests,
    task: crate::TaskStarter,
    cancellation: CancellationToken,
    reach: crate::groups::Reach,
    listing: crate::toolsets::ToolListing,
    approval_id: Option<String>,
}

impl<S> ToolContextBuilder<S> {
    pub fn caller(mut self, caller: Caller) -> Self {
        self.caller = caller;
        self
    }

    /// A principal with these roles (tests).
    pub fn principal(mut self, name: &str, roles: &[&str]) -> Self {
        self.caller.principal = Principal {
            name: name.into(),
            roles: roles.iter().map(|r| r.to_string()).collect(),
            group_roles: Vec::new(),
            kind: Default::default(),
        };
        self
    }

    pub fn tier(mut self, tier: Option<&'static TierRules>) -> Self {
        self.caller.tier_name = tier.map(|t| t.name.to_string()).unwrap_or_default();
        self.caller.tier = tier;
        self
    }

    pub fn token_id(mut self, id: &str) -> Self {
        self.caller.token_id = id.into();
        self
    }

    pub fn correlation_id(mut self, id: impl Into<String>) -> Self {
        self.correlation_id = id.into();
        self
    }

    pub fn progress(mut self, sink: ProgressSink) -> Self {
        self.progress = sink;
        self
    }

    pub fn log(mut self, sink: crate::LogSink) -> Self {
        self.log = sink;
        self
    }

    pub fn client(mut self, client: crate::ClientRequests) -> Self {
        self.client = client;
        self
    }

    pub fn task(mut self, task: crate::TaskStarter) -> Self {
        self.task = task;
        self
    }

    pub fn cancellation(mut self, token: CancellationToken) -> Self {
        self.cancellation = token;
        self
    }

    /// What the gate found the caller's grant covers (no agent at all unless set).
    pub fn reach(mut self, reach: crate::groups::Reach) -> Self {
        self.reach = reach;
        self
    }

    /// The approval ticket the call consumed.
    pub fn listing(mut self, listing: crate::toolsets::ToolListing) -> Self {
        self.listing = listing;
        self
    }

    pub fn approval_id(mut self, id: Option<String>) -> Self {
        self.approval_id = id;
        self
    }

    pub fn build(self) -> ToolContext<S> {
        ToolContext {
            caller: self.caller,
            correlation_id: self.correlation_id,
            services: self.services,
            progress: self.progress,
            log: self.log,
            client: self.client,
            task: self.task,
            cancellation: self.cancellation,
            reach: self.reach,
            listing: self.listing,
            approval_id: self.approval_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_only_increases_and_is_a_no_op_without_a_listener() {
        assert!(!ProgressSink::none().report(1.0, None, None));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = {
            let seen = seen.clone();
            ProgressSink::new(move |p| seen.lock().unwrap().push(p.progress))
        };
        assert!(sink.report(1.0, Some(3.0), Some("one")));
        assert!(!sink.report(1.0, Some(3.0), None), "not above the last");
        assert!(!sink.report(f64::NAN, None, None));
        assert!(sink.clone().report(2.0, Some(3.0), None), "clones share the last value");
        assert_eq!(*seen.lock().unwrap(), vec![1.0, 2.0]);
    }

    #[test]
    fn builder_defaults_and_cancellation() {
        let ctx = ToolContext::builder(Arc::new(())).principal("alice", &["Viewer"]).build();
        assert_eq!(ctx.principal().name, "alice");
        assert!(ctx.caller().tier.is_none());
        assert!(!ctx.progress().is_active());
        let child = ctx.clone();
        ctx.cancellation().cancel();
        assert!(child.cancellation().is_cancelled());
    }
}
