//! `systemd.service_action`: one unit started, stopped, restarted, reloaded, enabled or
//! disabled with `systemctl ACTION -- UNIT` (fixed arguments, never a shell). Its plan reads the
//! unit as it is and says the state it would move to, changing nothing; what cannot be done
//! (a unit that does not exist, a masked one, a static one enabled) fails at the plan already.

use serde_json::{Map, Value, json};

use super::systemd::{is_glob, require_systemd, unit_pattern};
use super::{PluginContext, output, required_text};
use crate::collect::systemd::{Unit, number, property, show};
use crate::collect::{Row, row};

const ACTIONS: [&str; 6] = ["start", "stop", "restart", "reload", "enable", "disable"];

const PROPERTIES: &str = "Id,LoadState,ActiveState,SubState,UnitFileState,MainPID,InvocationID,CanReload";

/// The unit and action asked for, checked, and the unit as it is now.
fn target(params: &Map<String, Value>) -> Result<(Unit, &'static str), String> {
    let name = unit_pattern(required_text(params, "unit")?)?;
    if is_glob(name) {
        return Err(format!("`{name}` is a glob: service_action changes one unit, named exactly"));
    }
    let asked = required_text(params, "action")?;
    let Some(action) = ACTIONS.iter().find(|a| **a == asked) else {
        return Err(format!("no action `{asked}`: one of {}", ACTIONS.join(", ")));
    };
    require_systemd()?;
    let unit = show(&[name.to_string()], PROPERTIES)?.into_iter().next().unwrap_or_default();
    Ok((unit, action))
}

/// The active and unit file states `action` leaves `unit` in, or why it cannot be done.
fn after(unit: &Unit, action: &str) -> Result<(String, String), String> {
    let id = property(unit, "Id");
    let active = property(unit, "ActiveState");
    let file = property(unit, "UnitFileState");
    match property(unit, "LoadState") {
        "not-found" => return Err(format!("no unit `{id}` on this host")),
        "masked" if action != "stop" && action != "disable" => {
            return Err(format!("`{id}` is masked: it cannot {action} until it is unmasked"));
        }
        _ => {}
    }
    Ok(match action {
        "start" | "restart" => ("active".into(), file.into()),
        "stop" => ("inactive".into(), file.into()),
        "reload" if active != "active" => return Err(format!("`{id}` is {active}: only a running unit reloads")),
        "reload" if property(unit, "CanReload") != "yes" => return Err(format!("`{id}` does not support reload")),
        "reload" => (active.into(), file.into()),
        "enable" if matches!(file, "static" | "indirect" | "generated" | "transient" | "") => {
            return Err(format!(
                "`{id}` is {}: it has no [Install] section to enable",
                if file.is_empty() { "without a unit file" } else { file }
            ));
        }
        "enable" => (active.into(), "enabled".into()),
        _ => {
            (active.into(), if matches!(file, "enabled" | "enabled-runtime") { "disabled".into() } else { file.into() })
        }
    })
}

pub fn plan(_: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let (unit, action) = target(params)?;
    let (active_after, file_after) = after(&unit, action)?;
    Ok(vec![row([
        ("unit", json!(property(&unit, "Id"))),
        ("action", json!(action)),
        ("active_state_now", json!(property(&unit, "ActiveState"))),
        ("active_state_after", json!(active_after)),
        ("unit_file_state_now", json!(property(&unit, "UnitFileState"))),
        ("unit_file_state_after", json!(file_after)),
    ])])
}

pub fn apply(_: &PluginContext, params: &Map<String, Value>) -> Result<Vec<Row>, String> {
    let (unit, action) = target(params)?;
    after(&unit, action)?;
    let id = property(&unit, "Id").to_string();
    output("systemctl", &[action, "--", &id])?;
    let now = show(std::slice::from_ref(&id), PROPERTIES)?.into_iter().next().unwrap_or_default();
    Ok(vec![row([
        ("unit", json!(id)),
        ("action", json!(action)),
        ("active_state", json!(property(&now, "ActiveState"))),
        ("sub_state", json!(property(&now, "SubState"))),
        ("unit_file_state", json!(property(&now, "UnitFileState"))),
        ("main_pid", json!(number(&now, "MainPID"))),
        ("invocation_id", json!(property(&now, "InvocationID"))),
    ])])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(pairs: &[(&str, &str)]) -> Unit {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn each_action_says_where_it_leaves_the_unit() {
        let cron = unit(&[
            ("Id", "cron.service"),
            ("LoadState", "loaded"),
            ("ActiveState", "active"),
            ("UnitFileState", "enabled"),
            ("CanReload", "yes"),
        ]);
        assert_eq!(after(&cron, "stop").unwrap(), ("inactive".into(), "enabled".into()));
        assert_eq!(after(&cron, "restart").unwrap(), ("active".into(), "enabled".into()));
        assert_eq!(after(&cron, "disable").unwrap(), ("active".into(), "disabled".into()));
        assert_eq!(after(&cron, "reload").unwrap(), ("active".into(), "enabled".into()));
        let stopped = unit(&[
            ("Id", "x.service"),
            ("LoadState", "loaded"),
            ("ActiveState", "inactive"),
            ("UnitFileState", "static"),
        ]);
        assert!(after(&stopped, "reload").unwrap_err().contains("only a running unit reloads"));
        assert!(after(&stopped, "enable").unwrap_err().contains("static"));
        let gone = unit(&[("Id", "nope.service"), ("LoadState", "not-found")]);
        assert_eq!(after(&gone, "start").unwrap_err(), "no unit `nope.service` on this host");
        let masked = unit(&[("Id", "m.service"), ("LoadState", "masked"), ("ActiveState", "inactive")]);
        assert!(after(&masked, "start").unwrap_err().contains("masked"));
        assert!(after(&masked, "stop").is_ok());
    }
}
