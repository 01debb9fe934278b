//! Which of a conversation's images one request carries: pictures stay in the session's history
//! as references ([`ImagePart`] without data), and before each model call the newest ones that fit
//! `vision.max_images_per_request` and `vision.max_request_image_bytes` are read back from the
//! media cache. Older ones, and ones the cache has pruned, go without data; the providers then
//! write [`ImagePart::placeholder`] in their place, so the model knows a picture was there.

use crate::agent::{ChatMessage, ImagePart, Role};
use base64::Engine;
use std::sync::Arc;

/// Give the newest images of `messages` their data, within `max_images` and `max_bytes` (the
/// prepared files' sizes added up); every other image gets none. Only users' messages carry
/// images to a provider, so only theirs count. Reads files (a few MB at most): async callers run
/// it in `spawn_blocking` or accept a short block.
pub fn attach_recent(messages: &mut [ChatMessage], max_images: usize, max_bytes: u64) {
    let mut budget = Budget { images: max_images, bytes: max_bytes, full: false };
    for message in messages.iter_mut().rev() {
        let sendable = message.role == Role::User;
        for image in message.images.iter_mut().rev() {
            image.data = if sendable { budget.take(image) } else { None };
        }
    }
}

/// What is left of a request's image budget. Once an image does not fit, older ones are not
/// tried: the model sees the newest pictures, never a gap filled by an older small one.
struct Budget {
    images: usize,
    bytes: u64,
    full: bool,
}

impl Budget {
    /// `image`'s data when it fits and its file is still there.
    fn take(&mut self, image: &ImagePart) -> Option<Arc<str>> {
        if self.full {
            return None;
        }
        let size = std::fs::metadata(&image.path).ok().filter(|m| m.is_file())?.len();
        if self.images == 0 || size > self.bytes {
            self.full = true;
            return None;
        }
        // Pruned between the size check and the read: the image is simply not sent.
        let bytes = std::fs::read(&image.path).ok()?;
        self.images -= 1;
        self.bytes -= size;
        Some(Arc::from(base64::engine::general_purpose::STANDARD.encode(bytes)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image_file(dir: &std::path::Path, name: &str, bytes: usize) -> ImagePart {
        let path = dir.join(name);
        std::fs::write(&path, vec![b'j'; bytes]).unwrap();
        ImagePart { media_type: "image/jpeg".into(), path: path.to_string_lossy().into_owned(), width: 10, height: 10, data: None }
    }

    fn user_with(images: Vec<ImagePart>) -> ChatMessage {
        ChatMessage { images, ..ChatMessage::user("look") }
    }

    /// Which images (by file name) carry data, oldest first.
    fn attached(messages: &[ChatMessage]) -> Vec<String> {
        let name = |i: &ImagePart| std::path::Path::new(&i.path).file_name().unwrap().to_string_lossy().into_owned();
        messages.iter().flat_map(|m| &m.images).filter(|i| i.data.is_some()).map(name).collect()
    }

    #[test]
    fn the_newest_images_within_the_count_get_their_data() {
        let dir = tempfile::tempdir().unwrap();
        let mut messages: Vec<ChatMessage> = (1..=4).map(|n| user_with(vec![image_file(dir.path(), &format!("{n}.jpg"), 100)])).collect();
        messages.insert(2, ChatMessage::assistant("nice"));
        attach_recent(&mut messages, 2, 1_000_000);
        assert_eq!(attached(&messages), ["3.jpg", "4.jpg"]);
        let newest = messages[4].images[0].data.as_deref().unwrap();
        assert_eq!(newest, base64::engine::general_purpose::STANDARD.encode([b'j'; 100]), "the file, base64");
    }

    #[test]
    fn the_byte_budget_stops_at_the_first_image_that_does_not_fit() {
        let dir = tempfile::tempdir().unwrap();
        let mut messages = vec![
            user_with(vec![image_file(dir.path(), "old-small.jpg", 10)]),
            user_with(vec![image_file(dir.path(), "middle-big.jpg", 600), image_file(dir.path(), "new.jpg", 500)]),
        ];
        attach_recent(&mut messages, 8, 1_000);
        assert_eq!(attached(&messages), ["new.jpg"], "an older small image does not leapfrog a big one");
    }

    #[test]
    fn a_pruned_file_is_skipped_and_earlier_data_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let gone = image_file(dir.path(), "gone.jpg", 50);
        std::fs::remove_file(&gone.path).unwrap();
        let mut stale = image_file(dir.path(), "stale.jpg", 50);
        stale.data = Some(Arc::from("left over from the last request"));
        let mut tool = ChatMessage::new(Role::Tool, "result");
        tool.images = vec![image_file(dir.path(), "tool.jpg", 50)];
        let mut messages =
            vec![user_with(vec![stale]), user_with(vec![image_file(dir.path(), "kept.jpg", 50)]), tool, user_with(vec![gone])];
        attach_recent(&mut messages, 1, 1_000);
        assert_eq!(attached(&messages), ["kept.jpg"], "a missing file costs nothing; tool messages send no images");
        assert_eq!(messages[0].images[0].data, None, "an image past the budget loses data it carried before");
    }
}
