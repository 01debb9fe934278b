//! Fake Discord REST API and gateway.
