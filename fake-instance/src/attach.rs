//! Files a person attaches in the web UI's composer, as the prompt's blocks (the spec's
//! `session/prompt` table): an image as an `image` block, a text file as a `resource` with
//! `text`, any other file as a `resource` with a base64 `blob`. The web UI refuses what is over
//! the limits (10 MB a file, 25 MB a message, decoded) before anything is sent.

use base64::Engine;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// A file attached in the web UI's composer.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachFile {
    /// Its name.
    pub name: String,
    /// Its type (default: `text/plain` with `text`, else `application/octet-stream`); an
    /// image type makes an `image` block.
    #[serde(default)]
    pub mime_type: Option<String>,
    /// Its text (a text file: a `resource` with `text`).
    #[serde(default)]
    pub text: Option<String>,
    /// Its size in bytes, for a binary file or an image of made-up content.
    #[serde(default)]
    pub bytes: Option<usize>,
}

/// The most one file may hold.
pub const MAX_FILE_BYTES: usize = 10 * 1024 * 1024;
/// The most one message's files may hold together.
pub const MAX_MESSAGE_BYTES: usize = 25 * 1024 * 1024;
/// The image types a device takes as `image` blocks.
pub const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/webp", "image/gif"];

/// The blocks for these files. `careless`: a misbehaving web UI, which leaves an image's
/// `mimeType` out and does not check sizes.
pub fn blocks(files: &[AttachFile], careless: bool) -> Result<Vec<Value>, String> {
    let mut total = 0;
    let mut blocks = Vec::new();
    for file in files {
        let uri = format!("file:///uploads/{}", file.name);
        let (block, size) = match (&file.text, file.bytes) {
            (Some(text), None) => {
                let mime = file
                    .mime_type
                    .clone()
                    .unwrap_or_else(|| "text/plain".into());
                let block = json!({ "type": "resource", "resource": { "uri": uri, "mimeType": mime, "text": text } });
                (block, text.len())
            }
            (None, Some(bytes)) => {
                let data = base64::engine::general_purpose::STANDARD.encode(made_up(bytes));
                let mime = file
                    .mime_type
                    .clone()
                    .unwrap_or_else(|| "application/octet-stream".into());
                let block = if IMAGE_TYPES.contains(&mime.as_str()) {
                    let mut image =
                        json!({ "type": "image", "data": data, "mimeType": mime, "uri": uri });
                    if careless && let Some(fields) = image.as_object_mut() {
                        fields.remove("mimeType");
                    }
                    image
                } else {
                    json!({ "type": "resource", "resource": { "uri": uri, "mimeType": mime, "blob": data } })
                };
                (block, bytes)
            }
            _ => {
                return Err(format!(
                    "attach `{}` with either `text` or `bytes`",
                    file.name
                ));
            }
        };
        if size > MAX_FILE_BYTES && !careless {
            return Err(format!(
                "`{}` is {size} bytes: the web UI takes at most {MAX_FILE_BYTES} a file",
                file.name
            ));
        }
        total += size;
        blocks.push(block);
    }
    if total > MAX_MESSAGE_BYTES && !careless {
        return Err(format!(
            "the files come to {total} bytes: the web UI takes at most {MAX_MESSAGE_BYTES} a message"
        ));
    }
    Ok(blocks)
}

/// Content for a file of made-up bytes.
fn made_up(bytes: usize) -> Vec<u8> {
    (0..bytes).map(|i| b'a' + (i % 26) as u8).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(
        name: &str,
        mime: Option<&str>,
        text: Option<&str>,
        bytes: Option<usize>,
    ) -> AttachFile {
        AttachFile {
            name: name.into(),
            mime_type: mime.map(String::from),
            text: text.map(String::from),
            bytes,
        }
    }

    #[test]
    fn each_kind_of_file_becomes_its_block() {
        let blocks = blocks(
            &[
                file("shot.png", Some("image/png"), None, Some(3)),
                file("notes.md", None, Some("hi"), None),
                file("a.zip", Some("application/zip"), None, Some(2)),
            ],
            false,
        )
        .expect("blocks");
        assert_eq!(blocks[0]["type"], "image");
        assert_eq!(blocks[0]["mimeType"], "image/png");
        assert_eq!(blocks[0]["data"], "YWJj");
        assert_eq!(blocks[1]["resource"]["text"], "hi");
        assert_eq!(blocks[1]["resource"]["mimeType"], "text/plain");
        assert_eq!(blocks[2]["resource"]["blob"], "YWI=");
    }

    #[test]
    fn the_web_ui_refuses_files_over_the_limits_unless_careless() {
        let big = [file("big.bin", None, None, Some(MAX_FILE_BYTES + 1))];
        assert!(blocks(&big, false).is_err());
        assert!(blocks(&big, true).is_ok());
        let many: Vec<AttachFile> = (0..3)
            .map(|i| file(&format!("{i}.bin"), None, None, Some(9 * 1024 * 1024)))
            .collect();
        assert!(blocks(&many, false).unwrap_err().contains("a message"));
        assert!(blocks(&[file("x", None, None, None)], false).is_err());
        let careless =
            blocks(&[file("s.png", Some("image/png"), None, Some(1))], true).expect("sent");
        assert!(careless[0].get("mimeType").is_none());
    }
}
