//! The connection loop: connect, hello (or enroll), report, heartbeat; reconnect with backoff.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use toolgate_domain::CancellationToken;
use toolgate_domain::fleet::wire::{AGENT_PATH, AgentMessage, PROTOCOL_VERSION, RefusalCode, ServerMessage};
use toolgate_domain::secrets::random_bytes;

use crate::state::{self, Identity};
use crate::{AgentError, AgentOptions, collect};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

const AGENT_VERSION: &str = env!("CARGO_PKG_VERSION");
/// How long connecting and the handshake may take before the attempt counts as failed.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const FIRST_RETRY_MS: u64 = 1_000;

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// A random duration in [0, up_to_ms).
fn jitter(up_to_ms: u64) -> Duration {
    Duration::from_millis(u64::from_le_bytes(random_bytes::<8>()) % up_to_ms.max(1))
}

/// The agent endpoint's URL for a server base URL.
pub fn endpoint(server: &str) -> Result<String, AgentError> {
    let bad = || AgentError::BadServerUrl(server.to_string());
    let (scheme, rest) = server.split_once("://").ok_or_else(bad)?;
    let scheme = match scheme {
        "http" | "ws" => "ws",
        "https" | "wss" => return Err(AgentError::BadServerUrl(format!("{server} (TLS is not supported yet)"))),
        _ => return Err(bad()),
    };
    let host = rest.trim_end_matches('/');
    if host.is_empty() || host.contains('/') {
        return Err(bad());
    }
    Ok(format!("{scheme}://{host}{AGENT_PATH}"))
}

/// How one connection ended.
enum Ended {
    /// Lost (the server went away, the network broke): reconnect soon, spread out.
    Lost(String),
    /// The attempt failed before the welcome: back off.
    Failed(String),
}

/// Runs until `stop` is cancelled or the server refuses the agent for good.
pub async fn run(options: AgentOptions, stop: CancellationToken) -> Result<(), AgentError> {
    let url = endpoint(&options.server)?;
    let mut identity = state::load(&options.state_dir)?;
    if identity.is_none() && options.enroll_token.is_none() {
        return Err(AgentError::NotEnrolled(state::path(&options.state_dir)));
    }
    if let Some(id) = &identity {
        tracing::info!(agent_id = %id.agent_id, "enrolled; connecting to {url}");
    }
    let mut failures: u32 = 0;
    loop {
        let ended = tokio::select! {
            ended = session(&url, &options, &mut identity) => ended?,
            _ = stop.cancelled() => return Ok(()),
        };
        let wait = match ended {
            Ended::Lost(why) => {
                failures = 0;
                tracing::warn!("connection lost ({why}); reconnecting");
                jitter(options.reconnect_spread_ms)
            }
            Ended::Failed(why) => {
                failures = failures.saturating_add(1);
                let ceiling = FIRST_RETRY_MS.saturating_mul(1 << failures.min(16)).min(options.reconnect_max_ms.max(1));
                // Equal jitter: at least half the ceiling, so retries do grow apart.
                let wait = Duration::from_millis(ceiling / 2) + jitter(ceiling / 2 + 1);
                tracing::warn!("cannot connect to {url} ({why}); retrying in {} ms", wait.as_millis());
                wait
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.cancelled() => return Ok(()),
        }
    }
}

async fn send(socket: &mut Socket, message: &AgentMessage) -> Result<(), String> {
    let text = serde_json::to_string(message).map_err(|e| e.to_string())?;
    socket.send(Message::text(text)).await.map_err(|e| e.to_string())
}

/// One connection: handshake, then reports and heartbeats until it ends.
async fn session(url: &str, options: &AgentOptions, identity: &mut Option<Identity>) -> Result<Ended, AgentError> {
    let connected = tokio::time::timeout(HANDSHAKE_TIMEOUT, tokio_tungstenite::connect_async(url)).await;
    let mut socket = match connected {
        Ok(Ok((socket, _))) => socket,
        Ok(Err(e)) => return Ok(Ended::Failed(e.to_string())),
        Err(_) => return Ok(Ended::Failed("timed out".into())),
    };
    let first = match identity {
        Some(id) => AgentMessage::Hello {
            protocol: PROTOCOL_VERSION,
            agent_id: id.agent_id.clone(),
            credential: id.credential.clone(),
            agent_version: AGENT_VERSION.into(),
        },
        None => AgentMessage::Enroll {
            protocol: PROTOCOL_VERSION,
            enroll_token: options.enroll_token.clone().unwrap_or_default(),
            agent_version: AGENT_VERSION.into(),
        },
    };
    if let Err(e) = send(&mut socket, &first).await {
        return Ok(Ended::Failed(e));
    }
    let answer = match tokio::time::timeout(HANDSHAKE_TIMEOUT, next_message(&mut socket)).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => return Ok(Ended::Failed(e)),
        Err(_) => return Ok(Ended::Failed("no answer to the handshake".into())),
    };
    let (heartbeat_ms, inventory_ms) = match answer {
        ServerMessage::Welcome { agent_id, credential, heartbeat_ms, inventory_interval_ms } => {
            if let Some(credential) = credential {
                let enrolled = Identity { server: options.server.clone(), agent_id: agent_id.clone(), credential };
                state::save(&options.state_dir, &enrolled)?;
                tracing::info!(%agent_id, "enrolled; identity saved in {}", state::path(&options.state_dir).display());
                *identity = Some(enrolled);
            }
            (heartbeat_ms.max(10), inventory_interval_ms.max(1_000))
        }
        ServerMessage::Refused { code: RefusalCode::Busy, message } => return Ok(Ended::Failed(message)),
        ServerMessage::Refused { code, message } => return Err(AgentError::Refused { code, message }),
        ServerMessage::Revoked { message } => return Err(AgentError::Revoked(message)),
    };
    let mut heartbeat = tokio::time::interval(Duration::from_millis(heartbeat_ms));
    let mut inventory = tokio::time::interval(Duration::from_millis(inventory_ms));
    heartbeat.tick().await;
    loop {
        tokio::select! {
            _ = inventory.tick() => {
                if let Err(e) = report(&mut socket).await {
                    return Ok(Ended::Lost(e));
                }
            }
            _ = heartbeat.tick() => {
                if let Err(e) = send(&mut socket, &AgentMessage::Heartbeat).await {
                    return Ok(Ended::Lost(e));
                }
            }
            incoming = next_message(&mut socket) => match incoming {
                Ok(ServerMessage::Revoked { message }) => return Err(AgentError::Revoked(message)),
                Ok(ServerMessage::Refused { code, message }) if code.is_permanent() => {
                    return Err(AgentError::Refused { code, message })
                }
                Ok(ServerMessage::Refused { message, .. }) => return Ok(Ended::Lost(message)),
                Ok(other) => tracing::debug!("ignored a message from the server: {other:?}"),
                Err(e) => return Ok(Ended::Lost(e)),
            },
        }
    }
}

/// Reads the host (off the async threads) and sends the facts and every table.
async fn report(socket: &mut Socket) -> Result<(), String> {
    let (facts, tables) = tokio::task::spawn_blocking(|| {
        let facts = AgentMessage::Facts { collected_at_ms: now_ms(), facts: Box::new(collect::host_facts()) };
        (facts, collect::all_tables(now_ms))
    })
    .await
    .map_err(|e| format!("the collectors failed: {e}"))?;
    send(socket, &facts).await?;
    for table in tables {
        send(socket, &AgentMessage::Inventory(table)).await?;
    }
    Ok(())
}

/// The next message from the server (pings are answered by the library as it reads).
async fn next_message(socket: &mut Socket) -> Result<ServerMessage, String> {
    loop {
        match socket.next().await {
            Some(Ok(Message::Text(text))) => {
                return serde_json::from_str(&text)
                    .map_err(|e| format!("the server sent a frame this agent cannot read: {e}"));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(endpoint("http://127.0.0.1:8080").unwrap(), "ws://127.0.0.1:8080/agent/v1");
        assert_eq!(endpoint("ws://h:1/").unwrap(), "ws://h:1/agent/v1");
        assert!(endpoint("127.0.0.1:8080").is_err());
        assert!(endpoint("http://h:1/path").is_err());
        assert!(endpoint("https://h").unwrap_err().to_string().contains("TLS"));
    }
}
