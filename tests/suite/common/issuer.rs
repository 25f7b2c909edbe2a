//! An OAuth issuer run by the test on a loopback port: its discovery document and key set
//! over real HTTP, and access tokens signed with keys it made itself (rcgen, P-256). For the
//! bad-token tests, which need tokens no certified provider would mint; the end-to-end flow
//! with a real provider is scripts/test_clients.sh's (oidc-provider and the Python SDK).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

pub struct Issuer {
    pub url: String,
    /// What its introspection endpoint answers for each opaque token it knows.
    opaque: Arc<Mutex<HashMap<String, Value>>>,
    key: EncodingKey,
    /// Another key, published nowhere, with the same key id: a forgery.
    pub forger: EncodingKey,
    _runtime: tokio::runtime::Runtime,
}

pub const KID: &str = "test-key-1";
/// The client toolgate introspects as (`client_id:secret`).
pub const INTROSPECTION_CLIENT: &str = "rs-client:rs-secret";

fn key_pair() -> (EncodingKey, Value) {
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let point = pair.public_key_raw();
    let jwk = json!({"kty": "EC", "crv": "P-256", "kid": KID, "alg": "ES256", "use": "sig",
                     "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..])});
    (EncodingKey::from_ec_der(&pair.serialize_der()), jwk)
}

/// A free loopback port (for a server whose public URL must be known before it starts).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Issuer {
    pub fn start() -> Issuer {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let url = format!("http://{addr}");
        let (key, jwk) = key_pair();
        let (forger, _) = key_pair();
        let discovery = json!({"issuer": url, "jwks_uri": format!("{url}/jwks"),
                               "introspection_endpoint": format!("{url}/introspect"),
                               "authorization_endpoint": format!("{url}/authorize"),
                               "token_endpoint": format!("{url}/token")})
        .to_string();
        let jwks = json!({"keys": [jwk]}).to_string();
        let opaque: Arc<Mutex<HashMap<String, Value>>> = Arc::default();
        let known = opaque.clone();
        // RFC 7662: this server's introspection client must authenticate; unknown tokens are
        // inactive.
        let introspect = move |headers: axum::http::HeaderMap,
                               axum::Form(form): axum::Form<HashMap<String, String>>| {
            let known = known.clone();
            async move {
                let expected =
                    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(INTROSPECTION_CLIENT));
                if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(expected.as_str()) {
                    return (axum::http::StatusCode::UNAUTHORIZED, "{\"error\":\"invalid_client\"}".to_string());
                }
                let token = form.get("token").cloned().unwrap_or_default();
                let answer = known.lock().unwrap().get(&token).cloned().unwrap_or(json!({"active": false}));
                (axum::http::StatusCode::OK, answer.to_string())
            }
        };
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(move || async move { discovery }))
            .route("/jwks", get(move || async move { jwks }))
            .route("/introspect", post(introspect));
        runtime.spawn(async move { axum::serve(listener, app).await.unwrap() });
        Issuer { url, opaque, key, forger, _runtime: runtime }
    }

    /// Claims for `subject` of this issuer, for `audience`, issued now and living ten minutes.
    pub fn claims(&self, subject: &str, audience: &str, scope: &str) -> Value {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        json!({"iss": self.url, "sub": subject, "aud": audience, "iat": now, "exp": now + 600,
               "scope": scope, "jti": format!("jti-{subject}-{now}")})
    }

    pub fn sign(&self, claims: &Value) -> String {
        sign_with(&self.key, claims)
    }

    /// Makes `token` an opaque token its introspection endpoint answers `answer` for.
    pub fn know_opaque(&self, token: &str, answer: Value) {
        self.opaque.lock().unwrap().insert(token.to_string(), answer);
    }
}

pub fn sign_with(key: &EncodingKey, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(KID.into());
    jsonwebtoken::encode(&header, claims, key).unwrap()
}

/// An unsigned token (`alg: none`), which no server may accept.
pub fn unsigned(claims: &Value) -> String {
    let header = URL_SAFE_NO_PAD.encode(json!({"alg": "none", "typ": "JWT", "kid": KID}).to_string());
    format!("{header}.{}.", URL_SAFE_NO_PAD.encode(claims.to_string()))
}

/// A deployment settings file for a server at `port` trusting `issuer`, with `extra` YAML
/// lines appended under the issuer entry and `mapping` under `oauth`.
pub fn settings(port: u16, issuer: &str, issuer_extra: &str, oauth_extra: &str) -> String {
    format!(
        "public_url: http://127.0.0.1:{port}\noauth:\n  issuers:\n    - issuer: {issuer}\n{issuer_extra}{oauth_extra}"
    )
}
