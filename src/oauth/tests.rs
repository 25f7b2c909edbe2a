//! Access-token validation against keys made here (rcgen): every refusal the issue names.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{EncodingKey, Header};
use serde_json::{Value, json};

use super::*;

const NOW: i64 = 1_800_000_000;
const ISSUER: &str = "https://idp.example/realms/fleet";
const AUDIENCE: &str = "https://toolgate.example/mcp";

struct Signer {
    key: EncodingKey,
    jwk: Value,
}

fn signer(kid: &str) -> Signer {
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let point = pair.public_key_raw();
    assert_eq!((point.len(), point[0]), (65, 4), "an uncompressed P-256 point");
    let jwk = json!({"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig",
                     "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..])});
    Signer { key: EncodingKey::from_ec_der(&pair.serialize_der()), jwk }
}

fn keys(signers: &[&Signer]) -> JwkSet {
    serde_json::from_value(json!({"keys": signers.iter().map(|s| s.jwk.clone()).collect::<Vec<_>>()})).unwrap()
}

fn expect() -> Expectations {
    Expectations {
        issuer: ISSUER.into(),
        audience: AUDIENCE.into(),
        leeway_secs: 30,
        max_lifetime_secs: 3600,
        max_token_bytes: 8192,
    }
}

fn claims() -> Value {
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "u-1", "iat": NOW - 60, "exp": NOW + 600,
           "scope": "openid toolgate:operator", "groups": ["fleet-ops"], "email": "ann@example.com"})
}

fn token(signer: &Signer, kid: &str, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(&header, claims, &signer.key).unwrap()
}

fn check(token: &str, keys: &JwkSet) -> Result<Claims, Refused> {
    validate(token, keys, &expect(), NOW)
}

#[test]
fn a_token_from_the_issuer_for_this_server_is_valid() {
    let s = signer("k1");
    let got = check(&token(&s, "k1", &claims()), &keys(&[&s])).unwrap();
    assert_eq!(got.sub.as_deref(), Some("u-1"));
    assert_eq!(got.scopes(&["scope", "scp"]), ["openid", "toolgate:operator"]);
    assert_eq!((got.groups("groups"), got.email.as_deref()), (vec!["fleet-ops"], Some("ann@example.com")));
    assert_eq!(got.groups("roles"), Vec::<&str>::new(), "another claim lists nothing");
}

#[test]
fn forged_foreign_and_misdirected_tokens_are_refused() {
    let (s, other) = (signer("k1"), signer("k1"));
    let set = keys(&[&s]);
    assert_eq!(check(&token(&other, "k1", &claims()), &set), Err(Refused::Signature), "another key, the same kid");
    assert_eq!(check(&token(&s, "k9", &claims()), &set), Err(Refused::UnknownKey("k9".into())));
    let mut wrong = claims();
    wrong["aud"] = "https://elsewhere.example/mcp".into();
    assert_eq!(check(&token(&s, "k1", &wrong), &set), Err(Refused::Audience));
    let mut wrong = claims();
    wrong["iss"] = "https://evil.example".into();
    assert_eq!(check(&token(&s, "k1", &wrong), &set), Err(Refused::Issuer));
    // A payload edited after signing.
    let good = token(&s, "k1", &claims());
    let parts: Vec<&str> = good.split('.').collect();
    let mut edited = claims();
    edited["scope"] = "toolgate:supervised".into();
    let tampered = format!("{}.{}.{}", parts[0], URL_SAFE_NO_PAD.encode(edited.to_string()), parts[2]);
    assert_eq!(check(&tampered, &set), Err(Refused::Signature));
}

#[test]
fn no_algorithm_and_shared_secrets_are_never_accepted() {
    let s = signer("k1");
    let set = keys(&[&s]);
    let b64 = |v: Value| URL_SAFE_NO_PAD.encode(v.to_string());
    let unsigned = format!("{}.{}.", b64(json!({"alg": "none", "kid": "k1"})), b64(claims()));
    let refused = check(&unsigned, &set).unwrap_err();
    assert_eq!(refused, Refused::Algorithm("none".into()), "alg none is named as such");
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("k1".into());
    let hmac = jsonwebtoken::encode(&header, &claims(), &EncodingKey::from_secret(b"guessable").unwrap()).unwrap();
    assert!(matches!(check(&hmac, &set), Err(Refused::Algorithm(_))));
    let mut header = Header::new(Algorithm::ES256);
    header.kid = None;
    let anonymous = jsonwebtoken::encode(&header, &claims(), &s.key).unwrap();
    assert_eq!(check(&anonymous, &set), Err(Refused::NoKeyId));
}

#[test]
fn time_is_judged_at_the_edges_with_the_leeway() {
    let s = signer("k1");
    let set = keys(&[&s]);
    let at = |exp: i64, nbf: Option<i64>| {
        let mut c = claims();
        c["exp"] = exp.into();
        if let Some(nbf) = nbf {
            c["nbf"] = nbf.into();
        }
        check(&token(&s, "k1", &c), &set)
    };
    assert_eq!(at(NOW - 30, None), Err(Refused::Expired), "exp + leeway reached");
    assert!(at(NOW - 29, None).is_ok(), "within the leeway");
    assert_eq!(at(NOW + 600, Some(NOW + 31)), Err(Refused::NotYetValid));
    assert!(at(NOW + 600, Some(NOW + 30)).is_ok(), "within the leeway");
    let mut long = claims();
    long["exp"] = (NOW - 60 + 3601).into();
    assert_eq!(check(&token(&s, "k1", &long), &set), Err(Refused::TooLong(3601)));
    let mut no_exp = claims();
    no_exp.as_object_mut().unwrap().remove("exp");
    assert_eq!(check(&token(&s, "k1", &no_exp), &set), Err(Refused::MissingClaim("exp")));
}

#[test]
fn a_huge_token_is_refused_before_it_is_read() {
    let set = keys(&[&signer("k1")]);
    assert_eq!(check(&"a".repeat(9000), &set), Err(Refused::TooLarge(8192)));
    assert!(matches!(check("not.a.jwt", &set), Err(Refused::Malformed(_))));
}
