//! `GET /mcp` in the handshake era: a session's server→client channel (heartbeats now;
//! whatever is not tied to a request as it comes), and the way back into a dropped stream
//! (`Last-Event-ID`). A second GET takes the channel over from the first. 2026-07-28 has no
//! GET (405).

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use toolgate_domain::Caller;
use toolgate_domain::audit::{AuditEvent, AuditOutcome, TargetType};

use super::follow::{self, Following};
use super::headers::header;
use super::jsonrpc as rpc;
use super::replay::{CHANNEL, EventId};
use super::{HANDSHAKE_VERSIONS, McpServer, Reply, handshake};

impl McpServer {
    pub async fn open_channel(self: &Arc<Self>, caller: &Caller, headers: &HeaderMap) -> Reply {
        let refuse = |status: StatusCode, code: i64, message: &str, remediation: &str| {
            let data =
                json!({"correlation_id": self.correlation_id(), "retry_after_ms": null, "remediation": remediation});
            Reply::error(status, &Value::Null, code, message, Some(data))
        };
        if header(headers, super::headers::PROTOCOL_VERSION).is_some_and(|v| !HANDSHAKE_VERSIONS.contains(&v)) {
            return refuse(
                StatusCode::METHOD_NOT_ALLOWED,
                rpc::INVALID_REQUEST,
                "2026-07-28 has no GET stream",
                "POST each request; a call that reports progress answers as a stream",
            );
        }
        let Some(sid) = header(headers, super::headers::SESSION_ID) else {
            return refuse(
                StatusCode::BAD_REQUEST,
                rpc::INVALID_REQUEST,
                "GET /mcp opens a session's stream: send the Mcp-Session-Id that initialize returned",
                "initialize first, then GET with its Mcp-Session-Id and Accept: text/event-stream",
            );
        };
        let Some(session) = self.find_session(sid, &caller.principal.name).await else {
            return handshake::session_not_found(self, &Value::Null, "session not found: it expired or was ended");
        };
        if !super::headers::accepts_sse(headers) {
            return refuse(
                StatusCode::NOT_ACCEPTABLE,
                rpc::NOT_ACCEPTABLE,
                "GET /mcp answers with Server-Sent Events only",
                "send Accept: text/event-stream",
            );
        }
        let cursor = match header(headers, super::headers::LAST_EVENT_ID).map(|id| (id, EventId::parse(id))) {
            None => None,
            Some((_, Some(id))) => Some(id),
            Some((raw, None)) => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    rpc::INVALID_REQUEST,
                    &format!(
                        "Last-Event-ID `{}` is not an event id this server sent",
                        raw.chars().take(64).collect::<String>()
                    ),
                    "send the id of the last event you received, as it came (`<stream>-<n>`), or no Last-Event-ID",
                );
            }
        };
        let ring = session.ring.clone();
        // A resume checks its cursor before it takes anything: a gap ends the session.
        if let Some(id) = cursor
            && ring.after(id.stream, Some(id.seq)).is_err()
        {
            self.sessions.remove(sid, &caller.principal.name);
            self.forget_shared_session(sid).await;
            self.record(
                AuditEvent::new(self.now_ms(), "session.close", AuditOutcome::Success)
                    .by(caller)
                    .target(TargetType::McpSession, sid)
                    .detail(format!("replay_window_exceeded (Last-Event-ID {id})"))
                    .correlation(self.correlation_id()),
            );
            return refuse(
                StatusCode::NOT_FOUND,
                rpc::SESSION_NOT_FOUND,
                "Replay window exceeded",
                "the frames after your Last-Event-ID are gone and the session has ended: initialize again, and fetch results by execution_id (get_execution_status, query_responses); do not repeat a call that changes state",
            );
        }
        let permit = match self.streams.admit(&caller.principal.name, super::admission::StreamKind::Channel) {
            Ok(permit) => permit,
            Err(cap) => return cap.refusal(self, &Value::Null),
        };
        let following = match cursor {
            Some(id) if id.stream != CHANNEL => Following::Call { stream: id.stream, cancellation: None },
            _ => Following::Channel { owner: ring.take_channel() },
        };
        // A fresh channel starts now; a resume right after its cursor.
        let start = cursor.map(|id| id.seq).or_else(|| ring.head());
        let what = match cursor {
            Some(id) => format!("resume after {id}"),
            None => "channel".to_string(),
        };
        let audit = follow::StreamAudit::attach(self, caller, (TargetType::McpSession, sid), what);
        let events = follow::follow(self.clone(), audit, ring, following, start);
        Reply::stream(follow::holding(events, permit))
    }
}
