//! A tools/call answered as a stream (Server-Sent Events on the POST's response): when the
//! request carries `_meta.progressToken` (a string of at most 512 bytes, or an integer) or
//! the client asked for log lines (a session's `logging/setLevel`, 2026-07-28's `_meta`
//! level), its `Accept` admits `text/event-stream`, and the call reports progress or logs
//! before its result. A call that sends nothing before its result is answered with the plain
//! JSON body, byte for byte as without a token.
//!
//! The call runs in a task of its own, so a client that goes away loses nothing: the call
//! finishes and is audited, and its cancellation token fires, so a handler that was only
//! waiting to report progress (an execution's) stops waiting. Durable work goes on.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use toolgate_domain::audit::TargetType;
use toolgate_domain::{Caller, CancellationToken, ClientRequests, LogLevel, LogSink, Progress, ProgressSink};

use super::super::admission::StreamPermit;
use super::super::back_channel::{ASK_TIMEOUT, SessionChannel};
use super::super::era::Era;
use super::super::follow::{self, CredentialWatch, Following, StreamAudit, close_for, frame, stream_closed};
use super::super::in_flight::InFlightGuard;
use super::super::replay::Ring;
use super::super::request::Listeners;
use super::super::{McpServer, Payload, Reply};

/// The longest progress token echoed back; anything else means "no progress requested".
const MAX_TOKEN_BYTES: usize = 512;

/// The request's progress token, if it is one the server honours.
pub fn progress_token(params: Option<&Value>) -> Option<Value> {
    let token = params?.get("_meta")?.get("progressToken")?;
    match token {
        Value::String(s) if s.len() <= MAX_TOKEN_BYTES => Some(token.clone()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(token.clone()),
        _ => None,
    }
}

/// What the client asked to hear while the call runs.
pub struct Wants {
    pub progress: Option<Value>,
    pub log_level: Option<LogLevel>,
    /// The session whose client may be asked questions on this stream (elicitation,
    /// sampling, roots), as its `initialize` declared.
    pub ask_session: Option<String>,
    /// The session's replay ring: the stream's frames go there, so a dropped connection
    /// resumes with Last-Event-ID (handshake era, in a session).
    pub ring: Option<Arc<Ring>>,
    /// Open the stream with a priming event (an id to resume from; 2025-11-25 on).
    pub priming: bool,
    /// The stream's place among those held open; freed when the call ends.
    pub permit: StreamPermit,
}

fn log_notification(level: LogLevel, message: &str) -> String {
    let params = json!({"level": level.as_str(), "logger": "toolgate", "data": message});
    json!({"jsonrpc": "2.0", "method": "notifications/message", "params": params}).to_string()
}

/// The `_meta` key a progress notification names its execution under.
pub const EXECUTION_ID_META: &str = "toolgate/execution_id";

/// Progress for a call answered with plain JSON, sent on its session's GET channel instead
/// (kept in the session's ring, so a channel that reconnects with Last-Event-ID loses none).
pub fn progress_on_channel(ring: Arc<Ring>, token: Value) -> ProgressSink {
    ProgressSink::new(move |p| {
        ring.push(super::super::replay::CHANNEL, progress_notification(&token, &p), false);
    })
}

fn progress_notification(token: &Value, p: &Progress) -> String {
    let mut params = json!({"progressToken": token, "progress": p.progress});
    if let Some(total) = p.total {
        params["total"] = json!(total);
    }
    if let Some(message) = &p.message {
        params["message"] = json!(message);
    }
    if let Some(execution_id) = &p.execution_id {
        params["_meta"] = json!({EXECUTION_ID_META: execution_id});
    }
    json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}).to_string()
}

/// Fires the call's cancellation token when the stream is dropped before the result went out
/// (the client went away).
struct Detach {
    cancellation: CancellationToken,
    finished: bool,
}

impl Drop for Detach {
    fn drop(&mut self) {
        if !self.finished {
            self.cancellation.cancel();
        }
    }
}

struct Streaming {
    /// The exchange's correlation id (its close frame names it).
    correlation_id: String,
    /// Its audit rows and its close's count.
    audit: StreamAudit,
    /// The request's id (an internal error still answers it).
    id: Value,
    first: Option<String>,
    frames: mpsc::UnboundedReceiver<String>,
    call: Option<JoinHandle<Reply>>,
    detach: Detach,
    watch: CredentialWatch,
}

/// Runs the call (`run`, with the listeners this stream gives it) in a task of its own;
/// answers it as a stream if it reports progress before its result.
pub async fn answer_streaming(
    server: Arc<McpServer>,
    caller: Caller,
    id: Value,
    era: Era,
    wants: Wants,
    in_flight: Option<InFlightGuard>,
    run: impl FnOnce(Listeners) -> futures_util::future::BoxFuture<'static, Reply> + Send + 'static,
) -> Reply {
    let (frames_tx, mut frames) = mpsc::unbounded_channel();
    let permit = wants.permit;
    // A stream's audit rows name its session, or the request it answers outside one.
    let audit_target = match &wants.ask_session {
        Some(session) => (TargetType::McpSession, session.clone()),
        None => (TargetType::McpRequest, id.to_string()),
    };
    let progress = match wants.progress {
        Some(token) => {
            let frames = frames_tx.clone();
            ProgressSink::new(move |p| {
                let _ = frames.send(progress_notification(&token, &p));
            })
        }
        None => ProgressSink::none(),
    };
    let log = match wants.log_level {
        Some(min) => {
            let frames = frames_tx.clone();
            LogSink::new(min, move |level, message| {
                let _ = frames.send(log_notification(level, message));
            })
        }
        None => LogSink::none(),
    };
    // The session's registration (notifications/cancelled fires it) goes with the task.
    let cancellation = in_flight.as_ref().map_or_else(|| server.call_cancellation(), |r| r.cancellation.clone());
    let client = match wants.ask_session {
        Some(session) => ClientRequests::new(Arc::new(SessionChannel {
            outstanding: server.outstanding.clone(),
            session,
            capabilities: era.client_capabilities().cloned().unwrap_or(Value::Null),
            frames: frames_tx,
            cancellation: cancellation.clone(),
            timeout: ASK_TIMEOUT,
        })),
        None => ClientRequests::default(),
    };
    let listeners = Listeners { progress, log, client, cancellation: cancellation.clone(), ..Listeners::default() };
    let detach = Detach { cancellation: cancellation.clone(), finished: false };
    // The task outlives the request: it carries the exchange's correlation id along.
    let correlation_id = server.correlation_id();
    let token_id = caller.token_id.clone();
    let watch = CredentialWatch::new(server.clone(), token_id.clone());
    let follower_server = server.clone();
    let audited_caller = caller.clone();
    let request_id = id.clone();
    let mut call = tokio::spawn(crate::correlation::scope(correlation_id, async move {
        let reply = run(listeners).await;
        drop((in_flight, permit));
        reply
    }));
    let first = tokio::select! {
        biased;
        Some(frame) = frames.recv() => frame,
        reply = &mut call => {
            // Nothing reported before the result: the plain answer.
            let mut detach = detach;
            detach.finished = true;
            return reply.unwrap_or_else(|e| Reply::task_failed(&request_id, &e.to_string()));
        }
    };
    if let Some(ring) = wants.ring {
        // In a session the frames go through its ring: a dropped connection loses nothing
        // and does not cancel the call; the client resumes with Last-Event-ID.
        let mut detach = detach;
        detach.finished = true;
        let stream = ring.open_stream();
        if wants.priming {
            ring.push(stream, "", false);
        }
        let what = format!("call {request_id} (stream {stream})");
        let audit = StreamAudit::attach(&follower_server, &audited_caller, (audit_target.0, &audit_target.1), what);
        follow::pump(ring.clone(), stream, first, frames, call, request_id);
        let following = Following::Call { stream, cancellation: Some(detach.cancellation.clone()) };
        return Reply::stream(follow::follow(follower_server, audit, ring, following, None));
    }
    let audit = StreamAudit::attach(
        &follower_server,
        &audited_caller,
        (audit_target.0, &audit_target.1),
        format!("call {request_id}"),
    );
    let state = Streaming {
        correlation_id: follower_server.correlation_id(),
        audit,
        id: request_id,
        first: Some(first),
        frames,
        call: Some(call),
        detach,
        watch,
    };
    let events: BoxStream<'static, Result<Bytes, Infallible>> =
        Box::pin(futures_util::stream::unfold(state, |mut s| async move {
            if let Some(first) = s.first.take() {
                return Some((Ok(frame(None, &first)), s));
            }
            let call = s.call.as_mut()?;
            tokio::select! {
                biased;
                Some(next) = s.frames.recv() => Some((Ok(frame(None, &next)), s)),
                _ = s.watch.every.tick() => {
                    let Some(reason) = close_for(s.watch.standing().await) else {
                        return Some((Ok(Bytes::from_static(b": the credential is still valid\n\n")), s));
                    };
                    // The call goes on (and is audited); its client hears nothing more of it.
                    s.call = None;
                    s.detach.cancellation.cancel();
                    s.detach.finished = true;
                    s.audit.close(reason.label());
                    Some((Ok(frame(None, &stream_closed(reason, &s.correlation_id))), s))
                }
                reply = call => {
                    s.call = None;
                    s.detach.finished = true;
                    s.audit.close("completed");
                    // Progress reported just before the end goes out before the result.
                    let mut out = String::new();
                    while let Ok(next) = s.frames.try_recv() {
                        out.push_str(&String::from_utf8_lossy(&frame(None, &next)));
                    }
                    let reply = reply.unwrap_or_else(|e| Reply::task_failed(&s.id, &e.to_string()));
                    let body = reply.body.map(Payload::into_text).unwrap_or_default();
                    out.push_str(&String::from_utf8_lossy(&frame(None, &body)));
                    Some((Ok(Bytes::from(out)), s))
                }
            }
        }));
    Reply::stream(events)
}
