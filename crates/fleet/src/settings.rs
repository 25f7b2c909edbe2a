//! How the fleet is kept: the intervals agents are told and the server's caps.

/// How agents are kept: the intervals they are told in their welcome and the server's caps.
#[derive(Clone, Copy, Debug)]
pub struct FleetSettings {
    /// How often an agent sends a heartbeat.
    pub heartbeat_ms: u64,
    /// An agent silent for this many heartbeats is offline (and its connection is closed).
    pub missed_heartbeats: u32,
    /// How often an agent re-reads its host and reports its inventory.
    pub inventory_interval_ms: u64,
    /// How often an agent samples its experience (protocol 5 on), and how often it sends
    /// what it sampled.
    pub experience_sample_ms: u64,
    pub experience_report_ms: u64,
    /// How long raw samples, hourly and daily rollups are kept.
    pub experience_retention: toolgate_store::Retention,
    /// Agent connections open at once; past it a new one is refused as busy.
    pub max_connections: usize,
    /// Agent connections between the upgrade and their first frame, at once; past it a new
    /// one is refused (503) and the agent retries. The agent surface's own budget: agents do
    /// not use the MCP endpoint's allowance of unauthenticated connections.
    pub max_handshakes: usize,
    /// Report uploads taken at once; the others wait their turn (see [`crate::Hub::report_place`]).
    /// Reports are large and the store takes them one at a time anyway: this bounds the
    /// memory a whole fleet reporting at once (after a server restart) can claim.
    pub max_concurrent_reports: usize,
    /// How long a report connection may wait for its next frame before it is closed: an
    /// agent sends its frames at once, so an idle one holds a place for nothing.
    pub report_idle_ms: u64,
    /// How often each replica reads the revoked certificate serials (docs/trust.md): a
    /// certificate revoked on another replica is cut off within it.
    pub revocation_check_ms: u64,
}

impl Default for FleetSettings {
    fn default() -> Self {
        Self {
            heartbeat_ms: 30_000,
            missed_heartbeats: 3,
            inventory_interval_ms: 3_600_000,
            experience_sample_ms: 60_000,
            experience_report_ms: 300_000,
            experience_retention: toolgate_store::Retention::default(),
            max_connections: 20_000,
            max_handshakes: 1024,
            max_concurrent_reports: 16,
            report_idle_ms: 10_000,
            revocation_check_ms: 30_000,
        }
    }
}

impl FleetSettings {
    pub fn offline_after_ms(&self) -> i64 {
        (self.heartbeat_ms as i64).saturating_mul(i64::from(self.missed_heartbeats.max(1)))
    }
}
