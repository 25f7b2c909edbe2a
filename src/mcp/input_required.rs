//! 2026-07-28's questions to the client (multi round-trip requests): a call whose handler
//! asks something it has no answer for ends with `resultType: "input_required"`, naming each
//! open question under its key, and a `requestState` the client echoes on its retry.
//!
//! The state is `base64url(payload).base64url(HMAC-SHA256(key, payload))`. The payload binds
//! the principal, the method, the tool and a digest of the canonical arguments, expires after
//! [`STATE_TTL_SECS`], carries a nonce the server accepts once, and holds the answers of the
//! earlier rounds (the client sends only the latest round's). A state that fails any check is
//! a JSON-RPC error, never a prompt again: only an expired one is asked afresh.

use std::collections::HashMap;
use std::sync::Mutex;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{KeyInit, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use toolgate_domain::client::{AskFuture, ClientChannel};
use toolgate_domain::secrets::{hex, random_hex};
use toolgate_domain::{AskError, ClientMethod};

/// How long a round's state stays good: long enough for a person to answer a form.
pub const STATE_TTL_SECS: i64 = 600;
const STATE_VERSION: u8 = 1;

type HmacSha256 = hmac::Hmac<Sha256>;

/// What a `requestState` says, once its MAC checks out.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct Payload {
    v: u8,
    /// The JSON-RPC method (`tools/call`).
    m: String,
    tool: String,
    /// SHA-256 of the canonical arguments.
    args: String,
    sub: String,
    iat: i64,
    exp: i64,
    nonce: String,
    /// Earlier rounds' answers, by key.
    answers: Map<String, Value>,
}

/// Why a `requestState` is refused (each a -32602).
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum StateError {
    #[error("invalid requestState: it was not issued by this server or was altered")]
    Forged,
    #[error("invalid requestState: it was issued for another {0}")]
    Mismatch(&'static str),
    #[error("this requestState was already used: call again without it to be asked afresh")]
    Reused,
}

/// What a retry brings: the answers to use, and whether they came with a state this server
/// issued (a confirmation is accepted only then).
#[derive(Debug, Default)]
pub struct Round {
    pub answers: Map<String, Value>,
    pub verified: bool,
    /// The verified state's nonce and expiry: replicas sharing a database also mark it used
    /// there, so that a state is good once across all of them.
    pub nonce: Option<(String, i64)>,
}

/// Signs and checks request states; remembers used nonces until they expire.
pub struct RequestStates {
    key: Vec<u8>,
    used: Mutex<HashMap<String, i64>>,
}

impl RequestStates {
    pub fn new(key: Vec<u8>) -> Self {
        Self { key, used: Mutex::default() }
    }

    fn mac(&self) -> HmacSha256 {
        <HmacSha256 as KeyInit>::new_from_slice(&self.key).expect("HMAC takes a key of any length")
    }

    /// A state for the next round, carrying `answers`.
    pub fn issue(&self, binding: &Binding, answers: Map<String, Value>, now_secs: i64) -> String {
        let payload = Payload {
            v: STATE_VERSION,
            m: binding.method.into(),
            tool: binding.tool.into(),
            args: binding.digest.clone(),
            sub: binding.principal.clone(),
            iat: now_secs,
            exp: now_secs + STATE_TTL_SECS,
            nonce: random_hex::<16>(),
            answers,
        };
        let body = serde_json::to_vec(&payload).expect("the payload serializes");
        let mut mac = self.mac();
        mac.update(&body);
        let tag = mac.finalize().into_bytes();
        format!("{}.{}", URL_SAFE_NO_PAD.encode(&body), URL_SAFE_NO_PAD.encode(tag))
    }

    /// The answers a retry may use: the state's (when it is still fresh) and this request's.
    pub fn round(
        &self,
        binding: &Binding,
        state: Option<&str>,
        responses: Map<String, Value>,
        now_secs: i64,
    ) -> Result<Round, StateError> {
        let Some(state) = state else {
            return Ok(Round { answers: responses, verified: false, nonce: None });
        };
        let payload = self.verify(state)?;
        if payload.sub != binding.principal {
            return Err(StateError::Mismatch("principal"));
        }
        if payload.m != binding.method || payload.tool != binding.tool {
            return Err(StateError::Mismatch("request"));
        }
        if payload.args != binding.digest {
            return Err(StateError::Mismatch("set of arguments"));
        }
        if payload.exp <= now_secs {
            // Too old to trust, not forged: everything is asked again.
            return Ok(Round::default());
        }
        {
            let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
            used.retain(|_, exp| *exp > now_secs);
            if used.insert(payload.nonce.clone(), payload.exp).is_some() {
                return Err(StateError::Reused);
            }
        }
        let mut answers = payload.answers;
        answers.extend(responses);
        Ok(Round { answers, verified: true, nonce: Some((payload.nonce, payload.exp)) })
    }

    fn verify(&self, state: &str) -> Result<Payload, StateError> {
        let (body, tag) = state.split_once('.').ok_or(StateError::Forged)?;
        let body = URL_SAFE_NO_PAD.decode(body).map_err(|_| StateError::Forged)?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| StateError::Forged)?;
        let mut mac = self.mac();
        mac.update(&body);
        mac.verify_slice(&tag).map_err(|_| StateError::Forged)?;
        let payload: Payload = serde_json::from_slice(&body).map_err(|_| StateError::Forged)?;
        if payload.v != STATE_VERSION {
            return Err(StateError::Forged);
        }
        Ok(payload)
    }
}

/// What a state is bound to: who asked, which call, with which arguments.
#[derive(Clone, Debug)]
pub struct Binding {
    pub principal: String,
    pub method: &'static str,
    pub tool: &'static str,
    /// SHA-256 of the canonical arguments (sorted keys, no approval id).
    digest: String,
}

impl Binding {
    pub fn new(principal: &str, method: &'static str, tool: &'static str, arguments: &Value) -> Self {
        let canonical = toolgate_domain::approvals::canonical_arguments(arguments);
        Self { principal: principal.into(), method, tool, digest: hex(&Sha256::digest(canonical.as_bytes())) }
    }
}

/// One round's answers, and the questions the handler asked that they do not answer.
pub struct RoundChannel {
    pub capabilities: Value,
    round: Round,
    /// Keys whose answers the handler used (carried into the next round's state).
    used: Mutex<Vec<String>>,
    asked: Mutex<Vec<(String, ClientMethod, Value)>>,
}

impl RoundChannel {
    pub fn new(capabilities: Value, round: Round) -> Self {
        Self { capabilities, round, used: Mutex::default(), asked: Mutex::default() }
    }

    /// Whether the answers came with a state this server issued.
    pub fn verified(&self) -> bool {
        self.round.verified
    }

    /// Records a question without looking for its answer: a confirmation sent in
    /// `inputResponses` without this server's state could have been pre-filled by the client
    /// before anyone was asked.
    pub fn ask_afresh(&self, key: &str, method: ClientMethod, params: Value) {
        self.asked.lock().unwrap_or_else(|e| e.into_inner()).push((key.to_string(), method, params));
    }

    /// The `input_required` result's parts: the open questions, and the answers to carry.
    pub fn open_questions(&self) -> Option<(Value, Map<String, Value>)> {
        let asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
        if asked.is_empty() {
            return None;
        }
        let requests: Map<String, Value> = asked
            .iter()
            .map(|(key, method, params)| (key.clone(), json!({"method": method.method(), "params": params})))
            .collect();
        let used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let carried = used.iter().filter_map(|k| Some((k.clone(), self.round.answers.get(k)?.clone()))).collect();
        Some((Value::Object(requests), carried))
    }
}

impl ClientChannel for RoundChannel {
    fn supports(&self, method: ClientMethod) -> bool {
        self.capabilities.get(method.capability()).is_some_and(Value::is_object)
    }

    fn ask<'a>(&'a self, key: &'a str, method: ClientMethod, params: Value) -> AskFuture<'a> {
        Box::pin(async move {
            match self.round.answers.get(key) {
                Some(answer) if answer.is_object() => {
                    self.used.lock().unwrap_or_else(|e| e.into_inner()).push(key.to_string());
                    Ok(answer.clone())
                }
                Some(_) => Err(AskError::Malformed {
                    key: key.to_string(),
                    why: format!("inputResponses.{key} must be the result object of {}", method.method()),
                }),
                None => {
                    self.asked.lock().unwrap_or_else(|e| e.into_inner()).push((key.to_string(), method, params));
                    Err(AskError::InputRequired)
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(arguments: &Value) -> Binding {
        Binding::new("alice", "tools/call", "t", arguments)
    }

    #[test]
    fn a_state_carries_answers_once_and_refuses_tampering_and_rebinding() {
        let states = RequestStates::new(b"k".to_vec());
        let args = json!({"b": 1, "a": 2});
        let mut carried = Map::new();
        carried.insert("name".into(), json!({"action": "accept", "content": {"name": "Alice"}}));
        let state = states.issue(&binding(&args), carried, 1000);
        let mut responses = Map::new();
        responses.insert("color".into(), json!({"action": "accept"}));
        let round = states.round(&binding(&args), Some(&state), responses, 1001).unwrap();
        assert!(round.verified);
        assert_eq!(round.answers.len(), 2, "the earlier round's answer and this one's");
        assert_eq!(states.round(&binding(&args), Some(&state), Map::new(), 1002).unwrap_err(), StateError::Reused);

        let fresh = states.issue(&binding(&args), Map::new(), 1000);
        let tampered = format!("{fresh}-TAMPERED");
        assert_eq!(states.round(&binding(&args), Some(&tampered), Map::new(), 1001).unwrap_err(), StateError::Forged);
        let other = json!({"a": 3});
        assert_eq!(
            states.round(&binding(&other), Some(&fresh), Map::new(), 1001).unwrap_err(),
            StateError::Mismatch("set of arguments")
        );
        let bob = Binding::new("bob", "tools/call", "t", &args);
        assert_eq!(states.round(&bob, Some(&fresh), Map::new(), 1001).unwrap_err(), StateError::Mismatch("principal"));
        let other_key = RequestStates::new(b"other".to_vec());
        assert_eq!(other_key.round(&binding(&args), Some(&fresh), Map::new(), 1001).unwrap_err(), StateError::Forged);
        let expired = states.round(&binding(&args), Some(&fresh), Map::new(), 1000 + STATE_TTL_SECS).unwrap();
        assert!(!expired.verified && expired.answers.is_empty(), "an expired state asks everything again");
    }

    #[tokio::test]
    async fn unanswered_questions_are_collected_and_answers_carried() {
        let mut answers = Map::new();
        answers.insert("a".into(), json!({"x": 1}));
        answers.insert("bad".into(), json!(12345));
        let channel = RoundChannel::new(json!({"sampling": {}}), Round { answers, verified: true, nonce: None });
        assert_eq!(channel.ask("a", ClientMethod::Sampling, json!({})).await, Ok(json!({"x": 1})));
        assert!(matches!(channel.ask("bad", ClientMethod::Sampling, json!({})).await, Err(AskError::Malformed { .. })));
        assert_eq!(channel.ask("b", ClientMethod::Sampling, json!({"q": 1})).await, Err(AskError::InputRequired));
        let (requests, carried) = channel.open_questions().unwrap();
        assert_eq!(requests, json!({"b": {"method": "sampling/createMessage", "params": {"q": 1}}}));
        assert_eq!(carried.keys().collect::<Vec<_>>(), vec!["a"]);
    }
}
