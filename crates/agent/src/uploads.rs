//! The agent's side of an upload connection (docs/uploads.md): a hello with `purpose: upload`,
//! the grant taken, binary frames, the end, the server's answer. Never the session: a large
//! upload must not hold up heartbeats or orders. Called from an action's own thread, so each
//! step blocks on the runtime here, one at a time.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::runtime::Handle;
use tokio_tungstenite::tungstenite::Message;
use toolgate_domain::fleet::wire::{AgentMessage, Purpose, ServerMessage, UploadEnd};

use crate::connection::{Socket, hello, open, send};
use crate::frames::next_message;
use crate::plugins::upload::{UploadChannel, UploadSink};
use crate::servers::Servers;
use crate::state::Identity;

/// How long the server may take to answer the hello, the grant and the end (the end waits
/// for the last chunk to be stored).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(45);

pub(crate) struct UploadClient {
    pub(crate) servers: Arc<Servers>,
    pub(crate) identity: Identity,
    pub(crate) runtime: Handle,
}

struct SocketSink {
    socket: Socket,
    path: String,
    runtime: Handle,
}

/// The server's refusal (or revocation) in words; anything else is unexpected.
fn refusal(answer: ServerMessage, expected: &str) -> String {
    match answer {
        ServerMessage::Refused { message, .. } => format!("the server refused the upload: {message}"),
        ServerMessage::Revoked { message } => format!("the server refused the upload: {message}"),
        other => format!("expected {expected} from the server, got {other:?}"),
    }
}

async fn answer(socket: &mut Socket) -> Result<ServerMessage, String> {
    tokio::time::timeout(ANSWER_TIMEOUT, next_message(socket))
        .await
        .map_err(|_| "the server did not answer".to_string())?
}

impl UploadClient {
    async fn take_grant(&self, grant_id: &str, path: Option<&str>) -> Result<(Socket, String), String> {
        let url = self.servers.current().clone();
        let (mut socket, welcome) = match open(&url, &hello(&self.identity, Purpose::Upload), ANSWER_TIMEOUT).await {
            Ok(opened) => opened,
            Err(e) => {
                // The next replica is tried by the next attempt (the run's, or the operator's).
                self.servers.advance(&url);
                return Err(format!("cannot reach {url} to upload: {e}"));
            }
        };
        if !matches!(welcome, ServerMessage::Welcome { .. }) {
            return Err(refusal(welcome, "a welcome"));
        }
        let start = AgentMessage::UploadStart { grant_id: grant_id.to_string(), path: path.map(str::to_string) };
        send(&mut socket, &start).await?;
        match answer(&mut socket).await? {
            ServerMessage::UploadReady { path, .. } => Ok((socket, path)),
            other => Err(refusal(other, "upload_ready")),
        }
    }
}

impl UploadChannel for UploadClient {
    fn begin(&self, grant_id: &str, path: Option<&str>) -> Result<Box<dyn UploadSink>, String> {
        let (socket, path) = self.runtime.block_on(self.take_grant(grant_id, path))?;
        Ok(Box::new(SocketSink { socket, path, runtime: self.runtime.clone() }))
    }
}

impl SocketSink {
    /// After a failed send: the server's reason, when it gave one before closing.
    async fn why_closed(&mut self, error: String) -> String {
        match tokio::time::timeout(Duration::from_secs(5), next_message(&mut self.socket)).await {
            Ok(Ok(answer)) => refusal(answer, "nothing"),
            _ => format!("the upload connection broke: {error}"),
        }
    }
}

impl UploadSink for SocketSink {
    fn path(&self) -> &str {
        &self.path
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        let runtime = self.runtime.clone();
        runtime.block_on(async {
            match self.socket.send(Message::binary(bytes.to_vec())).await {
                Ok(()) => Ok(()),
                Err(e) => Err(self.why_closed(e.to_string()).await),
            }
        })
    }

    fn end(mut self: Box<Self>, end: UploadEnd) -> Result<(String, u64), String> {
        let runtime = self.runtime.clone();
        runtime.block_on(async {
            if let Err(e) = send(&mut self.socket, &AgentMessage::UploadEnd(end)).await {
                return Err(self.why_closed(e).await);
            }
            let stored = answer(&mut self.socket).await;
            let _ = self.socket.close(None).await;
            match stored? {
                ServerMessage::UploadStored { sha256, size_bytes } => Ok((sha256, size_bytes)),
                other => Err(refusal(other, "upload_stored")),
            }
        })
    }

    fn abort(mut self: Box<Self>, reason: &str) {
        let runtime = self.runtime.clone();
        runtime.block_on(async {
            let _ = send(&mut self.socket, &AgentMessage::UploadAbort { reason: reason.to_string() }).await;
            // The server records the refusal, answers and closes.
            let _ = answer(&mut self.socket).await;
            let _ = self.socket.close(None).await;
            let _ = self.socket.next().await;
        });
    }
}
