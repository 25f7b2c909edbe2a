//! Writing to an agent's WebSocket: a frame, or a last frame and the close (every agent
//! connection's, whatever it is for).

use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use toolgate_domain::fleet::wire::ServerMessage;

pub(super) async fn send(socket: &mut WebSocket, message: &ServerMessage) -> Result<(), axum::Error> {
    let text = serde_json::to_string(message).unwrap_or_default();
    socket.send(Message::text(text)).await
}

/// Sends `message` and closes as refused (policy): the agent reads why in the frame.
pub(super) async fn close(socket: WebSocket, message: ServerMessage, reason: &str) {
    close_with(socket, message, close_code::POLICY, reason).await;
}

/// Sends `message` and closes normally: the conversation is done.
pub(super) async fn finish(socket: WebSocket, message: ServerMessage) {
    close_with(socket, message, close_code::NORMAL, "done").await;
}

async fn close_with(mut socket: WebSocket, message: ServerMessage, code: u16, reason: &str) {
    let _ = send(&mut socket, &message).await;
    let _ = socket.send(Message::Close(Some(CloseFrame { code, reason: reason.into() }))).await;
}
