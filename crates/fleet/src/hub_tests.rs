//! The hub's bookkeeping over a real (in-memory) store and a stopped clock.

use std::sync::Arc;
use toolgate_domain::groups::Visible;

use toolgate_domain::Clock;
use toolgate_domain::fleet::AgentStatus;
use toolgate_store::SqliteStore;

use crate::{FleetSettings, Hub, Kick, Link, PeerCertificate};

async fn hub_with_agents(clock: &Clock, n: i64) -> (Hub, Vec<String>) {
    let repositories = SqliteStore::open_in_memory().unwrap().repositories();
    let store = repositories.fleet;
    let (_, secret) = store.create_enrollment_token(i64::MAX, n, 0).await.unwrap();
    let settings = FleetSettings { heartbeat_ms: 100, missed_heartbeats: 3, ..FleetSettings::default() };
    let hub = Hub::load(Arc::clone(&store), repositories.work, clock.clone(), settings).await.unwrap();
    let mut ids = Vec::new();
    for _ in 0..n {
        ids.push(hub.enroll(&secret).await.unwrap().unwrap().0);
    }
    (hub, ids)
}

fn status(hub: &Hub, id: &str) -> AgentStatus {
    hub.summary(&Visible::All, id).unwrap().status
}

#[tokio::test]
async fn live_connections_are_counted_through_every_way_out() {
    let clock = Clock::stopped_at(1_000_000);
    let (hub, ids) = hub_with_agents(&clock, 3).await;
    assert_eq!(hub.connected(), 0);
    let a = hub.connect(&ids[0], Link::default());
    let mut a_again = hub.connect(&ids[0], Link::default());
    let b = hub.connect(&ids[1], Link::default());
    let c = hub.connect(&ids[2], Link::default());
    assert_eq!(hub.connected(), 3, "a replaced connection is not counted twice");
    assert_eq!(a.kicked.await, Ok(Kick::Replaced));
    // The replaced connection's end does not take the agent offline.
    hub.disconnect(&crate::hub::Connection {
        agent_id: ids[0].clone(),
        id: 0,
        kicked: tokio::sync::oneshot::channel().1,
        outbox: tokio::sync::mpsc::unbounded_channel().1,
    })
    .await;
    assert_eq!((hub.connected(), status(&hub, &ids[0])), (3, AgentStatus::Online));
    hub.disconnect(&b).await;
    assert_eq!((hub.connected(), status(&hub, &ids[1])), (2, AgentStatus::Offline));
    assert!(hub.revoke(&ids[2]).await.unwrap());
    assert_eq!((hub.connected(), status(&hub, &ids[2])), (1, AgentStatus::Revoked));
    drop(c);
    // Silent past the window (3 heartbeats of 100 ms): the sweep closes it.
    hub.seen(&a_again);
    clock.advance_ms(301);
    assert_eq!(status(&hub, &ids[0]), AgentStatus::Offline, "offline as soon as the window passes");
    hub.sweep(true).await.unwrap();
    assert_eq!(hub.connected(), 0);
    assert_eq!((&mut a_again.kicked).await, Ok(Kick::Silent));
}

/// Every attribute the scope language declares is answered by an agent's view: a new
/// attribute without its arm in `AgentView::attribute` fails here, not in a user's scope.
#[tokio::test]
async fn every_declared_scope_attribute_has_a_value() {
    use toolgate_domain::fleet::HostFacts;
    use toolgate_domain::fleet::scope::{ATTRIBUTES, Subject};

    let clock = Clock::stopped_at(1_000_000);
    let (hub, ids) = hub_with_agents(&clock, 1).await;
    let facts = HostFacts {
        hostname: "h".into(),
        os_name: "Debian GNU/Linux".into(),
        os_id: "debian".into(),
        os_version: "12".into(),
        os_pretty_name: "Debian GNU/Linux 12".into(),
        kernel: "6.1.0".into(),
        arch: "x86_64".into(),
        cpu_model: "cpu".into(),
        cpu_count: 2,
        memory_total_bytes: 1,
        memory_available_bytes: 1,
        uptime_secs: 1,
        boot_time: 1,
        ip_addresses: vec!["10.0.0.1".into()],
        disks: vec![],
        agent_version: "0.1.0".into(),
        init_system: "systemd".into(),
        reboot_required: false,
    };
    hub.save_facts(&ids[0], facts, 1).await.unwrap();
    let missing: Vec<&str> = hub
        .with_agent(&Visible::All, &ids[0], |view| {
            // `group` is read from the group index, not from what the agent reported.
            ATTRIBUTES
                .iter()
                .filter(|a| a.name != "group" && view.attribute(a.name).is_empty())
                .map(|a| a.name)
                .collect()
        })
        .unwrap();
    assert!(missing.is_empty(), "no value for {missing:?}");
}

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

/// Issue 27, MEDIUM 5 and 6: a report frame is checked against revocation (nothing is stored
/// after it), a report place waits on the revocation, and one agent holds at most two places.
#[tokio::test]
async fn report_places_are_per_agent_and_end_with_a_revocation() {
    use crate::session::{FrameError, receive_report};
    use crate::{MAX_REPORTS_PER_AGENT, ReportRefusal};

    let clock = Clock::stopped_at(1_000_000);
    let (hub, ids) = hub_with_agents(&clock, 2).await;
    let first = hub.report_place(&ids[0]).await.unwrap();
    let mut second = hub.report_place(&ids[0]).await.unwrap();
    assert_eq!(MAX_REPORTS_PER_AGENT, 2);
    assert_eq!(hub.report_place(&ids[0]).await.err(), Some(ReportRefusal::TooManyForAgent));
    let other = hub.report_place(&ids[1]).await.expect("another agent is not held up");
    drop(first);
    let third = hub.report_place(&ids[0]).await.expect("a place given back is free again");

    let report = r#"{"type":"inventory","table":"processes","collected_at_ms":1,"available":true,"rows":[]}"#;
    receive_report(&hub, &ids[0], report).await.unwrap();
    // A newer agent's table is skipped, not a bad frame; a known table's unknown column is one.
    let newer =
        r#"{"type":"inventory","table":"from_the_future","collected_at_ms":1,"available":true,"rows":[{"a":1}]}"#;
    receive_report(&hub, &ids[0], newer).await.expect("skipped");
    let wrong = r#"{"type":"inventory","table":"processes","collected_at_ms":1,"available":true,"rows":[{"pdi":1}]}"#;
    let refused = receive_report(&hub, &ids[0], wrong).await;
    assert!(matches!(&refused, Err(FrameError::Malformed(m)) if m.contains("pid")), "{refused:?}");
    // A connection waiting for its next frame is woken by the revocation.
    let ((), revoked) = tokio::join!(second.revoked(), hub.revoke(&ids[0]));
    assert!(revoked.unwrap());
    let refused = receive_report(&hub, &ids[0], report).await;
    assert!(matches!(refused, Err(FrameError::Revoked(_))), "{refused:?}");
    receive_report(&hub, &ids[1], report).await.expect("another agent still reports");
    drop((third, other));
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
