//! The fleet's work: executions go to the store first (durable), then to every target that is
//! connected; an agent that connects later is sent what is still due. Quarantine and the
//! compliance rules travel the same way: the server's wish is kept, and repeated until the
//! agent says it complies.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use toolgate_domain::StoreError;
use toolgate_domain::fleet::compliance::Rule;
use toolgate_domain::fleet::wire::{QuarantineEnforcement, RunOrder, ServerMessage};
use toolgate_domain::groups::Visible;
use toolgate_store::{Created, NewExecution};

use crate::hub::Hub;

/// The compliance rules in force and the file they came from.
#[derive(Clone, Debug, Default)]
pub struct RuleSet {
    pub source: String,
    pub rules: Vec<Rule>,
}

/// A refused target's error.
pub const QUARANTINED: &str = "refused: the agent is quarantined and this instruction changes something; only diagnostic instructions reach it until it is released";

/// How often, at most, the sweep looks for executions past their deadline.
const EXPIRE_EVERY_MS: i64 = 1_000;

impl Hub {
    /// Stores the execution and its targets, then sends the run to every target connected now;
    /// how many that was. Under an idempotency key used already, nothing is created or sent:
    /// the store's answer says which execution holds the key.
    pub async fn start_execution(&self, execution: NewExecution) -> Result<(Created, usize), StoreError> {
        let order = RunOrder {
            execution_id: execution.execution_id.clone(),
            deadline_ms: execution.deadline_ms,
            steps: execution.steps.clone(),
        };
        // A rollout sends its first wave now; the sweep releases the others ([`crate::waves`]).
        let targets = execution.first_wave();
        match self.work.create_execution(execution).await? {
            Created::New => Ok((Created::New, self.dispatch(&order, targets).await)),
            existing => Ok((existing, 0)),
        }
    }

    /// Sends a run to each of `agent_ids` that is connected here, but never a change to a
    /// quarantined agent: that target is refused (with the reason) instead, so the change
    /// cannot run when the agent reconnects either. How many were sent it now.
    pub(crate) async fn dispatch(&self, order: &RunOrder, agent_ids: Vec<String>) -> usize {
        // Stored before its switch was engaged (or on a replica that had not heard of it yet).
        let agent_ids = match self.stopping(&order.steps) {
            Some(switch) => match self.stop_unsent(order, agent_ids, &switch.refusal()).await {
                Some(sent_before) => sent_before,
                None => return 0,
            },
            None => agent_ids,
        };
        let (agent_ids, unapproved) = crate::plans::approved_only(order, agent_ids);
        self.refuse_targets(&order.execution_id, unapproved, crate::plans::NO_APPROVED_PLAN).await;
        let changes = order.steps.iter().any(|step| !step.diagnostic);
        let (refused, allowed): (Vec<String>, Vec<String>) =
            agent_ids.into_iter().partition(|agent_id| changes && self.quarantine_wanted(agent_id));
        self.refuse_targets(&order.execution_id, refused, QUARANTINED).await;
        // Recorded as sent before it is sent: a fast agent's result must find its target open
        // (`running`). One not reached after all stays due and goes on its next connection.
        let mut live: Vec<String> = allowed.into_iter().filter(|agent_id| self.is_live(agent_id)).collect();
        // Secrets go only down a connection that came over TLS, whatever the others are.
        if crate::secrets::needs_secrets(order) {
            let plain: Vec<String>;
            (live, plain) = live.into_iter().partition(|agent_id| self.is_live_over_tls(agent_id));
            self.refuse_targets(&order.execution_id, plain, crate::NOT_OVER_TLS).await;
        }
        if crate::plans::needs_plans(order) {
            let old: Vec<String>;
            (live, old) = live
                .into_iter()
                .partition(|agent_id| self.live_protocol(agent_id).is_some_and(|p| p >= crate::plans::PLAN_PROTOCOL));
            self.refuse_targets(&order.execution_id, old, crate::plans::TOO_OLD_TO_PLAN).await;
        }
        if live.is_empty() {
            return 0;
        }
        // The secrets its steps name, valued only now; a run that cannot have them is refused.
        let order = match self.with_secret_values(order).await {
            Ok(order) => order,
            Err(reason) => {
                self.refuse_targets(&order.execution_id, live, &reason).await;
                return 0;
            }
        };
        // Its configuration, valued now too; an agent older than configuration gets the run without.
        let configured = match self.with_config_values(&order).await {
            Ok(configured) => configured,
            Err(e) => {
                tracing::warn!(execution_id = %order.execution_id, "could not read the plugin configuration, so the run is not sent now: {e}");
                return 0;
            }
        };
        if !self.record_delivery(&order.execution_id, live.clone()).await {
            return 0;
        }
        live.iter()
            .filter(|agent_id| {
                let reads_config = self.live_protocol(agent_id).is_some_and(|p| p >= crate::config::CONFIG_PROTOCOL);
                let run = if reads_config { configured.as_ref() } else { order.as_ref() };
                let run = crate::plans::for_agent(run, agent_id).into_owned();
                self.send(agent_id, ServerMessage::Run(run))
            })
            .count()
    }

    /// Refuses, with `reason`, those of `agent_ids` the run was never sent; the others (sent
    /// before a switch stopped it), to be sent again: their agents answer from their journals
    /// what they ran, and refuse by the switch they hold what they did not. None when nothing
    /// is left to send.
    async fn stop_unsent(&self, order: &RunOrder, agent_ids: Vec<String>, reason: &str) -> Option<Vec<String>> {
        let unsent = match self.work.undelivered(&order.execution_id, self.clock().now_ms()).await {
            Ok(Some((_, unsent))) => unsent,
            // Cancelled, or past its deadline: nothing is sent.
            Ok(None) => return None,
            Err(e) => {
                tracing::warn!(execution_id = %order.execution_id, "could not read the targets to stop, so none is sent now: {e}");
                return None;
            }
        };
        let (stopped, sent_before): (Vec<String>, Vec<String>) =
            agent_ids.into_iter().partition(|agent_id| unsent.contains(agent_id));
        self.refuse_targets(&order.execution_id, stopped, reason).await;
        (!sent_before.is_empty()).then_some(sent_before)
    }

    /// Refuses the targets `agent_ids` of an execution with `reason`: never sent, now or on a
    /// later connection (a failure to record it is tried again on the next connection).
    pub(crate) async fn refuse_targets(&self, execution_id: &str, agent_ids: Vec<String>, reason: &str) {
        if agent_ids.is_empty() {
            return;
        }
        match self.work.refuse(execution_id, agent_ids, reason, self.clock().now_ms()).await {
            Ok(()) => drop(self.execution_updates.send(execution_id.to_string())),
            Err(e) => tracing::warn!(%execution_id, "could not record a refusal: {e}"),
        }
    }

    /// Whether the server wants the agent quarantined (a change must not reach it).
    fn quarantine_wanted(&self, agent_id: &str) -> bool {
        self.read().get(agent_id).is_some_and(|e| e.quarantine_wanted)
    }

    /// Records that runs are being sent; false when that failed, and then they must not be
    /// sent: they stay pending in the store and go on the agents' next connections.
    async fn record_delivery(&self, execution_id: &str, agent_ids: Vec<String>) -> bool {
        if agent_ids.is_empty() {
            return true;
        }
        match self.work.mark_delivered(execution_id, agent_ids, self.clock().now_ms()).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(%execution_id, "could not record the delivery, so the run is not sent now: {e}");
                false
            }
        }
    }

    /// A session just began: the kill switches, the rules, and every run still due.
    pub async fn welcome_work(&self, agent_id: &str) -> Result<(), StoreError> {
        // First: an agent back from a long absence must know what is stopped before any run.
        self.push_kill_switches(agent_id);
        let rules = self.rules();
        if !rules.rules.is_empty() {
            self.send(agent_id, ServerMessage::Evaluate { rules: rules.rules.clone() });
        }
        for order in self.work.due_for(agent_id, self.clock().now_ms()).await? {
            self.dispatch(&order, vec![agent_id.to_string()]).await;
        }
        Ok(())
    }

    /// Sets the quarantine the server wants for an agent, and tells it if connected (else on
    /// its next connection). False when the agent is not enrolled.
    pub async fn set_quarantine(
        &self,
        agent_id: &str,
        wanted: bool,
        reason: Option<String>,
    ) -> Result<bool, StoreError> {
        if !self.knows(&Visible::All, agent_id) {
            return Ok(false);
        }
        self.work.set_quarantine(agent_id, wanted, reason.as_deref()).await?;
        self.update(agent_id, |e| {
            e.quarantine_wanted = wanted;
            e.quarantine = reason.as_deref().map(Arc::from);
        });
        self.send(agent_id, ServerMessage::Quarantine { quarantined: wanted, reason });
        Ok(true)
    }

    /// The agent said which quarantine state it is in, and how it holds one (None from an
    /// older agent); if not the wanted state, it is told again.
    pub async fn quarantine_reported(
        &self,
        agent_id: &str,
        quarantined: bool,
        enforcement: Option<QuarantineEnforcement>,
    ) -> Result<(), StoreError> {
        let mut changed = false;
        let mut wanted = None;
        self.update(agent_id, |e| {
            let enforcement_changed =
                enforcement.is_some() && e.quarantine_enforcement.as_deref() != enforcement.as_ref();
            changed = e.quarantine_reported != Some(quarantined) || enforcement_changed;
            e.quarantine_reported = Some(quarantined);
            if enforcement_changed {
                e.quarantine_enforcement = enforcement.clone().map(Arc::new);
            }
            wanted = Some((e.quarantine_wanted, e.quarantine.as_deref().map(str::to_string)));
        });
        if changed {
            self.work.quarantine_reported(agent_id, quarantined, enforcement.as_ref()).await?;
        }
        if let Some((wanted, reason)) = wanted
            && wanted != quarantined
        {
            self.send(agent_id, ServerMessage::Quarantine { quarantined: wanted, reason });
        }
        Ok(())
    }

    /// The compliance rules agents evaluate now.
    pub fn rules(&self) -> Arc<RuleSet> {
        self.rules.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces the rules and hands them to every connected agent, which evaluates them at once.
    pub fn set_rules(&self, rules: RuleSet) {
        let rules = Arc::new(rules);
        *self.rules.write().unwrap_or_else(|e| e.into_inner()) = rules.clone();
        for agent_id in self.live_agent_ids() {
            self.send(&agent_id, ServerMessage::Evaluate { rules: rules.rules.clone() });
        }
    }

    /// Asks the connected ones of `agent_ids` to evaluate the rules now (through the replica
    /// holding the connection, for an agent connected to another); how many were asked.
    pub fn evaluate_now(&self, agent_ids: &[String]) -> usize {
        let rules = self.rules();
        let (here, not_here): (Vec<&String>, Vec<&String>) =
            agent_ids.iter().partition(|id| self.send(id, ServerMessage::Evaluate { rules: rules.rules.clone() }));
        let elsewhere = self.online_elsewhere(&not_here);
        let asked = here.len() + elsewhere.len();
        self.evaluate_elsewhere(elsewhere);
        asked
    }

    /// Finishes the targets whose execution is past its deadline and moves rollouts on (at
    /// most once a second).
    pub(crate) async fn expire_overdue(&self) -> Result<(), StoreError> {
        let now = self.clock().now_ms();
        let last = self.expired_at_ms.load(Ordering::Relaxed);
        if now - last < EXPIRE_EVERY_MS {
            return Ok(());
        }
        self.expired_at_ms.store(now, Ordering::Relaxed);
        let expired = self.work.expire(now).await?;
        if expired > 0 {
            tracing::info!("{expired} execution target(s) passed their deadline");
        }
        self.advance_rollouts(now).await
    }

    /// Whether the agent is quarantined: (wanted, reported, reason).
    pub fn quarantine_of(&self, agent_id: &str) -> Option<(bool, Option<bool>, Option<String>)> {
        let agents = self.read();
        let e = agents.get(agent_id)?;
        Some((e.quarantine_wanted, e.quarantine_reported, e.quarantine.as_deref().map(str::to_string)))
    }
}
