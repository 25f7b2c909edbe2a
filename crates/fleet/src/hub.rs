//! Agents in memory: one entry per enrolled agent, with its live connection if any.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64};
use std::sync::{Arc, RwLock};

use tokio::sync::{mpsc, oneshot};
use toolgate_domain::fleet::agent::AgentAuth;
use toolgate_domain::fleet::wire::{InventoryReport, QuarantineEnforcement, ServerMessage};
use toolgate_domain::fleet::{AgentStatus, EnrollRefusal, HostFacts};
use toolgate_domain::{Clock, StoreError};
use toolgate_store::{FleetStore, WorkStore};

use crate::settings::FleetSettings;

/// Why the hub closes a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kick {
    /// The agent's credential was revoked: it must not come back.
    Revoked,
    /// Silent past the heartbeat window.
    Silent,
    /// The same agent connected again; the newer connection wins.
    Replaced,
    /// The certificate the session was opened with was revoked.
    CertificateRevoked,
    /// The certificate the session was opened with expired: reconnect (and renew).
    CertificateExpired,
    /// The server is stopping: reconnect (to another replica, if there is one).
    Stopping,
}

pub(crate) struct Live {
    pub(crate) id: u64,
    pub(crate) kick: oneshot::Sender<Kick>,
    /// Messages for the agent (runs, quarantine, rules); boxed so an idle channel stays small.
    pub(crate) outbox: mpsc::UnboundedSender<Box<ServerMessage>>,
    pub(crate) link: Link,
}

/// What a session's connection is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Link {
    /// The serial and expiry of the client certificate it was opened with, if any.
    pub certificate: Option<(String, i64)>,
    /// Whether it came over TLS: plugin secrets go only to such a connection.
    pub over_tls: bool,
    /// The agent protocol it speaks (frames a version lacks are not sent it).
    pub protocol: u32,
}

pub(crate) struct Entry {
    pub(crate) enrolled_at_ms: i64,
    pub(crate) revoked_at_ms: Option<i64>,
    pub(crate) facts: Option<Arc<HostFacts>>,
    pub(crate) facts_at_ms: Option<i64>,
    pub(crate) last_seen_ms: Option<i64>,
    /// Whether the server wants the agent quarantined, and why.
    pub(crate) quarantine: Option<Arc<str>>,
    pub(crate) quarantine_wanted: bool,
    /// What the agent last said it is in (None: it has not said since it was enrolled).
    pub(crate) quarantine_reported: Option<bool>,
    /// How it last said it holds a quarantine (kept to write it only when it changes).
    pub(crate) quarantine_enforcement: Option<Arc<QuarantineEnforcement>>,
    pub(crate) live: Option<Live>,
    /// Report connections open now (at most [`crate::MAX_REPORTS_PER_AGENT`]).
    pub(crate) reports_open: u8,
}

impl Entry {
    /// An agent just enrolled: nothing reported, never seen.
    pub(crate) fn enrolled_at(ms: i64) -> Self {
        Entry {
            enrolled_at_ms: ms,
            revoked_at_ms: None,
            facts: None,
            facts_at_ms: None,
            last_seen_ms: None,
            quarantine: None,
            quarantine_wanted: false,
            quarantine_reported: None,
            quarantine_enforcement: None,
            live: None,
            reports_open: 0,
        }
    }
}

pub struct Hub {
    pub(crate) store: Arc<dyn FleetStore>,
    pub(crate) work: Arc<dyn WorkStore>,
    /// The compliance rules agents evaluate (the last good compliance.yaml).
    pub(crate) rules: RwLock<Arc<crate::RuleSet>>,
    /// When the last sweep expired overdue executions.
    pub(crate) expired_at_ms: AtomicI64,
    clock: Clock,
    settings: FleetSettings,
    agents: RwLock<BTreeMap<String, Entry>>,
    pub(crate) next_connection: AtomicU64,
    /// When the last sweep looked for revocations made elsewhere (the console).
    pub(crate) revocations_checked_ms: AtomicI64,
    pub(crate) reports: Arc<tokio::sync::Semaphore>,
    pub(crate) reports_waiting: AtomicU64,
    /// Bumped at every revocation: report connections watch it to close at once.
    pub(crate) revocations: tokio::sync::watch::Sender<u64>,
    handshakes: Arc<tokio::sync::Semaphore>,
    /// How many entries hold a live connection; changed under the registry's write lock.
    pub(crate) live_connections: AtomicU64,
    /// The id of each execution an agent's response was just stored for.
    pub(crate) execution_updates: tokio::sync::broadcast::Sender<String>,
    /// The id of each approval ticket just decided or consumed (here, or on another replica).
    pub(crate) approval_updates: tokio::sync::broadcast::Sender<String>,
    /// This server's name when it shares its database with other replicas (None: alone).
    pub(crate) replica: Option<std::sync::Arc<str>>,
    /// Tells the other replicas what only the one holding an agent's connection can do.
    pub(crate) announcer: Option<Arc<dyn toolgate_store::ReplicaStore>>,
    /// Agents connected to another replica: when that replica last saw each.
    pub(crate) elsewhere: RwLock<std::collections::HashMap<String, i64>>,
    /// The plugin actions whose declared columns results are checked against.
    pub(crate) actions: Option<&'static toolgate_domain::fleet::instruction::InstructionSet>,
    /// Where the plugin secrets of the steps that declare them come from.
    pub(crate) secrets: Option<crate::secrets::SecretDelivery>,
    /// Takes what agents upload under grants (none: upload connections are refused).
    pub(crate) uploads: Option<crate::uploads::UploadDesk>,
    /// Signs the certificates agents ask for (none: no CA, no certificates).
    pub(crate) certificates: Option<crate::certs::Certificates>,
    /// The certificate serials refused now, and when they were last read.
    pub(crate) revoked_serials: crate::certs::RevokedSerials,
    pub(crate) certificates_checked_ms: AtomicI64,
    /// Signs the frames that make agents act (none: they go unsigned).
    pub(crate) signing: Option<crate::signing::Signing>,
    /// Where each change's outcome on each agent is recorded ([`Hub::with_audit`]).
    pub(crate) audit: Option<Arc<dyn toolgate_domain::audit::AuditSink>>,
    /// Where plugin configuration and kill switches are kept, and the switches engaged now.
    pub(crate) plugin_config: Option<Arc<dyn toolgate_store::PluginConfigStore>>,
    pub(crate) kill_switches: RwLock<Arc<Vec<toolgate_domain::records::KillSwitch>>>,
    /// Where the experience agents report is kept (none: they are not asked for it).
    pub(crate) experience: Option<Arc<dyn toolgate_store::ExperienceStore>>,
    /// The signals experience is watched for (experience.yaml).
    pub(crate) signals: Vec<toolgate_domain::fleet::signals::SignalType>,
    /// Recent views of devices' experience, for the fleet reads (experience_views).
    pub(crate) views: crate::experience_views::ExperienceViews,
}

/// Updates a slow listener may fall behind by before it misses some (it is told it lagged).
const EXECUTION_UPDATES_BUFFER: usize = 1024;

/// A live connection's handle: the edge waits on `kicked` beside the socket.
pub struct Connection {
    pub agent_id: String,
    pub id: u64,
    pub kicked: oneshot::Receiver<Kick>,
    /// What the hub wants sent to the agent, in order.
    pub outbox: mpsc::UnboundedReceiver<Box<ServerMessage>>,
}

impl Hub {
    /// Loads every enrolled agent from the store; none is online until it connects.
    pub async fn load(
        store: Arc<dyn FleetStore>,
        work: Arc<dyn WorkStore>,
        clock: Clock,
        settings: FleetSettings,
    ) -> Result<Self, StoreError> {
        let quarantines: BTreeMap<String, _> =
            work.quarantines().await?.into_iter().map(|q| (q.agent_id.clone(), q)).collect();
        let agents = store
            .agents()
            .await?
            .into_iter()
            .map(|a| {
                let quarantine = quarantines.get(&a.agent_id).cloned().unwrap_or_default();
                let entry = Entry {
                    enrolled_at_ms: a.enrolled_at_ms,
                    revoked_at_ms: a.revoked_at_ms,
                    facts: a.facts.map(Arc::new),
                    facts_at_ms: a.facts_at_ms,
                    last_seen_ms: a.last_seen_ms,
                    quarantine: quarantine.reason.map(Arc::from),
                    quarantine_wanted: quarantine.wanted,
                    quarantine_reported: quarantine.reported,
                    quarantine_enforcement: quarantine.enforcement.map(Arc::new),
                    live: None,
                    reports_open: 0,
                };
                (a.agent_id, entry)
            })
            .collect();
        let revocations_checked_ms = AtomicI64::new(clock.now_ms());
        Ok(Self {
            store,
            work,
            rules: RwLock::new(Arc::new(crate::RuleSet::default())),
            expired_at_ms: AtomicI64::new(0),
            clock,
            settings,
            agents: RwLock::new(agents),
            next_connection: AtomicU64::new(1),
            revocations_checked_ms,
            reports: Arc::new(tokio::sync::Semaphore::new(settings.max_concurrent_reports.max(1))),
            reports_waiting: AtomicU64::new(0),
            revocations: tokio::sync::watch::channel(0).0,
            handshakes: Arc::new(tokio::sync::Semaphore::new(settings.max_handshakes.max(1))),
            live_connections: AtomicU64::new(0),
            execution_updates: tokio::sync::broadcast::channel(EXECUTION_UPDATES_BUFFER).0,
            approval_updates: tokio::sync::broadcast::channel(EXECUTION_UPDATES_BUFFER).0,
            replica: None,
            announcer: None,
            elsewhere: RwLock::default(),
            actions: None,
            secrets: None,
            uploads: None,
            certificates: None,
            revoked_serials: crate::certs::RevokedSerials::default(),
            certificates_checked_ms: AtomicI64::new(0),
            signing: None,
            audit: None,
            plugin_config: None,
            kill_switches: RwLock::default(),
            experience: None,
            signals: Vec::new(),
            views: Default::default(),
        })
    }

    /// A place among the connections still in their handshake, or None when all are taken.
    pub fn handshake_permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.handshakes.clone().try_acquire_owned().ok()
    }

    pub fn settings(&self) -> &FleetSettings {
        &self.settings
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    pub fn store(&self) -> &dyn FleetStore {
        self.store.as_ref()
    }

    /// Queues a message for the agent's live connection, signed when it makes the agent act;
    /// false when it has none (or it could not be signed).
    pub fn send(&self, agent_id: &str, message: ServerMessage) -> bool {
        if !self.is_live(agent_id) {
            return false;
        }
        let Some(message) = self.outgoing(agent_id, message) else { return false };
        self.read()
            .get(agent_id)
            .and_then(|e| e.live.as_ref())
            .is_some_and(|live| live.outbox.send(Box::new(message)).is_ok())
    }

    /// Whether the agent holds a live connection to this server.
    pub(crate) fn is_live(&self, agent_id: &str) -> bool {
        self.read().get(agent_id).is_some_and(|e| e.live.is_some())
    }

    /// The agent protocol of its live connection here, if it has one.
    pub(crate) fn live_protocol(&self, agent_id: &str) -> Option<u32> {
        self.read().get(agent_id).and_then(|e| e.live.as_ref()).map(|live| live.link.protocol)
    }

    /// Whether the agent's live connection to this server came over TLS.
    pub(crate) fn is_live_over_tls(&self, agent_id: &str) -> bool {
        self.read().get(agent_id).and_then(|e| e.live.as_ref()).is_some_and(|live| live.link.over_tls)
    }

    /// Calls `change` on one agent's entry; false when it is not enrolled.
    pub(crate) fn update(&self, agent_id: &str, change: impl FnOnce(&mut Entry)) -> bool {
        self.write().get_mut(agent_id).map(change).is_some()
    }

    /// The agents with a live connection now.
    pub fn live_agent_ids(&self) -> Vec<String> {
        self.read().iter().filter(|(_, e)| e.live.is_some()).map(|(id, _)| id.clone()).collect()
    }

    pub(crate) fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Entry>> {
        self.agents.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Entry>> {
        self.agents.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Redeems an enrollment token: a new agent, its id and its credential.
    pub async fn enroll(&self, secret: &str) -> Result<Result<(String, String), EnrollRefusal>, StoreError> {
        let now = self.clock.now_ms();
        let enrolled = self.store.enroll(secret, now).await?;
        if let Ok((agent_id, _)) = &enrolled {
            self.write().insert(agent_id.clone(), Entry::enrolled_at(now));
        }
        Ok(enrolled)
    }

    pub async fn authenticate(&self, agent_id: &str, credential: &str) -> Result<AgentAuth, StoreError> {
        self.store.authenticate_agent(agent_id, credential).await
    }

    pub async fn save_facts(&self, agent_id: &str, facts: HostFacts, collected_at_ms: i64) -> Result<(), StoreError> {
        self.store.save_facts(agent_id, &facts, collected_at_ms).await?;
        if let Some(entry) = self.write().get_mut(agent_id) {
            entry.facts = Some(Arc::new(facts));
            entry.facts_at_ms = Some(collected_at_ms);
        }
        Ok(())
    }

    pub async fn save_inventory(&self, agent_id: &str, report: InventoryReport) -> Result<(), StoreError> {
        self.store.save_inventory(agent_id, report, self.clock.now_ms()).await
    }

    /// `seen_elsewhere`: when another replica the agent is connected to last saw it.
    pub(crate) fn status(&self, entry: &Entry, seen_elsewhere: Option<i64>, now: i64) -> AgentStatus {
        let recent = |seen: Option<i64>| seen.is_some_and(|s| now - s <= self.settings.offline_after_ms());
        if entry.revoked_at_ms.is_some() {
            AgentStatus::Revoked
        } else if (entry.live.is_some() && recent(entry.last_seen_ms)) || recent(seen_elsewhere) {
            AgentStatus::Online
        } else {
            AgentStatus::Offline
        }
    }

    /// Whether the agent was revoked (here, on another replica, or by the CLI once the sweep
    /// has seen it).
    pub fn is_revoked(&self, agent_id: &str) -> bool {
        self.read().get(agent_id).is_some_and(|e| e.revoked_at_ms.is_some())
    }
}
