//! The one table of platform adapters compiled into this build ([`Registry::builtin`]), each
//! behind its cargo feature (`telegram`, `discord`, `slack`, `matrix`, `email`, `webhook`, `api-server`). Adding a platform is
//! its crate under `adapters/` plus one line here; the configuration loader, the gateway's
//! start-up, `hermes doctor` and the generated examples all read this table.

use hermes_adapter::Registration;

/// Registrations by platform name; built-in ones first, then any added with [`Registry::with`].
#[derive(Clone, Debug)]
pub struct Registry {
    entries: Vec<Registration>,
}

/// The built-in table: what a gateway runs when nothing else is said.
impl Default for Registry {
    fn default() -> Self {
        Self::builtin()
    }
}

impl Registry {
    /// The adapters of this build.
    pub fn builtin() -> Self {
        let entries = vec![
            #[cfg(feature = "api-server")]
            hermes_api_server::REGISTRATION,
            #[cfg(feature = "webhook")]
            hermes_webhook::REGISTRATION,
            #[cfg(feature = "telegram")]
            hermes_telegram::REGISTRATION,
            #[cfg(feature = "discord")]
            hermes_discord::REGISTRATION,
            #[cfg(feature = "slack")]
            hermes_slack::REGISTRATION,
            #[cfg(feature = "matrix")]
            hermes_matrix::REGISTRATION,
            #[cfg(feature = "email")]
            hermes_email::REGISTRATION,
        ];
        Self { entries }
    }

    /// This table plus `registration` (replacing a built-in one of the same platform).
    pub fn with(mut self, registration: Registration) -> Self {
        self.entries.retain(|r| r.platform != registration.platform);
        self.entries.push(registration);
        self
    }

    /// The registration of `platform`, by name (any case).
    pub fn get(&self, platform: &str) -> Option<&Registration> {
        self.entries.iter().find(|r| r.platform.eq_ignore_ascii_case(platform))
    }

    /// Every registration, in table order.
    pub fn iter(&self) -> impl Iterator<Item = &Registration> {
        self.entries.iter()
    }
}
