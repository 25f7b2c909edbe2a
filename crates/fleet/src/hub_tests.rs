//! The hub's bookkeeping over a real (in-memory) store and a stopped clock.

use std::sync::Arc;
use toolgate_domain::groups::Visible;

use toolgate_domain::Clock;
use toolgate_domain::fleet::AgentStatus;
use toolgate_store::SqliteStore;

use crate::{FleetSettings, Hub, Kick, Link};

pub(crate) async fn hub_with_agents(clock: &Clock, n: i64) -> (Hub, Vec<String>) {
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

pub(crate) fn status(hub: &Hub, id: &str) -> AgentStatus {
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
        model: String::new(),
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
