//! Plugin kill switches (set_plugin_kill_switch; docs/instructions.md): an engaged switch stops
//! a plugin, or one of its actions, on the whole fleet. The server refuses to start what it
//! stops, sends none of it to agents (a run already stored is refused per target, saying
//! which switch), stops the targets of running executions not yet sent, and pushes the
//! engaged switches to every agent in a signed frame, so that an agent refuses them even from
//! a server that has not heard of one yet. Every replica keeps them in memory, read again when
//! another sets one.

use std::sync::Arc;

use toolgate_domain::StoreError;
use toolgate_domain::fleet::instruction::TargetStatus;
use toolgate_domain::fleet::wire::{RunStep, ServerMessage};
use toolgate_domain::records::{KillSwitch, stopping};
use toolgate_store::PluginConfigStore;

use crate::hub::Hub;

/// The first agent protocol that reads the kill-switch frame.
const KILL_SWITCH_PROTOCOL: u32 = 3;
/// How many of the newest executions an engaged switch looks through for targets not yet sent.
const SCANNED_EXECUTIONS: usize = 1000;
const SCAN_PAGE: usize = 100;

impl Hub {
    /// Kill switches and plugin configuration are read from `store` (without it, no switch is
    /// ever engaged and no action is given configuration).
    pub fn with_plugin_config(mut self, store: Arc<dyn PluginConfigStore>) -> Self {
        self.plugin_config = Some(store);
        self
    }

    /// Reads the engaged switches again (at start, and when a replica set one).
    pub async fn load_kill_switches(&self) -> Result<(), StoreError> {
        let Some(store) = &self.plugin_config else { return Ok(()) };
        let engaged = Arc::new(store.engaged_kill_switches().await?);
        *self.kill_switches.write().unwrap_or_else(|e| e.into_inner()) = engaged;
        Ok(())
    }

    /// The switches engaged now.
    pub fn kill_switches(&self) -> Arc<Vec<KillSwitch>> {
        self.kill_switches.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The engaged switch that stops one of `steps`, if any.
    pub fn stopping(&self, steps: &[RunStep]) -> Option<KillSwitch> {
        let switches = self.kill_switches();
        stopping(&switches, steps.iter().map(|s| (s.plugin.as_str(), s.action.as_str()))).cloned()
    }

    /// A switch was set (here or on another replica): read them again, tell every agent
    /// connected here, and refuse the targets of unfinished executions not yet sent what a
    /// switch stops. The executions stopped so.
    pub async fn kill_switches_changed(&self) -> Result<Vec<String>, StoreError> {
        self.load_kill_switches().await?;
        for agent_id in self.live_agent_ids() {
            self.push_kill_switches(&agent_id);
        }
        self.stop_undelivered().await
    }

    /// Sends the engaged switches to an agent connected here that can read them.
    pub(crate) fn push_kill_switches(&self, agent_id: &str) {
        if self.live_protocol(agent_id).is_some_and(|p| p >= KILL_SWITCH_PROTOCOL) {
            let switches = self.kill_switches().as_ref().clone();
            self.send(agent_id, ServerMessage::KillSwitches { switches });
        }
    }

    async fn stop_undelivered(&self) -> Result<Vec<String>, StoreError> {
        let now = self.clock().now_ms();
        let mut stopped = Vec::new();
        let mut offset = 0;
        while offset < SCANNED_EXECUTIONS {
            let page = self.work.executions(None, None, None, offset, SCAN_PAGE).await?;
            for header in &page {
                let waiting = header.counts.iter().any(|(status, n)| *status == TargetStatus::Pending && *n > 0);
                if !waiting || header.cancelled_at_ms.is_some() || header.deadline_ms <= now {
                    continue;
                }
                let Some(switch) = self.stopping(&header.steps) else { continue };
                let Some((_, agents)) = self.work.undelivered(&header.execution_id, now).await? else { continue };
                if !agents.is_empty() {
                    tracing::warn!(execution_id = %header.execution_id, "{} target(s) not sent: {}", agents.len(), switch.refusal());
                    self.refuse_targets(&header.execution_id, agents, &switch.refusal()).await;
                    stopped.push(header.execution_id.clone());
                }
            }
            if page.len() < SCAN_PAGE {
                break;
            }
            offset += page.len();
        }
        Ok(stopped)
    }
}
