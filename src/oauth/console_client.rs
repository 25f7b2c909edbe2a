//! The approver's console as an OpenID Connect client of the organisation's identity provider
//! (docs/sign-in.md): authorization code with PKCE (S256), a `state` and a `nonce` per
//! sign-in, the exact redirect URI `PUBLIC_URL/console/oidc/callback`. An approval's step-up
//! asks for a fresh authentication (`prompt=login`, `max_age=0`, and `acr_values` when the
//! deployment names a level), and the ID token must show one (`auth_time`, `acr`).

use base64::Engine;
use sha2::{Digest, Sha256};
use toolgate_catalogue::deployment::ConsoleClientSettings;
use toolgate_domain::secrets::random_hex;

use super::Claims;
use super::resource::{Issuer, Refusal};

/// The largest token or userinfo answer read, in bytes.
const MAX_ANSWER_BYTES: u64 = 64 * 1024;

pub const CALLBACK_PATH: &str = "/console/oidc/callback";

pub struct ConsoleClient {
    pub client_id: String,
    secret: Option<String>,
    pub redirect_uri: String,
    scopes: String,
    pub step_up_acr: Option<String>,
}

/// A sign-in begun: where to send the browser, and what the callback must match.
pub struct Begun {
    pub url: String,
    pub state: String,
    pub nonce: String,
    pub verifier: String,
}

/// What a finished sign-in proved.
pub struct SignedInAt {
    pub subject: String,
    pub claims: Claims,
}

fn challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

impl ConsoleClient {
    pub fn new(settings: &ConsoleClientSettings, secret: Option<String>, public_url: &str) -> Self {
        let asked = settings.scopes.as_deref().unwrap_or("openid profile email");
        let scopes = match asked.split_whitespace().any(|s| s == "openid") {
            true => asked.to_string(),
            false => format!("openid {asked}"),
        };
        ConsoleClient {
            client_id: settings.client_id.clone(),
            secret,
            redirect_uri: format!("{public_url}{CALLBACK_PATH}"),
            scopes,
            step_up_acr: settings.step_up_acr.clone(),
        }
    }

    /// The authorization request for a sign-in, or (`fresh`) for an approval's step-up.
    pub async fn begin(&self, issuer: &Issuer, fresh: bool) -> Result<Begun, String> {
        let metadata = issuer.discovery().metadata().await?;
        let endpoint = metadata
            .authorization_endpoint
            .as_deref()
            .ok_or_else(|| format!("the metadata of {} names no authorization_endpoint", issuer.settings.issuer))?;
        let mut url = url::Url::parse(endpoint).map_err(|e| format!("authorization_endpoint {endpoint}: {e}"))?;
        let (state, nonce, verifier) = (random_hex::<16>(), random_hex::<16>(), random_hex::<32>());
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &self.client_id)
                .append_pair("redirect_uri", &self.redirect_uri)
                .append_pair("scope", &self.scopes)
                .append_pair("state", &state)
                .append_pair("nonce", &nonce)
                .append_pair("code_challenge", &challenge(&verifier))
                .append_pair("code_challenge_method", "S256");
            if fresh {
                query.append_pair("prompt", "login").append_pair("max_age", "0");
                if let Some(acr) = &self.step_up_acr {
                    query.append_pair("acr_values", acr);
                }
            }
        }
        Ok(Begun { url: url.into(), state, nonce, verifier })
    }

    /// Redeems `code` and checks the ID token (signature, issuer, audience = this client, time,
    /// `nonce`); a person's name, email and groups the ID token lacks come from userinfo.
    pub async fn finish(&self, issuer: &Issuer, code: &str, verifier: &str, nonce: &str) -> Result<SignedInAt, String> {
        let metadata = issuer.discovery().metadata().await?;
        let endpoint = metadata
            .token_endpoint
            .as_deref()
            .ok_or_else(|| format!("the metadata of {} names no token_endpoint", issuer.settings.issuer))?;
        let mut form = vec![
            ("grant_type".to_string(), "authorization_code".to_string()),
            ("code".to_string(), code.to_string()),
            ("redirect_uri".to_string(), self.redirect_uri.clone()),
            ("code_verifier".to_string(), verifier.to_string()),
        ];
        if self.secret.is_none() {
            form.push(("client_id".to_string(), self.client_id.clone()));
        }
        let basic = self.secret.as_deref().map(|secret| (self.client_id.as_str(), secret));
        let body = issuer
            .outbound()
            .post_form(endpoint, basic, form, MAX_ANSWER_BYTES)
            .await
            .map_err(|e| format!("the code was not redeemed: {e}"))?;
        #[derive(serde::Deserialize)]
        struct Tokens {
            id_token: Option<String>,
            access_token: Option<String>,
        }
        let tokens: Tokens = serde_json::from_slice(&body).map_err(|e| format!("the token endpoint's answer: {e}"))?;
        let id_token = tokens.id_token.ok_or("the token endpoint gave no ID token (is `openid` among the scopes?)")?;
        let mut claims = issuer.check(&id_token, Some(&self.client_id)).await.map_err(|refusal| match refusal {
            Refusal::Invalid(refused) => format!("the ID token is refused: {refused}"),
            other => format!("the ID token cannot be checked: {other:?}"),
        })?;
        if claims.nonce.as_deref() != Some(nonce) {
            return Err("the ID token's nonce is not this sign-in's: start again".into());
        }
        let subject = claims.sub.clone().filter(|s| !s.is_empty()).ok_or("the ID token names no subject")?;
        let groups_claim = issuer.groups_claim().to_string();
        let lacking = claims.email.is_none() || claims.name.is_none() || !claims.other.contains_key(&groups_claim);
        if lacking
            && let (Some(userinfo), Some(access)) =
                (metadata.userinfo_endpoint.as_deref(), tokens.access_token.as_deref())
        {
            let body = issuer
                .outbound()
                .get_as(userinfo, Some(access), MAX_ANSWER_BYTES)
                .await
                .map_err(|e| format!("userinfo: {e}"))?;
            let info: Claims = serde_json::from_slice(&body).map_err(|e| format!("userinfo's answer: {e}"))?;
            if info.sub.as_deref() != Some(subject.as_str()) {
                return Err("userinfo answered for another subject than the ID token's".into());
            }
            claims.name = claims.name.or(info.name);
            claims.email = claims.email.or(info.email);
            claims.preferred_username = claims.preferred_username.or(info.preferred_username);
            if let Some(groups) = info.other.get(&groups_claim) {
                claims.other.entry(groups_claim).or_insert_with(|| groups.clone());
            }
        }
        Ok(SignedInAt { subject, claims })
    }
}
