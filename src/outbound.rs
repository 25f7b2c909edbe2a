//! Every call this server makes to another server (an issuer's discovery document, its key
//! set, token introspection): one HTTP client (ureq on rustls), with a deadline per call and a
//! cap on what it reads, run off the async workers. Nothing here follows a token anywhere.

use std::time::Duration;

/// How long one call may take, end to end.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a call brought nothing usable back.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallFailed {
    #[error("{url} could not be reached: {why}")]
    Unreachable { url: String, why: String },
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: u16 },
}

#[derive(Clone)]
pub struct Outbound {
    agent: ureq::Agent,
}

impl Default for Outbound {
    fn default() -> Self {
        // A non-2xx answer is read as a status, not as a transport error.
        let config =
            ureq::Agent::config_builder().timeout_global(Some(CALL_TIMEOUT)).http_status_as_error(false).build();
        Outbound { agent: ureq::Agent::new_with_config(config) }
    }
}

impl Outbound {
    /// GETs `url` and reads at most `max_bytes` of its body.
    pub async fn get(&self, url: &str, max_bytes: u64) -> Result<Vec<u8>, CallFailed> {
        self.get_as(url, None, max_bytes).await
    }

    /// GETs `url` with a bearer token when given (an IdP's userinfo endpoint).
    pub async fn get_as(&self, url: &str, bearer: Option<&str>, max_bytes: u64) -> Result<Vec<u8>, CallFailed> {
        let (agent, owned) = (self.agent.clone(), url.to_string());
        let authorization = bearer.map(|token| format!("Bearer {token}"));
        self.blocking(url, move || {
            let mut request = agent.get(&owned).header("accept", "application/json");
            if let Some(value) = authorization {
                request = request.header("authorization", value);
            }
            read(request.call(), &owned, max_bytes)
        })
        .await
    }

    /// POSTs a form (`application/x-www-form-urlencoded`), with HTTP basic credentials when
    /// given, and reads at most `max_bytes` of the answer.
    pub async fn post_form(
        &self,
        url: &str,
        basic: Option<(&str, &str)>,
        form: Vec<(String, String)>,
        max_bytes: u64,
    ) -> Result<Vec<u8>, CallFailed> {
        use base64::Engine;
        let credentials =
            basic.map(|(id, secret)| base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}")));
        let (agent, owned) = (self.agent.clone(), url.to_string());
        self.blocking(url, move || {
            let mut request = agent.post(&owned).header("accept", "application/json");
            if let Some(credentials) = credentials {
                request = request.header("authorization", format!("Basic {credentials}"));
            }
            read(request.send_form(form.iter().map(|(k, v)| (k.as_str(), v.as_str()))), &owned, max_bytes)
        })
        .await
    }

    async fn blocking(
        &self,
        url: &str,
        call: impl FnOnce() -> Result<Vec<u8>, CallFailed> + Send + 'static,
    ) -> Result<Vec<u8>, CallFailed> {
        tokio::task::spawn_blocking(call)
            .await
            .map_err(|e| CallFailed::Unreachable { url: url.to_string(), why: e.to_string() })?
    }
}

fn read(
    answer: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    url: &str,
    max_bytes: u64,
) -> Result<Vec<u8>, CallFailed> {
    let unreachable = |why: String| CallFailed::Unreachable { url: url.to_string(), why };
    let mut response = answer.map_err(|e| unreachable(e.to_string()))?;
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        return Err(CallFailed::Status { url: url.to_string(), status });
    }
    response.body_mut().with_config().limit(max_bytes).read_to_vec().map_err(|e| unreachable(e.to_string()))
}
