//! Management groups: the store's trait, and what both backends share: the tree's rules
//! (no cycle, bounded depth, unique names) and a rule's evaluation against an agent as stored
//! (its facts and tags). A backend evaluates the rules inside the transaction that changes
//! what they read (an agent's enrollment, facts or tags; a group's rule), so membership is
//! never behind the data it is judged on.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use toolgate_domain::StoreError;
use toolgate_domain::fleet::HostFacts;
use toolgate_domain::fleet::scope::{Scope, Subject};
use toolgate_domain::groups::{GroupRefusal, MAX_GROUP_DEPTH, ManagementGroup, ROOT_GROUP, Reach, Visible, check_rule};
use toolgate_domain::records::Change;

type Result<T> = std::result::Result<T, StoreError>;
type Refusable<T> = Result<std::result::Result<T, GroupRefusal>>;

/// A group to create.
#[derive(Clone, Debug)]
pub struct NewGroup<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub parent_id: &'a str,
    /// Checked by the caller ([`check_rule`]); stored as given.
    pub rule: Option<&'a str>,
    pub change: Change<'a>,
}

/// What to change of a group; `None` keeps a field. `rule: Some(None)` removes the rule (its
/// rule members go; explicit members stay).
#[derive(Clone, Debug, Default)]
pub struct GroupUpdate<'a> {
    pub name: Option<&'a str>,
    pub description: Option<&'a str>,
    pub parent_id: Option<&'a str>,
    pub rule: Option<Option<&'a str>>,
}

/// One agent directly in a group, and how it came in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMember {
    pub agent_id: String,
    pub explicit: bool,
    pub by_rule: bool,
}

/// A role a principal holds on a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupRoleRecord {
    pub principal: String,
    pub group_id: String,
    pub role: String,
    pub granted_at: i64,
    pub granted_by: String,
}

#[async_trait]
pub trait GroupStore: Send + Sync {
    /// Every group, the root first, then by name.
    async fn management_groups(&self) -> Result<Vec<ManagementGroup>>;
    async fn management_group(&self, id: &str) -> Result<Option<ManagementGroup>>;
    /// Creates a group; its rule (if any) chooses its members at once.
    async fn create_group(&self, new: NewGroup<'_>) -> Refusable<ManagementGroup>;
    /// Changes a group; returns it before and after. A new rule chooses its members again.
    async fn update_group(
        &self,
        id: &str,
        update: GroupUpdate<'_>,
        change: Change<'_>,
    ) -> Refusable<(ManagementGroup, ManagementGroup)>;
    /// Deletes a childless group with its members and the roles held on it; returns it.
    async fn delete_group(&self, id: &str) -> Refusable<ManagementGroup>;
    /// Adds an enrolled agent by id; false when it was an explicit member already.
    async fn add_member(&self, group_id: &str, agent_id: &str) -> Refusable<bool>;
    /// Takes away an explicit membership; false when there was none (a rule member stays
    /// while the rule matches it).
    async fn remove_member(&self, group_id: &str, agent_id: &str) -> Refusable<bool>;
    /// The agents directly in a group (not its descendants'), by id.
    async fn members(&self, group_id: &str) -> Refusable<Vec<GroupMember>>;
    /// Every agent's direct memberships: (agent id, group id).
    async fn memberships(&self) -> Result<Vec<(String, String)>>;
    /// The roles held on one group, or on every group.
    async fn group_roles(&self, group_id: Option<&str>) -> Result<Vec<GroupRoleRecord>>;
    /// The agents `reach` covers now: every agent of its groups and of their descendants.
    async fn visible(&self, reach: &Reach) -> Result<Visible>;
}

/// A group's place in the tree is sound: its parent exists, is not itself or inside it, and
/// sits less than [`MAX_GROUP_DEPTH`] levels below the root.
pub(crate) fn check_placement(
    groups: &[ManagementGroup],
    group: Option<&str>,
    parent: &str,
) -> std::result::Result<(), GroupRefusal> {
    let by_id: HashMap<&str, &ManagementGroup> = groups.iter().map(|g| (g.id.as_str(), g)).collect();
    if !by_id.contains_key(parent) {
        return Err(GroupRefusal::Unknown(parent.to_string()));
    }
    let mut depth = 1;
    let mut at = Some(parent);
    while let Some(id) = at {
        if Some(id) == group {
            return Err(GroupRefusal::Cycle { group: group.unwrap_or_default().into(), parent: parent.into() });
        }
        at = by_id.get(id).and_then(|g| g.parent_id.as_deref());
        depth += 1;
    }
    let below = group.map_or(0, |g| subtree_height(groups, g));
    if depth - 1 + below > MAX_GROUP_DEPTH {
        return Err(GroupRefusal::TooDeep(group.unwrap_or(parent).to_string()));
    }
    Ok(())
}

fn subtree_height(groups: &[ManagementGroup], id: &str) -> usize {
    groups
        .iter()
        .filter(|g| g.parent_id.as_deref() == Some(id))
        .map(|g| 1 + subtree_height(groups, &g.id))
        .max()
        .unwrap_or(0)
}

/// A name no other group holds (case-insensitively).
pub(crate) fn check_name_free(
    groups: &[ManagementGroup],
    name: &str,
    except: Option<&str>,
) -> std::result::Result<(), GroupRefusal> {
    let taken = groups.iter().any(|g| Some(g.id.as_str()) != except && g.name.to_lowercase() == name.to_lowercase());
    if taken { Err(GroupRefusal::NameTaken(name.to_string())) } else { Ok(()) }
}

/// The groups that are `id` or below it.
pub fn subtree<'a>(groups: &'a [ManagementGroup], id: &str) -> Vec<&'a str> {
    let mut out = vec![];
    let mut frontier = vec![id];
    while let Some(at) = frontier.pop() {
        if let Some(g) = groups.iter().find(|g| g.id == at) {
            out.push(g.id.as_str());
            frontier.extend(groups.iter().filter(|c| c.parent_id.as_deref() == Some(at)).map(|c| c.id.as_str()));
        }
    }
    out
}

/// For the scope language's `group`: each agent's groups, ancestors included, by id and name.
pub fn group_labels(groups: &[ManagementGroup], memberships: &[(String, String)]) -> HashMap<String, Vec<String>> {
    let by_id: HashMap<&str, &ManagementGroup> = groups.iter().map(|g| (g.id.as_str(), g)).collect();
    let mut labels: HashMap<String, HashSet<String>> = HashMap::new();
    for (agent, group) in memberships {
        let entry = labels.entry(agent.clone()).or_default();
        let mut at = by_id.get(group.as_str()).copied();
        while let Some(g) = at {
            entry.insert(g.id.clone());
            entry.insert(g.name.clone());
            at = g.parent_id.as_deref().and_then(|p| by_id.get(p).copied());
        }
    }
    labels.into_iter().map(|(agent, set)| (agent, set.into_iter().collect())).collect()
}

/// A group's rule, parsed; `None` (and a warning) for a stored rule that no longer parses
/// (written by a newer version): it then chooses nobody rather than everybody.
pub(crate) fn parsed_rule(group_id: &str, rule: &str) -> Option<Scope> {
    match check_rule(rule) {
        Ok(scope) => Some(scope),
        Err(e) => {
            tracing::warn!(group_id, "the membership rule does not parse, so it chooses no agent: {e}");
            None
        }
    }
}

/// An agent as the store holds it, for a rule to judge.
pub(crate) struct StoredAgent<'a> {
    pub agent_id: &'a str,
    pub facts: Option<HostFacts>,
    pub tags: Vec<(String, String)>,
}

impl StoredAgent<'_> {
    /// Reads the facts column as stored (JSON, or NULL before the first report).
    pub(crate) fn facts_from(text: Option<&str>) -> Option<HostFacts> {
        text.and_then(|t| serde_json::from_str(t).ok())
    }
}

impl Subject for StoredAgent<'_> {
    fn attribute(&self, name: &str) -> Vec<String> {
        match name {
            "agent_id" => vec![self.agent_id.to_string()],
            _ => self.facts.as_ref().map(|f| f.attribute(name)).unwrap_or_default(),
        }
    }

    fn tag(&self, key: &str) -> Option<&str> {
        self.tags.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// Whether `reach` names the root (then it is the whole fleet).
pub(crate) fn is_whole_fleet(reach: &Reach) -> bool {
    reach.groups().is_none_or(|groups| groups.iter().any(|g| g == ROOT_GROUP))
}

/// A new group's id: short, random, never reused.
pub(crate) fn new_group_id() -> String {
    format!("mg-{}", toolgate_domain::secrets::random_hex::<4>())
}

/// The group `new` asks for, checked against the groups there are (`groups`, read in the
/// creating transaction).
pub(crate) fn planned_group(
    groups: &[ManagementGroup],
    new: &NewGroup<'_>,
) -> std::result::Result<ManagementGroup, GroupRefusal> {
    check_placement(groups, None, new.parent_id)?;
    check_name_free(groups, new.name, None)?;
    Ok(ManagementGroup {
        id: new_group_id(),
        name: new.name.to_string(),
        description: new.description.to_string(),
        parent_id: Some(new.parent_id.to_string()),
        rule: new.rule.map(str::to_string),
        created_at: new.change.at,
        updated_at: new.change.at,
    })
}

/// A group before and after `update`, and whether its rule changed (its members are then
/// chosen again).
pub(crate) struct PlannedUpdate {
    pub before: ManagementGroup,
    pub after: ManagementGroup,
    pub rule_changed: bool,
}

pub(crate) fn planned_update(
    groups: &[ManagementGroup],
    id: &str,
    update: &GroupUpdate<'_>,
    at: i64,
) -> std::result::Result<PlannedUpdate, GroupRefusal> {
    let before = groups.iter().find(|g| g.id == id).cloned().ok_or_else(|| GroupRefusal::Unknown(id.to_string()))?;
    if before.is_root() {
        return Err(GroupRefusal::Root);
    }
    let mut after = before.clone();
    if let Some(name) = update.name {
        check_name_free(groups, name, Some(id))?;
        after.name = name.to_string();
    }
    if let Some(parent) = update.parent_id {
        check_placement(groups, Some(id), parent)?;
        after.parent_id = Some(parent.to_string());
    }
    if let Some(description) = update.description {
        after.description = description.to_string();
    }
    if let Some(rule) = update.rule {
        after.rule = rule.map(str::to_string);
    }
    after.updated_at = at;
    let rule_changed = after.rule != before.rule;
    Ok(PlannedUpdate { before, after, rule_changed })
}

/// The group `id`, if it may be deleted: not the root, and holding no other group.
pub(crate) fn deletable(groups: &[ManagementGroup], id: &str) -> std::result::Result<ManagementGroup, GroupRefusal> {
    let group = groups.iter().find(|g| g.id == id).cloned().ok_or_else(|| GroupRefusal::Unknown(id.to_string()))?;
    if group.is_root() {
        return Err(GroupRefusal::Root);
    }
    let children: Vec<String> =
        groups.iter().filter(|g| g.parent_id.as_deref() == Some(id)).map(|g| format!("`{}`", g.name)).collect();
    if !children.is_empty() {
        return Err(GroupRefusal::HasChildren { group: group.name, children: children.join(", ") });
    }
    Ok(group)
}

/// Every agent's tags, by agent (a rule over the whole fleet reads them once).
pub(crate) fn tags_by_agent(
    rows: impl IntoIterator<Item = (String, String, String)>,
) -> HashMap<String, Vec<(String, String)>> {
    let mut tags: HashMap<String, Vec<(String, String)>> = HashMap::new();
    for (agent, key, value) in rows {
        tags.entry(agent).or_default().push((key, value));
    }
    tags
}

/// [`GroupUpdate`] with its own strings, to move onto a blocking thread.
pub(crate) struct OwnedUpdate {
    name: Option<String>,
    description: Option<String>,
    parent_id: Option<String>,
    rule: Option<Option<String>>,
}

impl OwnedUpdate {
    pub(crate) fn of(update: &GroupUpdate<'_>) -> Self {
        Self {
            name: update.name.map(str::to_string),
            description: update.description.map(str::to_string),
            parent_id: update.parent_id.map(str::to_string),
            rule: update.rule.map(|r| r.map(str::to_string)),
        }
    }

    pub(crate) fn borrowed(&self) -> GroupUpdate<'_> {
        GroupUpdate {
            name: self.name.as_deref(),
            description: self.description.as_deref(),
            parent_id: self.parent_id.as_deref(),
            rule: self.rule.as_ref().map(|r| r.as_deref()),
        }
    }
}

/// [`NewGroup`] with its own strings, to move onto a blocking thread.
pub(crate) struct OwnedNewGroup {
    name: String,
    description: String,
    parent_id: String,
    rule: Option<String>,
    at: i64,
    by: String,
}

impl OwnedNewGroup {
    pub(crate) fn of(new: &NewGroup<'_>) -> Self {
        Self {
            name: new.name.to_string(),
            description: new.description.to_string(),
            parent_id: new.parent_id.to_string(),
            rule: new.rule.map(str::to_string),
            at: new.change.at,
            by: new.change.by.to_string(),
        }
    }

    pub(crate) fn borrowed(&self) -> NewGroup<'_> {
        NewGroup {
            name: &self.name,
            description: &self.description,
            parent_id: &self.parent_id,
            rule: self.rule.as_deref(),
            change: Change { at: self.at, by: &self.by },
        }
    }
}
