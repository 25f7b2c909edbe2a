//! Management groups: named sets of agents in a tree, the roles principals hold on them, and
//! what a caller may reach through them. docs/groups.md is the user's guide.
//!
//! A group's agents are its members (explicit, or chosen by its rule) and every agent of its
//! descendants. The built-in root holds every agent: a role on the root is a fleet-wide role.

use std::collections::HashSet;
use std::sync::Arc;

use serde::Serialize;

use crate::fleet::scope::{self, Scope};

/// The built-in root group: every agent, whether or not any other group holds it.
pub const ROOT_GROUP: &str = "all";
/// The longest group name accepted.
pub const MAX_GROUP_NAME: usize = 128;
/// The most levels below the root a group may sit (a deeper tree is a mistake, and every
/// confined query walks it).
pub const MAX_GROUP_DEPTH: usize = 16;

/// A named set of agents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ManagementGroup {
    pub id: String,
    pub name: String,
    pub description: String,
    /// `None` only for the root.
    pub parent_id: Option<String>,
    /// The scope expression that chooses members as agents enroll and their facts or tags change.
    pub rule: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl ManagementGroup {
    pub fn is_root(&self) -> bool {
        self.id == ROOT_GROUP
    }

    /// The group in one line: what an audit row's before and after say.
    pub fn summary(&self) -> String {
        format!(
            "`{}` under {} rule {}",
            self.name,
            self.parent_id.as_deref().unwrap_or("(none)"),
            self.rule.as_deref().map_or("(none)".to_string(), |r| format!("`{r}`"))
        )
    }
}

/// Whether the group `id` is one of `among` or lies below one of them (`groups` is the tree).
pub fn at_or_below(groups: &[ManagementGroup], id: &str, among: &[&str]) -> bool {
    let mut at = groups.iter().find(|g| g.id == id);
    while let Some(group) = at {
        if among.contains(&group.id.as_str()) {
            return true;
        }
        at = group.parent_id.as_deref().and_then(|p| groups.iter().find(|g| g.id == p));
    }
    false
}

/// How an agent came to be in a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Membership {
    /// Added by id (`add_management_group_member`).
    Explicit,
    /// Its facts or tags match the group's rule.
    Rule,
}

impl Membership {
    pub fn label(self) -> &'static str {
        match self {
            Membership::Explicit => "explicit",
            Membership::Rule => "rule",
        }
    }
}

/// A role a principal holds on one group: its permissions over that group's agents only.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct GroupRole {
    pub group_id: String,
    pub role: String,
}

/// Which agents a grant covers: the whole fleet, or the agents of some groups (and of their
/// descendants). Worked out per call from the caller's roles and the tool's pair; every store
/// query over agents, inventory, executions and responses takes one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reach {
    Fleet,
    /// The gate never hands a handler an empty list (no grant is refused first); an empty one
    /// covers no agent (a context built without a reach).
    Groups(Arc<[String]>),
}

impl Reach {
    pub fn is_fleet(&self) -> bool {
        matches!(self, Reach::Fleet)
    }

    /// The groups, or `None` for the whole fleet.
    pub fn groups(&self) -> Option<&[String]> {
        match self {
            Reach::Fleet => None,
            Reach::Groups(groups) => Some(groups),
        }
    }
}

/// Who reads what belongs to a principal and is about agents: an execution and its responses,
/// an audit row. Its owner always; another principal only when its reach covers every agent
/// the thing is about (a fleet-wide reach covers all). Anyone else finds no such thing. The
/// condition is in each store query.
#[derive(Clone, Debug)]
pub struct Reader {
    pub principal: String,
    pub reach: Reach,
}

/// The agents a reach covers, read at one moment (membership is judged when it is read).
#[derive(Clone, Debug)]
pub enum Visible {
    All,
    Only(Arc<HashSet<String>>),
}

impl Visible {
    /// No agent at all.
    pub fn nothing() -> Visible {
        Visible::Only(Arc::default())
    }

    pub fn contains(&self, agent_id: &str) -> bool {
        match self {
            Visible::All => true,
            Visible::Only(ids) => ids.contains(agent_id),
        }
    }

    pub fn is_all(&self) -> bool {
        matches!(self, Visible::All)
    }
}

/// Why a group cannot be created or changed as asked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupRefusal {
    #[error("no management group `{0}`; list_management_groups lists them")]
    Unknown(String),
    #[error("a management group is already named `{0}`; names are unique (case-insensitively)")]
    NameTaken(String),
    #[error("the root group `{ROOT_GROUP}` is built in: it holds every agent and cannot be changed, moved or deleted")]
    Root,
    #[error("`{group}` cannot move under `{parent}`: `{parent}` is inside `{group}` (a group cannot contain itself)")]
    Cycle { group: String, parent: String },
    #[error("`{0}` would sit more than {MAX_GROUP_DEPTH} levels below the root")]
    TooDeep(String),
    #[error("`{group}` still holds the groups {children}: delete or move them first")]
    HasChildren { group: String, children: String },
    #[error("no enrolled agent `{0}`; list_agents lists them")]
    UnknownAgent(String),
}

/// The problems with a membership rule, before it is stored.
pub fn check_rule(rule: &str) -> Result<Scope, String> {
    let parsed = scope::parse(rule).map_err(|e| format!("column {}: {}", e.column, e.message))?;
    for field in parsed.attribute_names() {
        match field {
            // Membership must not change by the minute, nor depend on membership itself.
            "status" => {
                return Err(
                    "a membership rule cannot read `status`: it changes by the minute (use a tag or a fact)".into()
                );
            }
            "group" => return Err("a membership rule cannot read `group`: membership would depend on itself".into()),
            _ => {}
        }
    }
    Ok(parsed)
}

/// A group name as given: trimmed, not empty, not too long, no control characters.
pub fn check_name(name: &str) -> Result<&str, String> {
    let name = name.trim();
    if name.is_empty() {
        return Err("a group name cannot be empty".into());
    }
    if name.chars().count() > MAX_GROUP_NAME {
        return Err(format!("a group name holds at most {MAX_GROUP_NAME} characters"));
    }
    if name.chars().any(char::is_control) {
        return Err("a group name cannot hold control characters".into());
    }
    Ok(name)
}
