//! Confinement written in SQL (SQLite): the agents a reach covers, as a subquery beside a
//! query's own conditions (before LIMIT and OFFSET), and whether a reader may read an
//! execution. Every confined read of agents, inventory, compliance, executions and responses
//! takes its condition from here.

use toolgate_domain::groups::Reach;

use crate::fleet_work::Reader;
use crate::groups::is_whole_fleet;

/// The agents of the groups in the JSON array parameter `placeholder` (`?`, `?1`) and of
/// their descendants: a subquery every confined read puts beside its own conditions, so the
/// store cuts pages after confinement, never before.
pub(crate) fn reach_agents(placeholder: &str) -> String {
    format!(
        "SELECT m.agent_id FROM group_member m WHERE m.group_id IN (WITH RECURSIVE reach(id) AS \
         (SELECT value FROM json_each({placeholder}) UNION SELECT g.id FROM management_group g JOIN reach ON g.parent_id = reach.id) \
         SELECT id FROM reach)"
    )
}

/// The JSON parameter [`reach_agents`] reads; `None` for the whole fleet (no condition).
pub(crate) fn reach_param(reach: &Reach) -> Option<String> {
    (!is_whole_fleet(reach)).then(|| serde_json::to_string(reach.groups().unwrap_or_default()).expect("strings"))
}

/// ` AND` the execution `execution_id_sql` (an SQL expression) is readable by `reader`: its
/// submitter's, or every target within the reader's reach. Anonymous `?` placeholders; their
/// values, to append in order. Nothing for the server itself or a fleet-wide reader.
pub(crate) fn readable(execution_id_sql: &str, reader: Option<&Reader>) -> (String, Vec<rusqlite::types::Value>) {
    let Some((reader, groups)) = reader.and_then(|r| reach_param(&r.reach).map(|g| (r, g))) else {
        return (String::new(), vec![]);
    };
    let sql = format!(
        " AND EXISTS (SELECT 1 FROM execution e WHERE e.execution_id = {execution_id_sql} AND (e.requested_by = ? OR NOT EXISTS \
         (SELECT 1 FROM execution_target t2 WHERE t2.execution_id = e.execution_id AND t2.agent_id NOT IN ({}))))",
        reach_agents("?")
    );
    (sql, vec![reader.principal.clone().into(), groups.into()])
}
