//! Plugin configuration for the actions that declare they read it (set_plugin_config;
//! docs/instructions.md): valued as a run is sent, like secrets, so that a run takes the value
//! set when it goes out, and only to agents that can read it (protocol 3 on).

use std::borrow::Cow;

use toolgate_domain::StoreError;
use toolgate_domain::fleet::wire::RunOrder;

use crate::hub::Hub;

/// The first agent protocol whose run steps carry configuration.
pub(crate) const CONFIG_PROTOCOL: u32 = 3;

impl Hub {
    /// `order` with the configuration values its steps' actions declare (a key never set is
    /// left out: the action's own default holds).
    pub(crate) async fn with_config_values<'o>(&self, order: &'o RunOrder) -> Result<Cow<'o, RunOrder>, StoreError> {
        let (Some(store), Some(actions)) = (&self.plugin_config, self.actions) else {
            return Ok(Cow::Borrowed(order));
        };
        let mut filled: Option<RunOrder> = None;
        for (i, step) in order.steps.iter().enumerate() {
            let Some(action) = actions.action(&step.plugin, &step.action) else { continue };
            for key in &action.config {
                if let Some(entry) = store.get(&step.plugin, &key.name).await? {
                    let filled = filled.get_or_insert_with(|| order.clone());
                    filled.steps[i].config.insert(key.name.clone(), entry.value);
                }
            }
        }
        Ok(filled.map_or(Cow::Borrowed(order), Cow::Owned))
    }
}
