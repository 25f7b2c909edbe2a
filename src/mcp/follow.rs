//! Streams of a handshake-era session, through its replay ring: a streamed call's frames go
//! into the ring (a task of their own, so nothing is lost when the connection drops), and a
//! connection follows the ring — the call's own POST from its start, or a GET resuming after
//! `Last-Event-ID`, or the session's GET channel. A follower ends after its stream's last
//! frame, or with `notifications/toolgate/stream_closed` and the reason.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use serde_json::json;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use toolgate_domain::CancellationToken;
use toolgate_domain::tokens::TokenState;

use super::replay::{CHANNEL, Event, Gap, Ring};
pub use super::stream_audit::StreamAudit;
use super::{McpServer, Payload, Reply};

/// How often a stream checks that the credential that opened it is still valid (and sends a
/// comment that keeps the connection alive): a revoked or expired one ends the stream within
/// this.
pub const CREDENTIAL_CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(2);
/// How long a client waits before reconnecting (the priming event's `retry`).
const RETRY_MS: u64 = 1000;

/// One SSE event of the default `message` type (JSON carries no raw newlines), with its id
/// when it is in a ring.
pub fn frame(id: Option<&str>, json: &str) -> Bytes {
    match id {
        Some(id) => Bytes::from(format!("id: {id}\ndata: {json}\n\n")),
        None => Bytes::from(format!("data: {json}\n\n")),
    }
}

fn ring_frame(event: &Event) -> Bytes {
    if event.data.is_empty() {
        // The priming event: an id to resume from before anything else was sent.
        return Bytes::from(format!("id: {}\nretry: {RETRY_MS}\ndata: \n\n", event.id));
    }
    frame(Some(&event.id.to_string()), &event.data)
}

/// Why a stream ends before its last frame, and what the client does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    CredentialRevoked,
    /// The credential could not be checked (the store is down) for longer than the grace.
    AuthUnavailable,
    SessionTerminated,
    Superseded,
    RecordGone,
}

impl CloseReason {
    /// When trying again can help, and how soon: only a store outage passes by itself.
    fn retry_after_ms(self) -> Option<u64> {
        match self {
            CloseReason::AuthUnavailable => Some(toolgate_domain::denial::RETRY_AFTER_STORE_FAULT_MS),
            _ => None,
        }
    }

    /// The reason's name, as close frames, audit rows and metrics say it.
    pub fn label(self) -> &'static str {
        self.parts().0
    }

    fn parts(self) -> (&'static str, &'static str) {
        match self {
            CloseReason::CredentialRevoked => (
                "credential_revoked",
                "authenticate again with a valid token; durable work (an execution) goes on and is fetchable by its id",
            ),
            CloseReason::AuthUnavailable => (
                "auth_unavailable",
                "the server could not check your credential for a while (its store is unavailable): reconnect in a few seconds; durable work (an execution) goes on and is fetchable by its id",
            ),
            CloseReason::SessionTerminated => (
                "session_terminated",
                "the session ended (DELETE, idle expiry or the server stopping): initialize again; executions are fetchable by their id",
            ),
            CloseReason::Superseded => {
                ("superseded", "a newer GET on this session took the channel over; keep reading that one")
            }
            CloseReason::RecordGone => (
                "record_gone",
                "this stream fell too far behind and its frames left the replay ring; fetch results by execution_id",
            ),
        }
    }
}

/// The last frame of a stream the server ends before its result, with why.
/// It carries the whole error envelope: the exchange's correlation id, the retry hint (null
/// when retrying as-is cannot help) and the remediation.
pub fn stream_closed(reason: CloseReason, correlation_id: &str) -> String {
    let retry_after_ms = reason.retry_after_ms();
    let (reason, remediation) = reason.parts();
    json!({"jsonrpc": "2.0", "method": "notifications/toolgate/stream_closed", "params": {
        "reason": reason, "correlation_id": correlation_id, "retry_after_ms": retry_after_ms, "remediation": remediation,
    }})
    .to_string()
}

pub struct CredentialWatch {
    pub server: Arc<McpServer>,
    pub token_id: String,
    pub every: tokio::time::Interval,
    grace: AuthGrace,
}

/// How long a credential may stay uncheckable before its stream ends.
struct AuthGrace {
    /// Since when the credential could not be checked (None: the last check answered).
    failing_since: Option<tokio::time::Instant>,
    grace: std::time::Duration,
}

/// What a credential check found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    Valid,
    /// Revoked, expired or gone: the stream ends with `credential_revoked`.
    Invalid,
    /// Not checkable for longer than the grace: the stream ends with `auth_unavailable`.
    Unavailable,
}

impl CredentialWatch {
    pub fn new(server: Arc<McpServer>, token_id: String) -> Self {
        let start = tokio::time::Instant::now() + CREDENTIAL_CHECK_EVERY;
        let grace = AuthGrace { failing_since: None, grace: server.options.streams.auth_unavailable_grace };
        let every = tokio::time::interval_at(start, CREDENTIAL_CHECK_EVERY);
        Self { server, token_id, every, grace }
    }

    /// Asks the store whether the token is still active. A store that cannot answer does not
    /// end the stream at once, nor ever while it answers again within the grace.
    pub async fn standing(&mut self) -> Standing {
        let services = self.server.services();
        let looked_up = services.credentials().token(&self.token_id).await;
        let looked_up =
            looked_up.map(|t| t.is_some_and(|t| t.state(services.clock().now_secs()) == TokenState::Active));
        if let Err(e) = &looked_up {
            tracing::warn!("could not re-check a streaming credential: {e}");
        }
        self.grace.judge(looked_up.map_err(drop), tokio::time::Instant::now())
    }
}

impl AuthGrace {
    /// The verdict on one check's answer at `now` (`Err`: the store did not answer).
    fn judge(&mut self, answer: Result<bool, ()>, now: tokio::time::Instant) -> Standing {
        match answer {
            Ok(valid) => {
                self.failing_since = None;
                if valid { Standing::Valid } else { Standing::Invalid }
            }
            Err(()) => {
                let since = *self.failing_since.get_or_insert(now);
                if now.duration_since(since) >= self.grace { Standing::Unavailable } else { Standing::Valid }
            }
        }
    }
}

/// The close a verdict calls for, if any.
pub fn close_for(standing: Standing) -> Option<CloseReason> {
    match standing {
        Standing::Valid => None,
        Standing::Invalid => Some(CloseReason::CredentialRevoked),
        Standing::Unavailable => Some(CloseReason::AuthUnavailable),
    }
}

/// Moves a streamed call's frames into the ring, then its result as the stream's last frame.
pub fn pump(
    ring: Arc<Ring>,
    stream: u64,
    first: String,
    mut frames: mpsc::UnboundedReceiver<String>,
    mut call: JoinHandle<Reply>,
    request_id: serde_json::Value,
) {
    ring.push(stream, first, false);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                biased;
                Some(frame) = frames.recv() => { ring.push(stream, frame, false); }
                reply = &mut call => {
                    while let Ok(frame) = frames.try_recv() {
                        ring.push(stream, frame, false);
                    }
                    let reply = reply.unwrap_or_else(|e| Reply::task_failed(&request_id, &e.to_string()));
                    ring.push(stream, reply.body.map(Payload::into_text).unwrap_or_default(), true);
                    return;
                }
            }
        }
    });
}

/// Which stream a connection follows.
pub enum Following {
    /// A call's stream: ends after its last frame. A revoked credential also fires the call's
    /// cancellation when the connection is the call's own.
    Call { stream: u64, cancellation: Option<CancellationToken> },
    /// The GET channel, while this GET owns it.
    Channel { owner: u64 },
}

struct Follower {
    audit: StreamAudit,
    /// The exchange that opened this stream (its close frame names it).
    correlation_id: String,
    ring: Arc<Ring>,
    following: Following,
    cursor: Option<u64>,
    changes: watch::Receiver<u64>,
    watch: CredentialWatch,
    pending: VecDeque<Bytes>,
    done: bool,
}

impl Follower {
    fn stream(&self) -> u64 {
        match self.following {
            Following::Call { stream, .. } => stream,
            Following::Channel { .. } => CHANNEL,
        }
    }

    fn close(&mut self, reason: CloseReason) {
        self.pending.push_back(frame(None, &stream_closed(reason, &self.correlation_id)));
        self.audit.close(reason.label());
        self.done = true;
    }

    /// Queues what the ring has for this follower; false when there is nothing new.
    fn collect(&mut self) -> bool {
        self.changes.borrow_and_update();
        match self.ring.after(self.stream(), self.cursor) {
            Err(Gap) => self.close(CloseReason::RecordGone),
            Ok(events) if events.is_empty() => {
                // A resume at or past a finished stream's last frame: nothing more will come.
                if let Following::Call { stream, .. } = self.following
                    && self.ring.is_finished(stream)
                {
                    self.done = true;
                    self.audit.close("completed");
                    return true;
                }
                let ended = match self.following {
                    Following::Call { .. } => self.ring.is_closed(),
                    Following::Channel { .. } => self.ring.is_channel_closed(),
                };
                if ended {
                    self.close(CloseReason::SessionTerminated);
                } else if matches!(self.following, Following::Channel { owner } if owner != self.ring.channel_owner()) {
                    self.close(CloseReason::Superseded);
                } else {
                    return false;
                }
            }
            Ok(events) => {
                for event in events {
                    self.pending.push_back(ring_frame(&event));
                    self.cursor = Some(event.id.seq);
                    if event.last {
                        self.done = true;
                        self.audit.close("completed");
                        break;
                    }
                }
            }
        }
        true
    }

    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(bytes) = self.pending.pop_front() {
                return Some(bytes);
            }
            if self.done || self.collect() {
                if self.pending.is_empty() {
                    return None;
                }
                continue;
            }
            tokio::select! {
                _ = self.changes.changed() => {}
                _ = self.watch.every.tick() => {
                    match close_for(self.watch.standing().await) {
                        None => self.pending.push_back(Bytes::from_static(b": the credential is still valid\n\n")),
                        Some(reason) => {
                            if let Following::Call { cancellation: Some(c), .. } = &self.following {
                                c.cancel();
                            }
                            self.close(reason);
                        }
                    }
                }
            }
        }
    }
}

/// The SSE body of a connection following `following` in `ring` after `cursor`.
pub fn follow(
    server: Arc<McpServer>,
    audit: StreamAudit,
    ring: Arc<Ring>,
    following: Following,
    cursor: Option<u64>,
) -> BoxStream<'static, Result<Bytes, Infallible>> {
    let token_id = audit.token_id().to_string();
    let follower = Follower {
        audit,
        correlation_id: server.correlation_id(),
        changes: ring.subscribe(),
        ring,
        following,
        cursor,
        watch: CredentialWatch::new(server, token_id),
        pending: VecDeque::new(),
        done: false,
    };
    Box::pin(futures_util::stream::unfold(follower, |mut f| async move { f.next().await.map(|b| (Ok(b), f)) }))
}

/// `events`, keeping `held` (a stream permit) until the connection lets go of them.
pub fn holding<T: Send + 'static>(
    events: BoxStream<'static, Result<Bytes, Infallible>>,
    held: T,
) -> BoxStream<'static, Result<Bytes, Infallible>> {
    use futures_util::StreamExt as _;
    Box::pin(events.map(move |event| {
        let _ = &held;
        event
    }))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;

    /// A stream of a caller whose credential cannot be checked ends with `auth_unavailable`
    /// once the store has failed for the whole grace, not before, and not at all when it
    /// answers again in between (the clock is the test's).
    #[test]
    fn an_uncheckable_credential_ends_its_stream_after_the_grace() {
        let mut grace = AuthGrace { failing_since: None, grace: Duration::from_secs(60) };
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        assert_eq!(grace.judge(Err(()), at(0)), Standing::Valid);
        assert_eq!(grace.judge(Err(()), at(59)), Standing::Valid);
        assert_eq!(grace.judge(Ok(true), at(61)), Standing::Valid, "answered again: the count starts over");
        assert_eq!(grace.judge(Err(()), at(62)), Standing::Valid);
        assert_eq!(grace.judge(Err(()), at(121)), Standing::Valid);
        assert_eq!(grace.judge(Err(()), at(122)), Standing::Unavailable);
        assert_eq!(close_for(Standing::Unavailable), Some(CloseReason::AuthUnavailable));
        assert_eq!(grace.judge(Ok(false), at(123)), Standing::Invalid);
        let close: serde_json::Value =
            serde_json::from_str(&stream_closed(CloseReason::AuthUnavailable, "req-1")).unwrap();
        let params = &close["params"];
        assert_eq!(
            (params["reason"].as_str(), params["correlation_id"].as_str()),
            (Some("auth_unavailable"), Some("req-1"))
        );
        assert_eq!(params["retry_after_ms"], 5000);
        assert!(params["remediation"].as_str().unwrap().contains("reconnect"));
        let revoked: serde_json::Value =
            serde_json::from_str(&stream_closed(CloseReason::CredentialRevoked, "r")).unwrap();
        assert_eq!(revoked["params"]["retry_after_ms"], serde_json::Value::Null, "retrying as-is cannot help");
    }
}
