//! Reading what the server sends on an agent connection: its messages, and the pongs that
//! answer the agent's pings (the heartbeat's round trip, docs/experience.md).

use futures_util::StreamExt;
use tokio_tungstenite::tungstenite::Message;
use toolgate_domain::fleet::wire::ServerMessage;

use crate::connection::Socket;

/// What the server sent: a message, or the answer to one of the agent's pings.
pub(crate) enum Frame {
    Message(ServerMessage),
    /// A pong for the ping sent at this time (µs since the epoch).
    Pong(i64),
}

/// The next message from the server (pings are answered by the library as it reads).
pub(crate) async fn next_message(socket: &mut Socket) -> Result<ServerMessage, String> {
    loop {
        if let Frame::Message(message) = next_frame(socket).await? {
            return Ok(message);
        }
    }
}

/// The next message or pong from the server.
pub(crate) async fn next_frame(socket: &mut Socket) -> Result<Frame, String> {
    loop {
        match socket.next().await {
            Some(Ok(Message::Text(text))) => {
                return serde_json::from_str(&text)
                    .map(Frame::Message)
                    .map_err(|e| format!("the server sent a frame this agent cannot read: {e}"));
            }
            Some(Ok(Message::Pong(payload))) => {
                if let Ok(sent) = <[u8; 8]>::try_from(payload.as_ref()) {
                    return Ok(Frame::Pong(i64::from_le_bytes(sent)));
                }
            }
            Some(Ok(Message::Close(frame))) => {
                return Err(
                    frame.map_or("closed by the server".into(), |f| format!("closed by the server: {}", f.reason))
                );
            }
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(e.to_string()),
            None => return Err("the connection closed".into()),
        }
    }
}
