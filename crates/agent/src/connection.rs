//! The connection loop: connect, hello (or enroll), report, heartbeat; reconnect with backoff.

use std::sync::Arc;
use std::time::Duration;

use futures_util::SinkExt;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use toolgate_domain::CancellationToken;
use toolgate_domain::fleet::HostFacts;
use toolgate_domain::fleet::wire::{
    AgentMessage, InventoryReport, PROTOCOL_VERSION, Purpose, RefusalCode, ServerMessage,
};
use toolgate_domain::secrets::random_bytes;

use crate::delivery::deliver;
use crate::experience::{self, Experience};
use crate::frames::{Frame, next_frame, next_message};
use crate::servers::Servers;
use crate::state::{self, Identity};
use crate::tls::Endpoint;
use crate::worker::Worker;
use crate::{AgentError, AgentOptions, certificate, collect};

pub(crate) type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

const AGENT_VERSION: &str = env!("CARGO_PKG_VERSION");
/// How long connecting and the handshake may take before the attempt counts as failed.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
pub(crate) const FIRST_RETRY_MS: u64 = 1_000;

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// A random duration in [0, up_to_ms).
pub(crate) fn jitter(up_to_ms: u64) -> Duration {
    Duration::from_millis(u64::from_le_bytes(random_bytes::<8>()) % up_to_ms.max(1))
}

/// How one connection ended.
enum Ended {
    /// Lost (the server went away, the network broke): reconnect soon, spread out.
    Lost(String),
    /// The attempt failed before the welcome: back off.
    Failed(String),
    /// The server asked for a new connection at once (with a certificate just issued).
    Again(String),
}

/// What the agent reports on connect and on the server's schedule.
pub trait Reporter: Send + Sync + 'static {
    /// The host's facts and every inventory table, read now (called off the async threads).
    fn read(&self) -> (HostFacts, Vec<InventoryReport>);
    /// An experience sample at `at_ms` made by the reporter itself (the load benchmark's
    /// simulated hosts), in place of measuring this host; none (the default): the agent
    /// measures the host as `--measure` says.
    fn experience_sample(&self, _at_ms: i64) -> Option<toolgate_domain::fleet::experience::Sample> {
        None
    }
}

/// The real thing: this host, read by the collectors.
pub struct ThisHost;

impl Reporter for ThisHost {
    fn read(&self) -> (HostFacts, Vec<InventoryReport>) {
        (collect::host_facts(), collect::all_tables(now_ms))
    }
}

/// Runs until `stop` is cancelled or the server refuses the agent for good.
pub async fn run(options: AgentOptions, stop: CancellationToken) -> Result<(), AgentError> {
    run_with(options, stop, Arc::new(ThisHost)).await
}

/// [`run`] with another source of reports (the fleet load benchmark's simulated agents).
pub async fn run_with(
    options: AgentOptions,
    stop: CancellationToken,
    reporter: Arc<dyn Reporter>,
) -> Result<(), AgentError> {
    let servers = Arc::new(Servers::new(&options.servers, &options.trust, Some(&options.state_dir))?);
    let mut identity = state::load(&options.state_dir)?;
    if identity.is_none() && options.enroll_token.is_none() {
        return Err(AgentError::NotEnrolled(state::path(&options.state_dir)));
    }
    if let Some(id) = &identity {
        tracing::info!(agent_id = %id.agent_id, "enrolled; connecting to {}", servers.current());
    }
    let worker = Arc::new(Worker::new(&options, servers.clone())?);
    let experience = Arc::new(Experience::default());
    let measuring = experience::run(
        experience.clone(),
        servers.clone(),
        options.measure,
        options.state_dir.clone(),
        options.reconnect_max_ms,
        stop.child_token(),
        reporter.clone(),
    );
    let _measuring = AbortOnDrop(Some(tokio::spawn(measuring)));
    let mut rounds_failed: u32 = 0;
    loop {
        let url = servers.current().clone();
        let ended = tokio::select! {
            ended = session(&url, &options, &mut identity, &reporter, &worker, &experience) => ended?,
            _ = stop.cancelled() => return Ok(()),
        };
        let wait = match ended {
            Ended::Again(why) => {
                rounds_failed = 0;
                tracing::info!("reconnecting to {url}: {why}");
                Duration::ZERO
            }
            Ended::Lost(why) => {
                rounds_failed = 0;
                tracing::warn!("connection to {url} lost ({why}); reconnecting");
                jitter(options.reconnect_spread_ms)
            }
            // Another replica is tried at once; only a whole round of failures backs off.
            Ended::Failed(why) if !servers.advance(&url) => {
                tracing::warn!("cannot connect to {url} ({why}); trying {}", servers.current());
                jitter(FIRST_RETRY_MS / 4)
            }
            Ended::Failed(why) => {
                rounds_failed = rounds_failed.saturating_add(1);
                let ceiling =
                    FIRST_RETRY_MS.saturating_mul(1 << rounds_failed.min(16)).min(options.reconnect_max_ms.max(1));
                // Equal jitter: at least half the ceiling, so retries do grow apart.
                let wait = Duration::from_millis(ceiling / 2) + jitter(ceiling / 2 + 1);
                let which = if servers.several() { "any of the servers" } else { "the server" };
                tracing::warn!("cannot connect to {url} ({why}), nor to {which}; retrying in {} ms", wait.as_millis());
                wait
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.cancelled() => return Ok(()),
        }
    }
}

pub(crate) async fn send(socket: &mut Socket, message: &AgentMessage) -> Result<(), String> {
    let text = serde_json::to_string(message).map_err(|e| e.to_string())?;
    socket.send(Message::text(text)).await.map_err(|e| e.to_string())
}

/// Connects and sends the first frame; the server's answer, within `answer_timeout`.
pub(crate) async fn open(
    url: &Endpoint,
    first: &AgentMessage,
    answer_timeout: Duration,
) -> Result<(Socket, ServerMessage), String> {
    let connected = tokio::time::timeout(HANDSHAKE_TIMEOUT, url.connect()).await;
    let mut socket = match connected {
        Ok(Ok(socket)) => socket,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err("timed out".into()),
    };
    send(&mut socket, first).await?;
    match tokio::time::timeout(answer_timeout, next_message(&mut socket)).await {
        Ok(Ok(answer)) => Ok((socket, answer)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err("no answer to the handshake".into()),
    }
}

pub(crate) fn hello(identity: &Identity, purpose: Purpose) -> AgentMessage {
    hello_asking(identity, purpose, None)
}

/// A hello that asks for a certificate with `csr`.
fn hello_asking(identity: &Identity, purpose: Purpose, csr: Option<String>) -> AgentMessage {
    AgentMessage::Hello {
        protocol: PROTOCOL_VERSION,
        agent_id: identity.agent_id.clone(),
        credential: identity.credential.clone(),
        agent_version: AGENT_VERSION.into(),
        purpose,
        csr,
    }
}

/// Aborts a task when its owner ends: the report in flight when the session ends, the
/// experience tasks when the agent stops.
struct AbortOnDrop(Option<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

/// One session: handshake, then heartbeats, with a report on connect and on schedule, until
/// the connection ends.
async fn session(
    url: &Endpoint,
    options: &AgentOptions,
    identity: &mut Option<Identity>,
    reporter: &Arc<dyn Reporter>,
    worker: &Arc<Worker>,
    experience: &Experience,
) -> Result<Ended, AgentError> {
    // A certificate is asked for on enrollment, and when none is held or it is past half its life.
    let asking = certificate::wanted(certificate::load(&options.state_dir).as_ref(), now_ms())
        .then(certificate::request)
        .and_then(|made| made.inspect_err(|e| tracing::warn!("cannot make a key for a certificate: {e}")).ok());
    let csr = asking.as_ref().map(|r| r.csr_pem.clone());
    let first = match identity {
        Some(id) => hello_asking(id, Purpose::Session, csr),
        None => AgentMessage::Enroll {
            protocol: PROTOCOL_VERSION,
            enroll_token: options.enroll_token.clone().unwrap_or_default(),
            agent_version: AGENT_VERSION.into(),
            csr,
        },
    };
    let (mut socket, answer) = match open(url, &first, HANDSHAKE_TIMEOUT).await {
        Ok(opened) => opened,
        Err(e) => return Ok(Ended::Failed(e)),
    };
    let (heartbeat_ms, inventory_ms, measure) = match answer {
        ServerMessage::Welcome {
            agent_id,
            credential,
            heartbeat_ms,
            inventory_interval_ms,
            quarantine,
            certificate,
            experience,
        } => {
            // Before anything else the server sends: a change must not run on an agent that
            // was quarantined while it was away.
            if let Some(wish) = quarantine {
                worker.enter_from_welcome(wish, &options.state_dir);
            }
            if let Some(credential) = credential {
                let enrolled = Identity { server: url.to_string(), agent_id: agent_id.clone(), credential };
                state::save(&options.state_dir, &enrolled)?;
                tracing::info!(%agent_id, "enrolled; identity saved in {}", state::path(&options.state_dir).display());
                *identity = Some(enrolled);
            }
            if let (Some(request), Some(certificate)) = (asking, certificate) {
                match certificate::save(&options.state_dir, request, certificate, now_ms()) {
                    Ok(held) => {
                        tracing::info!(not_after_ms = held.not_after_ms, "client certificate received and kept")
                    }
                    Err(e) => tracing::warn!("cannot keep the client certificate: {e}"),
                }
            }
            (heartbeat_ms.max(10), inventory_interval_ms.max(1_000), experience)
        }
        ServerMessage::Refused { code, message } if !code.is_permanent() => return Ok(Ended::Failed(message)),
        ServerMessage::Refused { code, message } => return Err(AgentError::Refused { code, message }),
        ServerMessage::Revoked { message } => return Err(AgentError::Revoked(message)),
        other => return Ok(Ended::Failed(format!("expected a welcome, got {other:?}"))),
    };
    let Some(me) = identity.clone() else { return Ok(Ended::Failed("welcomed without an identity".into())) };
    experience.welcomed(&me, measure);
    // Frames that make the agent act must be signed once it has pinned a CA (docs/trust.md).
    let pinned = crate::signed::pinned_for_session(&options.state_dir)
        .map_err(|message| AgentError::State { path: options.state_dir.clone(), message })?;
    let renew_in = certificate::renewal_in(&options.state_dir, now_ms());
    let renew = tokio::time::sleep(renew_in.unwrap_or(Duration::MAX));
    tokio::pin!(renew);
    let mut heartbeat = tokio::time::interval(Duration::from_millis(heartbeat_ms));
    let mut inventory = tokio::time::interval(Duration::from_millis(inventory_ms));
    heartbeat.tick().await;
    let mut reporting = AbortOnDrop(None);
    // Frames the worker's tasks want sent on this session (started, quarantine state).
    let (outgoing, mut to_send) = tokio::sync::mpsc::unbounded_channel();
    if let Err(e) = send(&mut socket, &worker.quarantine_state()).await {
        return Ok(Ended::Lost(e));
    }
    loop {
        tokio::select! {
            () = &mut renew, if renew_in.is_some() => {
                return Ok(Ended::Again("renewing the client certificate".into()));
            }
            _ = inventory.tick() => {
                // One report at a time; a slow one is not piled on.
                if reporting.0.as_ref().is_none_or(|task| task.is_finished()) {
                    let task = report(worker.servers(), me.clone(), reporter.clone(), worker.clone(), options.reconnect_max_ms);
                    reporting.0 = Some(tokio::spawn(task));
                }
            }
            Some(frame) = to_send.recv() => {
                if let Err(e) = send(&mut socket, &frame).await {
                    return Ok(Ended::Lost(e));
                }
            }
            _ = heartbeat.tick() => {
                // The server's WebSocket answers a ping with its payload: the round trip.
                let ping = Message::Ping(experience::now_us().to_le_bytes().to_vec().into());
                let sent = match send(&mut socket, &AgentMessage::Heartbeat).await {
                    Ok(()) => socket.send(ping).await.map_err(|e| e.to_string()),
                    Err(e) => Err(e),
                };
                if let Err(e) = sent {
                    return last_word(&mut socket, e).await;
                }
            }
            incoming = next_frame(&mut socket) => {
                let message = match incoming {
                    Ok(Frame::Pong(sent_us)) => {
                        experience.pong(sent_us);
                        continue;
                    }
                    Ok(Frame::Message(message)) => message,
                    Err(e) => return Ok(Ended::Lost(e)),
                };
                match message {
                    ServerMessage::Revoked { message } => return Err(AgentError::Revoked(message)),
                    ServerMessage::Refused { code, message } if code.is_permanent() => {
                        return Err(AgentError::Refused { code, message })
                    }
                    ServerMessage::Refused { code: RefusalCode::Reconnect, message } => return Ok(Ended::Again(message)),
                    ServerMessage::Refused { message, .. } => return Ok(Ended::Lost(message)),
                    ServerMessage::Welcome { .. } => tracing::debug!("ignored a second welcome"),
                    frame => match crate::signed::admit(frame, pinned.as_ref(), &me.agent_id, now_ms()) {
                        Ok(work) => {
                            worker.take(work, &me, &outgoing);
                        }
                        Err(refusal) => {
                            tracing::warn!("refused a frame from the server: {refusal:?}");
                            if let Err(e) = send(&mut socket, &refusal).await {
                                return Ok(Ended::Lost(e));
                            }
                        }
                    },
                }
            }
        }
    }
}

/// A write failed because the server closed the connection: what it said before closing
/// (revoked, refused for good) decides, not the broken pipe that a write after it met.
async fn last_word(socket: &mut Socket, broken: String) -> Result<Ended, AgentError> {
    match tokio::time::timeout(Duration::from_millis(500), next_message(socket)).await {
        Ok(Ok(ServerMessage::Revoked { message })) => Err(AgentError::Revoked(message)),
        Ok(Ok(ServerMessage::Refused { code, message })) if code.is_permanent() => {
            Err(AgentError::Refused { code, message })
        }
        _ => Ok(Ended::Lost(broken)),
    }
}

/// Reads the host (off the async threads) and uploads the facts, every table and the
/// compliance outcomes (once the server has sent rules).
async fn report(
    servers: Arc<Servers>,
    identity: Identity,
    reporter: Arc<dyn Reporter>,
    worker: Arc<Worker>,
    max_wait_ms: u64,
) {
    let read = tokio::task::spawn_blocking(move || (reporter.read(), worker.compliance_frame())).await;
    let Ok(((facts, tables), compliance)) = read else {
        tracing::error!("the collectors failed; the next scheduled report tries again");
        return;
    };
    let mut frames = vec![AgentMessage::Facts { collected_at_ms: now_ms(), facts: Box::new(facts) }];
    frames.extend(tables.into_iter().map(AgentMessage::Inventory));
    frames.extend(compliance);
    deliver(&servers, &identity, &frames, max_wait_ms).await;
}
