//! An upload connection on `/agent/v1` (docs/uploads.md): after the welcome, one grant is
//! taken, binary frames follow, then the end; each frame within the report idle timeout. What
//! to answer is the fleet's ([`toolgate_fleet::uploads`]); this file only moves frames. A
//! connection that ends early gives its grant back, so the agent's retry can use it.

use std::time::Duration;

use axum::extract::ws::{Message, WebSocket};
use toolgate_domain::fleet::wire::{RefusalCode, ServerMessage};
use toolgate_fleet::{Hub, UploadError};

use super::agent_frames::{close, finish, send};

fn refusal(e: &UploadError) -> ServerMessage {
    let code = match e {
        UploadError::Refused(_) => RefusalCode::UploadRefused,
        UploadError::Store(_) => RefusalCode::Busy,
    };
    ServerMessage::Refused { code, message: e.to_string() }
}

/// The next frame, within `idle`; None when the connection ended or idled.
async fn next(socket: &mut WebSocket, idle: Duration) -> Option<Message> {
    match tokio::time::timeout(idle, socket.recv()).await {
        Ok(Some(Ok(Message::Close(_)) | Err(_)) | None) | Err(_) => None,
        Ok(Some(Ok(message))) => Some(message),
    }
}

pub(super) async fn take_upload(hub: &Hub, mut socket: WebSocket, agent_id: &str, welcome: ServerMessage) {
    let Some(desk) = hub.uploads().cloned() else {
        let message = "this server takes no uploads".to_string();
        return close(socket, ServerMessage::Refused { code: RefusalCode::UploadRefused, message }, "refused").await;
    };
    let Some(_permit) = desk.permit() else {
        let message = "the server is taking as many uploads as it allows: retry shortly".to_string();
        return close(socket, ServerMessage::Refused { code: RefusalCode::Busy, message }, "busy").await;
    };
    if send(&mut socket, &welcome).await.is_err() {
        return;
    }
    let idle = Duration::from_millis(hub.settings().report_idle_ms.max(1));
    let first = loop {
        match next(&mut socket, idle).await {
            Some(Message::Text(text)) => break text,
            Some(Message::Ping(_) | Message::Pong(_)) => continue,
            _ => return,
        }
    };
    let (mut receiving, ready) = match desk.start(agent_id, first.as_str()).await {
        Ok(started) => started,
        Err(e) => return close(socket, refusal(&e), "refused").await,
    };
    tracing::info!(%agent_id, grant_id = %receiving.grant_id(), "upload started");
    if send(&mut socket, &ready).await.is_err() {
        return receiving.dropped().await;
    }
    loop {
        if hub.is_revoked(agent_id) {
            receiving.dropped().await;
            let message = format!("agent {agent_id} was revoked on the server");
            return close(socket, ServerMessage::Revoked { message }, "revoked").await;
        }
        match next(&mut socket, idle).await {
            Some(Message::Binary(bytes)) => {
                if let Err(e) = receiving.take(&bytes).await {
                    tracing::warn!(%agent_id, "upload refused: {e}");
                    // A store fault is not the agent's: the grant is given back for its retry.
                    if matches!(e, UploadError::Store(_)) {
                        receiving.dropped().await;
                    }
                    return close(socket, refusal(&e), "refused").await;
                }
            }
            Some(Message::Text(text)) => {
                return match receiving.finish(text.as_str()).await {
                    Ok(stored) => finish(socket, stored).await,
                    Err(e) => {
                        tracing::warn!(%agent_id, "upload refused: {e}");
                        close(socket, refusal(&e), "refused").await
                    }
                };
            }
            Some(_) => continue,
            None => {
                tracing::info!(%agent_id, "an upload connection ended before its end frame; the grant is open again");
                return receiving.dropped().await;
            }
        }
    }
}
