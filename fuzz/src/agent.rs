//! The agent protocol from the server's side: bytes as the frames an agent sends (its first
//! frame, then report frames), through the hub's real conversation code on an in-memory store
//! with one enrolled agent and one execution sent to it; and as the frames a server sends, as
//! the agent reads them.

use std::sync::OnceLock;

use toolgate_domain::Clock;
use toolgate_domain::fleet::instruction::ActionClass;
use toolgate_domain::fleet::wire::{RunStep, ServerMessage};
use toolgate_fleet::session::{self, Handshake};
use toolgate_fleet::{FleetSettings, Hub};
use toolgate_store::{NewExecution, SqliteStore};

struct World {
    runtime: tokio::runtime::Runtime,
    hub: Hub,
    agent_id: String,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        let (hub, agent_id) = runtime.block_on(async {
            let repositories = SqliteStore::open_in_memory().expect("an in-memory store").repositories();
            let (_, secret) = repositories.fleet.create_enrollment_token(i64::MAX, 1, 0).await.expect("a token");
            let clock = Clock::stopped_at(1_000_000);
            let hub = Hub::load(repositories.fleet.clone(), repositories.work.clone(), clock, FleetSettings::default())
                .await
                .expect("the hub loads")
                .declaring(toolgate::instructions::instructions());
            let (agent_id, _) = hub.enroll(&secret).await.expect("the store").expect("enrolled");
            // Connected, and sent one execution: results for it reach the checks and the store.
            let connection = hub.connect(&agent_id, toolgate_fleet::Link::default());
            std::mem::forget(connection);
            let step = RunStep {
                definition: "file_hash".into(),
                plugin: "files".into(),
                action: "sha256".into(),
                class: ActionClass::Read,
                diagnostic: true,
                params: Default::default(),
                timeout_ms: 1_000,
                secret_names: Vec::new(),
                config: Default::default(),
                secrets: Default::default(),
                mode: Default::default(),
                approved_plan: None,
                approved_plans: Default::default(),
            };
            let execution = NewExecution {
                execution_id: "exe-00c1".into(),
                kind: "instruction".into(),
                steps: vec![step],
                scope: None,
                requested_by: "fuzz".into(),
                created_at_ms: 1_000_000,
                deadline_ms: i64::MAX,
                targets: vec![agent_id.clone()],
                idempotency: None,
                rollout: None,
            };
            hub.start_execution(execution).await.expect("the execution starts");
            (hub, agent_id)
        });
        World { runtime, hub, agent_id }
    })
}

/// The first byte picks what the rest is: a first frame, a report frame, or a server frame.
pub fn frame(bytes: &[u8]) {
    let Some((&which, rest)) = bytes.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let world = world();
    match which % 3 {
        0 => {
            let answer = world.runtime.block_on(session::handshake(
                &world.hub,
                &text,
                &toolgate_fleet::PeerCertificate::NotAsked,
                false,
            ));
            if let Handshake::Welcome { connection, .. } = answer {
                world.runtime.block_on(world.hub.disconnect(&connection));
            }
        }
        1 => {
            let _ = world.runtime.block_on(session::receive_report(&world.hub, &world.agent_id, &text));
        }
        _ => {
            let _ = serde_json::from_str::<ServerMessage>(&text);
        }
    }
}
