//! The agent protocol: JSON text frames over one WebSocket the agent opens to `/agent/v1`.
//!
//! 1. The agent's first frame is [`AgentMessage::Enroll`] (first run: an enrollment token) or
//!    [`AgentMessage::Hello`] (its agent id and credential, kept in its state dir).
//! 2. The server answers [`ServerMessage::Welcome`] (with the credential, once, after an
//!    enrollment, the intervals to keep and, from protocol 2, the quarantine state the server
//!    wants, which the agent takes on before it reads anything else) or
//!    [`ServerMessage::Refused`] and closes.
//! 3. On that (session) connection the agent sends a heartbeat every interval; silence past
//!    the window marks it offline. Facts and inventory go over a short-lived second
//!    connection (a hello with `purpose: report`), on connect and on the server's schedule:
//!    a table can be large, and a WebSocket keeps its largest frame's buffer for its whole
//!    life, so bulk reports never pass through the connection that stays open.
//! 4. The server may send [`ServerMessage::Revoked`] and close: the agent must not come back.
//! 5. Work: the server sends [`ServerMessage::Run`] (on the session; again after a reconnect
//!    while the run is unfinished), the agent answers [`AgentMessage::Result`] (on the session
//!    when small, else over a report connection). A changing step runs at most once
//!    per execution: the agent journals it (durably) before and after, and answers a repeated
//!    order from its journal. [`ServerMessage::Quarantine`] sets the state the agent keeps
//!    across restarts (it confirms with [`AgentMessage::QuarantineState`]);
//!    [`ServerMessage::Evaluate`] hands over the compliance rules, evaluated at once, on the
//!    inventory schedule and whenever they come again ([`AgentMessage::Compliance`]).
//! 6. Uploads (docs/uploads.md): a connection of its own (a hello with `purpose: upload`)
//!    takes one grant ([`AgentMessage::UploadStart`]); the server answers
//!    [`ServerMessage::UploadReady`], the agent sends binary frames and
//!    [`AgentMessage::UploadEnd`], the server answers [`ServerMessage::UploadStored`] or a
//!    refusal and closes.
//! 7. Experience (protocol 5, docs/experience.md): the welcome says how often to sample and
//!    report; the agent sends [`AgentMessage::Experience`] batches over report connections.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::agent::{EnrollRefusal, HostFacts};
use super::compliance::{Rule, RuleResult};
pub use super::experience::{ExperienceReport, ExperienceSettings};
pub use super::quarantine::{QuarantineEnforcement, QuarantineMode, QuarantineWish};
pub use super::run_order::{RunOrder, RunResult, RunStep, SecretValues, StepMode, StepResult, plan_digest};
use super::signing::{FrameRefusal, SignedFrame};

/// The WebSocket path agents connect to.
pub const AGENT_PATH: &str = "/agent/v1";
/// The version of this protocol, sent in every Enroll and Hello. 2: the welcome carries the
/// quarantine state. 3: the server sends the engaged kill switches (an older agent is sent
/// none: it could not read the frame, and the server refuses what they stop anyway). 4: a step
/// may be a plan, a change may carry its approved plan's digest, and a step may end
/// `plan_changed` (an older agent is never sent either: the server refuses that target). 5: the
/// welcome says how to measure the endpoint's experience, and the agent reports it
/// ([`AgentMessage::Experience`]); an older agent is not asked. 6: a sample may count process
/// exits and crashes per program (`apps`, and the metric `app_crashes`). 7: it may also give a
/// program's CPU time, memory and starts, and the package that owns it (`packages`); a server
/// is upgraded before its agents, which it serves whatever their protocol.
pub const PROTOCOL_VERSION: u32 = 7;
/// The oldest version a server still serves: a protocol-1 agent gets a welcome without the
/// quarantine state (the server refuses to send a quarantined agent a change whatever its
/// protocol, so it is safe, only told later).
pub const OLDEST_PROTOCOL_VERSION: u32 = 1;
/// The largest frame either side accepts (an inventory table of a big host fits).
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum AgentMessage {
    Enroll {
        protocol: u32,
        enroll_token: String,
        agent_version: String,
        /// A signing request (PEM) for a key the agent made: the welcome brings its
        /// certificate (docs/trust.md).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        csr: Option<String>,
    },
    Hello {
        protocol: u32,
        agent_id: String,
        credential: String,
        agent_version: String,
        #[serde(default)]
        purpose: Purpose,
        /// A signing request when the agent has no certificate yet, or its certificate is
        /// past half its life.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        csr: Option<String>,
    },
    Facts {
        collected_at_ms: i64,
        facts: Box<HostFacts>,
    },
    Inventory(InventoryReport),
    Heartbeat,
    /// How a run ended, every step (report connection).
    Result(RunResult),
    /// The quarantine state the agent is in now (session), and how it can hold one.
    QuarantineState {
        quarantined: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// None from an agent older than protocol 3.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        enforcement: Option<QuarantineEnforcement>,
    },
    /// Every rule's outcome on this host (report connection).
    Compliance {
        evaluated_at_ms: i64,
        results: Vec<RuleResult>,
    },
    /// Takes an upload grant (upload connection, first frame after the welcome); `path` only
    /// when the grant names none.
    UploadStart {
        grant_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
    },
    /// Every byte was sent (as binary frames, after the server's `upload_ready`).
    UploadEnd(UploadEnd),
    /// The agent cannot send what the grant asks for (the path is refused, unreadable).
    UploadAbort {
        reason: String,
    },
    /// Samples of the endpoint's experience (report connection, protocol 5 on).
    Experience(ExperienceReport),
    /// A frame that would make the agent act was refused before its worker saw it (unsigned,
    /// altered, expired, for another agent): nothing of it ran (session).
    FrameRefused {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        execution_id: Option<String>,
        reason: FrameRefusal,
        detail: String,
    },
}

/// The end of an upload: what the agent sent, for the server to check against what came.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UploadEnd {
    pub size_bytes: u64,
    pub sha256: String,
    /// `file` or `tar` (a directory, bundled).
    pub kind: String,
    /// A bundle's member names (the first [`MAX_LISTED_ENTRIES`]): its preview.
    ///
    /// [`MAX_LISTED_ENTRIES`]: crate::uploads::MAX_LISTED_ENTRIES
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entries: Vec<String>,
    /// How many members the bundle has.
    #[serde(default)]
    pub entry_count: u64,
}

/// What a connection is for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    /// The one connection that stays open: heartbeats, and what the server sends.
    #[default]
    Session,
    /// A short-lived upload of facts and inventory, closed by the agent when done.
    Report,
    /// One file (or bundle) sent under an upload grant (docs/uploads.md), then closed.
    Upload,
}

/// One inventory table as collected on the host.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InventoryReport {
    pub table: String,
    pub collected_at_ms: i64,
    /// False where the host has no source for the table (no dpkg or rpm, no systemd).
    pub available: bool,
    /// Why the table is not available, or what went wrong reading it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default)]
    pub rows: Vec<Map<String, Value>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ServerMessage {
    Welcome {
        agent_id: String,
        /// Only after an enrollment: the agent's own credential, sent this once.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        credential: Option<String>,
        heartbeat_ms: u64,
        inventory_interval_ms: u64,
        /// The quarantine the agent must be in before it takes any work (protocol 2 on).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        quarantine: Option<QuarantineWish>,
        /// The certificate the hello's or enrollment's signing request asked for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        certificate: Option<AgentCertificate>,
        /// How to measure the endpoint's experience (protocol 5 on; none: do not).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        experience: Option<ExperienceSettings>,
    },
    Refused {
        code: RefusalCode,
        message: String,
    },
    /// The agent's credential was revoked; it must stop and not reconnect.
    Revoked {
        message: String,
    },
    Run(RunOrder),
    /// The quarantine state the agent must be in (sent on connect and on every change).
    Quarantine {
        quarantined: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The compliance rules: evaluate them now and on the inventory schedule.
    Evaluate {
        rules: Vec<Rule>,
    },
    /// Every plugin kill switch engaged now (protocol 3 on): the agent keeps them across
    /// restarts and refuses what they stop, even when a server that has not heard of one
    /// yet sends it.
    KillSwitches {
        switches: Vec<crate::records::KillSwitch>,
    },
    /// The grant is taken: send what `path` holds, at most `max_bytes`, as binary frames of
    /// at most [`UPLOAD_FRAME_BYTES`], then an `upload_end`.
    UploadReady {
        path: String,
        max_bytes: u64,
    },
    /// The upload is stored under its digest; the connection closes.
    UploadStored {
        sha256: String,
        size_bytes: u64,
    },
    /// A frame that makes the agent act, signed by the server's code-signing key
    /// ([`crate::fleet::signing`]).
    Signed(Box<SignedFrame>),
}

/// The largest binary frame of an upload.
pub const UPLOAD_FRAME_BYTES: usize = 64 * 1024;

/// A client certificate for the agent, signed by the server's agent CA (docs/trust.md).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentCertificate {
    pub pem: String,
    /// The CA that signed it: what the agent pins.
    pub ca_pem: String,
    pub not_after_ms: i64,
}

/// Why the server refused a connection. Permanent ones end the agent with a clear error;
/// the others are retried with backoff.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalCode {
    EnrollTokenUnknown,
    EnrollTokenExpired,
    EnrollTokenUsedUp,
    AgentUnknown,
    AgentRevoked,
    BadCredential,
    UnsupportedProtocol,
    Malformed,
    /// The server is at its cap of agent connections or handshakes: try again later.
    Busy,
    /// The upload grant cannot be used, or the upload broke its terms (size, digest).
    UploadRefused,
    /// The agent listener wants the client certificate this agent holds (docs/trust.md); it
    /// can connect without one again once that one has expired.
    CertificateRequired,
    /// The agent's certificate was revoked: it must be enrolled again.
    CertificateRevoked,
    /// A certificate was just issued on a connection that presented none: reconnect with it.
    Reconnect,
}

impl RefusalCode {
    /// Whether trying again with the same credentials can ever succeed.
    pub fn is_permanent(self) -> bool {
        !matches!(self, RefusalCode::Busy | RefusalCode::CertificateRequired | RefusalCode::Reconnect)
    }
}

impl From<EnrollRefusal> for RefusalCode {
    fn from(refusal: EnrollRefusal) -> Self {
        match refusal {
            EnrollRefusal::Unknown => RefusalCode::EnrollTokenUnknown,
            EnrollRefusal::Expired => RefusalCode::EnrollTokenExpired,
            EnrollRefusal::UsedUp => RefusalCode::EnrollTokenUsedUp,
        }
    }
}

impl EnrollRefusal {
    pub fn message(self) -> &'static str {
        match self {
            EnrollRefusal::Unknown => {
                "the enrollment token is not known to this server (mistyped, or from another server): mint one with `toolgate enroll-token create`"
            }
            EnrollRefusal::Expired => {
                "the enrollment token has expired: mint a new one with `toolgate enroll-token create --expires-in 1h`"
            }
            EnrollRefusal::UsedUp => {
                "the enrollment token has been used as many times as it allows: mint a new one with `toolgate enroll-token create --uses N`"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_with_their_type_tag() {
        let hello = AgentMessage::Hello {
            protocol: PROTOCOL_VERSION,
            agent_id: "agt-0123456789abcdef".into(),
            credential: "tga_x".into(),
            agent_version: "0.1.0".into(),
            purpose: Purpose::Session,
            csr: None,
        };
        let text = serde_json::to_string(&hello).unwrap();
        assert!(text.starts_with(r#"{"type":"hello""#), "{text}");
        assert_eq!(serde_json::from_str::<AgentMessage>(&text).unwrap(), hello);
        let heartbeat: AgentMessage = serde_json::from_str(r#"{"type":"heartbeat"}"#).unwrap();
        assert_eq!(heartbeat, AgentMessage::Heartbeat);
        let refused = ServerMessage::Refused { code: RefusalCode::EnrollTokenExpired, message: "m".into() };
        assert_eq!(
            serde_json::to_string(&refused).unwrap(),
            r#"{"type":"refused","code":"enroll_token_expired","message":"m"}"#
        );
    }

    #[test]
    fn an_unknown_field_is_refused_not_ignored() {
        assert!(
            serde_json::from_str::<AgentMessage>(
                r#"{"type":"hello","protocol":1,"agent_id":"a","credential":"c","agent_version":"v","extra":1}"#
            )
            .is_err()
        );
    }
}
