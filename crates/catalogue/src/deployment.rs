//! The deployment settings file (`toolgate serve --config`, docs/sign-in.md): what differs
//! between one organisation's servers and another's (the public URL, the identity providers
//! and how their groups map to roles), never compiled into the policy. Read at start; every
//! problem is reported at once, at `file:line:col`, like the catalogue's.

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::diag::Diagnostic;
use crate::load::{self, Parsed};
use crate::source::SourceFile;

pub mod uploads;
pub use uploads::{UploadLimits, UploadSettings};

/// The longest access-token lifetime a deployment may accept: a JWT cannot be revoked.
pub const MAX_TOKEN_LIFETIME_SECS: i64 = 24 * 3600;
/// The most clock skew a deployment may allow at a token's `nbf` and `exp`.
pub const MAX_LEEWAY_SECS: i64 = 300;

#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[schemars(title = "toolgate deployment settings")]
#[serde(deny_unknown_fields)]
pub struct DeploymentFile {
    /// Where people and clients reach this server (`https://toolgate.example.com`): every
    /// redirect, resource URI and link is built from it. The MCP endpoint's resource URI is
    /// it followed by `/mcp`.
    #[serde(default)]
    pub public_url: Option<String>,
    /// Sign-in through the organisation's identity provider. Absent: only `tg_` tokens.
    #[serde(default)]
    pub oauth: Option<OAuthSettings>,
    /// Upload grants' limits and retention classes (docs/uploads.md). Absent: the defaults.
    #[serde(default)]
    pub uploads: Option<UploadSettings>,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OAuthSettings {
    /// The authorization servers whose access tokens this server accepts.
    pub issuers: Vec<IssuerSettings>,
    /// The tier whose scope a 401's challenge asks for [default: the first tier in
    /// policy.yaml with a scope].
    #[serde(default)]
    pub challenge_tier: Option<String>,
    /// Roles a person holds while the identity provider says they are in a group.
    #[serde(default)]
    pub group_roles: Vec<GroupRoleMapping>,
    /// What each OAuth client is shown when its requests choose no toolsets
    /// (docs/toolsets.md): the client is the access token's `client_id` (RFC 9068) or `azp`.
    #[serde(default)]
    pub client_toolsets: Vec<ClientToolsets>,
}

/// One OAuth client's default toolsets.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClientToolsets {
    /// The client id its access tokens carry.
    pub client_id: String,
    /// tools.yaml toolset names, comma-separated, or `all`, `default`, `dynamic`.
    pub toolsets: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Provisioning {
    /// A person's principal is made the first time one of their tokens is presented.
    #[default]
    OnFirstUse,
    /// Only people linked beforehand (`toolgate principal link`) are let in.
    PreProvisioned,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IssuerSettings {
    /// The issuer identifier, exactly as its tokens' `iss` says (`https://idp.example.com/realms/fleet`).
    pub issuer: String,
    /// The `aud` its access tokens carry for this server [default: the resource URI].
    #[serde(default)]
    pub audience: Option<String>,
    /// Its key set [default: `jwks_uri` from its discovery document].
    #[serde(default)]
    pub jwks_uri: Option<String>,
    #[serde(default)]
    pub provisioning: Provisioning,
    /// The claim that lists a person's groups [default: `groups`].
    #[serde(default)]
    pub groups_claim: Option<String>,
    /// The claims that hold an access token's scopes, each a space-separated string or an
    /// array of strings; what they hold together is read [default: `scope` (RFC 9068) and
    /// `scp` (Okta's array, Entra's string)].
    #[serde(default)]
    pub scope_claims: Option<Vec<String>>,
    /// The longest `exp - iat` accepted (`1h`, `30m`) [default: 1h; at most 24h].
    #[serde(default)]
    pub max_token_lifetime: Option<String>,
    /// Clock skew allowed at `nbf` and `exp` (`60s`) [default: 60s; at most 5m].
    #[serde(default)]
    pub leeway: Option<String>,
    /// The approver's console signs people in through this issuer (one issuer at most).
    #[serde(default)]
    pub console: Option<ConsoleClientSettings>,
    /// Opaque (non-JWT) access tokens are checked by this issuer's introspection endpoint
    /// (RFC 7662), as this client.
    #[serde(default)]
    pub introspection: Option<IntrospectionSettings>,
}

/// This server as a client of an issuer's introspection endpoint.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IntrospectionSettings {
    pub client_id: String,
    /// A file holding the client's secret (read at start).
    pub client_secret_file: String,
    /// The endpoint [default: `introspection_endpoint` from the issuer's metadata].
    #[serde(default)]
    pub endpoint: Option<String>,
}

impl DeploymentFile {
    /// Every secret file the settings name, to be read at start.
    pub fn secret_files(&self) -> Vec<&str> {
        let issuers = self.oauth.iter().flat_map(|o| &o.issuers);
        issuers
            .flat_map(|i| {
                let console = i.console.as_ref().and_then(|c| c.client_secret_file.as_deref());
                let introspection = i.introspection.as_ref().map(|c| c.client_secret_file.as_str());
                console.into_iter().chain(introspection)
            })
            .collect()
    }
}

/// The console as a client of the identity provider (authorization code with PKCE).
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsoleClientSettings {
    /// The client id registered at the IdP; its redirect URI is PUBLIC_URL/console/oidc/callback.
    pub client_id: String,
    /// A file holding the client's secret (read at start) [absent: a public client].
    #[serde(default)]
    pub client_secret_file: Option<String>,
    /// The scopes asked for [default: `openid profile email`]; `openid` is always asked for.
    #[serde(default)]
    pub scopes: Option<String>,
    /// The `acr` an approval's fresh sign-in must reach (asked for as `acr_values`), when the
    /// IdP offers levels (e.g. one that means multi-factor).
    #[serde(default)]
    pub step_up_acr: Option<String>,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupRoleMapping {
    /// The group as the identity provider names it in the groups claim.
    pub idp_group: String,
    /// A role policy.yaml declares.
    pub role: String,
    /// A management group's id: the role then covers that group's agents only.
    #[serde(default)]
    pub management_group: Option<String>,
}

/// What the file is checked against: the compiled policy's tiers (with their scopes) and
/// roles, and the retention classes the catalogue's `mint_upload_grant` offers.
pub struct PolicyNames<'a> {
    pub tiers: Vec<(&'a str, Option<&'a str>)>,
    pub roles: Vec<&'a str>,
    pub retention_classes: Vec<&'a str>,
    /// tools.yaml's toolsets.
    pub toolsets: Vec<&'a str>,
}

/// A checked file: its settings, with durations in seconds.
#[derive(Debug)]
pub struct Deployment {
    pub parsed: Parsed<DeploymentFile>,
    /// Per issuer, in order: (max token lifetime, leeway), seconds.
    pub issuer_times: Vec<(i64, i64)>,
    pub uploads: UploadLimits,
}

impl Deployment {
    pub fn settings(&self) -> &DeploymentFile {
        &self.parsed.model
    }

    /// A problem found after the file was read (a management group the store does not
    /// have), rendered like the file's own: at the node `pointer` names.
    pub fn problem(&self, pointer: &str, message: impl Into<String>, help: &str) -> String {
        let file = &self.parsed.file;
        Diagnostic::error(&file.name, self.parsed.map.value(pointer), message).help(help).render(Some(&file.text))
    }
}

/// `30d`, `12h`, `90m`, `45s` or plain seconds; positive.
pub fn parse_duration(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let n: i64 = number.parse().map_err(|_| format!("`{text}` is not a duration like 30d, 12h or 90m"))?;
    let seconds = match unit {
        "" | "s" => Some(n),
        "m" => n.checked_mul(60),
        "h" => n.checked_mul(3600),
        "d" => n.checked_mul(86_400),
        other => return Err(format!("unknown duration unit `{other}` in `{text}`: use d, h, m or s")),
    };
    match seconds {
        Some(s) if s > 0 => Ok(s),
        Some(_) => Err(format!("a duration must be positive, not `{text}`")),
        None => Err(format!("`{text}` is too long a duration")),
    }
}

/// A URL this server serves or calls: absolute, http(s), no query or fragment, and https
/// unless its host is this machine (a test's provider).
fn check_url(text: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(text).map_err(|e| format!("`{text}` is not a URL: {e}"))?;
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!("`{text}` may not have a query or a fragment"));
    }
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match url.scheme() {
        "https" => Ok(url),
        "http" if loopback => Ok(url),
        "http" => Err(format!(
            "`{text}` must be https: OAuth tokens and redirects never travel in the clear (plain http is only for this machine's own addresses)"
        )),
        other => Err(format!("`{text}` has the scheme `{other}`: use https")),
    }
}

/// Reads and checks the file.
pub fn check(file: &SourceFile, policy: &PolicyNames) -> Result<Deployment, Vec<Diagnostic>> {
    // A file of comments only sets nothing (YAML reads it as null, not as a mapping).
    let blank = file.text.lines().all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'));
    let parsed = if blank {
        load::parse::<DeploymentFile>(&SourceFile::new(file.name.clone(), "{}"))?
    } else {
        load::parse::<DeploymentFile>(file)?
    };
    let mut errors = Vec::new();
    let error = |pointer: &str, message: String| Diagnostic::error(&file.name, parsed.map.value(pointer), message);
    let settings = &parsed.model;
    if let Some(public_url) = &settings.public_url
        && let Err(e) = check_url(public_url)
    {
        errors.push(error("/public_url", format!("public_url: {e}")));
    }
    let mut issuer_times = Vec::new();
    if let Some(oauth) = &settings.oauth {
        if settings.public_url.is_none() {
            errors.push(
                error("/oauth", "oauth needs public_url: it is the resource URI tokens are issued for".into())
                    .help("add `public_url: https://toolgate.example.com` (where clients reach this server)"),
            );
        }
        if oauth.issuers.is_empty() {
            errors.push(error("/oauth/issuers", "oauth names no issuer".into()));
        }
        let mut seen = BTreeSet::new();
        let mut consoles = 0;
        for (i, issuer) in oauth.issuers.iter().enumerate() {
            let at = |key: &str| format!("/oauth/issuers/{i}/{key}");
            if let Err(e) = check_url(&issuer.issuer) {
                errors.push(error(&at("issuer"), format!("issuer: {e}")));
            }
            if !seen.insert(issuer.issuer.as_str()) {
                errors.push(error(&at("issuer"), format!("the issuer `{}` is listed twice", issuer.issuer)));
            }
            if let Some(jwks) = &issuer.jwks_uri
                && let Err(e) = check_url(jwks)
            {
                errors.push(error(&at("jwks_uri"), format!("jwks_uri: {e}")));
            }
            if let Some(endpoint) = issuer.introspection.as_ref().and_then(|i| i.endpoint.as_ref())
                && let Err(e) = check_url(endpoint)
            {
                errors.push(error(&at("introspection/endpoint"), format!("introspection.endpoint: {e}")));
            }
            if let Some(console) = &issuer.console {
                if console.client_id.trim().is_empty() {
                    errors.push(error(&at("console/client_id"), "console.client_id is empty".into()));
                }
                if consoles > 0 {
                    errors.push(
                        error(&at("console"), "another issuer already signs people in to the console".into())
                            .help("the console signs in through one identity provider: keep `console` on one issuer"),
                    );
                }
                consoles += 1;
            }
            let mut time = |key: &str, text: Option<&String>, default: i64, max: i64| {
                let Some(text) = text else { return default };
                match parse_duration(text) {
                    Ok(secs) if secs <= max => secs,
                    Ok(_) => {
                        errors
                            .push(error(&at(key), format!("{key} `{text}` is longer than the most allowed, {max} s")));
                        default
                    }
                    Err(e) => {
                        errors.push(error(&at(key), format!("{key}: {e}")));
                        default
                    }
                }
            };
            let lifetime =
                time("max_token_lifetime", issuer.max_token_lifetime.as_ref(), 3600, MAX_TOKEN_LIFETIME_SECS);
            let leeway = time("leeway", issuer.leeway.as_ref(), 60, MAX_LEEWAY_SECS);
            issuer_times.push((lifetime, leeway));
        }
        let scoped: Vec<&str> = policy.tiers.iter().filter(|(_, s)| s.is_some()).map(|(n, _)| *n).collect();
        if scoped.is_empty() {
            errors.push(
                error("/oauth", "no tier in policy.yaml has a scope, so no access token could have a tier".into())
                    .help("give the tiers scopes in policy.yaml (`scope: toolgate:readonly`) and rebuild"),
            );
        }
        if let Some(tier) = &oauth.challenge_tier
            && !scoped.contains(&tier.as_str())
        {
            errors.push(
                error("/oauth/challenge_tier", format!("challenge_tier `{tier}` is not a tier with a scope"))
                    .help(toolgate_policy::did_you_mean(tier, scoped.iter().copied())),
            );
        }
        for (i, mapping) in oauth.group_roles.iter().enumerate() {
            if !policy.roles.contains(&mapping.role.as_str()) {
                errors.push(
                    error(&format!("/oauth/group_roles/{i}/role"), format!("role `{}` is not declared", mapping.role))
                        .help(toolgate_policy::did_you_mean(&mapping.role, policy.roles.iter().copied())),
                );
            }
        }
        let words = || policy.toolsets.iter().copied().chain(["all", "default", "dynamic"]);
        for (i, client) in oauth.client_toolsets.iter().enumerate() {
            let named: Vec<&str> = client.toolsets.split(',').map(str::trim).filter(|w| !w.is_empty()).collect();
            let at = format!("/oauth/client_toolsets/{i}/toolsets");
            if named.is_empty() {
                errors.push(error(&at, "toolsets is empty: name toolsets, or `all`, `default`, `dynamic`".into()));
            }
            for name in named.into_iter().filter(|n| !words().any(|w| w == *n)) {
                errors.push(
                    error(&at, format!("client `{}`: unknown toolset `{name}`", client.client_id))
                        .help(toolgate_policy::did_you_mean(name, words())),
                );
            }
        }
    }
    let uploads = uploads::check(settings.uploads.as_ref(), &policy.retention_classes).unwrap_or_else(|problems| {
        for (pointer, message, help) in problems {
            let problem = error(&pointer, format!("{}: {message}", &pointer[1..].replace('/', ".")));
            errors.push(if help.is_empty() { problem } else { problem.help(help) });
        }
        uploads::check(None, &[]).expect("the defaults are good")
    });
    if errors.is_empty() {
        Ok(Deployment { parsed, issuer_times, uploads })
    } else {
        crate::diag::sort(&mut errors);
        Err(errors)
    }
}

#[cfg(test)]
mod tests;
