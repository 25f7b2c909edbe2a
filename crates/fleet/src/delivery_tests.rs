//! The hub's delivery of executions over a real (in-memory) store and a stopped clock: when
//! runs reach agents, what quarantine, a kill switch and a deadline stop.

use std::sync::Arc;

use toolgate_domain::Clock;
use toolgate_store::SqliteStore;

use crate::hub_tests::hub_with_agents;
use crate::{FleetSettings, Hub, Link, PeerCertificate};

fn order_step() -> toolgate_domain::fleet::wire::RunStep {
    toolgate_domain::fleet::wire::RunStep {
        definition: "os_facts".into(),
        plugin: "host".into(),
        action: "facts".into(),
        class: toolgate_domain::fleet::instruction::ActionClass::Read,
        diagnostic: true,
        params: Default::default(),
        timeout_ms: 1000,
        secret_names: Vec::new(),
        config: Default::default(),
        secrets: Default::default(),
        mode: Default::default(),
        approved_plan: None,
        approved_plans: Default::default(),
    }
}

/// Rows first, then messages: a connected target is sent the run at once, an offline one on
/// its next connection, and one that never comes is `offline` after the deadline.
#[tokio::test]
async fn executions_reach_connected_agents_now_and_the_others_when_they_connect() {
    use toolgate_domain::fleet::instruction::{StepStatus, TargetStatus};
    use toolgate_domain::fleet::wire::{RunResult, ServerMessage, StepResult};
    let clock = Clock::stopped_at(1_000_000);
    let (hub, ids) = hub_with_agents(&clock, 3).await;
    let mut online = hub.connect(&ids[0], Link::default());
    let execution = toolgate_store::NewExecution {
        execution_id: "exe-0001".into(),
        kind: "instruction".into(),
        steps: vec![order_step()],
        scope: None,
        requested_by: "test".into(),
        created_at_ms: 1_000_000,
        deadline_ms: 1_060_000,
        targets: ids.clone(),
        idempotency: None,
        rollout: None,
    };
    hub.start_execution(execution).await.unwrap();
    assert!(matches!(*online.outbox.try_recv().unwrap(), ServerMessage::Run(ref o) if o.execution_id == "exe-0001"));
    let mut later = hub.connect(&ids[1], Link::default());
    hub.welcome_work(&ids[1]).await.unwrap();
    assert!(matches!(*later.outbox.try_recv().unwrap(), ServerMessage::Run(_)), "due on connect");
    let result = RunResult {
        execution_id: "exe-0001".into(),
        steps: vec![StepResult { status: StepStatus::Succeeded, error: None, rows: vec![Default::default()] }],
    };
    assert_eq!(hub.take_result(&ids[0], result.clone()).await.unwrap(), toolgate_store::Taken::Stored);
    assert_eq!(hub.take_result(&ids[0], result).await.unwrap(), toolgate_store::Taken::AlreadyFinal);
    clock.advance_ms(61_000);
    hub.sweep(false).await.unwrap();
    let targets = hub.work.targets("exe-0001").await.unwrap();
    let status_of = |id: &str| targets.iter().find(|t| t.agent_id == id).unwrap().status;
    assert_eq!(status_of(&ids[0]), TargetStatus::Succeeded);
    assert_eq!(status_of(&ids[1]), TargetStatus::TimedOut, "delivered, no result");
    assert_eq!(status_of(&ids[2]), TargetStatus::Offline, "never delivered");
}

fn execution(id: &str, agent_id: &str, diagnostic: bool) -> toolgate_store::NewExecution {
    use toolgate_domain::fleet::instruction::ActionClass;
    use toolgate_domain::fleet::wire::RunStep;
    let class = if diagnostic { ActionClass::Read } else { ActionClass::Change };
    toolgate_store::NewExecution {
        execution_id: id.into(),
        kind: "instruction".into(),
        steps: vec![RunStep {
            definition: "d".into(),
            plugin: "workspace".into(),
            action: "write_marker".into(),
            class,
            diagnostic,
            params: Default::default(),
            timeout_ms: 1_000,
            secret_names: Vec::new(),
            config: Default::default(),
            secrets: Default::default(),
            mode: Default::default(),
            approved_plan: None,
            approved_plans: Default::default(),
        }],
        scope: None,
        requested_by: "admin".into(),
        created_at_ms: 1_000_000,
        deadline_ms: 2_000_000,
        targets: vec![agent_id.into()],
        idempotency: None,
        rollout: None,
    }
}

/// Issue 27, HIGH 1: an agent quarantined while offline, with a change due, used to be sent
/// the change right after its welcome and run it. Now the welcome says it is quarantined
/// (protocol 2; a protocol-1 agent's welcome is as it was), and no change is sent it: the
/// target is refused with the reason, on reconnection and when the change is started.
#[tokio::test]
async fn a_quarantined_agent_is_told_first_and_never_sent_a_change() {
    use toolgate_domain::fleet::instruction::TargetStatus;
    use toolgate_domain::fleet::wire::{PROTOCOL_VERSION, QuarantineWish, ServerMessage};

    use crate::session::{Handshake, handshake};

    let clock = Clock::stopped_at(1_000_000);
    let repositories = SqliteStore::open_in_memory().unwrap().repositories();
    let (_, secret) = repositories.fleet.create_enrollment_token(i64::MAX, 1, 0).await.unwrap();
    let hub = Hub::load(repositories.fleet, repositories.work.clone(), clock, FleetSettings::default()).await.unwrap();
    let (id, credential) = hub.enroll(&secret).await.unwrap().unwrap();
    assert_eq!(hub.start_execution(execution("exe-00c1", &id, false)).await.unwrap().1, 0, "offline");
    assert_eq!(hub.start_execution(execution("exe-00d1", &id, true)).await.unwrap().1, 0, "offline");
    assert!(hub.set_quarantine(&id, true, Some("suspicious".into())).await.unwrap());

    let hello = |protocol: u32| {
        serde_json::json!({"type": "hello", "protocol": protocol, "agent_id": id, "credential": credential, "agent_version": "t"})
            .to_string()
    };
    let Handshake::Welcome { reply, connection: old } =
        handshake(&hub, &hello(1), &PeerCertificate::NotAsked, false).await
    else {
        panic!("not welcomed")
    };
    assert!(!serde_json::to_string(&reply).unwrap().contains("quarantine"), "protocol 1: {reply:?}");
    drop(old);
    let Handshake::Welcome { reply, mut connection } =
        handshake(&hub, &hello(2), &PeerCertificate::NotAsked, false).await
    else {
        panic!("not welcomed")
    };
    let wish = QuarantineWish { quarantined: true, reason: Some("suspicious".into()) };
    assert!(matches!(reply, ServerMessage::Welcome { quarantine: Some(ref q), .. } if *q == wish), "{reply:?}");
    assert!(
        matches!(
            handshake(&hub, &hello(PROTOCOL_VERSION + 1), &PeerCertificate::NotAsked, false).await,
            Handshake::Refused(_)
        ),
        "a newer protocol is refused"
    );

    hub.welcome_work(&id).await.unwrap();
    let mut sent = Vec::new();
    while let Ok(message) = connection.outbox.try_recv() {
        sent.push(*message);
    }
    let runs: Vec<&str> = sent
        .iter()
        .filter_map(|m| match m {
            ServerMessage::Run(order) => Some(order.execution_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(runs, ["exe-00d1"], "only the diagnostic reaches a quarantined agent: {sent:?}");
    let work = &repositories.work;
    let refused = &work.targets("exe-00c1").await.unwrap()[0];
    assert_eq!(refused.status, TargetStatus::Refused);
    assert!(refused.error.as_deref().unwrap().contains("quarantined"), "{refused:?}");

    // Started while it is connected and quarantined: refused at once, never sent.
    assert_eq!(hub.start_execution(execution("exe-00c2", &id, false)).await.unwrap().1, 0);
    assert_eq!(work.targets("exe-00c2").await.unwrap()[0].status, TargetStatus::Refused);
    assert!(connection.outbox.try_recv().is_err(), "nothing was sent");
}

/// Issue 43, 14: a run stored before its plugin's kill switch was engaged is never sent to a
/// target that did not have it yet (refused, naming the switch); a target sent it before is
/// sent it again, for its agent to answer from its journal or refuse by the switch it holds.
#[tokio::test]
async fn a_kill_switch_refuses_only_the_targets_not_yet_sent() {
    use toolgate_domain::fleet::instruction::TargetStatus;
    use toolgate_domain::fleet::wire::ServerMessage;
    use toolgate_domain::records::KillSwitch;

    let clock = Clock::stopped_at(1_000_000);
    let (hub, ids) = hub_with_agents(&clock, 2).await;
    let mut sent_before = hub.connect(&ids[0], Link::default());
    let execution = toolgate_store::NewExecution { targets: ids.clone(), ..execution("exe-0k11", &ids[0], false) };
    assert_eq!(hub.start_execution(execution).await.unwrap().1, 1);
    assert!(matches!(*sent_before.outbox.try_recv().unwrap(), ServerMessage::Run(_)));
    let switch = KillSwitch {
        plugin: "workspace".into(),
        action: None,
        enabled: true,
        reason: Some("incident 42".into()),
        updated_at: Some(1),
        updated_by: Some("admin".into()),
    };
    *hub.kill_switches.write().unwrap() = Arc::new(vec![switch.clone()]);

    let mut unsent = hub.connect(&ids[1], Link::default());
    hub.welcome_work(&ids[1]).await.unwrap();
    assert!(unsent.outbox.try_recv().is_err(), "never sent");
    let targets = hub.work.targets("exe-0k11").await.unwrap();
    let status_of = |id: &str| targets.iter().find(|t| t.agent_id == id).unwrap().clone();
    assert_eq!(status_of(&ids[1]).status, TargetStatus::Refused);
    assert_eq!(status_of(&ids[1]).error, Some(switch.refusal()));
    assert_eq!(status_of(&ids[0]).status, TargetStatus::Running, "what was sent is not written off");
    hub.welcome_work(&ids[0]).await.unwrap();
    assert!(matches!(*sent_before.outbox.try_recv().unwrap(), ServerMessage::Run(_)), "sent again, for its journal");
}

/// An execution's deadline on an injected clock: an agent offline past it is finished
/// `offline` at the next sweep, one that ran stays as it was, and the agent that comes back
/// afterwards is never sent the run.
#[tokio::test]
async fn a_target_offline_past_the_deadline_is_finished_offline_and_never_sent() {
    use toolgate_domain::fleet::instruction::TargetStatus;
    use toolgate_domain::fleet::wire::ServerMessage;

    use crate::session::{Handshake, handshake};

    let clock = Clock::stopped_at(1_000_000);
    let repositories = SqliteStore::open_in_memory().unwrap().repositories();
    let (_, secret) = repositories.fleet.create_enrollment_token(i64::MAX, 1, 0).await.unwrap();
    let hub = Hub::load(repositories.fleet, repositories.work.clone(), clock.clone(), FleetSettings::default())
        .await
        .unwrap();
    let (id, credential) = hub.enroll(&secret).await.unwrap().unwrap();
    // deadline_ms is 2,000,000: a second before it nothing expires; just past it, the target does.
    assert_eq!(hub.start_execution(execution("exe-0de1", &id, false)).await.unwrap().1, 0, "offline");
    clock.advance_ms(999_000);
    hub.sweep(false).await.unwrap();
    assert_eq!(repositories.work.targets("exe-0de1").await.unwrap()[0].status, TargetStatus::Pending);
    clock.advance_ms(1_001);
    hub.sweep(false).await.unwrap();
    assert_eq!(repositories.work.targets("exe-0de1").await.unwrap()[0].status, TargetStatus::Offline);

    let hello = serde_json::json!({"type": "hello", "protocol": 2, "agent_id": id, "credential": credential, "agent_version": "t"});
    let Handshake::Welcome { mut connection, .. } =
        handshake(&hub, &hello.to_string(), &PeerCertificate::NotAsked, false).await
    else {
        panic!("not welcomed")
    };
    hub.welcome_work(&id).await.unwrap();
    while let Ok(message) = connection.outbox.try_recv() {
        assert!(!matches!(*message, ServerMessage::Run(_)), "a run past its deadline was sent: {message:?}");
    }
}

/// A vault that knows one value for every secret.
struct Known;

impl crate::SecretSource for Known {
    fn reveal<'a>(
        &'a self,
        _plugin: &'a str,
        _key: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Option<String>, String>> + Send + 'a>> {
        Box::pin(async { Ok(Some("known-value".to_string())) })
    }
}

/// Issue 43, HIGH 3: whether secrets may travel was decided once per server (from whether an
/// agent listener with TLS existed), so an agent on a plain connection of the same server was
/// sent the value. It is decided per connection: the TLS one gets it, the plain one is refused.
#[tokio::test]
async fn secrets_go_only_down_connections_that_came_over_tls() {
    use toolgate_domain::fleet::instruction::TargetStatus;
    use toolgate_domain::fleet::wire::ServerMessage;

    let clock = Clock::stopped_at(1_000_000);
    let (hub, ids) = hub_with_agents(&clock, 2).await;
    let hub = hub.with_secrets(crate::SecretDelivery { source: Arc::new(Known) });
    let mut over_tls = hub.connect(&ids[0], Link { over_tls: true, ..Link::default() });
    let mut plain = hub.connect(&ids[1], Link::default());
    let mut step = order_step();
    step.secret_names = vec!["token".into()];
    let execution = toolgate_store::NewExecution {
        steps: vec![step],
        targets: ids.clone(),
        ..execution("exe-0se1", &ids[0], true)
    };
    assert_eq!(hub.start_execution(execution).await.unwrap().1, 1, "sent to one of the two");
    let ServerMessage::Run(order) = *over_tls.outbox.try_recv().unwrap() else { panic!("no run") };
    assert_eq!(order.steps[0].secrets.0.get("token").map(String::as_str), Some("known-value"));
    assert!(plain.outbox.try_recv().is_err(), "nothing goes down the plain connection");
    let targets = hub.work.targets("exe-0se1").await.unwrap();
    let refused = targets.iter().find(|t| t.agent_id == ids[1]).unwrap();
    assert_eq!(refused.status, TargetStatus::Refused);
    assert_eq!(refused.error.as_deref(), Some(crate::NOT_OVER_TLS));
}
