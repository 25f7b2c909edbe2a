//! MCP callers that present an access token from the organisation's identity provider
//! (docs/sign-in.md): the token checked ([`crate::oauth::resource`]), the person found by issuer
//! and subject (made on first use, when the deployment lets it), their roles with those their
//! groups bring, and the tier the token's scope selects. A checked token is kept for the
//! credential cache's lifetime (never past its own end), so a removed principal or a changed
//! role takes effect as fast as for `tg_` tokens.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderValue, StatusCode, header};
use sha2::{Digest, Sha256};
use toolgate_catalogue::deployment::Provisioning;
use toolgate_domain::audit::{AuditEvent, AuditOutcome, AuditSink, TargetType};
use toolgate_domain::engines::PrincipalKind;
use toolgate_domain::reviews::IdpGrant;
use toolgate_domain::{Caller, CredentialKind, Principal, StoreError};
use toolgate_store::{FederatedIdentity, NewFederated, Seen, Tombstone};

use super::admission::Connection;
use super::auth_failures::audit_failure;
use super::{ApiError, AppState};
use crate::oauth::Claims;
use crate::oauth::resource::{Issuer, Refusal, ResourceServer, roles_of};

/// Checked tokens kept at once; past it, the expired ones go, then all.
const MAX_ENTRIES: usize = 10_000;
/// A person's name and email are written back at most this often.
const SEEN_EVERY_MS: i64 = 60_000;

struct Entry {
    caller: Arc<Caller>,
    until_ms: i64,
}

pub struct OAuthCallers {
    ttl_ms: i64,
    entries: Mutex<HashMap<[u8; 32], Entry>>,
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl OAuthCallers {
    pub fn new(ttl_ms: i64) -> Self {
        OAuthCallers { ttl_ms, entries: Mutex::default() }
    }

    fn get(&self, key: &[u8; 32], now_ms: i64) -> Option<Arc<Caller>> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.get(key).filter(|e| e.until_ms > now_ms).map(|e| e.caller.clone())
    }

    fn put(&self, key: [u8; 32], caller: Arc<Caller>, expires_ms: i64, now_ms: i64) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, e| e.until_ms > now_ms);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key, Entry { caller, until_ms: expires_ms.min(now_ms + self.ttl_ms) });
    }
}

/// The answer to a refused access token: 401 `invalid_token`, 403 `insufficient_scope`, or 503.
fn refusal_response(server: &ResourceServer, refusal: &Refusal) -> ApiError {
    let challenge = |error: &str, scope: &str| {
        HeaderValue::from_str(&server.challenge(Some(error), scope)).unwrap_or(HeaderValue::from_static("Bearer"))
    };
    let scopes = || server.tier_scopes().join(", ");
    match refusal {
        Refusal::Invalid(refused) => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            format!("the access token is refused: {refused}; sign in again"),
        )
        .with_header_value(header::WWW_AUTHENTICATE, challenge("invalid_token", server.challenge_scope)),
        Refusal::NoTier => ApiError::new(
            StatusCode::FORBIDDEN,
            "insufficient_scope",
            format!("the access token selects no tier: ask for exactly one of {}", scopes()),
        )
        .with_header_value(header::WWW_AUTHENTICATE, challenge("insufficient_scope", server.challenge_scope)),
        Refusal::Unavailable(why) => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "issuer_unavailable", format!("{why}; retry shortly"))
                .with_header(header::RETRY_AFTER, "10")
        }
    }
}

/// The principal `subject` of `issuer` is: linked already, made now, or None (the deployment
/// lets in only people linked beforehand). MCP and the console both sign people in here.
/// Who signed in: a linked (or just provisioned) person, or why nobody.
pub enum Person {
    Known(FederatedIdentity),
    /// Unknown here, and the deployment provisions nobody on first use.
    NotProvisioned,
    /// Its principal was removed: blocked until an administrator re-admits it.
    Removed(Tombstone),
}

pub async fn person(
    state: &AppState,
    from: &Issuer,
    subject: &str,
    claims: &Claims,
    grants: &[IdpGrant],
    now: i64,
) -> Result<Person, StoreError> {
    let federated = &state.services.repositories().federated;
    let issuer = &from.settings.issuer;
    if let Some(identity) = federated.federated(issuer, subject).await? {
        let changed = (claims.name.is_some() && claims.name != identity.display_name)
            || (claims.email.is_some() && claims.email != identity.email)
            || identity.idp_grants != grants;
        if changed || identity.last_seen_at.is_none_or(|at| now - at >= SEEN_EVERY_MS) {
            let seen = Seen {
                issuer,
                subject,
                display_name: claims.name.as_deref(),
                email: claims.email.as_deref(),
                idp_grants: grants,
                now,
            };
            federated.seen_federated(seen).await?;
        }
        return Ok(Person::Known(identity));
    }
    // A removed person does not come back through just-in-time provisioning.
    if let Some(tombstone) = federated.tombstone(issuer, subject).await? {
        return Ok(Person::Removed(tombstone));
    }
    if from.provisioning() == Provisioning::PreProvisioned {
        return Ok(Person::NotProvisioned);
    }
    let hint = claims.preferred_username.as_deref().or(claims.email.as_deref()).unwrap_or(subject);
    let new = NewFederated {
        issuer,
        subject,
        name_hint: hint,
        display_name: claims.name.as_deref(),
        email: claims.email.as_deref(),
        idp_grants: grants,
        now,
    };
    let made = federated.provision_federated(new).await?;
    let detail = format!("first sign-in of subject {subject} from {issuer}: principal made with no roles of its own");
    let event = AuditEvent::new(now, "principal.provisioned", AuditOutcome::Success)
        .by_principal(&made.principal)
        .target(TargetType::Principal, made.principal.clone())
        .detail(detail)
        .correlation(state.mcp.correlation_id());
    state.services.audit().record(event);
    Ok(Person::Known(made))
}

/// The MCP caller an access token is, or the refusal (audited, counted by reason).
pub async fn oauth_caller(
    state: &AppState,
    server: &ResourceServer,
    token: &str,
    connection: &Connection,
) -> Result<Arc<Caller>, ApiError> {
    let now_ms = state.services.clock().now_ms();
    let key = digest(token);
    if let Some(caller) = state.oauth_callers.get(&key, now_ms) {
        connection.authenticated();
        return Ok(caller);
    }
    let verified = server.verify(token).await.map_err(|refusal| {
        crate::metrics::token_refused(refusal.label());
        audit_failure(state, connection, &format!("access token refused ({}): {refusal:?}", refusal.label()));
        refusal_response(server, &refusal)
    })?;
    let grants = server.idp_grants(&verified.claims.groups(verified.issuer.groups_claim()));
    let identity = match person(state, verified.issuer, &verified.subject, &verified.claims, &grants, now_ms).await? {
        Person::Known(identity) => identity,
        Person::Removed(tombstone) => {
            crate::metrics::token_refused("principal_removed");
            let detail = format!(
                "subject {} of {} was principal {}, removed at {}",
                tombstone.subject, tombstone.issuer, tombstone.principal, tombstone.removed_at
            );
            audit_failure(state, connection, &detail);
            return Err(ApiError::unauthorized(
                "your principal was removed from this server: an administrator re-admits you (toolgate principal readmit)",
                true,
            ));
        }
        Person::NotProvisioned => return Err(not_provisioned(state, connection, &verified)),
    };
    let record = state.services.repositories().credentials.principal(&identity.principal).await?;
    let Some(record) = record.filter(|r| r.kind == PrincipalKind::Person) else {
        crate::metrics::token_refused("principal_removed");
        audit_failure(
            state,
            connection,
            &format!("principal {} of subject {} is gone", identity.principal, verified.subject),
        );
        return Err(ApiError::unauthorized("your principal was removed from this server; ask an administrator", true));
    };
    let (mut roles, mut group_roles) = (record.roles, record.group_roles);
    let (idp_roles, idp_group_roles) = roles_of(&grants);
    roles.extend(idp_roles.into_iter().filter(|r| !roles.contains(r)).collect::<Vec<_>>());
    group_roles.extend(idp_group_roles.into_iter().filter(|r| !group_roles.contains(r)).collect::<Vec<_>>());
    let token_id = match &verified.claims.jti {
        Some(jti) => format!("oauth:{jti}"),
        None => format!("oauth:{}", hex(&key[..8])),
    };
    let caller = Arc::new(Caller {
        principal: Principal { name: record.name, roles, group_roles, kind: PrincipalKind::Person },
        token_id,
        tier: Some(verified.tier),
        tier_name: verified.tier.name.to_string(),
        credential: CredentialKind::AccessToken,
        toolsets: server.client_toolsets(&verified),
    });
    let expires_ms = verified.claims.exp.unwrap_or_default().saturating_mul(1000);
    state.oauth_callers.put(key, caller.clone(), expires_ms, now_ms);
    connection.authenticated();
    Ok(caller)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The answer to a person this server does not know, where nobody is provisioned on first use.
fn not_provisioned(
    state: &AppState,
    connection: &Connection,
    verified: &crate::oauth::resource::Verified<'_>,
) -> ApiError {
    crate::metrics::token_refused("not_provisioned");
    let (subject, issuer) = (&verified.subject, &verified.issuer.settings.issuer);
    audit_failure(state, connection, &format!("subject {subject} of {issuer} is not provisioned"));
    ApiError::forbidden(
        "not_provisioned",
        format!(
            "you signed in as subject `{subject}` of {issuer}, which this server does not know: ask an administrator to run `toolgate principal link NAME --issuer {issuer} --subject {subject}`"
        ),
    )
}
