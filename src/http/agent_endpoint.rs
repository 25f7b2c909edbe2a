//! `GET /agent/v1`: the WebSocket agents hold open. Its caps and timeouts are its own: the
//! handshake must arrive within [`HELLO_TIMEOUT`], frames are capped at
//! [`MAX_FRAME_BYTES`], connections at `--max-agent-connections`, and buffers are small so
//! that ten thousand idle agents cost little memory. The conversation is the fleet's
//! (`toolgate_fleet::session`); this file only moves frames.

use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::json;
use tokio::sync::OwnedSemaphorePermit;
use toolgate_domain::fleet::wire::{MAX_FRAME_BYTES, RefusalCode, ServerMessage};
use toolgate_fleet::session::{self, FrameError, Handshake};
use toolgate_fleet::{Hub, Kick, PeerCertificate};

use super::admission::Connection;
use super::agent_frames::{close, send};
use super::{AppState, json_response};

/// How long an agent has, once connected, to send its enroll or hello frame.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// Tungstenite's buffers default to 128 KiB each; an idle agent needs far less.
const BUFFER_BYTES: usize = 4 * 1024;

pub async fn agent_socket(
    State(state): State<Arc<AppState>>,
    connection: Option<Extension<Connection>>,
    peer: Option<Extension<Arc<PeerCertificate>>>,
    upgrade: WebSocketUpgrade,
) -> Response {
    // Only the agent listener with mutual TLS says what certificate came (docs/trust.md).
    let peer = peer.map_or_else(|| Arc::new(PeerCertificate::NotAsked), |Extension(peer)| peer);
    let hub = state.services.fleet().clone();
    let Some(handshake) = hub.handshake_permit() else {
        let body = json!({"error": "busy", "message": "too many agents are connecting at once; retry shortly"});
        let mut response = json_response(StatusCode::SERVICE_UNAVAILABLE, body.to_string());
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return response;
    };
    // From here the connection counts against the agent surface's own caps (handshakes, then
    // agent connections), not the MCP endpoint's allowance of unauthenticated connections.
    let over_tls = connection.as_ref().is_some_and(|Extension(c)| c.over_tls);
    if let Some(Extension(connection)) = connection {
        connection.authenticated();
    }
    // The conversation runs on the agents' threads, below the calls' priority (agent_work.rs).
    small_buffers(upgrade).on_upgrade(move |socket| async move {
        state.agent_work.run(converse(hub, socket, handshake, peer, over_tls)).await
    })
}

/// An agent connection's WebSocket: small buffers, frames capped.
fn small_buffers(upgrade: WebSocketUpgrade) -> WebSocketUpgrade {
    upgrade
        .read_buffer_size(BUFFER_BYTES)
        .write_buffer_size(0)
        .max_message_size(MAX_FRAME_BYTES)
        .max_frame_size(MAX_FRAME_BYTES)
}

/// `GET /agent/v1` on the MCP listener of a server that has an agent listener of its own:
/// refused whole, enrollment included. Agents there would skip what the agent listener
/// demands (its client certificate, its caps), so a copied `agent.json` would be enough to
/// bring a clone online (docs/trust.md). The agent is told where to connect instead.
pub async fn agent_socket_elsewhere(State(state): State<Arc<AppState>>, upgrade: WebSocketUpgrade) -> Response {
    let port = state.config.agent_listen.map_or(0, |at| at.port());
    small_buffers(upgrade).on_upgrade(move |mut socket| async move {
        // Its first frame is read (and dropped) so that the agent is reading when it is told.
        let _ = first_text(&mut socket).await;
        let message = format!(
            "this port does not take agents: connect to the agent listener on port {port} (`--agent-listen`), with this agent's client certificate"
        );
        close(socket, ServerMessage::Refused { code: RefusalCode::CertificateRequired, message }, "agent listener elsewhere")
            .await;
    })
}

/// The first text frame, within the hello timeout.
async fn first_text(socket: &mut WebSocket) -> Option<String> {
    let read = async {
        while let Some(Ok(message)) = socket.recv().await {
            match message {
                Message::Text(text) => return Some(text.to_string()),
                Message::Close(_) => return None,
                _ => continue,
            }
        }
        None
    };
    tokio::time::timeout(HELLO_TIMEOUT, read).await.ok().flatten()
}

async fn converse(
    hub: Arc<Hub>,
    mut socket: WebSocket,
    handshake: OwnedSemaphorePermit,
    peer: Arc<PeerCertificate>,
    over_tls: bool,
) {
    if hub.connected() >= hub.settings().max_connections {
        let message = "the server is at its cap of agent connections; retrying later";
        close(socket, ServerMessage::Refused { code: RefusalCode::Busy, message: message.into() }, "busy").await;
        return;
    }
    let Some(first) = first_text(&mut socket).await else { return };
    let answer = session::handshake(&hub, &first, &peer, over_tls).await;
    drop(handshake);
    let (mut connection, welcome) = match answer {
        Handshake::Welcome { connection, reply } => (connection, reply),
        Handshake::Report { agent_id, reply } => return take_report(&hub, socket, &agent_id, reply).await,
        Handshake::Upload { agent_id, reply } => {
            return super::agent_uploads::take_upload(&hub, socket, &agent_id, reply).await;
        }
        Handshake::Reissued { reply } => {
            if send(&mut socket, &reply).await.is_ok() {
                let message = "a certificate was issued: reconnect with it".to_string();
                close(socket, ServerMessage::Refused { code: RefusalCode::Reconnect, message }, "reconnect").await;
            }
            return;
        }
        Handshake::Refused(refusal) => {
            tracing::info!("agent refused: {refusal:?}");
            close(socket, refusal, "refused").await;
            return;
        }
    };
    let agent_id = connection.agent_id.clone();
    tracing::info!(%agent_id, "agent connected");
    if send(&mut socket, &welcome).await.is_err() {
        hub.disconnect(&connection).await;
        return;
    }
    hub.announce_connected(&connection).await;
    if let Err(e) = hub.welcome_work(&agent_id).await {
        // Its runs stay due: the next connection is sent them.
        tracing::warn!(%agent_id, "could not look up the runs due: {e}");
    }
    let ended = loop {
        // The close frames are rare and their futures large: boxed, so that the state every
        // idle connection keeps stays small.
        tokio::select! {
            kick = &mut connection.kicked => {
                match kick.unwrap_or(Kick::Replaced) {
                    Kick::Revoked => {
                        let message = format!("agent {agent_id} was revoked on the server");
                        Box::pin(close(socket, ServerMessage::Revoked { message }, "revoked")).await;
                    }
                    Kick::Silent => {
                        let message = "no heartbeat within the window: reconnect".to_string();
                        Box::pin(close(socket, ServerMessage::Refused { code: RefusalCode::Busy, message }, "silent")).await;
                    }
                    Kick::CertificateRevoked => {
                        let code = RefusalCode::CertificateRevoked;
                        let message = format!("agent {agent_id}'s certificate was revoked: enroll it again with a new enrollment token");
                        Box::pin(close(socket, ServerMessage::Refused { code, message }, "certificate revoked")).await;
                    }
                    Kick::CertificateExpired => {
                        let message = "the client certificate of this session expired: reconnect with the renewed one".to_string();
                        Box::pin(close(socket, ServerMessage::Refused { code: RefusalCode::Reconnect, message }, "certificate expired")).await;
                    }
                    Kick::Stopping => {
                        let message = "the server is stopping: reconnect shortly".to_string();
                        Box::pin(close(socket, ServerMessage::Refused { code: RefusalCode::Busy, message }, "stopping")).await;
                    }
                    Kick::Replaced => {}
                }
                break "closed by the server";
            }
            Some(message) = connection.outbox.recv() => {
                if let Err(e) = send(&mut socket, &message).await {
                    tracing::debug!(%agent_id, "could not send to the agent: {e}");
                    break "a connection error";
                }
            }
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Text(text))) => {
                    if let Err(e) = Box::pin(session::receive(&hub, &connection, text.as_str())).await {
                        tracing::warn!(%agent_id, "{e}");
                        Box::pin(close(socket, refusal(&e), "bad frame")).await;
                        break "a bad frame";
                    }
                }
                Some(Ok(Message::Close(_))) | None => break "closed by the agent",
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    tracing::debug!(%agent_id, "agent connection error: {e}");
                    break "a connection error";
                }
            },
        }
    };
    tracing::info!(%agent_id, "agent disconnected ({ended})");
    hub.disconnect(&connection).await;
}

/// A store fault is the server's: the agent comes back later. A bad frame is the agent's and
/// will not improve by retrying; a revoked agent must not come back.
fn refusal(e: &FrameError) -> ServerMessage {
    let code = match e {
        FrameError::Malformed(_) => RefusalCode::Malformed,
        FrameError::Store(_) => RefusalCode::Busy,
        FrameError::Revoked(_) => return ServerMessage::Revoked { message: e.to_string() },
    };
    ServerMessage::Refused { code, message: e.to_string() }
}

/// A report connection: facts and inventory frames until the agent closes, each frame within
/// the report idle timeout; closed at once when the agent is revoked. Its buffers go when it
/// closes.
async fn take_report(hub: &Hub, mut socket: WebSocket, agent_id: &str, welcome: ServerMessage) {
    let mut place = match hub.report_place(agent_id).await {
        Ok(place) => place,
        Err(refusal) => {
            let message = ServerMessage::Refused { code: RefusalCode::Busy, message: refusal.to_string() };
            close(socket, message, "busy").await;
            return;
        }
    };
    if send(&mut socket, &welcome).await.is_err() {
        return;
    }
    let idle = Duration::from_millis(hub.settings().report_idle_ms.max(1));
    loop {
        let read = tokio::select! {
            () = place.revoked() => {
                let message = ServerMessage::Revoked { message: format!("agent {agent_id} was revoked on the server") };
                tracing::info!(%agent_id, "revoked: its report connection is closed");
                Box::pin(close(socket, message, "revoked")).await;
                return;
            }
            read = tokio::time::timeout(idle, socket.recv()) => read,
        };
        let frame = match read {
            Ok(Some(Ok(Message::Text(text)))) => text,
            Ok(Some(Ok(Message::Close(_)) | Err(_)) | None) => return,
            Ok(Some(Ok(_))) => continue,
            Err(_) => {
                tracing::warn!(%agent_id, "a report connection idled past {idle:?}; closed");
                return;
            }
        };
        if let Err(e) = session::receive_report(hub, agent_id, frame.as_str()).await {
            tracing::warn!(%agent_id, "report: {e}");
            close(socket, refusal(&e), "bad report").await;
            return;
        }
    }
}
