//! The one error type of the HTTP edge and the admin API: a status, a stable `error` word, a
//! message that says what to do, and the headers that go with it. Every refusal closes the
//! connection, so a refused upload can never corrupt a keep-alive connection.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use toolgate_domain::StoreError;

#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    error: &'static str,
    message: String,
    headers: Vec<(header::HeaderName, HeaderValue)>,
}

impl ApiError {
    pub fn new(status: StatusCode, error: &'static str, message: impl Into<String>) -> Self {
        Self { status, error, message: message.into(), headers: Vec::new() }
    }

    /// The machine-readable reason (`forbidden_origin`, `payload_too_large`, ...).
    pub fn error(&self) -> &'static str {
        self.error
    }

    pub fn with_header(self, name: header::HeaderName, value: &'static str) -> Self {
        self.with_header_value(name, HeaderValue::from_static(value))
    }

    pub fn with_header_value(mut self, name: header::HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    /// 401 with the challenge RFC 6750 asks for.
    pub fn unauthorized(message: impl Into<String>, invalid_token: bool) -> Self {
        let challenge = if invalid_token {
            r#"Bearer realm="toolgate", error="invalid_token""#
        } else {
            r#"Bearer realm="toolgate""#
        };
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message).with_header(header::WWW_AUTHENTICATE, challenge)
    }

    pub fn forbidden(error: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, error, message)
    }

    pub fn bad_request(error: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, error, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// A store fault: the server's problem, worth a retry shortly.
    pub fn store(e: StoreError) -> Self {
        tracing::error!("store fault: {e}");
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", format!("{e}; retry shortly"))
            .with_header(header::RETRY_AFTER, "5")
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::store(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": self.error, "message": self.message}).to_string();
        let mut response =
            (self.status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        for (name, value) in self.headers {
            headers.insert(name, value);
        }
        response
    }
}

/// A JSON body with a status.
pub fn json_response(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
}
