//! What handlers reach through their context: the repositories, the clock and the audit sink,
//! each behind an accessor, so a new service (the fleet hub, say) breaks no handler or test.

use std::sync::Arc;

use crate::sealing::vault::Vault;
use toolgate_catalogue::deployment::UploadLimits;
use toolgate_domain::catalogue::Catalogue;
use toolgate_domain::{Clock, Principal, StoreError};
use toolgate_fleet::Hub;
use toolgate_gate::Reviewing;
use toolgate_store::{
    ApprovalStore, AuditStore, AuditWriter, CredentialStore, GroupStore, PluginConfigStore, Repositories, SignInStore,
    TagStore, WorkStore,
};

/// The context every handler receives.
pub type ToolContext = toolgate_domain::ToolContext<Services>;

/// One page of a listing tool's answer, in bytes, unless `--page-bytes` says: near what a
/// model's client keeps of a tool result (Claude Code about 25,000 tokens).
pub const DEFAULT_ANSWER_PAGE_BYTES: usize = 64 << 10;

pub struct Services {
    repositories: Repositories,
    clock: Clock,
    audit: AuditWriter,
    fleet: Arc<Hub>,
    vault: Arc<Vault>,
    uploads: Arc<UploadLimits>,
    trust: Option<Arc<crate::trust::signing::Trust>>,
    answer_page_bytes: usize,
    summaries: Arc<crate::summaries::Summaries>,
}

impl Services {
    /// The services, with a vault that keeps no secrets until [`Services::with_vault`] and the
    /// default upload limits until [`Services::with_upload_limits`].
    pub fn new(mut repositories: Repositories, clock: Clock, audit: AuditWriter, fleet: Arc<Hub>) -> Self {
        // Whoever follows a ticket's resource hears it decided or consumed (here; another
        // replica hears of it from the store).
        let hub = Arc::downgrade(&fleet);
        let heard: toolgate_store::Heard = Arc::new(move |id: &str| {
            if let Some(hub) = hub.upgrade() {
                hub.approval_changed(id);
            }
        });
        repositories.approvals = Arc::new(toolgate_store::HeardApprovals::new(repositories.approvals, heard));
        let vault = Arc::new(Vault::absent(repositories.secrets.clone()));
        // Without durations for the catalogue's classes, minting is refused, naming the class.
        let uploads = crate::deployment::upload_limits(None, &crate::registry::CATALOGUE).unwrap_or(UploadLimits {
            max_bytes: 0,
            max_ttl_secs: 0,
            default_ttl_secs: 0,
            retention: Default::default(),
        });
        Self {
            repositories,
            clock,
            audit,
            fleet,
            vault,
            uploads: Arc::new(uploads),
            trust: None,
            answer_page_bytes: DEFAULT_ANSWER_PAGE_BYTES,
            summaries: Arc::default(),
        }
    }

    /// The same, with the vault the server opened with its keyring.
    pub fn with_vault(self, vault: Arc<Vault>) -> Self {
        Self { vault, ..self }
    }

    /// The same, with the deployment's upload limits.
    pub fn with_upload_limits(self, limits: UploadLimits) -> Self {
        Self { uploads: Arc::new(limits), ..self }
    }

    /// The same, with the agent CA and the code-signing key (a server with a KEK).
    pub fn with_trust(self, trust: Arc<crate::trust::signing::Trust>) -> Self {
        Self { trust: Some(trust), ..self }
    }

    /// The same, with the size a listing tool's page stays under (`--page-bytes`).
    pub fn with_answer_page_bytes(self, bytes: usize) -> Self {
        Self { answer_page_bytes: bytes, ..self }
    }

    /// How large one page of a listing tool's answer may grow, in bytes (`handlers::pages`).
    pub fn answer_page_bytes(&self) -> usize {
        self.answer_page_bytes
    }

    /// The agent CA and the code-signing key; None without a key-encryption key.
    pub fn trust(&self) -> Option<&crate::trust::signing::Trust> {
        self.trust.as_deref()
    }

    /// How large and long upload grants may be, and each retention class's duration.
    pub fn upload_limits(&self) -> &UploadLimits {
        &self.uploads
    }

    /// Plugin secrets, sealed under the key-encryption key (docs/secrets.md).
    pub fn vault(&self) -> &Vault {
        &self.vault
    }

    /// The agents: who is enrolled, who is connected, what they reported.
    pub fn fleet(&self) -> &Arc<Hub> {
        &self.fleet
    }

    /// Fleet-wide experience summaries, kept for a sample interval.
    pub fn summaries(&self) -> &crate::summaries::Summaries {
        &self.summaries
    }

    pub fn repositories(&self) -> &Repositories {
        &self.repositories
    }

    pub fn catalogue(&self) -> &'static Catalogue {
        &crate::registry::CATALOGUE
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The audit writer: `record` for rows nothing waits on, `record_durable` for the rows
    /// of state-changing calls.
    pub fn audit(&self) -> &AuditWriter {
        &self.audit
    }

    pub fn credentials(&self) -> &dyn CredentialStore {
        self.repositories.credentials.as_ref()
    }

    pub fn approvals(&self) -> &dyn ApprovalStore {
        self.repositories.approvals.as_ref()
    }

    pub fn audit_log(&self) -> &dyn AuditStore {
        self.repositories.audit.as_ref()
    }

    pub fn tags(&self) -> &dyn TagStore {
        self.repositories.tags.as_ref()
    }

    pub fn plugin_config(&self) -> &dyn PluginConfigStore {
        self.repositories.plugin_config.as_ref()
    }

    pub fn groups(&self) -> &dyn GroupStore {
        self.repositories.groups.as_ref()
    }

    /// Executions, their targets and the responses agents returned, read as the fleet hub
    /// writes them.
    pub fn work(&self) -> &dyn WorkStore {
        self.repositories.work.as_ref()
    }

    /// Which approval tickets `principal` sees and may decide, as its grants and the groups'
    /// membership stand now.
    pub async fn reviewing<'a>(&'a self, principal: &'a Principal) -> Result<Reviewing<'a>, StoreError> {
        Reviewing::of(self.catalogue(), self.credentials(), self.groups(), principal).await
    }

    /// The console's sign-in records: passwords, second factors, lockouts.
    pub fn sign_in(&self) -> &dyn SignInStore {
        self.repositories.sign_in.as_ref()
    }
}
