//! One agent connection's conversation, apart from its transport: the edge reads text frames
//! and hands them here; what to answer comes back as [`ServerMessage`]s.

use toolgate_domain::fleet::agent::{AgentAuth, MAX_FACTS_BYTES};
use toolgate_domain::fleet::inventory;
use toolgate_domain::fleet::wire::{
    AgentMessage, InventoryReport, OLDEST_PROTOCOL_VERSION, PROTOCOL_VERSION, Purpose, QuarantineWish, RefusalCode,
    ServerMessage,
};

use crate::certs::{CertificateReason, PeerCertificate};
use crate::hub::{Connection, Hub, Link};

/// How a handshake ended.
pub enum Handshake {
    /// A session: the agent's live connection.
    Welcome {
        connection: Connection,
        reply: ServerMessage,
    },
    /// A report connection: facts and inventory follow, then the agent closes.
    Report {
        agent_id: String,
        reply: ServerMessage,
    },
    /// An upload connection: one upload under a grant ([`crate::uploads`]).
    Upload {
        agent_id: String,
        reply: ServerMessage,
    },
    /// A certificate issued on a listener that asks for one: the welcome, then a close that
    /// has the agent reconnect with it.
    Reissued {
        reply: ServerMessage,
    },
    Refused(ServerMessage),
}

fn has_certificate(reply: &ServerMessage) -> bool {
    matches!(reply, ServerMessage::Welcome { certificate: Some(_), .. })
}

fn refused(code: RefusalCode, message: impl Into<String>) -> Handshake {
    Handshake::Refused(ServerMessage::Refused { code, message: message.into() })
}

/// Answers the agent's first frame: an enrollment or a hello, over a connection that came
/// with `peer` (docs/trust.md), over TLS or not (plugin secrets go only over TLS).
pub async fn handshake(hub: &Hub, first_frame: &str, peer: &PeerCertificate, over_tls: bool) -> Handshake {
    let message = match serde_json::from_str::<AgentMessage>(first_frame) {
        Ok(message) => message,
        Err(e) => {
            return refused(RefusalCode::Malformed, format!("the first frame must be an enroll or hello message: {e}"));
        }
    };
    let protocol = match &message {
        AgentMessage::Enroll { protocol, .. } | AgentMessage::Hello { protocol, .. } => *protocol,
        _ => PROTOCOL_VERSION,
    };
    if !(OLDEST_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&protocol) {
        return refused(
            RefusalCode::UnsupportedProtocol,
            format!(
                "this server speaks agent protocol {OLDEST_PROTOCOL_VERSION} to {PROTOCOL_VERSION}, the agent {protocol}: upgrade the older side"
            ),
        );
    }
    let (agent_id, credential, purpose, csr) = match message {
        AgentMessage::Enroll { enroll_token, csr, .. } => match hub.enroll(&enroll_token).await {
            Ok(Ok((agent_id, credential))) => (agent_id, Some(credential), Purpose::Session, csr),
            Ok(Err(refusal)) => return refused(refusal.into(), refusal.message()),
            Err(e) => return refused(RefusalCode::Busy, format!("the server could not enroll the agent now: {e}")),
        },
        AgentMessage::Hello { agent_id, credential, purpose, csr, .. } => {
            match hub.authenticate(&agent_id, &credential).await {
                Ok(AgentAuth::Valid) => (agent_id, None, purpose, csr),
                Ok(AgentAuth::Revoked) => {
                    return refused(
                        RefusalCode::AgentRevoked,
                        format!("agent {agent_id} was revoked: enroll it again with a new enrollment token"),
                    );
                }
                Ok(AgentAuth::Unknown) => {
                    return refused(
                        RefusalCode::AgentUnknown,
                        format!(
                            "this server has no agent {agent_id} (another server's state dir?): enroll it with an enrollment token"
                        ),
                    );
                }
                Ok(AgentAuth::BadCredential) => {
                    return refused(RefusalCode::BadCredential, format!("the credential is not agent {agent_id}'s"));
                }
                Err(e) => return refused(RefusalCode::Busy, format!("the server could not check the agent now: {e}")),
            }
        }
        _ => return refused(RefusalCode::Malformed, "the first frame must be an enroll or hello message"),
    };
    if credential.is_none()
        && let Err(refusal) = hub.admit_certificate(&agent_id, peer, purpose, csr.is_some()).await
    {
        return Handshake::Refused(refusal);
    }
    let settings = hub.settings();
    // Told before any work, so that a change never runs on an agent quarantined while offline.
    let quarantine = (protocol >= 2 && purpose == Purpose::Session)
        .then(|| hub.quarantine_of(&agent_id))
        .flatten()
        .map(|(quarantined, _, reason)| QuarantineWish { quarantined, reason });
    // Signed, it is the session's first frame instead: ahead of any work all the same.
    let (quarantine, signed_quarantine) = match hub.signs() {
        true => (None, quarantine),
        false => (quarantine, None),
    };
    let reason = if credential.is_some() { CertificateReason::Enrollment } else { CertificateReason::Renewal };
    let certificate = hub.certificate_for(&agent_id, csr.as_deref(), reason).await;
    let reply = ServerMessage::Welcome {
        agent_id: agent_id.clone(),
        credential,
        heartbeat_ms: settings.heartbeat_ms,
        inventory_interval_ms: settings.inventory_interval_ms,
        quarantine,
        certificate,
        experience: hub.experience_settings(protocol),
    };
    // A session bound to a certificate ends when it expires or is revoked.
    let certificate = match peer {
        PeerCertificate::Presented(p) => Some((p.serial_hex.clone(), p.not_after_ms)),
        PeerCertificate::NotAsked | PeerCertificate::Absent => None,
    };
    let link = Link { certificate, over_tls, protocol };
    match purpose {
        // On a listener that asks, a session given a new certificate comes back with it, so a
        // session is always bound to the newest.
        Purpose::Session if *peer != PeerCertificate::NotAsked && has_certificate(&reply) => {
            Handshake::Reissued { reply }
        }
        Purpose::Session => {
            let connection = hub.connect(&agent_id, link);
            if let Some(QuarantineWish { quarantined, reason }) = signed_quarantine {
                hub.send(&agent_id, ServerMessage::Quarantine { quarantined, reason });
            }
            Handshake::Welcome { connection, reply }
        }
        Purpose::Report => Handshake::Report { agent_id, reply },
        Purpose::Upload => Handshake::Upload { agent_id, reply },
    }
}

/// A frame the server will not take; the edge closes the connection with it.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("malformed frame: {0}")]
    Malformed(String),
    #[error("agent {0} was revoked on the server")]
    Revoked(String),
    #[error("the store failed: {0}")]
    Store(#[from] toolgate_domain::StoreError),
}

fn parse(frame: &str) -> Result<AgentMessage, FrameError> {
    serde_json::from_str::<AgentMessage>(frame).map_err(|e| FrameError::Malformed(e.to_string()))
}

/// Handles one frame of a session (after the handshake): heartbeats. Facts and inventory are
/// taken here too, though this agent sends them over a report connection.
pub async fn receive(hub: &Hub, connection: &Connection, frame: &str) -> Result<(), FrameError> {
    let message = parse(frame)?;
    hub.seen(connection);
    match message {
        AgentMessage::Heartbeat => Ok(()),
        AgentMessage::QuarantineState { quarantined, enforcement, .. } => {
            Ok(hub.quarantine_reported(&connection.agent_id, quarantined, enforcement).await?)
        }
        AgentMessage::FrameRefused { execution_id, reason, detail } => {
            hub.frame_refused(&connection.agent_id, execution_id.as_deref(), reason, &detail);
            Ok(())
        }
        AgentMessage::Enroll { .. } | AgentMessage::Hello { .. } => {
            Err(FrameError::Malformed("enroll and hello come once, as the first frame".into()))
        }
        report => store_report(hub, &connection.agent_id, report, frame.len()).await,
    }
}

/// Handles one frame of a report connection: facts and inventory only.
pub async fn receive_report(hub: &Hub, agent_id: &str, frame: &str) -> Result<(), FrameError> {
    match parse(frame)? {
        AgentMessage::Heartbeat
        | AgentMessage::Enroll { .. }
        | AgentMessage::Hello { .. }
        | AgentMessage::QuarantineState { .. }
        | AgentMessage::FrameRefused { .. } => Err(FrameError::Malformed(
            "a report connection carries facts, inventory, results, compliance and experience only".into(),
        )),
        report => store_report(hub, agent_id, report, frame.len()).await,
    }
}

/// `frame_bytes`: the size of the frame it came in.
async fn store_report(hub: &Hub, agent_id: &str, message: AgentMessage, frame_bytes: usize) -> Result<(), FrameError> {
    // Checked at every frame: a connection opened before the revocation writes nothing after it.
    if hub.is_revoked(agent_id) {
        return Err(FrameError::Revoked(agent_id.to_string()));
    }
    match message {
        AgentMessage::Facts { collected_at_ms, facts } => {
            if frame_bytes > MAX_FACTS_BYTES {
                return Err(FrameError::Malformed(format!(
                    "a facts frame of {frame_bytes} bytes, more than the {MAX_FACTS_BYTES} it may be"
                )));
            }
            facts.check().map_err(FrameError::Malformed)?;
            Ok(hub.save_facts(agent_id, *facts, collected_at_ms).await?)
        }
        AgentMessage::Inventory(report) => {
            // A newer agent reports the tables its release adds: skipped until this server
            // knows them, never a reason to drop the agent's connection.
            if inventory::table(&report.table).is_err() {
                tracing::warn!(%agent_id, table = %report.table, "an inventory table this server does not know (a newer agent?): skipped");
                return Ok(());
            }
            check_report(&report)?;
            Ok(hub.save_inventory(agent_id, report).await?)
        }
        AgentMessage::Result(result) => {
            hub.take_result(agent_id, result).await?;
            Ok(())
        }
        AgentMessage::Compliance { evaluated_at_ms, results } => {
            Ok(hub.take_compliance(agent_id, results, evaluated_at_ms).await?)
        }
        AgentMessage::Experience(report) => {
            report.check().map_err(FrameError::Malformed)?;
            hub.take_experience(agent_id, report).await?;
            Ok(())
        }
        // The callers pass reports only; anything else is refused, never silently dropped.
        _ => Err(FrameError::Malformed("expected facts, inventory, a result, compliance or experience".into())),
    }
}

/// A report's table and columns must be the declared ones: what queries rely on.
fn check_report(report: &InventoryReport) -> Result<(), FrameError> {
    let table = inventory::table(&report.table).map_err(FrameError::Malformed)?;
    for row in &report.rows {
        for name in row.keys() {
            table.column(name).map_err(FrameError::Malformed)?;
        }
    }
    Ok(())
}
