//! `toolgate engine ...`: engine principals from the console (docs/identities.md), beside
//! the MCP tools and by the same rules ([`crate::identities`]). Like the other console
//! commands they open the server's store directly; every change is audited.

use anyhow::{Result, bail};
use clap::{Subcommand, ValueEnum};
use toolgate_domain::Clock;
use toolgate_domain::audit::{AuditEvent, AuditOutcome, TargetType};
use toolgate_domain::engines::{NewEngine, check_engine_id};
use toolgate_domain::records::Change;
use toolgate_store::{Repositories, RevokeEngine};

use crate::identities::{self, refused};
use crate::registry::CATALOGUE;

/// Who the console's changes are by, in the records and the audit log.
const CONSOLE: &str = "console";

#[derive(Clone, Copy, ValueEnum)]
pub enum Classification {
    Internal,
    External,
}

#[derive(Subcommand)]
pub enum EngineCommand {
    /// Create an engine principal (`engine:<name>`) owned by a person.
    Create {
        principal_id: String,
        #[arg(long)]
        owner: String,
        #[arg(long)]
        display_name: String,
        #[arg(long)]
        justification: String,
        #[arg(long, value_enum)]
        classification: Classification,
        /// Its own request rate on each server, instead of policy.yaml's engines.quota.
        #[arg(long)]
        requests_per_minute: Option<u32>,
        /// Its own limit of requests in flight on each server.
        #[arg(long)]
        concurrent_requests: Option<u32>,
    },
    /// List engine principals: owner, roles, live credentials.
    List {
        #[arg(long)]
        include_revoked: bool,
    },
    /// Mint a credential (an MCP token); the secret is shown once.
    Mint {
        principal_id: String,
        #[arg(long)]
        tier: Option<String>,
        #[arg(long)]
        days: Option<i64>,
        #[arg(long)]
        name: Option<String>,
        /// The toolsets its client is shown when it chooses none (tools.yaml names, comma-separated).
        #[arg(long)]
        toolsets: Option<String>,
    },
    /// Rotate its newest live credential (or --token): both work until confirmed or the overlap ends.
    Rotate {
        principal_id: String,
        #[arg(long, default_value_t = 7)]
        overlap_days: i64,
        #[arg(long)]
        token: Option<String>,
    },
    /// Confirm a rotation: the successor's secret on standard input; the predecessor is revoked.
    Confirm { principal_id: String, token_id: String },
    /// Grant a policy.yaml role, fleet-wide or on a management group (never a human-only one).
    Assign {
        principal_id: String,
        role: String,
        #[arg(long)]
        group: Option<String>,
    },
    /// Take a role away.
    Unassign {
        principal_id: String,
        role: String,
        #[arg(long)]
        group: Option<String>,
    },
    /// Revoke it and every credential it holds, for good.
    Revoke {
        principal_id: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Make another person its owner.
    Transfer { principal_id: String, new_owner: String },
}

async fn audit(store: &Repositories, action: &str, principal_id: &str, detail: String) {
    let event = AuditEvent::new(Clock::default().now_ms(), action, AuditOutcome::Success)
        .by_principal(CONSOLE)
        .target(TargetType::Principal, principal_id.to_string())
        .detail(detail);
    if let Err(err) = store.audit.append([event].into(), true).await {
        eprintln!("warning: the audit row could not be written ({err})");
    }
}

/// Runs one command; `secret` is read only by `confirm`.
pub async fn run(
    store: &Repositories,
    command: EngineCommand,
    secret: impl FnOnce() -> Result<String>,
) -> Result<String> {
    let now = Clock::default().now_secs();
    match command {
        EngineCommand::Create {
            principal_id,
            owner,
            display_name,
            justification,
            classification,
            requests_per_minute,
            concurrent_requests,
        } => {
            check_engine_id(&principal_id).map_err(anyhow::Error::msg)?;
            let classification = match classification {
                Classification::Internal => "internal",
                Classification::External => "external",
            };
            let new = NewEngine {
                principal_id: &principal_id,
                display_name: &display_name,
                owner: &owner,
                justification: &justification,
                classification,
                requests_per_minute,
                concurrent_requests,
                created_by: CONSOLE,
                now,
            };
            store.engines.create_engine(new).await?.map_err(refused)?;
            audit(store, "console.engine_create", &principal_id, format!("created, owned by {owner}")).await;
            Ok(format!("created engine principal {principal_id}, owned by {owner}\n"))
        }
        EngineCommand::List { include_revoked } => {
            let mut out = format!("{:<32} {:<16} {:<10} roles\n", "engine principal", "owner", "state");
            for e in store.engines.engines(include_revoked).await? {
                let roles = store.credentials.principal(&e.principal_id).await?.map(|p| p.roles).unwrap_or_default();
                let state = if e.is_revoked() { "revoked" } else { "live" };
                out.push_str(&format!("{:<32} {:<16} {:<10} {}\n", e.principal_id, e.owner, state, roles.join(", ")));
            }
            Ok(out)
        }
        EngineCommand::Mint { principal_id, tier, days, name, toolsets } => {
            let asked = identities::Credential {
                name: name.as_deref(),
                ttl_days: days,
                tier: tier.as_deref(),
                toolsets: toolsets.as_deref(),
            };
            let (token, secret) = identities::mint(store, &CATALOGUE, &principal_id, asked, now).await?;
            let detail = format!("credential {} minted, expires {}", token.id, token.expires_at);
            audit(store, "console.engine_mint_credential", &principal_id, detail).await;
            Ok(format!("minted {} for {principal_id}; the secret is shown only now:\n\n    {secret}\n", token.id))
        }
        EngineCommand::Rotate { principal_id, overlap_days, token } => {
            let rotated = identities::rotate(store, &principal_id, token.as_deref(), overlap_days, now).await?;
            let (old, new) = (&rotated.predecessor.id, &rotated.successor.id);
            let detail = format!("credential {old} rotated to {new}; overlap until {}", rotated.overlap_ends_at);
            audit(store, "console.engine_rotate_credential", &principal_id, detail).await;
            Ok(format!(
                "rotated {old} to {new} (both work until {}); the new secret is shown only now:\n\n    {}\n\nconfirm with: toolgate engine confirm {principal_id} {new} (the secret on standard input)\n",
                rotated.overlap_ends_at, rotated.secret
            ))
        }
        EngineCommand::Confirm { principal_id, token_id } => {
            let secret = secret()?;
            let Some(predecessor) = store.credentials.confirm_rotation(&token_id, &secret, &principal_id, now).await?
            else {
                bail!(
                    "no pending rotation of {principal_id} to {token_id} with that secret (toolgate engine list shows them)"
                );
            };
            let detail = format!("rotation to {token_id} confirmed; {predecessor} revoked");
            audit(store, "console.engine_rotation_confirmed", &principal_id, detail).await;
            Ok(format!("confirmed: {token_id} replaces {predecessor}, which is revoked\n"))
        }
        EngineCommand::Assign { principal_id, role, group } => {
            let id = identities::engine_id(&principal_id);
            let change = Change { at: now, by: CONSOLE };
            let added = identities::assign_role(store, &CATALOGUE, &id, &role, group.as_deref(), change).await?;
            let on = group.as_deref().map_or("fleet-wide".to_string(), |g| format!("on group {g}"));
            audit(store, "console.engine_role_assign", &id, format!("{role} {on}; held before: {}", !added)).await;
            Ok(format!("{id} {} {role} {on}\n", if added { "now holds" } else { "already held" }))
        }
        EngineCommand::Unassign { principal_id, role, group } => {
            let id = identities::engine_id(&principal_id);
            let removed = identities::unassign_role(store, &id, &role, group.as_deref(), now).await?;
            let on = group.as_deref().map_or("fleet-wide".to_string(), |g| format!("on group {g}"));
            audit(store, "console.engine_role_unassign", &id, format!("{role} {on}; held before: {removed}")).await;
            Ok(format!("{id} {} {role} {on}\n", if removed { "no longer holds" } else { "did not hold" }))
        }
        EngineCommand::Revoke { principal_id, reason } => {
            let revoke =
                RevokeEngine { principal_id: &principal_id, reason: reason.as_deref(), superseded_by: None, now };
            let revoked = store.engines.revoke_engine(revoke).await?.map_err(refused)?;
            if revoked.changed {
                let detail = format!("revoked with {} live credential(s)", revoked.credentials_revoked);
                audit(store, "console.engine_revoke", &principal_id, detail).await;
            }
            Ok(format!(
                "{principal_id} {} ({} credential(s) revoked)\n",
                if revoked.changed { "is revoked" } else { "was revoked already" },
                revoked.credentials_revoked
            ))
        }
        EngineCommand::Transfer { principal_id, new_owner } => {
            let (previous, after) = store.engines.transfer_engine(&principal_id, &new_owner).await?.map_err(refused)?;
            audit(
                store,
                "console.engine_transfer_owner",
                &principal_id,
                format!("owner {previous} -> {}", after.owner),
            )
            .await;
            Ok(format!("{principal_id} is owned by {} (was {previous})\n", after.owner))
        }
    }
}
