//! Console commands on the store: tokens (and, with the gate, principals and approvals).
//! They open the same SQLite file as a running server (WAL), so they work while it runs.

use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::clock::Clock;
use crate::registry::Tier;
use crate::store::Store;

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

pub fn token_create(store: &Store, principal: &str, tier: &str, expires_in: &str, name: &str) -> Result<String> {
    if Tier::from_name(tier).is_none() {
        let known: Vec<&str> = Tier::ALL.iter().map(|t| t.name()).collect();
        bail!("no tier `{tier}`; {}", toolgate_codegen::diag::did_you_mean(tier, known.iter().copied()));
    }
    let seconds = parse_duration(expires_in)?;
    if seconds > MAX_TOKEN_DAYS * 86_400 {
        bail!("an MCP token may live at most {MAX_TOKEN_DAYS} days (asked: {expires_in})");
    }
    if store.principal(principal)?.is_none() {
        let known: Vec<String> = store.principals()?.into_iter().map(|p| p.name).collect();
        bail!(
            "no principal `{principal}`; {}",
            toolgate_codegen::diag::did_you_mean(principal, known.iter().map(String::as_str))
        );
    }
    let now = Clock::default().now_secs();
    let (record, secret) = store.create_token(principal, Some(tier), name, now, now + seconds)?;
    Ok(format!(
        "created {} for `{principal}` (tier {tier}, expires in {expires_in}); the secret is shown only now:\n\n    {secret}\n",
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
            bail!(
                "no role `{role}` in policy.yaml; {}",
                toolgate_codegen::diag::did_you_mean(role, known.iter().copied())
            );
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
