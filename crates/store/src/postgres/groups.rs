//! Management groups on PostgreSQL: the tree, members, roles on groups, and what a reach
//! covers. Tree changes lock the group table, so that two replicas cannot build a cycle or
//! take one name together.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use toolgate_domain::StoreError;
use toolgate_domain::groups::{GroupRefusal, GroupRole, ManagementGroup, ROOT_GROUP, Reach, Visible};
use toolgate_domain::records::Change;

use super::confinement::{reach_agents, reach_param};
use super::{Pg, PostgresStore, execute, pg, row, rows};
use crate::groups::{
    GroupMember, GroupRoleRecord, GroupStore, GroupUpdate, NewGroup, PlannedUpdate, StoredAgent, deletable,
    parsed_rule, planned_group, planned_update, tags_by_agent,
};

type Result<T> = std::result::Result<T, StoreError>;
type Refusable<T> = Result<std::result::Result<T, GroupRefusal>>;

const GROUP_COLUMNS: &str = "id, name, description, parent_id, rule, created_at, updated_at";

fn group_row(r: &tokio_postgres::Row) -> Pg<ManagementGroup> {
    Ok(ManagementGroup {
        id: r.try_get(0)?,
        name: r.try_get(1)?,
        description: r.try_get(2)?,
        parent_id: r.try_get(3)?,
        rule: r.try_get(4)?,
        created_at: r.try_get(5)?,
        updated_at: r.try_get(6)?,
    })
}

async fn all_groups(c: &impl GenericClient) -> Pg<Vec<ManagementGroup>> {
    let sql = format!("SELECT {GROUP_COLUMNS} FROM management_group ORDER BY id <> '{ROOT_GROUP}', lower(name), id");
    rows(c, &sql, &[]).await?.iter().map(group_row).collect()
}

async fn one_group(c: &impl GenericClient, id: &str) -> Pg<Option<ManagementGroup>> {
    let sql = format!("SELECT {GROUP_COLUMNS} FROM management_group WHERE id = $1");
    row(c, &sql, &[&id]).await?.as_ref().map(group_row).transpose()
}

/// Serializes changes to the tree across replicas (held to the transaction's end).
async fn lock_tree(c: &impl GenericClient) -> Pg<()> {
    c.batch_execute("LOCK TABLE management_group IN SHARE ROW EXCLUSIVE MODE").await.map_err(Into::into)
}

async fn drop_empty_members(c: &impl GenericClient) -> Pg<()> {
    execute(c, "DELETE FROM group_member WHERE NOT explicit AND NOT by_rule", &[]).await.map(drop)
}

async fn set_rule_flag(c: &impl GenericClient, group_id: &str, agent_id: &str, chosen: bool) -> Pg<()> {
    let sql = if chosen {
        "INSERT INTO group_member (group_id, agent_id, by_rule) VALUES ($1, $2, TRUE)
         ON CONFLICT (group_id, agent_id) DO UPDATE SET by_rule = TRUE"
    } else {
        "UPDATE group_member SET by_rule = FALSE WHERE group_id = $1 AND agent_id = $2"
    };
    execute(c, sql, &[&group_id, &agent_id]).await.map(drop)
}

/// Judges one agent against every group's rule, as it is stored now (inside the caller's
/// transaction: the write that changed its facts or tags).
pub(crate) async fn refresh_agent_rules(c: &impl GenericClient, agent_id: &str) -> Pg<()> {
    // The agent's row lock orders two writes about one agent (a tag, its facts): the later
    // one judges with what the earlier one committed. The shared lock on the groups orders
    // this against a rule's change (which judges every agent under an exclusive one).
    c.batch_execute("LOCK TABLE management_group IN SHARE MODE").await?;
    execute(c, "SELECT 1 FROM agent WHERE agent_id = $1 FOR UPDATE", &[&agent_id]).await?;
    let rules = rows(c, "SELECT id, rule FROM management_group WHERE rule IS NOT NULL", &[]).await?;
    if rules.is_empty() {
        return Ok(());
    }
    let facts: Option<String> = row(c, "SELECT facts FROM agent WHERE agent_id = $1", &[&agent_id])
        .await?
        .map(|r| r.try_get(0))
        .transpose()?
        .flatten();
    let tags = rows(c, "SELECT key, value FROM agent_tag WHERE agent_id = $1", &[&agent_id])
        .await?
        .iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect::<Pg<Vec<_>>>()?;
    let agent = StoredAgent { agent_id, facts: StoredAgent::facts_from(facts.as_deref()), tags };
    let held: std::collections::HashSet<String> =
        rows(c, "SELECT group_id FROM group_member WHERE agent_id = $1 AND by_rule", &[&agent_id])
            .await?
            .iter()
            .map(|r| r.try_get(0))
            .collect::<std::result::Result<_, _>>()?;
    // Only what changed is written: a report that changes nothing a rule reads writes nothing.
    let mut changed = false;
    for rule in &rules {
        let (group_id, rule): (String, String) = (rule.try_get(0)?, rule.try_get(1)?);
        let chosen = parsed_rule(&group_id, &rule).is_some_and(|scope| scope.matches(&agent));
        if chosen != held.contains(&group_id) {
            set_rule_flag(c, &group_id, agent_id, chosen).await?;
            changed = true;
        }
    }
    if changed { drop_empty_members(c).await } else { Ok(()) }
}

/// Judges every agent against one group's rule (a new or changed rule; none: no rule members).
async fn refresh_group_rule(c: &impl GenericClient, group_id: &str, rule: Option<&str>) -> Pg<()> {
    execute(c, "UPDATE group_member SET by_rule = FALSE WHERE group_id = $1", &[&group_id]).await?;
    if let Some(scope) = rule.and_then(|r| parsed_rule(group_id, r)) {
        let tag_rows = rows(c, "SELECT agent_id, key, value FROM agent_tag", &[])
            .await?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
            .collect::<Pg<Vec<_>>>()?;
        let mut tags = tags_by_agent(tag_rows);
        for agent in rows(c, "SELECT agent_id, facts FROM agent", &[]).await? {
            let (agent_id, facts): (String, Option<String>) = (agent.try_get(0)?, agent.try_get(1)?);
            let tags = tags.remove(&agent_id).unwrap_or_default();
            let agent = StoredAgent { agent_id: &agent_id, facts: StoredAgent::facts_from(facts.as_deref()), tags };
            if scope.matches(&agent) {
                set_rule_flag(c, group_id, &agent_id, true).await?;
            }
        }
    }
    drop_empty_members(c).await
}

/// A membership change names a group other than the root and an enrolled agent.
async fn member_target(
    c: &impl GenericClient,
    group_id: &str,
    agent_id: &str,
) -> Pg<std::result::Result<(), GroupRefusal>> {
    if group_id == ROOT_GROUP {
        return Ok(Err(GroupRefusal::Root));
    }
    if one_group(c, group_id).await?.is_none() {
        return Ok(Err(GroupRefusal::Unknown(group_id.to_string())));
    }
    if row(c, "SELECT 1 FROM agent WHERE agent_id = $1", &[&agent_id]).await?.is_none() {
        return Ok(Err(GroupRefusal::UnknownAgent(agent_id.to_string())));
    }
    Ok(Ok(()))
}

#[async_trait]
impl GroupStore for PostgresStore {
    async fn management_groups(&self) -> Result<Vec<ManagementGroup>> {
        pg(async { all_groups(&*self.conn().await?).await }).await
    }

    async fn management_group(&self, id: &str) -> Result<Option<ManagementGroup>> {
        pg(async { one_group(&*self.conn().await?, id).await }).await
    }

    async fn create_group(&self, new: NewGroup<'_>) -> Refusable<ManagementGroup> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            lock_tree(&tx).await?;
            let group = match planned_group(&all_groups(&tx).await?, &new) {
                Ok(group) => group,
                Err(refusal) => return Ok(Err(refusal)),
            };
            execute(
                &tx,
                "INSERT INTO management_group (id, name, description, parent_id, rule, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $6)",
                &[&group.id, &group.name, &group.description, &group.parent_id, &group.rule, &group.created_at],
            )
            .await?;
            refresh_group_rule(&tx, &group.id, group.rule.as_deref()).await?;
            tx.commit().await?;
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
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            lock_tree(&tx).await?;
            let PlannedUpdate { before, after, rule_changed } =
                match planned_update(&all_groups(&tx).await?, id, &update, change.at) {
                    Ok(planned) => planned,
                    Err(refusal) => return Ok(Err(refusal)),
                };
            execute(
                &tx,
                "UPDATE management_group SET name = $2, description = $3, parent_id = $4, rule = $5, updated_at = $6 WHERE id = $1",
                &[&id, &after.name, &after.description, &after.parent_id, &after.rule, &change.at],
            )
            .await?;
            if rule_changed {
                refresh_group_rule(&tx, id, after.rule.as_deref()).await?;
            }
            tx.commit().await?;
            Ok(Ok((before, after)))
        })
        .await
    }

    async fn delete_group(&self, id: &str) -> Refusable<ManagementGroup> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            lock_tree(&tx).await?;
            let group = match deletable(&all_groups(&tx).await?, id) {
                Ok(group) => group,
                Err(refusal) => return Ok(Err(refusal)),
            };
            execute(&tx, "DELETE FROM group_member WHERE group_id = $1", &[&id]).await?;
            execute(&tx, "DELETE FROM group_role WHERE group_id = $1", &[&id]).await?;
            execute(&tx, "DELETE FROM management_group WHERE id = $1", &[&id]).await?;
            // The roles held on it are gone: every replica's credential cache forgets them.
            self.notify(&tx, crate::Change::Credentials).await?;
            tx.commit().await?;
            Ok(Ok(group))
        })
        .await
    }

    async fn add_member(&self, group_id: &str, agent_id: &str) -> Refusable<bool> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            if let Err(refusal) = member_target(&tx, group_id, agent_id).await? {
                return Ok(Err(refusal));
            }
            let already = row(
                &tx,
                "SELECT explicit FROM group_member WHERE group_id = $1 AND agent_id = $2 FOR UPDATE",
                &[&group_id, &agent_id],
            )
            .await?
            .map(|r| r.try_get::<_, bool>(0))
            .transpose()?
            .unwrap_or(false);
            execute(
                &tx,
                "INSERT INTO group_member (group_id, agent_id, explicit) VALUES ($1, $2, TRUE)
                 ON CONFLICT (group_id, agent_id) DO UPDATE SET explicit = TRUE",
                &[&group_id, &agent_id],
            )
            .await?;
            tx.commit().await?;
            Ok(Ok(!already))
        })
        .await
    }

    async fn remove_member(&self, group_id: &str, agent_id: &str) -> Refusable<bool> {
        pg(async {
            let mut c = self.conn().await?;
            let tx = c.transaction().await?;
            if let Err(refusal) = member_target(&tx, group_id, agent_id).await? {
                return Ok(Err(refusal));
            }
            let removed = execute(
                &tx,
                "UPDATE group_member SET explicit = FALSE WHERE group_id = $1 AND agent_id = $2 AND explicit",
                &[&group_id, &agent_id],
            )
            .await?
                == 1;
            drop_empty_members(&tx).await?;
            tx.commit().await?;
            Ok(Ok(removed))
        })
        .await
    }

    async fn members(&self, group_id: &str) -> Refusable<Vec<GroupMember>> {
        pg(async {
            let c = self.conn().await?;
            if one_group(&*c, group_id).await?.is_none() {
                return Ok(Err(GroupRefusal::Unknown(group_id.to_string())));
            }
            let found = rows(
                &*c,
                "SELECT agent_id, explicit, by_rule FROM group_member WHERE group_id = $1 ORDER BY agent_id",
                &[&group_id],
            )
            .await?
            .iter()
            .map(|r| Ok(GroupMember { agent_id: r.try_get(0)?, explicit: r.try_get(1)?, by_rule: r.try_get(2)? }))
            .collect::<Pg<Vec<_>>>()?;
            Ok(Ok(found))
        })
        .await
    }

    async fn memberships(&self) -> Result<Vec<(String, String)>> {
        pg(async {
            let c = self.conn().await?;
            rows(&*c, "SELECT agent_id, group_id FROM group_member ORDER BY agent_id, group_id", &[])
                .await?
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                .collect()
        })
        .await
    }

    async fn group_roles(&self, group_id: Option<&str>) -> Result<Vec<GroupRoleRecord>> {
        pg(async {
            let c = self.conn().await?;
            rows(
                &*c,
                "SELECT principal, group_id, role, granted_at, granted_by FROM group_role
                 WHERE $1::text IS NULL OR group_id = $1 ORDER BY group_id, principal, role",
                &[&group_id],
            )
            .await?
            .iter()
            .map(|r| {
                Ok(GroupRoleRecord {
                    principal: r.try_get(0)?,
                    group_id: r.try_get(1)?,
                    role: r.try_get(2)?,
                    granted_at: r.try_get(3)?,
                    granted_by: r.try_get(4)?,
                })
            })
            .collect()
        })
        .await
    }

    async fn visible(&self, reach: &Reach) -> Result<Visible> {
        let Some(groups) = reach_param(reach) else { return Ok(Visible::All) };
        pg(async {
            let c = self.conn().await?;
            let ids = rows(&*c, &reach_agents(1), &[&groups])
                .await?
                .iter()
                .map(|r| r.try_get(0))
                .collect::<std::result::Result<HashSet<String>, _>>()?;
            Ok(Visible::Only(Arc::new(ids)))
        })
        .await
    }
}

/// Grants `role` on a group (the credential store's, so that caches forget at once).
pub(super) async fn assign_role(
    c: &impl GenericClient,
    principal: &str,
    group_id: &str,
    role: &str,
    change: &Change<'_>,
) -> Pg<std::result::Result<bool, GroupRefusal>> {
    if one_group(c, group_id).await?.is_none() {
        return Ok(Err(GroupRefusal::Unknown(group_id.to_string())));
    }
    let added = execute(
        c,
        "INSERT INTO group_role (principal, group_id, role, granted_at, granted_by) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT DO NOTHING",
        &[&principal, &group_id, &role, &change.at, &change.by],
    )
    .await?
        == 1;
    Ok(Ok(added))
}

/// The roles `principal` holds on groups.
pub(super) async fn roles_of_principal(c: &impl GenericClient, principal: &str) -> Pg<Vec<GroupRole>> {
    rows(c, "SELECT group_id, role FROM group_role WHERE principal = $1 ORDER BY group_id, role", &[&principal])
        .await?
        .iter()
        .map(|r| Ok(GroupRole { group_id: r.try_get(0)?, role: r.try_get(1)? }))
        .collect()
}
