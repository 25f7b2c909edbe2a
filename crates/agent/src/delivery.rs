//! Report connections: frames too large or too many for the session (facts, inventory, large
//! results, experience) go over a short-lived connection of their own (a hello with
//! `purpose: report`), retried until a server takes them.

use std::time::Duration;

use futures_util::StreamExt;
use tokio_tungstenite::tungstenite::Message;
use toolgate_domain::fleet::wire::{AgentMessage, Purpose, ServerMessage};

use crate::connection::{FIRST_RETRY_MS, HANDSHAKE_TIMEOUT, hello, jitter, open, send};
use crate::servers::Servers;
use crate::state::Identity;
use crate::tls::Endpoint;

/// How long a report waits for the server's answer: it may queue behind a fleet's reports
/// (the server waits at most 30 s before saying it is busy).
const REPORT_ANSWER_TIMEOUT: Duration = Duration::from_secs(45);

/// Uploads frames over a connection of their own, retried with jittered backoff until a
/// server takes them (a server busy with a whole fleet's reports says so; one that cannot be
/// reached is left for the next replica).
pub(crate) async fn deliver(servers: &Servers, identity: &Identity, frames: &[AgentMessage], max_wait_ms: u64) {
    let mut ceiling = FIRST_RETRY_MS;
    loop {
        let url = servers.current().clone();
        match upload(&url, identity, frames).await {
            Ok(()) => return,
            Err(e) => {
                servers.advance(&url);
                let wait = Duration::from_millis(ceiling / 2) + jitter(ceiling / 2 + 1);
                // A busy server is routine after a restart; still failing at the longest wait
                // is worth an operator's eye (a refusal that retrying will not cure, say).
                if ceiling >= max_wait_ms {
                    tracing::warn!("an upload is still not taken ({e}); retrying in {} ms", wait.as_millis());
                } else {
                    tracing::debug!("an upload was not taken ({e}); retrying in {} ms", wait.as_millis());
                }
                tokio::time::sleep(wait).await;
                ceiling = ceiling.saturating_mul(2).min(max_wait_ms.max(FIRST_RETRY_MS));
            }
        }
    }
}

async fn upload(url: &Endpoint, identity: &Identity, frames: &[AgentMessage]) -> Result<(), String> {
    let (mut socket, answer) = open(url, &hello(identity, Purpose::Report), REPORT_ANSWER_TIMEOUT).await?;
    if let ServerMessage::Refused { message, .. } | ServerMessage::Revoked { message } = answer {
        return Err(message);
    }
    for frame in frames {
        send(&mut socket, frame).await?;
    }
    // Close and wait for the server's close: it has then read (and stored) every frame.
    socket.close(None).await.map_err(|e| e.to_string())?;
    let drained = async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Text(text))) => {
                    if let Ok(ServerMessage::Refused { message, .. }) = serde_json::from_str(&text) {
                        return Err(message);
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return Ok(()),
            }
        }
    };
    tokio::time::timeout(HANDSHAKE_TIMEOUT, drained).await.map_err(|_| "the server did not close".to_string())?
}
