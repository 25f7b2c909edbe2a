//! OAuth 2.1 access tokens as a resource server checks them locally (docs/sign-in.md): a JWT signed by one of the issuer's
//! keys (its JWKS), with an allowed asymmetric algorithm (never `none`, never an HMAC secret),
//! issued by the configured issuer, for this server's resource URI (RFC 8707 `aud`), within its
//! `nbf`/`exp` (a small leeway), and living no longer than the server accepts: a JWT cannot be
//! revoked. Time is the caller's (an injected clock), never the process's own.

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

/// The algorithms a token may be signed with: asymmetric only.
pub const ALLOWED_ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// What a token must be for this server.
#[derive(Clone, Debug)]
pub struct Expectations {
    pub issuer: String,
    /// This server's resource URI (the `aud` it must carry).
    pub audience: String,
    /// Clock skew allowed at `nbf` and `exp`, in seconds.
    pub leeway_secs: i64,
    /// The longest `exp - iat` accepted, in seconds.
    pub max_lifetime_secs: i64,
    /// The longest token accepted, in bytes (checked before anything is decoded).
    pub max_token_bytes: usize,
}

/// Why a token is refused (every one answers 401 `invalid_token`; the reason is for the audit
/// row and the metrics).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the token is longer than {0} bytes")]
    TooLarge(usize),
    #[error("the token is not a JWT: {0}")]
    Malformed(String),
    #[error("the token is signed with {0}, which this server does not accept")]
    Algorithm(String),
    #[error("the token names no key id (kid)")]
    NoKeyId,
    #[error("the issuer's key set has no key `{0}`")]
    UnknownKey(String),
    #[error("the signature does not verify")]
    Signature,
    #[error("the token was issued by another issuer")]
    Issuer,
    #[error("the token is for another audience (resource)")]
    Audience,
    #[error("the token expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token lacks `{0}`")]
    MissingClaim(&'static str),
    #[error("the token lives {0} s, longer than this server accepts")]
    TooLong(i64),
    #[error("the issuer says the token is not active (revoked, expired or unknown to it)")]
    Inactive,
}

impl Refused {
    /// Its label in metrics and audit rows.
    pub fn label(&self) -> &'static str {
        match self {
            Refused::TooLarge(_) => "too_large",
            Refused::Malformed(_) => "malformed",
            Refused::Algorithm(_) => "algorithm",
            Refused::NoKeyId => "no_kid",
            Refused::UnknownKey(_) => "unknown_kid",
            Refused::Signature => "signature",
            Refused::Issuer => "issuer",
            Refused::Audience => "audience",
            Refused::Expired => "expired",
            Refused::NotYetValid => "not_yet_valid",
            Refused::MissingClaim(_) => "missing_claim",
            Refused::TooLong(_) => "lifetime",
            Refused::Inactive => "inactive",
        }
    }
}

/// The claims toolgate reads from a valid token.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct Claims {
    #[serde(default)]
    pub sub: Option<String>,
    #[serde(default)]
    pub iss: Option<String>,
    #[serde(default)]
    pub exp: Option<i64>,
    #[serde(default)]
    pub nbf: Option<i64>,
    #[serde(default)]
    pub iat: Option<i64>,
    /// Space-separated scopes (RFC 8693 `scope`).
    #[serde(default)]
    pub scope: Option<String>,
    #[serde(default)]
    pub jti: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub preferred_username: Option<String>,
    #[serde(default)]
    pub email: Option<String>,
    /// An ID token's: the nonce the sign-in asked with, when the person authenticated, how.
    #[serde(default)]
    pub nonce: Option<String>,
    #[serde(default)]
    pub auth_time: Option<i64>,
    #[serde(default)]
    pub acr: Option<String>,
    /// Every other claim (the groups claim's name is a deployment setting).
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

impl Claims {
    /// The scopes the claims `claims` hold together (`scope`, and others such as `scp`).
    pub fn scopes<'a>(&'a self, claims: &[&str]) -> Vec<&'a str> {
        claims.iter().flat_map(|claim| self.list(claim)).collect()
    }

    /// The groups the claim `claim` lists.
    pub fn groups(&self, claim: &str) -> Vec<&str> {
        self.list(claim)
    }

    /// What the claim `claim` lists: an array of strings, or one space-separated string.
    fn list(&self, claim: &str) -> Vec<&str> {
        let value = match claim {
            "scope" => return self.scope.as_deref().unwrap_or_default().split_whitespace().collect(),
            other => self.other.get(other),
        };
        match value {
            Some(serde_json::Value::Array(items)) => items.iter().filter_map(|v| v.as_str()).collect(),
            Some(serde_json::Value::String(text)) => text.split_whitespace().collect(),
            _ => Vec::new(),
        }
    }
}

fn refused(e: jsonwebtoken::errors::Error) -> Refused {
    use jsonwebtoken::errors::ErrorKind;
    match e.kind() {
        ErrorKind::InvalidSignature => Refused::Signature,
        ErrorKind::InvalidIssuer => Refused::Issuer,
        ErrorKind::InvalidAudience => Refused::Audience,
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName | ErrorKind::UnsupportedAlgorithm => {
            Refused::Algorithm(e.to_string())
        }
        _ => Refused::Malformed(e.to_string()),
    }
}

/// A token's header. One jsonwebtoken cannot read names its algorithm when it has one
/// (`none`, `HS256` with a key of ours): that is the refusal, not a malformed token.
pub fn header(token: &str) -> Result<jsonwebtoken::Header, Refused> {
    jsonwebtoken::decode_header(token).map_err(|e| {
        use base64::Engine;
        #[derive(Deserialize)]
        struct Alg {
            alg: String,
        }
        let raw = token.split('.').next().and_then(|h| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(h).ok());
        match raw.and_then(|bytes| serde_json::from_slice::<Alg>(&bytes).ok()) {
            Some(Alg { alg }) => Refused::Algorithm(alg),
            None => Refused::Malformed(e.to_string()),
        }
    })
}

/// Checks `token` against `keys` and `expect` at `now` (Unix seconds); its claims when valid.
pub fn validate(token: &str, keys: &JwkSet, expect: &Expectations, now: i64) -> Result<Claims, Refused> {
    if token.len() > expect.max_token_bytes {
        return Err(Refused::TooLarge(expect.max_token_bytes));
    }
    let header = header(token)?;
    if !ALLOWED_ALGORITHMS.contains(&header.alg) {
        return Err(Refused::Algorithm(format!("{:?}", header.alg)));
    }
    let kid = header.kid.ok_or(Refused::NoKeyId)?;
    let jwk = keys.find(&kid).ok_or_else(|| Refused::UnknownKey(kid.clone()))?;
    let key = DecodingKey::from_jwk(jwk).map_err(|e| Refused::Malformed(format!("key `{kid}`: {e}")))?;
    let mut validation = Validation::new(header.alg);
    validation.set_issuer(&[&expect.issuer]);
    validation.set_audience(&[&expect.audience]);
    // Time is checked below against the caller's clock.
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.required_spec_claims.clear();
    let claims = jsonwebtoken::decode::<Claims>(token, &key, &validation).map_err(refused)?.claims;
    if claims.iss.is_none() {
        return Err(Refused::MissingClaim("iss"));
    }
    check_times(&claims, expect, now)?;
    Ok(claims)
}

/// `exp` and `nbf` at `now` within the leeway, and `exp - iat` within the longest lifetime.
pub fn check_times(claims: &Claims, expect: &Expectations, now: i64) -> Result<(), Refused> {
    let exp = claims.exp.ok_or(Refused::MissingClaim("exp"))?;
    let iat = claims.iat.ok_or(Refused::MissingClaim("iat"))?;
    if exp + expect.leeway_secs <= now {
        return Err(Refused::Expired);
    }
    if claims.nbf.unwrap_or(iat) - expect.leeway_secs > now {
        return Err(Refused::NotYetValid);
    }
    if exp - iat > expect.max_lifetime_secs {
        return Err(Refused::TooLong(exp - iat));
    }
    Ok(())
}

pub mod console_client;
pub mod discovery;
pub mod keys;
pub mod resource;

#[cfg(test)]
mod tests;
