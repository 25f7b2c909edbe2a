//! The recent views of devices as the experience handlers read them (docs/experience.md, "At
//! scale"): the caller's views in agent order, walked rather than copied into maps.

use std::sync::Arc;

use toolgate_domain::ToolError;
use toolgate_fleet::DeviceView;

use crate::services::ToolContext;

/// The current views of the devices the caller's reach covers, in agent order: looked up by
/// agent without copying any (10,000 devices' ids copied into a map cost a fleet read more
/// than its arithmetic).
pub(crate) struct RecentViews(Vec<Arc<DeviceView>>);

impl RecentViews {
    /// The views of `agents` (ascending, as a BTreeSet gives them) that have one, in one walk
    /// of both lists: a search per agent compared 14 ids for each of 10,000.
    pub(crate) fn each_of<'a>(&'a self, agents: impl IntoIterator<Item = &'a str>) -> Vec<&'a DeviceView> {
        let mut views = self.iter().peekable();
        let mut found = Vec::new();
        for agent in agents {
            while views.next_if(|v| v.experience.agent_id.as_str() < agent).is_some() {}
            if let Some(view) = views.next_if(|v| v.experience.agent_id == agent) {
                found.push(view);
            }
        }
        found
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &DeviceView> {
        self.0.iter().map(|v| &**v)
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

/// The caller's current views (made from the store where they are not current).
pub(crate) async fn recent_views(ctx: &ToolContext) -> Result<RecentViews, ToolError> {
    // In bytewise agent order, as the hub gives them.
    Ok(RecentViews(ctx.services().fleet().recent_experience(ctx.reach()).await?))
}
