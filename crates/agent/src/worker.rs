//! What the agent does when the server asks: run orders (journaled, see [`crate::journal`]),
//! enter or leave quarantine, evaluate compliance rules. Work outlives the session that
//! brought it: a result is uploaded over a report connection of its own, retried until taken.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use tokio::runtime::Handle;
use tokio::sync::mpsc::UnboundedSender;
use toolgate_domain::fleet::compliance::Rule;
use toolgate_domain::fleet::wire::{
    AgentMessage, QuarantineEnforcement, QuarantineMode, QuarantineWish, RunOrder, ServerMessage,
};
use toolgate_domain::records::KillSwitch;

use crate::connection::now_ms;
use crate::delivery::deliver;
use crate::plugins::PluginContext;
use crate::plugins::upload::Uploads;
use crate::state::{self, Identity, Quarantine};
use crate::uploads::UploadClient;
use crate::{AgentError, AgentOptions, compliance, isolation, journal};

/// The largest result sent over the session (the server reads sessions with 4 KiB buffers).
const SESSION_FRAME_BYTES: usize = 3 * 1024;

pub(crate) struct Worker {
    ctx: PluginContext,
    servers: Arc<crate::servers::Servers>,
    /// Every server's URL: a quarantined host may still reach each.
    server_urls: Vec<String>,
    max_wait_ms: u64,
    /// Executions being worked on: an order that comes again meanwhile is not run twice.
    in_flight: Mutex<HashSet<String>>,
    quarantine: Mutex<Quarantine>,
    /// The compliance rules last received; None until the server sends them.
    rules: Mutex<Option<Vec<Rule>>>,
    /// The plugin kill switches engaged, as the server last said (kept across restarts).
    kill_switches: Mutex<Vec<KillSwitch>>,
    /// Cut the network but for the server while quarantined (`--allow-network-isolation`).
    isolate_network: bool,
    /// Why a quarantine here is soft (the network left open), or None when it cuts the network.
    soft_because: Mutex<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Worker {
    /// The servers, for uploads.
    pub(crate) fn servers(&self) -> Arc<crate::servers::Servers> {
        self.servers.clone()
    }

    pub(crate) fn new(options: &AgentOptions, servers: Arc<crate::servers::Servers>) -> Result<Self, AgentError> {
        journal::prune(&options.state_dir);
        if options.allow_network_isolation && !isolation::is_root() {
            return Err(AgentError::IsolationNeedsRoot);
        }
        let quarantine = state::load_quarantine(&options.state_dir)?;
        if quarantine.quarantined {
            tracing::warn!(
                "quarantined ({}): running diagnostic instructions only",
                quarantine.reason.as_deref().unwrap_or("no reason given")
            );
        }
        let kill_switches = state::load_kill_switches(&options.state_dir)?;
        if !kill_switches.is_empty() {
            tracing::warn!("{} plugin kill switch(es) engaged: what they stop is refused", kill_switches.len());
        }
        let worker = Self {
            ctx: PluginContext::new(options.state_dir.clone()),
            servers,
            server_urls: options.servers.clone(),
            max_wait_ms: options.reconnect_max_ms,
            in_flight: Mutex::new(HashSet::new()),
            quarantine: Mutex::new(quarantine.clone()),
            rules: Mutex::new(None),
            kill_switches: Mutex::new(kill_switches),
            isolate_network: options.allow_network_isolation,
            soft_because: Mutex::new(match options.allow_network_isolation {
                false => Some("the agent runs without --allow-network-isolation".into()),
                true => isolation::unavailable(),
            }),
        };
        // A restart keeps the host isolated: the rules are set again before anything else (and
        // a table left by an agent that died after a release is lifted).
        worker.apply_network(&quarantine);
        Ok(worker)
    }

    /// Isolates or releases the network to match `quarantine`, when allowed to; a failure
    /// leaves the soft quarantine (instructions refused) in force and is logged.
    fn apply_network(&self, quarantine: &Quarantine) {
        if !self.isolate_network {
            return;
        }
        let done = if quarantine.quarantined { isolation::isolate(&self.server_urls) } else { isolation::lift() };
        match done {
            Ok(()) if quarantine.quarantined => tracing::warn!("network isolated: only the server is reachable"),
            Ok(()) => tracing::debug!("no network isolation in force"),
            Err(e) => {
                tracing::error!("network isolation not applied ({e}); the quarantine stays soft");
                *lock(&self.soft_because) = Some(format!("network isolation failed: {e}"));
                return;
            }
        }
        *lock(&self.soft_because) = None;
    }

    /// How this agent holds a quarantine, and why.
    fn enforcement(&self) -> QuarantineEnforcement {
        match lock(&self.soft_because).clone() {
            None => QuarantineEnforcement {
                mode: QuarantineMode::Network,
                why: "the agent cuts the host's network but for its server (nftables, as root)".into(),
            },
            Some(because) => QuarantineEnforcement {
                mode: QuarantineMode::Soft,
                why: format!("{because}: a quarantine refuses changes but leaves the host's network open"),
            },
        }
    }

    /// Takes on the quarantine state the server wants (kept across restarts), before any
    /// work that comes after it; false when it could not be kept (then it is not confirmed,
    /// and the server asks again on every connection).
    pub(crate) fn enter(&self, wanted: Quarantine) -> bool {
        if let Err(e) = state::save_quarantine(&self.ctx.state_dir, &wanted) {
            tracing::error!("cannot keep the quarantine state: {e}");
            // Held in memory all the same: a change is refused while the server wants it.
            if wanted.quarantined {
                *lock(&self.quarantine) = wanted;
            }
            return false;
        }
        tracing::warn!(quarantined = wanted.quarantined, "quarantine state changed by the server");
        self.apply_network(&wanted);
        *lock(&self.quarantine) = wanted;
        true
    }

    /// The quarantine an unsigned welcome asks for: taken only while no CA is pinned; once one
    /// is, quarantine and its release come only in signed frames (docs/trust.md).
    pub(crate) fn enter_from_welcome(&self, wish: QuarantineWish, state_dir: &std::path::Path) {
        match crate::signed::load(state_dir) {
            Ok(None) => drop(self.enter(Quarantine { quarantined: wish.quarantined, reason: wish.reason })),
            _ => tracing::warn!(
                quarantined = wish.quarantined,
                "ignored the quarantine state of an unsigned welcome: this agent takes quarantine only in signed frames"
            ),
        }
    }

    /// The quarantine state, as the agent tells the server on every connection.
    pub(crate) fn quarantine_state(&self) -> AgentMessage {
        let q = lock(&self.quarantine).clone();
        AgentMessage::QuarantineState {
            quarantined: q.quarantined,
            reason: q.reason,
            enforcement: Some(self.enforcement()),
        }
    }

    /// Handles a message that asks for work; false when it is not one.
    pub(crate) fn take(
        self: &Arc<Self>,
        message: ServerMessage,
        me: &Identity,
        session: &UnboundedSender<AgentMessage>,
    ) -> bool {
        match message {
            ServerMessage::Run(order) => self.start(order, me.clone(), session.clone()),
            ServerMessage::Quarantine { quarantined, reason } => {
                if self.enter(Quarantine { quarantined, reason }) {
                    let _ = session.send(self.quarantine_state());
                }
            }
            ServerMessage::KillSwitches { switches } => self.take_kill_switches(switches),
            ServerMessage::Evaluate { rules } => {
                *lock(&self.rules) = Some(rules);
                let worker = self.clone();
                let me = me.clone();
                let session = session.clone();
                tokio::spawn(async move {
                    let evaluating = worker.clone();
                    if let Ok(Some(frame)) = tokio::task::spawn_blocking(move || evaluating.compliance_frame()).await {
                        worker.send_back(frame, &me, &session).await;
                    }
                });
            }
            _ => return false,
        }
        true
    }

    /// Keeps the switches the server says are engaged; held in memory even when they cannot
    /// be written (a stop is never dropped for a full disk).
    fn take_kill_switches(&self, switches: Vec<KillSwitch>) {
        if let Err(e) = state::save_kill_switches(&self.ctx.state_dir, &switches) {
            tracing::error!("cannot keep the kill switches: {e}");
        }
        let engaged: Vec<String> = switches
            .iter()
            .map(|s| format!("{}{}", s.plugin, s.action.as_deref().map(|a| format!(".{a}")).unwrap_or_default()))
            .collect();
        tracing::info!(?engaged, "plugin kill switches as the server says");
        *lock(&self.kill_switches) = switches;
    }

    fn start(self: &Arc<Self>, order: RunOrder, me: Identity, session: UnboundedSender<AgentMessage>) {
        if !lock(&self.in_flight).insert(order.execution_id.clone()) {
            tracing::debug!(execution_id = %order.execution_id, "already running; the repeated order is ignored");
            return;
        }
        let worker = self.clone();
        // A step that uploads (files.collect) does so as this agent, over a connection of its own.
        let mut ctx = self.ctx.clone();
        let client = UploadClient { servers: self.servers.clone(), identity: me.clone(), runtime: Handle::current() };
        ctx.uploads = Some(Uploads(Arc::new(client)));
        tokio::spawn(async move {
            let execution_id = order.execution_id.clone();
            let running = worker.clone();
            let result = tokio::task::spawn_blocking(move || {
                let quarantine = lock(&running.quarantine).clone();
                let kill_switches = lock(&running.kill_switches).clone();
                journal::execute(&ctx, &order, &quarantine, &kill_switches)
            })
            .await;
            // Done before the answer goes: a repeat of the order from now on is answered from
            // the journal (its changes are never run again), not ignored.
            lock(&worker.in_flight).remove(&execution_id);
            match result {
                Ok(result) => worker.send_back(AgentMessage::Result(result), &me, &session).await,
                Err(e) => tracing::error!(%execution_id, "the run failed: {e}"),
            }
        });
    }

    /// Sends a result back: a small one over the session (no new connection; a fleet's
    /// answers to one instruction then cost the server no handshakes), a large one over a
    /// report connection of its own, so the session's buffers stay small. A result lost with
    /// the session is not lost for good: its run is still unfinished on the server, which
    /// sends it again on the next connection.
    async fn send_back(&self, frame: AgentMessage, me: &Identity, session: &UnboundedSender<AgentMessage>) {
        let small = serde_json::to_vec(&frame).is_ok_and(|bytes| bytes.len() <= SESSION_FRAME_BYTES);
        let frame = match small {
            true => match session.send(frame) {
                Ok(()) => return,
                Err(unsent) => unsent.0,
            },
            false => frame,
        };
        deliver(&self.servers, me, &[frame], self.max_wait_ms).await;
    }

    /// The compliance outcomes now, if the server has sent rules (blocking: reads the host).
    pub(crate) fn compliance_frame(&self) -> Option<AgentMessage> {
        let rules = lock(&self.rules).clone()?;
        let results = compliance::evaluate(&self.ctx, &rules);
        Some(AgentMessage::Compliance { evaluated_at_ms: now_ms(), results })
    }
}
