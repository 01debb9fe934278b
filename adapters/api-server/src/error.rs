//! HTTP errors, always in OpenAI's shape `{"error":{"message","type","param","code"}}` so that
//! OpenAI client libraries surface them as ordinary API errors.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hermes_http_guard::Refusal;
use serde_json::json;

/// One error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub param: Option<String>,
    pub code: Option<&'static str>,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self { status, message: message.into(), param: None, code: None }
    }

    pub(crate) fn with_code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }

    pub(crate) fn with_param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    /// A malformed request; `param` names the offending field.
    pub(crate) fn bad_request(message: impl Into<String>, param: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message).with_param(param)
    }

    pub(crate) fn unauthorized() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "Invalid API key. Pass it as 'Authorization: Bearer <API_SERVER_KEY>'.")
            .with_code("invalid_api_key")
    }

    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message).with_code("not_found")
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message).with_code("internal_error")
    }

    /// OpenAI's `type`: client mistakes and server failures are told apart by status.
    fn kind(&self) -> &'static str {
        if self.status.is_server_error() { "server_error" } else { "invalid_request_error" }
    }

    /// The body as JSON, also used for errors sent inside an SSE stream.
    pub(crate) fn body(&self) -> serde_json::Value {
        json!({
            "error": {
                "message": self.message,
                "type": self.kind(),
                "param": self.param,
                "code": self.code,
            }
        })
    }
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> Self {
        Self::new(refusal.status, refusal.message).with_code(refusal.code)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unauthorized_has_the_documented_shape() {
        assert_eq!(
            ApiError::unauthorized().body(),
            json!({"error":{
                "message":"Invalid API key. Pass it as 'Authorization: Bearer <API_SERVER_KEY>'.",
                "type":"invalid_request_error","param":null,"code":"invalid_api_key"}})
        );
    }

    #[test]
    fn server_errors_are_typed_as_such() {
        assert_eq!(ApiError::internal("x").body()["error"]["type"], "server_error");
    }
}
