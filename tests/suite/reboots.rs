//! `reboot` (issue 46) on a booted Debian endpoint: planned (the boot it would end), then
//! applied: the endpoint really goes down and boots again, and the execution completes only
//! when the agent is back and reports the new boot. A host whose agent does not come back
//! ends `timed_out`, saying so.

use serde_json::json;

use crate::common;
use common::agents::{FAST, output_schemas, run_execution, structured, wait_finished};
use common::start;
use common::testbed::{Bed, Endpoint};

fn boot_id(e: &Endpoint) -> String {
    e.run(&["cat", "/proc/sys/kernel/random/boot_id"]).trim().to_string()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

#[test]
fn a_reboot_completes_when_the_agent_is_back_from_the_new_boot() {
    let s = start(FAST);
    let schemas = output_schemas(&s);
    let (bed, ids) = Bed::enrolled(&s, &["boot-a"]);
    let (e, id) = (&bed.endpoints[0], ids["boot-a"].as_str());
    let before = boot_id(e);
    let params = json!({"delay_minutes": 0, "message": "toolgate test: rebooting now"});

    let planning = json!({"definition": "reboot", "params": params, "agent_ids": [id], "plan_only": true});
    let (status, rows) = run_execution(&s, &schemas, planning);
    assert_eq!(status["counts"], json!({"succeeded": 1}), "{status}");
    let plan = &rows[0]["values"];
    assert_eq!((&plan["boot_id"], &plan["delay_minutes"]), (&json!(before), &json!(0)), "{plan}");
    assert_eq!(boot_id(e), before, "a plan reboots nothing");

    let asked_at = now_ms();
    let rebooting = json!({"definition": "reboot", "params": params, "agent_ids": [id], "deadline_seconds": 300});
    let (status, rows) = run_execution(&s, &schemas, rebooting);
    assert_eq!(status["counts"], json!({"succeeded": 1}), "{status}");
    let after = boot_id(e);
    assert_ne!(after, before, "the endpoint booted again");
    let done = &rows[0]["values"];
    assert_eq!((&done["previous_boot_id"], &done["boot_id"]), (&json!(before), &json!(after)), "{done}");
    let booted_at = done["booted_at_ms"].as_i64().unwrap();
    assert!(booted_at >= asked_at - 1_000 && booted_at <= now_ms(), "the new boot began after it was asked: {done}");
    assert!(plan["booted_at_ms"].as_i64().unwrap() < booted_at, "{plan} then {done}");
}

#[test]
fn a_host_whose_agent_does_not_come_back_ends_timed_out_saying_so() {
    let s = start(FAST);
    let schemas = output_schemas(&s);
    let (mut bed, ids) = Bed::enrolled(&s, &["boot-b"]);
    let id = ids["boot-b"].as_str();
    let before = boot_id(&bed.endpoints[0]);
    // The host comes back, its agent does not: the server hears nothing more of it.
    bed.endpoints[0].run(&["systemctl", "disable", "toolgate-agent"]);
    let arguments =
        json!({"definition": "reboot", "params": {"delay_minutes": 0}, "agent_ids": [id], "deadline_seconds": 15});
    let started = structured(&s, &schemas, "execute_instruction", arguments);
    let status = wait_finished(&s, &schemas, &s.token, started["execution_id"].as_str().unwrap());
    assert_eq!(status["counts"], json!({"timed_out": 1}), "{status}");
    let error = status["agents"][0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("did not come back"), "{status}");
    bed.endpoints[0].wait_up();
    let e = &bed.endpoints[0];
    assert_ne!(boot_id(e), before, "it did reboot");
    let agent = e.exec(&["systemctl", "is-active", "toolgate-agent"]);
    assert_eq!(String::from_utf8_lossy(&agent.stdout).trim(), "inactive");
}
