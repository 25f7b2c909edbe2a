//! What the engine-principal tools and `toolgate engine` share (docs/identities.md): the
//! rules of minting, rotating and granting, over the store, written once. Each caller adds its
//! own audit row and answer.

use toolgate_domain::ToolError;
use toolgate_domain::catalogue::Catalogue;
use toolgate_domain::engines::{ENGINE_PREFIX, EngineRecord, EngineRefusal, PrincipalKind};
use toolgate_domain::records::Change;
use toolgate_domain::tokens::{MAX_TOKEN_DAYS, NewToken, PrincipalRecord, TokenRecord, TokenState};
use toolgate_policy::did_you_mean;
use toolgate_store::Repositories;

pub fn refused(refusal: EngineRefusal) -> ToolError {
    match refusal {
        EngineRefusal::Unknown(_) | EngineRefusal::UnknownOwner(_) => ToolError::NotFound(refusal.to_string()),
        other => ToolError::InvalidArguments(other.to_string()),
    }
}

/// The reference names an engine principal by its slug alone in the role tools; both spell
/// the same one.
pub fn engine_id(given: &str) -> String {
    match given.starts_with(ENGINE_PREFIX) {
        true => given.to_string(),
        false => format!("{ENGINE_PREFIX}{given}"),
    }
}

/// The engine principal `id` names, as stored, and its principal row (roles).
pub async fn engine(store: &Repositories, id: &str) -> Result<(EngineRecord, PrincipalRecord), ToolError> {
    let unknown = || refused(EngineRefusal::Unknown(id.to_string()));
    let record = store.engines.engine(id).await?.ok_or_else(unknown)?;
    let principal = store.credentials.principal(id).await?.ok_or_else(unknown)?;
    Ok((record, principal))
}

/// An engine principal that may still be changed: not revoked.
pub async fn live_engine(store: &Repositories, id: &str) -> Result<(EngineRecord, PrincipalRecord), ToolError> {
    let (record, principal) = engine(store, id).await?;
    match record.is_revoked() {
        true => Err(refused(EngineRefusal::Revoked(id.to_string()))),
        false => Ok((record, principal)),
    }
}

/// A new credential for a live engine principal: `tier` or policy.yaml's
/// `engines.credential_tier`, living `ttl_days` (at most [`MAX_TOKEN_DAYS`]). Its record and
/// secret.
pub async fn mint(
    store: &Repositories,
    catalogue: &'static Catalogue,
    id: &str,
    asked: Credential<'_>,
    now: i64,
) -> Result<(TokenRecord, String), ToolError> {
    let Credential { name, ttl_days, tier, toolsets } = asked;
    live_engine(store, id).await?;
    let toolsets = toolsets
        .map(|t| toolgate_domain::toolsets::canonical(t, catalogue.toolsets))
        .transpose()
        .map_err(|e| ToolError::InvalidArguments(format!("toolsets: {e}")))?;
    let tier = match tier.or(catalogue.engines.credential_tier) {
        Some(tier) if catalogue.tier(tier).is_some() => tier,
        Some(tier) => {
            let hint = did_you_mean(tier, catalogue.tier_names());
            return Err(ToolError::InvalidArguments(format!("no tier `{tier}`; {hint}")));
        }
        None => {
            let why = "give `tier`: policy.yaml names no engines.credential_tier to mint with";
            return Err(ToolError::InvalidArguments(why.into()));
        }
    };
    let days = ttl_days.unwrap_or(MAX_TOKEN_DAYS).clamp(1, MAX_TOKEN_DAYS);
    let name = name.map_or_else(|| format!("{id} credential"), str::to_string);
    let new = NewToken {
        principal: id,
        tier: Some(tier),
        name: &name,
        now,
        expires_at: now + days * 86_400,
        toolsets: toolsets.as_deref(),
    };
    Ok(store.credentials.create_token(new).await?)
}

/// What a new engine credential is asked to be; each absent part has its default.
#[derive(Clone, Copy, Debug, Default)]
pub struct Credential<'a> {
    pub name: Option<&'a str>,
    pub ttl_days: Option<i64>,
    pub tier: Option<&'a str>,
    /// The toolsets its client is shown when it chooses none (docs/toolsets.md).
    pub toolsets: Option<&'a str>,
}

/// What a rotation made.
pub struct Rotated {
    pub predecessor: TokenRecord,
    pub successor: TokenRecord,
    pub secret: String,
    pub overlap_ends_at: i64,
}

/// Rotates a live engine principal's credential (`token_id`, or its newest live one): the
/// successor lives as long as the predecessor did, the predecessor until the overlap ends
/// (never past its own expiry). One rotation at a time.
pub async fn rotate(
    store: &Repositories,
    id: &str,
    token_id: Option<&str>,
    overlap_days: i64,
    now: i64,
) -> Result<Rotated, ToolError> {
    live_engine(store, id).await?;
    let credentials = &store.credentials;
    if let Some(pending) = credentials.rotations(id).await?.into_iter().find(|r| r.is_pending(now)) {
        return Err(ToolError::Refused {
            message: format!(
                "a rotation of {id} is pending: {} replaces {} until {} (Unix seconds)",
                pending.successor_id, pending.predecessor_id, pending.overlap_ends_at
            ),
            remediation:
                "confirm it (confirm_engine_rotation with the successor's token_id and secret) or let its overlap end"
                    .into(),
        });
    }
    let mut live: Vec<TokenRecord> =
        credentials.tokens(Some(id)).await?.into_iter().filter(|t| t.state(now) == TokenState::Active).collect();
    live.sort_by_key(|t| (t.created_at, t.id.clone()));
    let predecessor = match token_id {
        Some(wanted) => live.into_iter().find(|t| t.id == wanted).ok_or_else(|| {
            ToolError::NotFound(format!("{id} holds no live credential `{wanted}` (get_engine_principal lists them)"))
        })?,
        None => live.pop().ok_or_else(|| {
            ToolError::NotFound(format!("{id} holds no live credential to rotate: mint one (mint_engine_credential)"))
        })?,
    };
    let overlap = (overlap_days * 86_400).min(predecessor.expires_at - now);
    let lifetime = (predecessor.expires_at - predecessor.created_at).clamp(86_400, MAX_TOKEN_DAYS * 86_400);
    let (successor, secret) = credentials.rotate_token(&predecessor, overlap, now + lifetime, now).await?;
    Ok(Rotated { predecessor, successor, secret, overlap_ends_at: now + overlap })
}

/// A role an engine principal may be given: declared, and not human-only.
pub fn ensure_holdable(catalogue: &'static Catalogue, id: &str, role: &str) -> Result<(), ToolError> {
    if !catalogue.role_names().any(|r| r == role) {
        let hint = did_you_mean(role, catalogue.role_names());
        return Err(ToolError::InvalidArguments(format!("no role `{role}` in policy.yaml; {hint}")));
    }
    match catalogue.engines.refusal_to_hold(PrincipalKind::Engine, id, role) {
        Some(message) => Err(ToolError::Refused {
            message,
            remediation: "give it a role that grants only what the automation needs (docs/identities.md)".into(),
        }),
        None => Ok(()),
    }
}

/// Grants a live engine principal `role`, fleet-wide or on `group_id`; false when it held it.
pub async fn assign_role(
    store: &Repositories,
    catalogue: &'static Catalogue,
    id: &str,
    role: &str,
    group_id: Option<&str>,
    change: Change<'_>,
) -> Result<bool, ToolError> {
    let (_, principal) = live_engine(store, id).await?;
    ensure_holdable(catalogue, id, role)?;
    let credentials = &store.credentials;
    Ok(match group_id {
        Some(group) => credentials
            .assign_group_role(id, group, role, change)
            .await?
            .map_err(|refusal| ToolError::NotFound(refusal.to_string()))?,
        None if principal.roles.iter().any(|r| r == role) => false,
        None => {
            let mut roles = principal.roles.clone();
            roles.push(role.to_string());
            credentials.put_principal(id, &roles, change.at).await?;
            true
        }
    })
}

/// Takes `role` away from an engine principal, fleet-wide or on `group_id`; false when it did
/// not hold it.
pub async fn unassign_role(
    store: &Repositories,
    id: &str,
    role: &str,
    group_id: Option<&str>,
    now: i64,
) -> Result<bool, ToolError> {
    let (_, principal) = engine(store, id).await?;
    let credentials = &store.credentials;
    Ok(match group_id {
        Some(group) => credentials.unassign_group_role(id, group, role).await?,
        None if !principal.roles.iter().any(|r| r == role) => false,
        None => {
            let roles: Vec<String> = principal.roles.iter().filter(|r| *r != role).cloned().collect();
            credentials.put_principal(id, &roles, now).await?;
            true
        }
    })
}
