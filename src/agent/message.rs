//! The provider-neutral conversation message.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "system" => Some(Role::System),
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            "tool" => Some(Role::Tool),
            _ => None,
        }
    }
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallRequest {
    pub id: String,
    pub name: String,
    /// The raw JSON arguments as the model wrote them (possibly malformed).
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallRequest>,
    /// For `Role::Tool`: which call this answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// Pictures that go with a user's message (or a tool's result), already prepared to the
    /// providers' limits. Only those with [`ImagePart::data`] are sent; the rest are named in text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImagePart>,
}

/// One prepared image: a JPEG or PNG in the media cache, small enough for every provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImagePart {
    /// `image/jpeg` or `image/png`.
    pub media_type: String,
    /// The prepared file in the media cache (the original is kept beside it).
    pub path: String,
    pub width: u32,
    pub height: u32,
    /// The file, base64, when this request carries it; `None` leaves a line of text instead
    /// (an older image past the request's budget, or a file pruned from the cache).
    #[serde(skip)]
    pub data: Option<std::sync::Arc<str>>,
}

impl ImagePart {
    /// `data:image/jpeg;base64,...` for OpenAI's `image_url`.
    pub fn data_url(&self) -> Option<String> {
        self.data.as_ref().map(|d| format!("data:{};base64,{d}", self.media_type))
    }

    /// A 1568x1176 JPEG in the cache, with `data` when given (the providers' tests).
    #[cfg(test)]
    pub(crate) fn test_picture(data: Option<&str>) -> Self {
        Self {
            media_type: "image/jpeg".into(),
            path: "/cache/images/cat.prepared.jpg".into(),
            width: 1568,
            height: 1176,
            data: data.map(std::sync::Arc::from),
        }
    }

    /// The line a model reads in place of an image it is not sent.
    pub fn placeholder(&self) -> String {
        format!("[an image the user sent earlier ({}x{}), no longer attached]", self.width, self.height)
    }
}

impl ChatMessage {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self { role, content: content.into(), tool_calls: Vec::new(), tool_call_id: None, tool_name: None, images: Vec::new() }
    }
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }
}
