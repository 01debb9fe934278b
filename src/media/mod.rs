//! Media engines: speech to text for voice notes, text to speech for `/voice`, and images
//! prepared for models that can see them. Engines only: what a turn does with a voice note or a
//! picture is `gateway::turn::perceive`'s decision, what is spoken is `gateway::delivery`'s. This
//! room knows the configuration and the agent's message types, never the gateway.

pub mod history_images;
pub mod images;
pub mod multipart;
pub mod ogg;
pub mod speakable;
pub mod stt;
pub mod tts;
pub mod vision;
