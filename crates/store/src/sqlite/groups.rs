//! Management groups in SQLite: the tree, members, roles on groups, and what a reach covers.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use toolgate_domain::StoreError;
use toolgate_domain::groups::{GroupRefusal, GroupRole, ManagementGroup, ROOT_GROUP, Reach, Visible};
use toolgate_domain::records::Change;

use super::SqliteStore;
use super::confinement::{reach_agents, reach_param};
use crate::groups::{
    GroupMember, GroupRoleRecord, GroupStore, GroupUpdate, NewGroup, OwnedNewGroup, OwnedUpdate, PlannedUpdate,
    StoredAgent, deletable, parsed_rule, planned_group, planned_update, tags_by_agent,
};

type Result<T> = std::result::Result<T, StoreError>;
type Refusable<T> = Result<std::result::Result<T, GroupRefusal>>;

const GROUP_COLUMNS: &str = "id, name, description, parent_id, rule, created_at, updated_at";

fn group_row(r: &rusqlite::Row) -> rusqlite::Result<ManagementGroup> {
    Ok(ManagementGroup {
        id: r.get(0)?,
        name: r.get(1)?,
        description: r.get(2)?,
        parent_id: r.get(3)?,
        rule: r.get(4)?,
        created_at: r.get(5)?,
        updated_at: r.get(6)?,
    })
}

fn all_groups(c: &Connection) -> rusqlite::Result<Vec<ManagementGroup>> {
    let sql = format!("SELECT {GROUP_COLUMNS} FROM management_group ORDER BY id <> '{ROOT_GROUP}', lower(name), id");
    let mut stmt = c.prepare_cached(&sql)?;
    stmt.query_map([], group_row)?.collect()
}

fn one_group(c: &Connection, id: &str) -> rusqlite::Result<Option<ManagementGroup>> {
    let sql = format!("SELECT {GROUP_COLUMNS} FROM management_group WHERE id = ?1");
    c.query_row(&sql, params![id], group_row).optional()
}

fn agent_exists(c: &Connection, agent_id: &str) -> rusqlite::Result<bool> {
    c.query_row("SELECT 1 FROM agent WHERE agent_id = ?1", params![agent_id], |_| Ok(()))
        .optional()
        .map(|r| r.is_some())
}

fn stored_tags(c: &Connection, agent_id: &str) -> rusqlite::Result<Vec<(String, String)>> {
    let mut stmt = c.prepare_cached("SELECT key, value FROM agent_tag WHERE agent_id = ?1")?;
    stmt.query_map(params![agent_id], |r| Ok((r.get(0)?, r.get(1)?)))?.collect()
}

/// Drops the member rows that neither an id nor a rule holds any more.
fn drop_empty_members(c: &Connection) -> rusqlite::Result<()> {
    c.execute("DELETE FROM group_member WHERE NOT explicit AND NOT by_rule", []).map(drop)
}

/// Judges one agent against every group's rule, as it is stored now (inside the caller's
/// transaction: the write that changed its facts or tags).
pub(crate) fn refresh_agent_rules(c: &Connection, agent_id: &str) -> rusqlite::Result<()> {
    let rules: Vec<(String, String)> = {
        let mut stmt = c.prepare_cached("SELECT id, rule FROM management_group WHERE rule IS NOT NULL")?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<_>>()?
    };
    if rules.is_empty() {
        return Ok(());
    }
    let facts: Option<String> = c
        .query_row("SELECT facts FROM agent WHERE agent_id = ?1", params![agent_id], |r| r.get(0))
        .optional()?
        .flatten();
    let agent =
        StoredAgent { agent_id, facts: StoredAgent::facts_from(facts.as_deref()), tags: stored_tags(c, agent_id)? };
    let held: std::collections::HashSet<String> = {
        let mut stmt = c.prepare_cached("SELECT group_id FROM group_member WHERE agent_id = ?1 AND by_rule")?;
        stmt.query_map(params![agent_id], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?
    };
    // Only what changed is written: a report that changes nothing a rule reads writes nothing.
    let mut changed = false;
    for (group_id, rule) in rules {
        let chosen = parsed_rule(&group_id, &rule).is_some_and(|scope| scope.matches(&agent));
        if chosen != held.contains(&group_id) {
            set_rule_flag(c, &group_id, agent_id, chosen)?;
            changed = true;
        }
    }
    if changed { drop_empty_members(c) } else { Ok(()) }
}

fn set_rule_flag(c: &Connection, group_id: &str, agent_id: &str, chosen: bool) -> rusqlite::Result<()> {
    if chosen {
        c.prepare_cached(
            "INSERT INTO group_member (group_id, agent_id, by_rule) VALUES (?1, ?2, TRUE)
             ON CONFLICT (group_id, agent_id) DO UPDATE SET by_rule = TRUE",
        )?
        .execute(params![group_id, agent_id])?;
    } else {
        c.prepare_cached("UPDATE group_member SET by_rule = FALSE WHERE group_id = ?1 AND agent_id = ?2")?
            .execute(params![group_id, agent_id])?;
    }
    Ok(())
}

/// Judges every agent against one group's rule (a new or changed rule; none: no rule members).
fn refresh_group_rule(c: &Connection, group_id: &str, rule: Option<&str>) -> rusqlite::Result<()> {
    c.execute("UPDATE group_member SET by_rule = FALSE WHERE group_id = ?1", params![group_id])?;
    if let Some(scope) = rule.and_then(|r| parsed_rule(group_id, r)) {
        let mut stmt = c.prepare("SELECT agent_id, key, value FROM agent_tag")?;
        let rows =
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<rusqlite::Result<Vec<_>>>()?;
        let mut tags = tags_by_agent(rows);
        let mut stmt = c.prepare("SELECT agent_id, facts FROM agent")?;
        let agents: Vec<(String, Option<String>)> =
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<_>>()?;
        for (agent_id, facts) in agents {
            let tags = tags.remove(&agent_id).unwrap_or_default();
            let agent = StoredAgent { agent_id: &agent_id, facts: StoredAgent::facts_from(facts.as_deref()), tags };
            if scope.matches(&agent) {
                set_rule_flag(c, group_id, &agent_id, true)?;
            }
        }
    }
    drop_empty_members(c)
}

#[async_trait]
impl GroupStore for SqliteStore {
    async fn management_groups(&self) -> Result<Vec<ManagementGroup>> {
        self.read(|c| all_groups(c)).await
    }

    async fn management_group(&self, id: &str) -> Result<Option<ManagementGroup>> {
        let id = id.to_string();
        self.run(move |c| one_group(c, &id)).await
    }

    async fn create_group(&self, new: NewGroup<'_>) -> Refusable<ManagementGroup> {
        let owned = OwnedNewGroup::of(&new);
        self.run(move |c| {
            let tx = c.transaction()?;
            let group = match planned_group(&all_groups(&tx)?, &owned.borrowed()) {
                Ok(group) => group,
                Err(refusal) => return Ok(Err(refusal)),
            };
            tx.execute(
                "INSERT INTO management_group (id, name, description, parent_id, rule, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
                params![group.id, group.name, group.description, group.parent_id, group.rule, group.created_at],
            )?;
            refresh_group_rule(&tx, &group.id, group.rule.as_deref())?;
            tx.commit()?;
            Ok(Ok(group))
        })
        .await
    }

    async fn update_group(
        &self,
        id: &str,
        update: GroupUpdate<'_>,
        change: Change<'_>,
    ) -> Refusable<(ManagementGroup, ManagementGroup)> {
        let owned = OwnedUpdate::of(&update);
        let (id, at) = (id.to_string(), change.at);
        self.run(move |c| {
            let tx = c.transaction()?;
            let groups = all_groups(&tx)?;
            let PlannedUpdate { before, after, rule_changed } = match planned_update(&groups, &id, &owned.borrowed(), at) {
                Ok(planned) => planned,
                Err(refusal) => return Ok(Err(refusal)),
            };
            tx.execute(
                "UPDATE management_group SET name = ?2, description = ?3, parent_id = ?4, rule = ?5, updated_at = ?6 WHERE id = ?1",
                params![id, after.name, after.description, after.parent_id, after.rule, at],
            )?;
            if rule_changed {
                refresh_group_rule(&tx, &id, after.rule.as_deref())?;
            }
            tx.commit()?;
            Ok(Ok((before, after)))
        })
        .await
    }

    async fn delete_group(&self, id: &str) -> Refusable<ManagementGroup> {
        let id = id.to_string();
        self.run(move |c| {
            let tx = c.transaction()?;
            let group = match deletable(&all_groups(&tx)?, &id) {
                Ok(group) => group,
                Err(refusal) => return Ok(Err(refusal)),
            };
            tx.execute("DELETE FROM group_member WHERE group_id = ?1", params![id])?;
            tx.execute("DELETE FROM group_role WHERE group_id = ?1", params![id])?;
            tx.execute("DELETE FROM management_group WHERE id = ?1", params![id])?;
            tx.commit()?;
            Ok(Ok(group))
        })
        .await
    }

    async fn add_member(&self, group_id: &str, agent_id: &str) -> Refusable<bool> {
        let (group_id, agent_id) = (group_id.to_string(), agent_id.to_string());
        self.run(move |c| {
            let tx = c.transaction()?;
            if let Err(refusal) = member_target(&tx, &group_id, &agent_id)? {
                return Ok(Err(refusal));
            }
            let already: bool = tx
                .query_row(
                    "SELECT explicit FROM group_member WHERE group_id = ?1 AND agent_id = ?2",
                    params![group_id, agent_id],
                    |r| r.get(0),
                )
                .optional()?
                .unwrap_or(false);
            tx.execute(
                "INSERT INTO group_member (group_id, agent_id, explicit) VALUES (?1, ?2, TRUE)
                 ON CONFLICT (group_id, agent_id) DO UPDATE SET explicit = TRUE",
                params![group_id, agent_id],
            )?;
            tx.commit()?;
            Ok(Ok(!already))
        })
        .await
    }

    async fn remove_member(&self, group_id: &str, agent_id: &str) -> Refusable<bool> {
        let (group_id, agent_id) = (group_id.to_string(), agent_id.to_string());
        self.run(move |c| {
            let tx = c.transaction()?;
            if let Err(refusal) = member_target(&tx, &group_id, &agent_id)? {
                return Ok(Err(refusal));
            }
            let removed = tx.execute(
                "UPDATE group_member SET explicit = FALSE WHERE group_id = ?1 AND agent_id = ?2 AND explicit",
                params![group_id, agent_id],
            )? == 1;
            drop_empty_members(&tx)?;
            tx.commit()?;
            Ok(Ok(removed))
        })
        .await
    }

    async fn members(&self, group_id: &str) -> Refusable<Vec<GroupMember>> {
        let group_id = group_id.to_string();
        self.run(move |c| {
            if one_group(c, &group_id)?.is_none() {
                return Ok(Err(GroupRefusal::Unknown(group_id)));
            }
            let mut stmt = c.prepare_cached(
                "SELECT agent_id, explicit, by_rule FROM group_member WHERE group_id = ?1 ORDER BY agent_id",
            )?;
            let rows = stmt.query_map(params![group_id], |r| {
                Ok(GroupMember { agent_id: r.get(0)?, explicit: r.get(1)?, by_rule: r.get(2)? })
            })?;
            rows.collect::<rusqlite::Result<_>>().map(Ok)
        })
        .await
    }

    async fn memberships(&self) -> Result<Vec<(String, String)>> {
        self.read(|c| {
            let mut stmt =
                c.prepare_cached("SELECT agent_id, group_id FROM group_member ORDER BY agent_id, group_id")?;
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect()
        })
        .await
    }

    async fn group_roles(&self, group_id: Option<&str>) -> Result<Vec<GroupRoleRecord>> {
        let group_id = group_id.map(str::to_string);
        self.run(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT principal, group_id, role, granted_at, granted_by FROM group_role
                 WHERE ?1 IS NULL OR group_id = ?1 ORDER BY group_id, principal, role",
            )?;
            let rows = stmt.query_map(params![group_id], |r| {
                Ok(GroupRoleRecord {
                    principal: r.get(0)?,
                    group_id: r.get(1)?,
                    role: r.get(2)?,
                    granted_at: r.get(3)?,
                    granted_by: r.get(4)?,
                })
            })?;
            rows.collect()
        })
        .await
    }

    async fn visible(&self, reach: &Reach) -> Result<Visible> {
        let Some(groups) = reach_param(reach) else { return Ok(Visible::All) };
        self.run(move |c| {
            let mut stmt = c.prepare_cached(&reach_agents("?1"))?;
            let ids = stmt.query_map(params![groups], |r| r.get(0))?.collect::<rusqlite::Result<HashSet<String>>>()?;
            Ok(Visible::Only(Arc::new(ids)))
        })
        .await
    }
}

/// A membership change names a group other than the root and an enrolled agent.
fn member_target(
    c: &Connection,
    group_id: &str,
    agent_id: &str,
) -> rusqlite::Result<std::result::Result<(), GroupRefusal>> {
    if group_id == ROOT_GROUP {
        return Ok(Err(GroupRefusal::Root));
    }
    if one_group(c, group_id)?.is_none() {
        return Ok(Err(GroupRefusal::Unknown(group_id.to_string())));
    }
    if !agent_exists(c, agent_id)? {
        return Ok(Err(GroupRefusal::UnknownAgent(agent_id.to_string())));
    }
    Ok(Ok(()))
}

/// Grants `role` on a group (the credential store's, so that caches forget at once).
pub(super) fn assign_role(
    c: &mut Connection,
    principal: &str,
    group_id: &str,
    role: &str,
    change: &Change<'_>,
) -> rusqlite::Result<std::result::Result<bool, GroupRefusal>> {
    let tx = c.transaction()?;
    if one_group(&tx, group_id)?.is_none() {
        return Ok(Err(GroupRefusal::Unknown(group_id.to_string())));
    }
    let added = tx.execute(
        "INSERT INTO group_role (principal, group_id, role, granted_at, granted_by) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT DO NOTHING",
        params![principal, group_id, role, change.at, change.by],
    )? == 1;
    tx.commit()?;
    Ok(Ok(added))
}

pub(super) fn unassign_role(c: &Connection, principal: &str, group_id: &str, role: &str) -> rusqlite::Result<bool> {
    c.execute(
        "DELETE FROM group_role WHERE principal = ?1 AND group_id = ?2 AND role = ?3",
        params![principal, group_id, role],
    )
    .map(|n| n == 1)
}

/// The roles `principal` holds on groups.
pub(super) fn roles_of_principal(c: &Connection, principal: &str) -> rusqlite::Result<Vec<GroupRole>> {
    let mut stmt =
        c.prepare_cached("SELECT group_id, role FROM group_role WHERE principal = ?1 ORDER BY group_id, role")?;
    stmt.query_map(params![principal], |r| Ok(GroupRole { group_id: r.get(0)?, role: r.get(1)? }))?.collect()
}
