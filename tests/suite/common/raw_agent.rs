//! An agent's connection opened by hand with its real credential (from its state dir): what
//! a forged or broken agent could send, and what the server answers it.

use std::path::Path;

use serde_json::{Value, json};

use super::Server;
use super::agents::PATIENCE;

pub type Socket = tungstenite::WebSocket<std::net::TcpStream>;

/// A report connection opened by hand with the agent's credential; the server's first answer.
pub fn report_connection(s: &Server, state_dir: &Path) -> (Socket, Value) {
    connection_for(s, state_dir, "report")
}

/// A connection opened by hand with the agent's credential for `purpose` (session, report).
pub fn connection_for(s: &Server, state_dir: &Path, purpose: &str) -> (Socket, Value) {
    let identity: Value =
        serde_json::from_str(&std::fs::read_to_string(state_dir.join("agent.json")).unwrap()).unwrap();
    let stream = std::net::TcpStream::connect(s.agents).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let (mut socket, _) = tungstenite::client(format!("ws://{}/agent/v1", s.agents), stream).unwrap();
    let hello = json!({
        "type": "hello", "protocol": 2, "agent_id": identity["agent_id"], "credential": identity["credential"],
        "agent_version": "test", "purpose": purpose,
    });
    socket.send(tungstenite::Message::text(hello.to_string())).unwrap();
    let answer = next_frame(&mut socket).expect("an answer to the hello");
    (socket, answer)
}

/// The next text frame, or None once the server has closed the connection.
pub fn next_frame(socket: &mut Socket) -> Option<Value> {
    loop {
        match socket.read() {
            Ok(tungstenite::Message::Text(text)) => return Some(serde_json::from_str(&text).unwrap()),
            Ok(tungstenite::Message::Close(_)) | Err(_) => return None,
            Ok(_) => continue,
        }
    }
}

pub fn facts_frame(hostname: &str) -> String {
    json!({"type": "facts", "collected_at_ms": 1, "facts": {
        "hostname": hostname, "os_name": "x", "os_id": "x", "os_version": "1", "os_pretty_name": "x", "kernel": "k",
        "arch": "x86_64", "cpu_model": "c", "cpu_count": 1, "memory_total_bytes": 1, "memory_available_bytes": 1,
        "uptime_secs": 1, "boot_time": 1, "ip_addresses": [], "disks": [], "agent_version": "test"}})
    .to_string()
}

/// The next frame of `type` the server sends on a session opened by hand.
pub fn next_of_type(socket: &mut Socket, kind: &str) -> Value {
    loop {
        let frame = next_frame(socket).unwrap_or_else(|| panic!("closed before a {kind} frame"));
        if frame["type"] == kind {
            return frame;
        }
    }
}
