//! The real agent loop against a fake server (docs/trust.md): it enrolls, receives its
//! certificate and pins the CA, then is sent runs of a change that would write a marker file:
//! one altered after signing, one past its deadline, one signed for another agent, one
//! unsigned. Each is refused and reported, and nothing of it runs; then a good one runs, once,
//! and its re-delivery is answered from the journal without running again.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, CertifiedIssuer, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, SigningKey,
};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use toolgate_agent::{AgentOptions, ServerTrust};
use toolgate_domain::CancellationToken;
use toolgate_domain::fleet::instruction::ActionClass;
use toolgate_domain::fleet::signing::{FrameRefusal, SignedFrame};
use toolgate_domain::fleet::wire::{AgentCertificate, AgentMessage, Purpose, RunOrder, RunStep, ServerMessage};

const AGENT: &str = "agt-00000000000000aa";
const PATIENCE: Duration = Duration::from_secs(30);

type Socket = WebSocketStream<TcpStream>;

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

struct FakeServer {
    ca: CertifiedIssuer<'static, KeyPair>,
    key: KeyPair,
    chain_pem: String,
}

impl FakeServer {
    fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.distinguished_name.push(DnType::CommonName, "fake agent CA");
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let mut signing = CertificateParams::default();
        signing.extended_key_usages = vec![ExtendedKeyUsagePurpose::CodeSigning];
        let chain_pem = signing.signed_by(&key, &ca).unwrap().pem();
        Self { ca, key, chain_pem }
    }

    fn certificate(&self, csr: &str) -> AgentCertificate {
        let mut request = CertificateSigningRequestParams::from_pem(csr).unwrap();
        request.params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = request.signed_by(&self.ca).unwrap();
        AgentCertificate { pem: cert.pem(), ca_pem: self.ca.pem(), not_after_ms: now_ms() + 3_600_000 }
    }

    fn signed(&self, inner: &ServerMessage, agent_id: &str, deadline_ms: i64) -> SignedFrame {
        let payload = serde_json::to_string(inner).unwrap();
        let execution_id = inner.execution_id().map(String::from);
        let bytes = SignedFrame::signed_bytes(agent_id, execution_id.as_deref(), deadline_ms, &payload);
        SignedFrame {
            payload,
            agent_id: agent_id.into(),
            execution_id,
            deadline_ms,
            chain_pem: self.chain_pem.clone(),
            signature_hex: toolgate_domain::secrets::hex(&self.key.sign(&bytes).unwrap()),
        }
    }
}

/// A run of one change: write the marker `name`.
fn marker_run(execution_id: &str, name: &str) -> ServerMessage {
    let params = json!({"name": name, "text": "ran"}).as_object().unwrap().clone();
    ServerMessage::Run(RunOrder {
        execution_id: execution_id.into(),
        deadline_ms: now_ms() + 60_000,
        steps: vec![RunStep {
            definition: "write_marker".into(),
            plugin: "workspace".into(),
            action: "write_marker".into(),
            class: ActionClass::Change,
            diagnostic: false,
            params,
            timeout_ms: 10_000,
            secret_names: vec![],
            config: Default::default(),
            secrets: Default::default(),
            mode: Default::default(),
            approved_plan: None,
            approved_plans: Default::default(),
        }],
    })
}

async fn send(socket: &mut Socket, message: &ServerMessage) {
    socket.send(Message::text(serde_json::to_string(message).unwrap())).await.unwrap();
}

/// The next frame the agent sends on the session that is not a heartbeat or its quarantine state.
async fn next_report(socket: &mut Socket) -> AgentMessage {
    loop {
        let frame = tokio::time::timeout(PATIENCE, socket.next()).await.expect("the agent answers").unwrap().unwrap();
        let Message::Text(text) = frame else { continue };
        match serde_json::from_str(&text).unwrap() {
            AgentMessage::Heartbeat | AgentMessage::QuarantineState { .. } => continue,
            other => return other,
        }
    }
}

/// Every other connection (the agent's reports) is told the server is busy.
async fn turn_away(listener: TcpListener) {
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(async move {
            let Ok(mut socket) = tokio_tungstenite::accept_async(stream).await else { return };
            let _ = socket.next().await;
            let busy = json!({"type": "refused", "code": "busy", "message": "fake server"}).to_string();
            let _ = socket.send(Message::text(busy)).await;
        });
    }
}

/// A real agent enrolled with the fake server `server`: its first session, the listener its
/// next connections come to, and what stops it.
struct Enrolled {
    session: Socket,
    listener: TcpListener,
    state_dir: std::path::PathBuf,
    stop: CancellationToken,
    agent: tokio::task::JoinHandle<Result<(), toolgate_agent::AgentError>>,
    _states: tempfile::TempDir,
}

async fn enrolled(server: &FakeServer) -> Enrolled {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let states = tempfile::tempdir().unwrap();
    let state_dir = states.path().join("agent");
    let options = AgentOptions {
        servers: vec![format!("http://{address}")],
        enroll_token: Some("tge_fake".into()),
        state_dir: state_dir.clone(),
        reconnect_spread_ms: 100,
        reconnect_max_ms: 500,
        allow_network_isolation: false,
        trust: ServerTrust::System,
        measure: toolgate_agent::experience::Measure::Off,
    };
    let stop = CancellationToken::new();
    let agent = tokio::spawn(toolgate_agent::run(options, stop.clone()));
    let (mut session, first) = next_session(&listener).await;
    let AgentMessage::Enroll { csr: Some(csr), .. } = first else { panic!("{first:?}") };
    let welcome = ServerMessage::Welcome {
        agent_id: AGENT.into(),
        credential: Some("tga_fake".into()),
        heartbeat_ms: 60_000,
        inventory_interval_ms: 3_600_000,
        quarantine: None,
        certificate: Some(server.certificate(&csr)),
        experience: None,
    };
    send(&mut session, &welcome).await;
    Enrolled { session, listener, state_dir, stop, agent, _states: states }
}

impl Enrolled {
    async fn stop(self) {
        self.stop.cancel();
        let _ = self.agent.await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_runs_only_frames_signed_for_it_by_the_ca_it_pinned() {
    let server = FakeServer::new();
    let Enrolled { mut session, listener, state_dir, stop, agent, _states } = enrolled(&server).await;
    tokio::spawn(turn_away(listener));

    let marker = |name: &str| state_dir.join("work").join(name);
    let good_deadline = now_ms() + 60_000;
    let mut altered = server.signed(&marker_run("exe-a1", "altered"), AGENT, good_deadline);
    altered.payload = altered.payload.replace("\"ran\"", "\"tampered\"");
    let refusals = [
        (ServerMessage::Signed(Box::new(altered)), "exe-a1", FrameRefusal::BadSignature),
        (
            ServerMessage::Signed(Box::new(server.signed(&marker_run("exe-e1", "expired"), AGENT, now_ms() - 1))),
            "exe-e1",
            FrameRefusal::Expired,
        ),
        (
            ServerMessage::Signed(Box::new(server.signed(
                &marker_run("exe-b1", "other"),
                "agt-00000000000000bb",
                good_deadline,
            ))),
            "exe-b1",
            FrameRefusal::OtherAgent,
        ),
        (marker_run("exe-c1", "unsigned"), "exe-c1", FrameRefusal::Unsigned),
    ];
    for (frame, execution_id, reason) in &refusals {
        send(&mut session, frame).await;
        match next_report(&mut session).await {
            AgentMessage::FrameRefused { execution_id: Some(id), reason: said, detail } => {
                assert_eq!((id.as_str(), said), (*execution_id, *reason), "{detail}");
            }
            other => panic!("expected the refusal of {execution_id}, got {other:?}"),
        }
    }

    // A good one runs, once: its re-delivery is answered from the journal.
    let good = ServerMessage::Signed(Box::new(server.signed(&marker_run("exe-d1", "good"), AGENT, good_deadline)));
    for _ in 0..2 {
        send(&mut session, &good).await;
        let AgentMessage::Result(result) = next_report(&mut session).await else { panic!("no result") };
        assert_eq!(result.execution_id, "exe-d1");
        assert_eq!(result.steps[0].status, toolgate_domain::fleet::instruction::StepStatus::Succeeded, "{result:?}");
    }
    assert_eq!(std::fs::read_to_string(marker("good")).unwrap(), "ran");
    for (name, execution_id) in
        [("altered", "exe-a1"), ("expired", "exe-e1"), ("other", "exe-b1"), ("unsigned", "exe-c1")]
    {
        assert!(!marker(name).exists(), "{name} ran");
        assert!(!state_dir.join("runs").join(format!("{execution_id}.json")).exists(), "{name} was journalled");
    }
    stop.cancel();
    let _ = agent.await;
}

/// The next session (an enrollment or a session hello) on `listener`; report and upload
/// connections that come first are told the server is busy.
async fn next_session(listener: &TcpListener) -> (Socket, AgentMessage) {
    loop {
        let (stream, _) = tokio::time::timeout(PATIENCE, listener.accept()).await.expect("a connection").unwrap();
        let mut socket = tokio_tungstenite::accept_async(stream).await.unwrap();
        let Some(Ok(Message::Text(first))) = socket.next().await else { continue };
        let first: AgentMessage = serde_json::from_str(&first).unwrap();
        match first {
            AgentMessage::Enroll { .. } | AgentMessage::Hello { purpose: Purpose::Session, .. } => {
                return (socket, first);
            }
            _ => {
                let busy = json!({"type": "refused", "code": "busy", "message": "fake server"}).to_string();
                let _ = socket.send(Message::text(busy)).await;
            }
        }
    }
}

/// The quarantine state the agent says it is in, next on the session.
async fn next_quarantine_state(socket: &mut Socket) -> bool {
    loop {
        let frame = tokio::time::timeout(PATIENCE, socket.next()).await.expect("the agent answers").unwrap().unwrap();
        let Message::Text(text) = frame else { continue };
        if let AgentMessage::QuarantineState { quarantined, .. } = serde_json::from_str(&text).unwrap() {
            return quarantined;
        }
    }
}

/// Issue 43, MEDIUM 5: the agent applied `welcome.quarantine` from any server it reached, so
/// an unsigned welcome released a quarantined agent. Once it holds a pin, quarantine and its
/// release come only in signed frames: the welcome's is ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_agent_ignores_the_quarantine_of_an_unsigned_welcome() {
    let server = FakeServer::new();
    let mut started = enrolled(&server).await;
    let session = &mut started.session;
    assert!(!next_quarantine_state(session).await, "not quarantined yet");
    let quarantine = ServerMessage::Quarantine { quarantined: true, reason: Some("suspicious".into()) };
    let signed = server.signed(&quarantine, AGENT, now_ms() + 60_000);
    send(session, &ServerMessage::Signed(Box::new(signed))).await;
    assert!(next_quarantine_state(session).await, "quarantined by the signed frame");
    let _ = session.close(None).await;

    // Back on a server whose unsigned welcome says it is released: it stays quarantined.
    let (mut session, first) = next_session(&started.listener).await;
    assert!(matches!(first, AgentMessage::Hello { .. }), "{first:?}");
    let release = toolgate_domain::fleet::wire::QuarantineWish { quarantined: false, reason: None };
    let welcome = ServerMessage::Welcome {
        agent_id: AGENT.into(),
        credential: None,
        heartbeat_ms: 60_000,
        inventory_interval_ms: 3_600_000,
        quarantine: Some(release),
        certificate: None,
        experience: None,
    };
    send(&mut session, &welcome).await;
    assert!(next_quarantine_state(&mut session).await, "an unsigned welcome does not release it");
    started.stop().await;
}

/// Issue 43, 14: the agent keeps the kill switches the server signs for it (across restarts)
/// and refuses what they stop even from a server that sends it anyway (a replica that has not
/// heard of the switch yet); unsigned, they are refused like any acting frame.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_action_is_refused_even_from_a_server_that_sends_it() {
    use toolgate_domain::fleet::instruction::StepStatus;
    use toolgate_domain::records::KillSwitch;

    let server = FakeServer::new();
    let mut started = enrolled(&server).await;
    let (session, state_dir) = (&mut started.session, started.state_dir.clone());
    let deadline = now_ms() + 60_000;
    let signed = |inner: &ServerMessage| ServerMessage::Signed(Box::new(server.signed(inner, AGENT, deadline)));
    let switch = KillSwitch {
        plugin: "workspace".into(),
        action: Some("write_marker".into()),
        enabled: true,
        reason: Some("incident 42".into()),
        updated_at: Some(1),
        updated_by: Some("admin".into()),
    };
    // Unsigned, the switches are refused like a run: a rogue server cannot lift one either.
    let unsigned = ServerMessage::KillSwitches { switches: vec![] };
    send(session, &unsigned).await;
    assert!(matches!(next_report(session).await, AgentMessage::FrameRefused { .. }));
    send(session, &signed(&ServerMessage::KillSwitches { switches: vec![switch] })).await;
    send(session, &signed(&marker_run("exe-k1", "killed"))).await;
    let AgentMessage::Result(result) = next_report(session).await else { panic!("no result") };
    assert_eq!(result.steps[0].status, StepStatus::Failed, "{result:?}");
    let error = result.steps[0].error.as_deref().unwrap();
    assert!(
        error.contains("kill switch of action `workspace.write_marker`") && error.contains("incident 42"),
        "{error}"
    );
    assert!(!state_dir.join("work/killed").exists(), "nothing ran");
    let kept = std::fs::read_to_string(state_dir.join("kill-switches.json")).unwrap();
    assert!(kept.contains("incident 42"), "kept across restarts: {kept}");
    started.stop().await;
}
