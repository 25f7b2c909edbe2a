//! Console commands on the store: tokens (and, with the gate, principals and approvals).
//! They open the same SQLite file as a running server (WAL), so they work while it runs.

use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::clock::Clock;
use crate::registry::Tier;
use crate::store::{Approval, AuditEntry, ReviewRefusal, Store, StoreError};

/// The longest an MCP token may live.
pub const MAX_TOKEN_DAYS: i64 = 90;

pub fn open(data_dir: &Path) -> Result<Store> {
    let path = data_dir.join("toolgate.sqlite3");
    if !path.exists() {
        bail!(
            "no store at {}: start the server once (`toolgate serve --data-dir {}`) or pass --data-dir",
            path.display(),
            data_dir.display()
        );
    }
    Store::open(&path).with_context(|| format!("cannot open {}", path.display()))
}

/// `30d`, `12h`, `90m` or plain seconds -> seconds.
pub fn parse_duration(text: &str) -> Result<i64> {
    let text = text.trim();
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let n: i64 = number.parse().with_context(|| format!("`{text}` is not a duration like 30d, 12h or 90m"))?;
    let seconds = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86_400,
        other => bail!("unknown duration unit `{other}` in `{text}`: use d, h, m or s"),
    };
    if seconds <= 0 {
        bail!("a token must live a positive time, not `{text}`");
    }
    Ok(seconds)
}

/// `tier: None` makes an API credential (approvals, audit), for principals who may approve.
pub fn token_create(
    store: &Store,
    principal: &str,
    tier: Option<&str>,
    expires_in: &str,
    name: &str,
) -> Result<String> {
    if let Some(tier) = tier.filter(|t| Tier::from_name(t).is_none()) {
        let known: Vec<&str> = Tier::ALL.iter().map(|t| t.name()).collect();
        bail!("no tier `{tier}`; {}", toolgate_policy::did_you_mean(tier, known.iter().copied()));
    }
    let seconds = parse_duration(expires_in)?;
    if seconds > MAX_TOKEN_DAYS * 86_400 {
        bail!("an MCP token may live at most {MAX_TOKEN_DAYS} days (asked: {expires_in})");
    }
    let Some(p) = store.principal(principal)? else {
        let known: Vec<String> = store.principals()?.into_iter().map(|p| p.name).collect();
        bail!(
            "no principal `{principal}`; {}",
            toolgate_policy::did_you_mean(principal, known.iter().map(String::as_str))
        );
    };
    if tier.is_none() && !crate::gate::rbac::permits_pair(&p.roles, crate::registry::REVIEWER_PERMISSION) {
        bail!("an API credential is for reviewers: `{principal}`'s roles do not grant {}", crate::registry::REVIEWER_PERMISSION);
    }
    let now = Clock::default().now_secs();
    let (record, secret) = store.create_token(principal, tier, name, now, now + seconds)?;
    let kind = tier.map_or("API credential, no MCP tier".to_string(), |t| format!("tier {t}"));
    Ok(format!(
        "created {} for `{principal}` ({kind}, expires in {expires_in}); the secret is shown only now:\n\n    {secret}\n",
        record.id
    ))
}

pub fn token_list(store: &Store) -> Result<String> {
    let now = Clock::default().now_secs();
    let mut out = format!("{:<22} {:<12} {:<12} {:<11} {:<9} name\n", "id", "principal", "tier", "expires in", "state");
    for t in store.tokens(None)? {
        let state = if t.revoked_at.is_some() {
            "revoked"
        } else if t.expires_at <= now {
            "expired"
        } else {
            "active"
        };
        let left = (t.expires_at - now).max(0);
        out.push_str(&format!(
            "{:<22} {:<12} {:<12} {:<11} {:<9} {}\n",
            t.id,
            t.principal,
            t.tier.as_deref().unwrap_or("(none)"),
            format!("{}d{}h", left / 86_400, left % 86_400 / 3600),
            state,
            t.name
        ));
    }
    Ok(out)
}

pub fn token_revoke(store: &Store, id: &str) -> Result<String> {
    if store.revoke_token(id, Clock::default().now_secs())? {
        Ok(format!("revoked {id}\n"))
    } else {
        bail!("no active token `{id}` (`toolgate token list` shows them)")
    }
}

pub fn principal_add(store: &Store, name: &str, roles: &[String]) -> Result<String> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-@".contains(&b)) {
        bail!("principal names are letters, digits and . _ - @ (got `{name}`)");
    }
    if roles.is_empty() {
        bail!("give the principal at least one --role");
    }
    let known: Vec<&str> = crate::registry::ROLES.iter().map(|r| r.name).collect();
    for role in roles {
        if !known.contains(&role.as_str()) {
            bail!("no role `{role}` in policy.yaml; {}", toolgate_policy::did_you_mean(role, known.iter().copied()));
        }
    }
    let existed = store.principal(name)?.is_some();
    store.put_principal(name, roles, Clock::default().now_secs())?;
    Ok(format!("{} principal `{name}` with roles {}\n", if existed { "updated" } else { "added" }, roles.join(", ")))
}

pub fn principal_list(store: &Store) -> Result<String> {
    let mut out = format!("{:<24} roles\n", "principal");
    for p in store.principals()? {
        out.push_str(&format!("{:<24} {}\n", p.name, p.roles.join(", ")));
    }
    Ok(out)
}

pub fn principal_remove(store: &Store, name: &str) -> Result<String> {
    if store.remove_principal(name, Clock::default().now_secs())? {
        Ok(format!("removed principal `{name}` and revoked its tokens\n"))
    } else {
        bail!("no principal `{name}` (`toolgate principal list` shows them)")
    }
}

/// A person's decision on an approval, audited; shared by the HTTP API and the console.
pub fn review(
    store: &Store,
    record: &dyn Fn(AuditEntry),
    clock: &Clock,
    id: &str,
    reviewer: &str,
    approve: bool,
    comment: Option<&str>,
) -> Result<Result<Approval, ReviewRefusal>, StoreError> {
    let outcome = store.review_approval(id, reviewer, approve, comment, clock.now_secs())?;
    let (result, detail) = match &outcome {
        Ok(a) => (
            if approve { "approved" } else { "denied" },
            format!("{} {} for {}", if approve { "approved" } else { "rejected" }, a.definition, a.submitter),
        ),
        Err(refusal) => ("failure", format!("review refused: {refusal}")),
    };
    record(AuditEntry {
        at_ms: clock.now_ms(),
        principal: Some(reviewer.to_string()),
        token_id: None,
        action: "approval.review".into(),
        target: Some(id.to_string()),
        result: result.into(),
        detail: Some(detail),
        correlation_id: None,
    });
    Ok(outcome)
}

fn describe(a: &Approval) -> String {
    format!(
        "{}  {:<9} {:<28} by {:<12} args {}{}\n",
        a.id,
        a.status.label(),
        a.definition,
        a.submitter,
        a.canonical_args,
        a.reviewer.as_ref().map(|r| format!("  (reviewed by {r})")).unwrap_or_default()
    )
}

pub fn approvals_list(store: &Store, status: Option<&str>) -> Result<String> {
    let all = store.approvals(status, None, 1000)?;
    if all.is_empty() {
        return Ok("no approvals\n".into());
    }
    Ok(all.iter().map(describe).collect())
}

pub fn approvals_show(store: &Store, id: &str) -> Result<String> {
    match store.approval(id)? {
        Some(a) => Ok(serde_json::to_string_pretty(&a)? + "\n"),
        None => bail!("no approval `{id}` (`toolgate approvals list` shows them)"),
    }
}

/// The console's decision, as `--as <principal>`, who must be allowed to approve.
pub fn approvals_decide(
    store: &Store,
    id: &str,
    reviewer: &str,
    approve: bool,
    comment: Option<&str>,
) -> Result<String> {
    let Some(p) = store.principal(reviewer)? else {
        bail!("no principal `{reviewer}` (`toolgate principal list` shows them)");
    };
    if !crate::gate::rbac::permits_pair(&p.roles, crate::registry::REVIEWER_PERMISSION) {
        bail!("`{reviewer}`'s roles do not grant {}, so they cannot review", crate::registry::REVIEWER_PERMISSION);
    }
    let record = |e: AuditEntry| {
        if let Err(err) = store.append_audit(std::slice::from_ref(&e)) {
            eprintln!("warning: the audit row could not be written ({err}): {e:?}");
        }
    };
    match review(store, &record, &Clock::default(), id, reviewer, approve, comment)? {
        Ok(a) => Ok(format!(
            "{} {} ({} for {}); the submitter may now call it again with approval_id\n",
            if approve { "approved" } else { "rejected" },
            a.id,
            a.definition,
            a.submitter
        )),
        Err(refusal) => bail!("{refusal}"),
    }
}
