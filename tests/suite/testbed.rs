//! Booted Debian endpoints (the test bed, common/testbed.rs) with the agent installed from its
//! package: it comes online as a service, keeps its identity through a reboot and an upgrade,
//! goes offline when the package is removed, and leaves nothing behind when it is purged.

use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use crate::common;
use common::agents::{FAST, mint, online_by_hostname, output_schemas, structured, wait_for_status};
use common::start;
use common::testbed::{Bed, packages};

/// The agent's identity on an endpoint, as its state file holds it.
fn agent_id_on(endpoint: &common::testbed::Endpoint) -> String {
    let state = std::fs::read_to_string(endpoint.file("/var/lib/toolgate-agent/agent.json")).unwrap();
    serde_json::from_str::<serde_json::Value>(&state).unwrap()["agent_id"].as_str().unwrap().to_string()
}

#[test]
fn the_agent_package_makes_a_service_that_enrolls_survives_reboots_and_upgrades_and_goes_with_the_package() {
    let s = start(FAST);
    let schemas = output_schemas(&s);
    let names = ["bed-a", "bed-b", "bed-c"];
    let mut bed = Bed::boot(&names);
    let mut boots: Vec<f64> = bed.endpoints.iter().map(|e| e.boot_time.as_secs_f64()).collect();
    boots.sort_by(f64::total_cmp);
    println!("boot times (s): {boots:.2?}, median {:.2}", boots[boots.len() / 2]);

    let token = mint(&s, &["--uses", "3"]);
    for endpoint in &bed.endpoints {
        endpoint.install_agent(&s, &token);
    }
    let online = online_by_hostname(&s, &schemas, 3);
    for endpoint in &bed.endpoints {
        assert_eq!(
            online.get(&endpoint.name),
            Some(&agent_id_on(endpoint)),
            "{} reports as itself: {online:?}",
            endpoint.name
        );
        assert_eq!(endpoint.run(&["systemctl", "is-enabled", "toolgate-agent"]).trim(), "enabled");
        assert_eq!(endpoint.run(&["systemctl", "is-active", "toolgate-agent"]).trim(), "active");
        let mode = |path: &str| std::fs::metadata(endpoint.file(path)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode("/var/lib/toolgate-agent"), 0o700, "the state directory is root's alone");
        assert_eq!(
            mode("/etc/toolgate/agent.env"),
            0o600,
            "the settings hold the enrollment token (the test wrote them 0644)"
        );
    }

    // A reboot of its host: the service starts again by itself, as the same agent.
    let a = &mut bed.endpoints[0];
    let id_a = agent_id_on(a);
    a.reboot();
    assert_eq!(agent_id_on(a), id_a, "the same identity after a reboot");
    wait_for_status(&s, &schemas, &id_a, "online");
    assert_eq!(a.run(&["systemctl", "is-active", "toolgate-agent"]).trim(), "active");

    // An upgrade restarts the service on the new package and keeps the identity.
    let b = &bed.endpoints[1];
    let id_b = agent_id_on(b);
    let started_before = b.run(&["systemctl", "show", "-P", "MainPID", "toolgate-agent"]);
    b.install(&packages().agent_upgrade);
    assert!(b.run(&["dpkg-query", "-W", "-f", "${Version}", "toolgate-agent"]).ends_with("+later"));
    assert_ne!(b.run(&["systemctl", "show", "-P", "MainPID", "toolgate-agent"]), started_before, "restarted");
    assert_eq!(agent_id_on(b), id_b, "the same identity after an upgrade");
    wait_for_status(&s, &schemas, &id_b, "online");

    // Removing the package stops the agent (offline) and keeps its state; purging deletes it.
    let c = &bed.endpoints[2];
    let id_c = agent_id_on(c);
    c.run(&["apt-get", "remove", "-y", "-q", "toolgate-agent"]);
    wait_for_status(&s, &schemas, &id_c, "offline");
    assert!(c.file("/var/lib/toolgate-agent/agent.json").exists(), "remove keeps the identity");
    assert!(!c.file("/usr/bin/toolgate-agent").exists());
    c.run(&["apt-get", "purge", "-y", "-q", "toolgate-agent"]);
    assert!(!c.file("/var/lib/toolgate-agent").exists(), "purge deletes the state");
    assert!(!c.file("/etc/toolgate/agent.env").exists(), "and the settings");

    let listed = structured(&s, &schemas, "list_agents", json!({}));
    assert_eq!(listed["agents"].as_array().unwrap().len(), 3, "three enrollments, no more: {listed}");
}

#[test]
fn the_server_package_serves_on_a_booted_host() {
    let bed = Bed::boot(&["bed-server"]);
    let host = &bed.endpoints[0];
    // Its own port: the endpoint shares this machine's loopback with every other test.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    std::fs::create_dir_all(host.file("/etc/toolgate")).unwrap();
    std::fs::write(host.file("/etc/toolgate/toolgate.env"), format!("TOOLGATE_LISTEN=127.0.0.1:{port}\n")).unwrap();
    host.install(&packages().server);
    assert_eq!(host.run(&["systemctl", "is-enabled", "toolgate"]).trim(), "enabled");
    let deadline = std::time::Instant::now() + common::agents::PATIENCE;
    let token = loop {
        let journal = host.run(&["journalctl", "-u", "toolgate", "--no-pager", "-o", "cat"]);
        if let Some(token) = journal.split_whitespace().find(|w| w.starts_with("tg_")) {
            break token.to_string();
        }
        assert!(std::time::Instant::now() < deadline, "no demo token in the journal:\n{journal}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let answer = common::request(
        addr,
        "POST",
        &[("Authorization", &format!("Bearer {token}")), ("MCP-Protocol-Version", "2025-11-25")],
        Some(&common::call("discover_permissions", json!({})).to_string()),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.json()["result"]["structuredContent"]["tools"].is_array(), "{}", answer.body);
    host.run(&["apt-get", "purge", "-y", "-q", "toolgate"]);
    assert!(!host.file("/var/lib/private/toolgate").exists(), "purge deletes the server's state");
}
