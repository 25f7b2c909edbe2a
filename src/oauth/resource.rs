//! This server as an OAuth 2.1 resource server (docs/sign-in.md): which issuers it trusts,
//! what their tokens must be, which tier a token's scope selects, and which roles a person's
//! identity-provider groups bring.

use base64::Engine;
use toolgate_catalogue::deployment::{ClientToolsets, Deployment, GroupRoleMapping, IssuerSettings, Provisioning};
use toolgate_domain::Clock;
use toolgate_domain::catalogue::Catalogue;
use toolgate_domain::groups::GroupRole;
use toolgate_domain::reviews::IdpGrant;
use toolgate_policy::{Decision, TierRules};

use super::console_client::ConsoleClient;
use super::discovery::Discovery;
use super::keys::KeyCache;
use super::{Claims, Expectations, Refused};
use crate::outbound::Outbound;

/// The longest token read (checked before anything is decoded).
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// How long a fetched key set serves before it is fetched again, and how often a token naming
/// an unknown key may cause a fetch.
const KEYS_MAX_AGE_MS: i64 = 3_600_000;
const KEYS_MIN_REFETCH_MS: i64 = 60_000;
/// The groups claim when the deployment names none.
const DEFAULT_GROUPS_CLAIM: &str = "groups";
/// The scope claims when the deployment names none: RFC 9068's, and Okta's and Entra's.
const DEFAULT_SCOPE_CLAIMS: [&str; 2] = ["scope", "scp"];
/// The largest introspection answer read, in bytes.
const INTROSPECTION_MAX_BYTES: u64 = 64 * 1024;

/// One trusted issuer.
pub struct Issuer {
    pub settings: IssuerSettings,
    /// Its introspection client's id and secret, when it checks opaque tokens.
    introspection: Option<(String, String)>,
    expect: Expectations,
    discovery: Discovery,
    keys: tokio::sync::OnceCell<KeyCache>,
    outbound: Outbound,
    clock: Clock,
}

impl Issuer {
    pub fn provisioning(&self) -> Provisioning {
        self.settings.provisioning
    }

    pub fn groups_claim(&self) -> &str {
        self.settings.groups_claim.as_deref().unwrap_or(DEFAULT_GROUPS_CLAIM)
    }

    /// The claims its access tokens' scopes are read from.
    pub fn scope_claims(&self) -> Vec<&str> {
        match &self.settings.scope_claims {
            Some(claims) => claims.iter().map(String::as_str).collect(),
            None => DEFAULT_SCOPE_CLAIMS.to_vec(),
        }
    }

    pub fn discovery(&self) -> &Discovery {
        &self.discovery
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    pub fn outbound(&self) -> &Outbound {
        &self.outbound
    }

    /// Checks a JWT this issuer signed for `audience` (this server's resource, or the
    /// console's client id for an ID token): its claims when valid now.
    pub async fn check(&self, token: &str, audience: Option<&str>) -> Result<Claims, Refusal> {
        let header = super::header(token).map_err(Refusal::Invalid)?;
        let kid = header.kid.ok_or(Refusal::Invalid(Refused::NoKeyId))?;
        let keys = self.keys().await.map_err(Refusal::Unavailable)?;
        let set = keys.keys_for(&kid).await.map_err(|e| Refusal::Unavailable(e.to_string()))?;
        let mut expect = self.expect.clone();
        if let Some(audience) = audience {
            expect.audience = audience.to_string();
        }
        super::validate(token, &set, &expect, self.clock.now_secs()).map_err(Refusal::Invalid)
    }

    /// Asks the issuer about an opaque token (RFC 7662): active, its own, for this resource,
    /// within its time; the same claims a JWT would have given.
    async fn introspect(&self, token: &str) -> Result<Claims, Refusal> {
        let Some((client_id, secret)) = &self.introspection else {
            return Err(Refusal::Invalid(Refused::Malformed(
                "not a JWT, and no issuer introspects opaque tokens".into(),
            )));
        };
        let configured = self.settings.introspection.as_ref().and_then(|i| i.endpoint.clone());
        let endpoint = match configured {
            Some(endpoint) => endpoint,
            None => self
                .discovery
                .metadata()
                .await
                .map_err(Refusal::Unavailable)?
                .introspection_endpoint
                .clone()
                .ok_or_else(|| {
                    Refusal::Unavailable(format!(
                        "the metadata of {} names no introspection_endpoint",
                        self.settings.issuer
                    ))
                })?,
        };
        let form =
            vec![("token".to_string(), token.to_string()), ("token_type_hint".to_string(), "access_token".to_string())];
        let body = self
            .outbound
            .post_form(&endpoint, Some((client_id, secret)), form, INTROSPECTION_MAX_BYTES)
            .await
            .map_err(|e| Refusal::Unavailable(format!("introspection: {e}")))?;
        #[derive(serde::Deserialize)]
        struct Introspected {
            active: bool,
            #[serde(flatten)]
            claims: Claims,
        }
        let answer: Introspected = serde_json::from_slice(&body)
            .map_err(|e| Refusal::Unavailable(format!("introspection answered something else: {e}")))?;
        if !answer.active {
            return Err(Refusal::Invalid(Refused::Inactive));
        }
        let claims = answer.claims;
        if claims.iss.as_deref().is_some_and(|iss| iss != self.settings.issuer) {
            return Err(Refusal::Invalid(Refused::Issuer));
        }
        let audiences = match claims.other.get("aud") {
            Some(serde_json::Value::String(aud)) => vec![aud.as_str()],
            Some(serde_json::Value::Array(auds)) => auds.iter().filter_map(|a| a.as_str()).collect(),
            _ => vec![],
        };
        if !audiences.contains(&self.expect.audience.as_str()) {
            return Err(Refusal::Invalid(Refused::Audience));
        }
        super::check_times(&claims, &self.expect, self.clock.now_secs()).map_err(Refusal::Invalid)?;
        Ok(claims)
    }

    /// Its key cache, made once the key set's address is known (configured, or discovered).
    async fn keys(&self) -> Result<&KeyCache, String> {
        self.keys
            .get_or_try_init(|| async {
                let url = match &self.settings.jwks_uri {
                    Some(url) => url.clone(),
                    None => self.discovery.metadata().await?.jwks_uri.clone().ok_or_else(|| {
                        format!(
                            "the metadata of {} names no jwks_uri; set one in the deployment settings",
                            self.settings.issuer
                        )
                    })?,
                };
                Ok(KeyCache::new(url, self.outbound.clone(), self.clock.clone(), KEYS_MAX_AGE_MS, KEYS_MIN_REFETCH_MS))
            })
            .await
    }
}

/// Why a bearer token that is not a `tg_` token gets no caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// 401 `invalid_token`.
    Invalid(Refused),
    /// 403 `insufficient_scope`: a valid token that selects no tier.
    NoTier,
    /// 503: the issuer's metadata or keys cannot be had right now.
    Unavailable(String),
}

impl Refusal {
    /// Its label in metrics and audit rows.
    pub fn label(&self) -> &'static str {
        match self {
            Refusal::Invalid(refused) => refused.label(),
            Refusal::NoTier => "no_tier",
            Refusal::Unavailable(_) => "issuer_unavailable",
        }
    }
}

/// A valid token and what it selects.
pub struct Verified<'a> {
    pub issuer: &'a Issuer,
    pub claims: Claims,
    pub subject: String,
    pub tier: &'static TierRules,
}

pub struct ResourceServer {
    /// The MCP endpoint's resource URI: the public URL followed by `/mcp`.
    pub resource: String,
    /// Where this resource's metadata is (RFC 9728, the path form).
    pub metadata_url: String,
    pub issuers: Vec<Issuer>,
    /// The scope a 401's challenge asks for.
    pub challenge_scope: &'static str,
    group_roles: Vec<GroupRoleMapping>,
    /// Each OAuth client's default toolsets (deployment `oauth.client_toolsets`).
    client_toolsets: Vec<ClientToolsets>,
    catalogue: &'static Catalogue,
    /// The console's client, and the index of the issuer it signs people in through.
    pub console: Option<(usize, ConsoleClient)>,
}

/// The `iss` a token claims, read before its signature is checked, to pick the keys to check
/// it with (it is checked again, signed, by the validation).
fn claimed_issuer(token: &str) -> Result<String, Refused> {
    let payload = token.split('.').nth(1).ok_or_else(|| Refused::Malformed("not three dot-separated parts".into()))?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|e| Refused::Malformed(format!("payload: {e}")))?;
    #[derive(serde::Deserialize)]
    struct Iss {
        iss: Option<String>,
    }
    let iss: Iss = serde_json::from_slice(&bytes).map_err(|e| Refused::Malformed(format!("payload: {e}")))?;
    iss.iss.ok_or(Refused::MissingClaim("iss"))
}

impl ResourceServer {
    /// The resource server a deployment's `oauth` settings describe (None without them).
    pub fn from_deployment(
        settings: &crate::deployment::Settings,
        catalogue: &'static Catalogue,
        outbound: Outbound,
        clock: Clock,
    ) -> Option<Self> {
        let deployment: &Deployment = &settings.file;
        let oauth = deployment.settings().oauth.as_ref()?;
        let public_url = deployment.settings().public_url.as_deref()?.trim_end_matches('/');
        let resource = format!("{public_url}/mcp");
        let issuers = oauth
            .issuers
            .iter()
            .zip(&deployment.issuer_times)
            .map(|(issuer, &(max_lifetime_secs, leeway_secs))| Issuer {
                expect: Expectations {
                    issuer: issuer.issuer.clone(),
                    audience: issuer.audience.clone().unwrap_or_else(|| resource.clone()),
                    leeway_secs,
                    max_lifetime_secs,
                    max_token_bytes: MAX_TOKEN_BYTES,
                },
                introspection: issuer
                    .introspection
                    .as_ref()
                    .and_then(|i| Some((i.client_id.clone(), settings.secret(&i.client_secret_file)?.to_string()))),
                discovery: Discovery::new(issuer.issuer.clone(), outbound.clone(), clock.clone()),
                keys: tokio::sync::OnceCell::new(),
                settings: issuer.clone(),
                outbound: outbound.clone(),
                clock: clock.clone(),
            })
            .collect();
        let scoped = || catalogue.tiers.iter().filter_map(|t| t.scope.map(|s| (t.name, s)));
        let challenge_scope = match &oauth.challenge_tier {
            Some(tier) => scoped().find(|(name, _)| name == tier).map(|(_, s)| s),
            None => scoped().next().map(|(_, s)| s),
        }?;
        let console = oauth.issuers.iter().enumerate().find_map(|(i, issuer)| {
            let client = issuer.console.as_ref()?;
            let secret = client.client_secret_file.as_deref().and_then(|path| settings.secret(path));
            Some((i, ConsoleClient::new(client, secret.map(str::to_string), public_url)))
        });
        Some(ResourceServer {
            metadata_url: format!("{public_url}/.well-known/oauth-protected-resource/mcp"),
            resource,
            issuers,
            challenge_scope,
            group_roles: oauth.group_roles.clone(),
            client_toolsets: oauth.client_toolsets.clone(),
            catalogue,
            console,
        })
    }

    /// Whether `token` is for this path: anything but a `tg_` token.
    pub fn takes(token: &str) -> bool {
        !token.starts_with("tg_")
    }

    /// Checks `token`: issued by a trusted issuer, for this resource, valid now, selecting one tier.
    pub async fn verify(&self, token: &str) -> Result<Verified<'_>, Refusal> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Refusal::Invalid(Refused::TooLarge(MAX_TOKEN_BYTES)));
        }
        // A JWT names its issuer; an opaque token is asked about (the first issuer that
        // introspects).
        let (issuer, claims) = if token.split('.').count() == 3 {
            let claimed = claimed_issuer(token).map_err(Refusal::Invalid)?;
            let issuer =
                self.issuers.iter().find(|i| i.settings.issuer == claimed).ok_or(Refusal::Invalid(Refused::Issuer))?;
            (issuer, issuer.check(token, None).await?)
        } else {
            let Some(issuer) = self.issuers.iter().find(|i| i.introspection.is_some()) else {
                return Err(Refusal::Invalid(Refused::Malformed(
                    "not a JWT, and no issuer is set to introspect opaque tokens".into(),
                )));
            };
            (issuer, issuer.introspect(token).await?)
        };
        let subject =
            claims.sub.clone().filter(|s| !s.is_empty()).ok_or(Refusal::Invalid(Refused::MissingClaim("sub")))?;
        // Several tier scopes (a client that stepped up asks for the union of what it held and
        // what the 403 named): the highest, policy.yaml listing tiers from least to most trusted.
        let scopes = claims.scopes(&issuer.scope_claims());
        let highest = self.catalogue.tiers.iter().rev().find(|t| t.scope.is_some_and(|s| scopes.contains(&s)));
        match highest {
            Some(tier) => Ok(Verified { issuer, subject, claims, tier }),
            None => Err(Refusal::NoTier),
        }
    }

    /// The first tier's scope (in policy.yaml's order) that allows `securable:operation`.
    pub fn scope_allowing(&self, securable: &str, operation: &str) -> Option<&'static str> {
        self.catalogue.tiers.iter().filter(|t| t.decide(securable, operation) != Decision::Deny).find_map(|t| t.scope)
    }

    /// The toolsets the deployment settings give the token's client (its `client_id`, RFC
    /// 9068, or `azp`) when its requests choose none; None: its tier's.
    pub fn client_toolsets(&self, verified: &Verified) -> Option<toolgate_domain::toolsets::Toolsets> {
        let claim = |name: &str| verified.claims.other.get(name).and_then(serde_json::Value::as_str);
        let client = claim("client_id").or_else(|| claim("azp"))?;
        let chosen = self.client_toolsets.iter().find(|c| c.client_id == client)?;
        let tier_default = self.catalogue.tier_toolsets.get(verified.tier.index).copied().unwrap_or_default();
        toolgate_domain::toolsets::stored(&chosen.toolsets, self.catalogue.toolsets, tier_default)
    }

    /// The roles a person's groups bring (fleet-wide, or on a management group), each with
    /// the groups that bring it.
    pub fn idp_grants(&self, groups: &[&str]) -> Vec<IdpGrant> {
        let mut grants: Vec<IdpGrant> = Vec::new();
        for mapping in self.group_roles.iter().filter(|m| groups.contains(&m.idp_group.as_str())) {
            let group_id = mapping.management_group.clone().unwrap_or_default();
            match grants.iter_mut().find(|g| g.role == mapping.role && g.group_id == group_id) {
                Some(grant) => grant.idp_groups.push(mapping.idp_group.clone()),
                None => grants.push(IdpGrant {
                    role: mapping.role.clone(),
                    group_id,
                    idp_groups: vec![mapping.idp_group.clone()],
                }),
            }
        }
        grants
    }

    /// Every tier's scope, in policy.yaml's order.
    pub fn tier_scopes(&self) -> Vec<&'static str> {
        self.catalogue.tiers.iter().filter_map(|t| t.scope).collect()
    }

    /// Protected Resource Metadata (RFC 9728) for the MCP endpoint.
    pub fn metadata(&self) -> serde_json::Value {
        let scopes = self.tier_scopes();
        serde_json::json!({
            "resource": self.resource,
            "authorization_servers": self.issuers.iter().map(|i| &i.settings.issuer).collect::<Vec<_>>(),
            "scopes_supported": scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "toolgate",
        })
    }

    /// A `WWW-Authenticate` challenge naming this resource's metadata and a scope.
    pub fn challenge(&self, error: Option<&str>, scope: &str) -> String {
        let mut value =
            format!(r#"Bearer realm="toolgate", resource_metadata="{}", scope="{scope}""#, self.metadata_url);
        if let Some(error) = error {
            value.push_str(&format!(r#", error="{error}""#));
        }
        value
    }
}

/// The roles IdP grants give: fleet-wide ones, and those on management groups.
pub fn roles_of(grants: &[IdpGrant]) -> (Vec<String>, Vec<GroupRole>) {
    let fleet = grants.iter().filter(|g| g.group_id.is_empty()).map(|g| g.role.clone()).collect();
    let on_groups = grants
        .iter()
        .filter(|g| !g.group_id.is_empty())
        .map(|g| GroupRole { group_id: g.group_id.clone(), role: g.role.clone() })
        .collect();
    (fleet, on_groups)
}
