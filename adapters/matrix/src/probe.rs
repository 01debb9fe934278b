//! `hermes doctor`'s question to the homeserver: whose is this access token (`/whoami`). With a
//! password login the token is the session saved by the first start; before that only the
//! homeserver's reachability is checked (`/versions`), because logging in would create a device.
//! Nothing is received or sent.

use crate::adapter::MatrixAdapter;
use crate::settings::Login;
use hermes_adapter::AdapterError;

impl MatrixAdapter {
    /// The bot's Matrix id and device, or why the homeserver would not say.
    pub(crate) async fn identify_for_probe(&self) -> Result<Option<String>, AdapterError> {
        let http = reqwest::Client::builder()
            .timeout(self.settings.request_timeout)
            .build()
            .map_err(|e| AdapterError::retryable("matrix_client", format!("could not build an HTTP client: {e}")))?;
        let saved = self.state.session().ok().flatten().filter(|s| s.homeserver == self.settings.homeserver.as_str());
        let (token, variable) = match (&self.settings.login, saved) {
            (Login::Token(token), _) => (token.clone(), "MATRIX_ACCESS_TOKEN"),
            (Login::Password(_), Some(saved)) => (saved.access_token, "MATRIX_PASSWORD (the saved session)"),
            (Login::Password(_), None) => return self.reachable(&http).await,
        };
        let url = self.endpoint("_matrix/client/v3/account/whoami")?;
        let response = http.get(url).bearer_auth(token).send().await.map_err(|e| unreachable(&self.settings.homeserver, e))?;
        if response.status().as_u16() == 401 {
            return Err(AdapterError::fatal(
                "unauthorized",
                format!(
                    "the homeserver rejected {variable} (401 on whoami); set a valid access token, or remove the state folder's session.json to log in again"
                ),
            ));
        }
        let body: serde_json::Value = response
            .error_for_status()
            .map_err(|e| AdapterError::retryable("matrix_whoami", format!("whoami failed: {}", e.without_url())))?
            .json()
            .await
            .map_err(|e| AdapterError::retryable("matrix_whoami", format!("whoami answered nonsense: {}", e.without_url())))?;
        let user = body.get("user_id").and_then(|u| u.as_str()).unwrap_or("an unnamed user");
        Ok(Some(match body.get("device_id").and_then(|d| d.as_str()) {
            Some(device) => format!("{user} (device {device})"),
            None => user.to_string(),
        }))
    }

    /// The homeserver answers `/versions`; the password is tried by the gateway's first start.
    async fn reachable(&self, http: &reqwest::Client) -> Result<Option<String>, AdapterError> {
        let url = self.endpoint("_matrix/client/versions")?;
        let response = http.get(url).send().await.map_err(|e| unreachable(&self.settings.homeserver, e))?;
        if !response.status().is_success() {
            return Err(AdapterError::retryable(
                "matrix_versions",
                format!("{} answered {} on /versions: is it a Matrix homeserver?", self.settings.homeserver, response.status()),
            ));
        }
        Ok(Some(format!(
            "homeserver {} answers; the password of {} is tried at the first start (no session saved yet)",
            self.settings.homeserver,
            self.settings.user_id.as_deref().unwrap_or("the bot")
        )))
    }

    fn endpoint(&self, path: &str) -> Result<url::Url, AdapterError> {
        self.settings.homeserver.join(path).map_err(|e| AdapterError::fatal("bad_config", format!("bad homeserver URL: {e}")))
    }
}

fn unreachable(homeserver: &url::Url, e: reqwest::Error) -> AdapterError {
    AdapterError::retryable("network", format!("cannot reach the homeserver {homeserver}: {}", e.without_url()))
}
