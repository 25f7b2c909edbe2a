//! `subscriptions/listen` (2026-07-28): how a stateless client hears resources change without
//! polling, where the handshake era has `resources/subscribe` and the session's GET stream.
//! The answer is a stream: first `notifications/subscriptions/acknowledged` naming what is
//! followed, then `notifications/resources/updated` each time one of those resources changes
//! (an execution's agents answer, an approval ticket is decided or consumed, here or on
//! another replica), each carrying the listen's id.
//! A resource is followed only if the caller may read it now (the same gate and confined read
//! as `resources/read`: another principal's execution or ticket is never heard of); lists do not change
//! while the server runs, so list-changed notifications are never offered. The stream holds a
//! stream slot of the caller's, and ends, saying why, when the credential that opened it stops
//! being valid.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use toolgate_domain::Caller;
use toolgate_domain::audit::TargetType;

use super::admission::StreamKind;
use super::changing::{self, Kind};
use super::era::Era;
use super::follow::{CredentialWatch, StreamAudit, close_for, frame, holding, stream_closed};
use super::jsonrpc as rpc;
use super::request::{Listeners, Request};
use super::{McpServer, Reply};

/// The `_meta` key every message of a listen stream carries: the listen request's id.
pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// The most resources one listen follows.
const MAX_RESOURCES: usize = 100;

pub async fn listen(server: &Arc<McpServer>, caller: &Caller, id: &Value, params: Option<&Value>, era: &Era) -> Reply {
    if server.options.streams.plain_json_only {
        let message = "Method not found: subscriptions/listen (this server answers plain JSON only, --mcp-no-streaming: poll resources/read)";
        return Reply::error(era.not_found_status(), id, rpc::METHOD_NOT_FOUND, message, None);
    }
    let request = Request { id, era, correlation_id: server.correlation_id(), listeners: Listeners::default() };
    let asked = params.and_then(|p| p.get("notifications"));
    let Some(asked) = asked.filter(|a| a.is_object()) else {
        let message = "needs params.notifications (an object: resourceSubscriptions, a list of resource URIs, and the list-changed flags)";
        return request.error(rpc::INVALID_PARAMS, message.into(), None).reply;
    };
    let uris: Vec<&str> = match asked.get("resourceSubscriptions") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) if items.len() <= MAX_RESOURCES => match items.iter().map(Value::as_str).collect() {
            Some(uris) => uris,
            None => {
                return request
                    .error(rpc::INVALID_PARAMS, "resourceSubscriptions holds URIs (strings)".into(), None)
                    .reply;
            }
        },
        Some(_) => {
            let message = format!("resourceSubscriptions is a list of at most {MAX_RESOURCES} resource URIs");
            return request.error(rpc::INVALID_PARAMS, message, None).reply;
        }
    };
    // Followed: what changes while the server runs (an execution, an approval ticket) and the
    // caller may read.
    let templates = changing::followable(server);
    let mut followed: BTreeSet<(Kind, String, String)> = BTreeSet::new();
    for target in uris {
        let Some((kind, id)) = changing::followed_by(&templates, target) else { continue };
        if super::resources::read_contents(server, caller, &request, target).await.is_ok() {
            followed.insert((kind, id, target.to_string()));
        }
    }
    let permit = match server.streams.admit(&caller.principal.name, StreamKind::Channel) {
        Ok(permit) => permit,
        Err(cap) => return cap.refusal(server, id),
    };
    let meta = json!({SUBSCRIPTION_ID: id});
    let honoured: Vec<&str> = followed.iter().map(|(_, _, target)| target.as_str()).collect();
    let acknowledged = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
        "params": {"notifications": {"resourceSubscriptions": honoured}, "_meta": meta}});
    let state = Listening {
        first: Some(acknowledged.to_string()),
        followed,
        meta,
        updates: changing::Updates::new(server),
        watch: CredentialWatch::new(server.clone(), caller.token_id.clone()),
        audit: StreamAudit::attach(server, caller, (TargetType::McpRequest, &id.to_string()), "listen".into()),
        correlation_id: server.correlation_id(),
        ended: false,
    };
    let events: BoxStream<'static, Result<Bytes, Infallible>> =
        Box::pin(futures_util::stream::unfold(state, |mut s| async move { s.next().await.map(|b| (Ok(b), s)) }));
    Reply::stream(holding(events, permit))
}

struct Listening {
    first: Option<String>,
    /// (what it is, its id, the URI the client named for it).
    followed: BTreeSet<(Kind, String, String)>,
    meta: Value,
    updates: changing::Updates,
    watch: CredentialWatch,
    audit: StreamAudit,
    correlation_id: String,
    ended: bool,
}

impl Listening {
    /// `notifications/resources/updated` for each of `targets`.
    fn updated(&self, targets: Vec<&str>) -> Bytes {
        let mut out = Vec::new();
        for target in targets {
            let note = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                              "params": {"uri": target, "_meta": self.meta}});
            out.extend_from_slice(&frame(None, &note.to_string()));
        }
        Bytes::from(out)
    }

    /// The next bytes of the stream; None once it has ended.
    async fn next(&mut self) -> Option<Bytes> {
        if let Some(first) = self.first.take() {
            return Some(frame(None, &first));
        }
        if self.ended {
            return None;
        }
        loop {
            tokio::select! {
                update = self.updates.recv() => match update {
                    Ok((kind, id)) => {
                        let changed: Vec<&str> = self
                            .followed
                            .iter()
                            .filter(|(k, i, _)| *k == kind && *i == id)
                            .map(|(_, _, target)| target.as_str())
                            .collect();
                        if !changed.is_empty() {
                            return Some(self.updated(changed));
                        }
                    }
                    // Behind: any followed resource may have changed; say so for each.
                    Err(RecvError::Lagged(_)) => {
                        return Some(self.updated(self.followed.iter().map(|(_, _, target)| target.as_str()).collect()));
                    }
                    Err(RecvError::Closed) => {
                        self.ended = true;
                        self.audit.close("completed");
                        let done = json!({"jsonrpc": "2.0", "id": self.meta[SUBSCRIPTION_ID],
                                          "result": {"resultType": "complete", "_meta": self.meta}});
                        return Some(frame(None, &done.to_string()));
                    }
                },
                _ = self.watch.every.tick() => {
                    let Some(reason) = close_for(self.watch.standing().await) else {
                        return Some(Bytes::from_static(b": still listening\n\n"));
                    };
                    self.ended = true;
                    self.audit.close(reason.label());
                    return Some(frame(None, &stream_closed(reason, &self.correlation_id)));
                }
            }
        }
    }
}
