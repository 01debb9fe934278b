//! Where a chat user may have a job's results posted. A job named `telegram:-100999` in its
//! `deliver` would have the bot post into that chat on a schedule, so explicit targets follow
//! the `send_message` tool's rule: the chat the job belongs to, a home channel, or a chat where
//! this user has talked to the bot. Admins and the shell may name any chat; `origin`, `local`,
//! platform names and `all` (the home channels an admin chose) are open to everyone.

use crate::cron::job::Origin;
use crate::gateway::delivery::home_channels::HomeChannels;
use crate::store::{Routes, StoreError};
use hermes_adapter::ChatTarget;

/// Why a `deliver` value is refused to this requester.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RightsError {
    /// An explicit target outside what the requester may reach.
    #[error(
        "⛔ {part}: results can go only to this chat, a home channel or a chat where you have talked to the bot \
         (an admin can send them anywhere)"
    )]
    NotTheirs { part: String },
    #[error("cannot check where you may post: {0}")]
    Store(#[from] StoreError),
}

/// The store and the home channels, to judge `deliver` values by.
pub(crate) struct DeliveryRights<'a> {
    /// Where each user has talked (`Routes::user_talked_in`).
    pub routes: &'a dyn Routes,
    pub homes: &'a HomeChannels,
}

/// Who is asking for the delivery.
pub(crate) struct Requester<'a> {
    /// The job's origin: the chat it was made in (or is being made in).
    pub origin: Option<&'a Origin>,
    pub user_id: Option<&'a str>,
    pub admin: bool,
}

impl DeliveryRights<'_> {
    /// `Err` names the first explicit target the requester may not post in, and why.
    pub(crate) async fn check(&self, deliver: Option<&str>, who: &Requester<'_>) -> Result<(), RightsError> {
        let Some(deliver) = deliver else { return Ok(()) };
        if who.admin {
            return Ok(());
        }
        let homes = self.homes.targets();
        // A part that does not parse is left to the job's own check, which names it.
        let explicit = deliver.split(',').map(str::trim).filter_map(|part| Some((part, ChatTarget::parse(part).ok()?)));
        for (part, target) in explicit {
            let is_origin =
                who.origin.is_some_and(|o| o.platform.eq_ignore_ascii_case(target.platform.as_str()) && o.chat_id == target.chat_id);
            let is_home = homes.get(target.platform.as_str()).is_some_and(|home| home.chat_id == target.chat_id);
            if is_origin || is_home || self.talked_in(&target, who.user_id).await? {
                continue;
            }
            return Err(RightsError::NotTheirs { part: part.to_string() });
        }
        Ok(())
    }

    async fn talked_in(&self, target: &ChatTarget, user_id: Option<&str>) -> Result<bool, RightsError> {
        let Some(user) = user_id else { return Ok(false) };
        Ok(self.routes.user_talked_in(target.platform.as_str(), &target.chat_id, user).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_target_is_named_with_the_rule() {
        let refused = RightsError::NotTheirs { part: "telegram:-100999".into() };
        let expected = [
            "⛔ telegram:-100999: results can go only to this chat, a home channel or a chat where you have talked to the bot",
            "(an admin can send them anywhere)",
        ];
        assert_eq!(refused.to_string(), expected.join(" "));
    }
}
