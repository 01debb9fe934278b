//! `hermes doctor`'s questions to Slack: who is the bot (`auth.test`, bot token) and may the app
//! open a Socket Mode connection (`apps.connections.open`, app-level token). The socket URL it
//! returns is never opened; nothing is received or sent.

use crate::adapter::SlackAdapter;
use crate::web::ClientError;
use hermes_adapter::AdapterError;

impl SlackAdapter {
    /// The bot user and team, once both tokens were accepted; or why Slack refused.
    pub(crate) async fn identify_for_probe(&self) -> Result<Option<String>, AdapterError> {
        let me = self.web.auth_test().await.map_err(|e| refusal(e, "bot token", "SLACK_BOT_TOKEN", "xoxb-"))?;
        self.web.open_socket().await.map_err(|e| refusal(e, "app-level token", "SLACK_APP_TOKEN", "xapp-"))?;
        let user = me.user.clone().unwrap_or_else(|| me.user_id.0.clone());
        Ok(Some(format!("@{user} ({}) in workspace {} ({}); Socket Mode allowed", me.user_id.0, me.team, me.team_id.0)))
    }
}

fn refusal(error: ClientError, what: &str, variable: &str, prefix: &str) -> AdapterError {
    match error {
        ClientError::Slack(e) if crate::errors::is_auth_failure(&e) => AdapterError::fatal(
            "slack_token",
            format!("Slack refused the {what} ({e}); set {variable} to the app's {prefix}… token (api.slack.com/apps)"),
        ),
        other => AdapterError::retryable("slack_web", format!("could not reach Slack with the {what}: {other}")),
    }
}
