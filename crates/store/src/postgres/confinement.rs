//! Confinement written in SQL (PostgreSQL): the agents a reach covers, as a subquery beside
//! a query's own conditions (before LIMIT and OFFSET), and whether a reader may read an
//! execution (see the SQLite twin).

use toolgate_domain::groups::Reach;

use crate::fleet_work::Reader;
use crate::groups::is_whole_fleet;

/// The agents of the groups in the text-array parameter `$N` and of their descendants (see
/// the SQLite twin): confined reads put it beside their own conditions.
pub(crate) fn reach_agents(n: usize) -> String {
    format!(
        "SELECT m.agent_id FROM group_member m WHERE m.group_id IN (WITH RECURSIVE reach(id) AS \
         (SELECT unnest(${n}::text[]) UNION SELECT g.id FROM management_group g JOIN reach ON g.parent_id = reach.id) \
         SELECT id FROM reach)"
    )
}

/// The array parameter [`reach_agents`] reads; `None` for the whole fleet (no condition).
pub(crate) fn reach_param(reach: &Reach) -> Option<Vec<String>> {
    (!is_whole_fleet(reach)).then(|| reach.groups().unwrap_or_default().to_vec())
}

/// ` AND` the execution `execution_id_sql` is readable by `reader` (see the SQLite twin), with
/// its parameters numbered from `$first`; nothing for the server itself or a fleet-wide reader.
pub(crate) fn readable<'a>(
    execution_id_sql: &str,
    reader: Option<&'a Reader>,
    groups: &'a Option<Vec<String>>,
    first: usize,
) -> (String, Vec<&'a (dyn tokio_postgres::types::ToSql + Sync)>) {
    let (Some(reader), Some(groups)) = (reader, groups) else { return (String::new(), vec![]) };
    let sql = format!(
        " AND EXISTS (SELECT 1 FROM execution e WHERE e.execution_id = {execution_id_sql} AND (e.requested_by = ${first} OR NOT EXISTS \
         (SELECT 1 FROM execution_target t2 WHERE t2.execution_id = e.execution_id AND t2.agent_id NOT IN ({}))))",
        reach_agents(first + 1)
    );
    (sql, vec![&reader.principal, groups])
}

/// The reach groups a reader's condition binds (None: no condition).
pub(crate) fn reader_groups(reader: Option<&Reader>) -> Option<Vec<String>> {
    reader.and_then(|r| reach_param(&r.reach))
}
