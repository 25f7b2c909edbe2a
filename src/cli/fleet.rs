//! Console commands for the fleet: enrollment tokens, the agents list, revocation, and
//! `agent run` (the endpoint process itself). Like the other console commands they open the
//! server's SQLite file directly, so they work while it runs; a running server notices a
//! revocation made here within a second and disconnects the agent.

use anyhow::{Result, bail};
use toolgate_domain::Clock;
use toolgate_domain::fleet::agent::is_agent_id;
use toolgate_domain::text::escape_controls;
use toolgate_store::Repositories;

use super::console::parse_duration;

/// The most uses one enrollment token may allow (a whole fleet's rollout).
pub const MAX_ENROLL_USES: i64 = 1_000_000;

pub async fn enroll_token_create(store: &Repositories, expires_in: &str, uses: i64) -> Result<String> {
    let seconds = parse_duration(expires_in)?;
    if !(1..=MAX_ENROLL_USES).contains(&uses) {
        bail!("--uses must be between 1 and {MAX_ENROLL_USES} (got {uses})");
    }
    let now = Clock::default().now_ms();
    let (token, secret) = store.fleet.create_enrollment_token(now + seconds * 1000, uses, now).await?;
    Ok(format!(
        "created enrollment token {} ({uses} use{}, expires in {expires_in}); the secret is shown only now:\n\n    {secret}\n\n\
         On each endpoint:\n    toolgate agent run --server http://SERVER:PORT --enroll-token {secret} --state-dir /var/lib/toolgate-agent\n",
        token.id,
        if uses == 1 { "" } else { "s" }
    ))
}

pub async fn enroll_token_list(store: &Repositories) -> Result<String> {
    let now = Clock::default().now_ms();
    let mut out = format!("{:<22} {:<10} {:<12} state\n", "id", "uses", "expires in");
    for t in store.fleet.enrollment_tokens().await? {
        let left = (t.expires_at_ms - now).max(0) / 1000;
        let state = if t.expires_at_ms <= now {
            "expired"
        } else if t.uses >= t.uses_allowed {
            "used up"
        } else {
            "usable"
        };
        out.push_str(&format!(
            "{:<22} {:<10} {:<12} {state}\n",
            t.id,
            format!("{}/{}", t.uses, t.uses_allowed),
            format!("{}h{}m", left / 3600, left % 3600 / 60),
        ));
    }
    Ok(out)
}

pub async fn agent_list(store: &Repositories) -> Result<String> {
    let mut out = format!("{:<22} {:<9} {:<24} {:<28} last seen\n", "agent", "state", "hostname", "os");
    for a in store.fleet.agents().await? {
        // Reported by the agent: escaped, so a hostname cannot rewrite the operator's terminal.
        let (hostname, os) = a.facts.as_ref().map_or(("", ""), |f| (f.hostname.as_str(), f.os_pretty_name.as_str()));
        let (hostname, os) = (escape_controls(hostname), escape_controls(os));
        // The console sees the store, not the server's live connections.
        let state = if a.revoked_at_ms.is_some() { "revoked" } else { "enrolled" };
        let seen = a
            .last_seen_ms
            .map_or("never".to_string(), |ms| format!("{} s ago", (Clock::default().now_ms() - ms) / 1000));
        out.push_str(&format!("{:<22} {state:<9} {hostname:<24} {os:<28} {seen}\n", a.agent_id));
    }
    Ok(out)
}

pub async fn agent_revoke(store: &Repositories, agent_id: &str) -> Result<String> {
    if !is_agent_id(agent_id) {
        bail!("`{agent_id}` is not an agent id (agt- and 16 hex digits; `toolgate agent list` shows them)");
    }
    let now = Clock::default().now_ms();
    if !store.fleet.revoke_agent(agent_id, now).await? {
        bail!("no unrevoked agent `{agent_id}` (`toolgate agent list` shows them)");
    }
    super::console::audit_now(store, "console.agent_revoke", agent_id).await;
    Ok(format!(
        "revoked {agent_id}; a running server disconnects it within a second, and it cannot \
         reconnect without a new enrollment\n"
    ))
}
