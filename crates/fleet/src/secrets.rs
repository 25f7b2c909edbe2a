//! Plugin secrets for the steps that declare them (docs/secrets.md): looked up as a run is
//! sent (never when it is stored, so no order in the store holds a value), only to agents
//! whose own connection came over TLS (decided per connection: one server can hear agents on
//! a plain and a TLS listener at once), and only when every one is set. Otherwise the targets
//! are refused with the reason, so the run cannot go out later either.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use toolgate_domain::fleet::wire::RunOrder;

use crate::hub::Hub;

/// Where a secret's value comes from (the server's vault).
pub trait SecretSource: Send + Sync {
    /// The value of `plugin`'s secret `key`; None when it is not set; Err when it cannot be
    /// opened (no key, another key).
    fn reveal<'a>(
        &'a self,
        plugin: &'a str,
        key: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<Option<String>, String>> + Send + 'a>>;
}

/// Where secrets come from.
#[derive(Clone)]
pub struct SecretDelivery {
    pub source: Arc<dyn SecretSource>,
}

/// A refused target's error when secrets would travel in the clear.
pub const NOT_OVER_TLS: &str = "refused: this instruction is given plugin secrets, which travel only over TLS, and this agent is connected over plain HTTP: serve agents with --tls-cert and --tls-key, or an agent listener with --agent-tls-cert (docs/secrets.md)";

/// Whether any step of `order` is given secrets.
pub(crate) fn needs_secrets(order: &RunOrder) -> bool {
    order.steps.iter().any(|s| !s.secret_names.is_empty())
}

impl Hub {
    /// Agents are given secrets from `delivery` (without it, an order naming one is refused).
    pub fn with_secrets(mut self, delivery: SecretDelivery) -> Self {
        self.secrets = Some(delivery);
        self
    }

    /// `order` with the values of the secrets its steps name, or why it cannot go.
    pub(crate) async fn with_secret_values<'o>(&self, order: &'o RunOrder) -> Result<Cow<'o, RunOrder>, String> {
        if !needs_secrets(order) {
            return Ok(Cow::Borrowed(order));
        }
        let Some(delivery) = &self.secrets else {
            return Err("refused: this server keeps no plugin secrets (docs/secrets.md)".into());
        };
        let mut filled = order.clone();
        for step in &mut filled.steps {
            for key in &step.secret_names {
                match delivery.source.reveal(&step.plugin, key).await {
                    Ok(Some(value)) => drop(step.secrets.0.insert(key.clone(), value)),
                    Ok(None) => {
                        return Err(format!(
                            "refused: plugin secret `{}/{key}` is not set (set_plugin_secret sets it)",
                            step.plugin
                        ));
                    }
                    Err(why) => return Err(format!("refused: plugin secret `{}/{key}`: {why}", step.plugin)),
                }
            }
        }
        Ok(Cow::Owned(filled))
    }
}
