//! A prompt's blocks (the spec's `session/prompt` table): text and links become the prompt's
//! text; `image` and `resource` blocks (capability `attachments`) are written under the
//! session's attachment directory, each under a name of its own, and attached — a text resource
//! line-numbered like an `@file`, a binary one by path, an image by path with a line saying so.
//!
//! Peer input: every block is checked, and every size counted decoded, before anything is
//! written, so a refused prompt (-32602) leaves nothing behind.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::{Value, json};

/// The most one block may hold, decoded.
pub const MAX_BLOCK_BYTES: usize = 10 * 1024 * 1024;
/// The most one prompt's attachments may hold together, decoded.
pub const MAX_PROMPT_BYTES: usize = 25 * 1024 * 1024;
// A prompt's limit is worked out from a block's (a misbehaving device's is doubled): two and a
// half blocks is the spec's 25 MB.
const _: () = assert!(MAX_BLOCK_BYTES / 2 * 5 == MAX_PROMPT_BYTES);
/// The image types a device takes.
pub const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/webp", "image/gif"];

/// How a misbehaving device misreads a prompt's blocks (all `false`: as the spec says).
#[derive(Debug, Clone, Copy, Default)]
pub struct Misreads {
    /// Text blocks joined by a single space, not a blank line.
    pub joined_by_space: bool,
    /// A `resource_link` becomes its bare uri, not `(see <uri>)`.
    pub bare_link: bool,
    /// A binary resource's size is its base64 text's length, not its decoded size.
    pub encoded_size: bool,
    /// A binary resource referred to by its path with no size.
    pub unsized_binary: bool,
    /// A text resource handed to the model as it is, not line-numbered.
    pub unnumbered: bool,
    /// Only the first text block is kept; the others never reach the model.
    pub first_text_only: bool,
    /// A `resource_link` is dropped: nothing of it reaches the model.
    pub link_dropped: bool,
}

/// One file attached to a prompt.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)] // fields whose names say it all go undocumented
pub struct Attachment {
    /// The name it came with (from its `uri`, or made from its type).
    pub name: String,
    pub mime_type: String,
    /// Its size in bytes, decoded.
    pub size: usize,
    /// Where it was written.
    pub path: PathBuf,
}

impl Attachment {
    /// How `prompt` events and history name it.
    pub fn to_value(&self) -> Value {
        json!({ "name": self.name, "mimeType": self.mime_type, "size": self.size })
    }
}

/// A prompt, read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prompt {
    /// What the person wrote: the text blocks, joined by a blank line, and links as
    /// `(see <uri>)` (commands and `@path` are read from this).
    pub typed: String,
    /// What the attachments add for the model, after the typed text.
    pub attached_text: String,
    /// The files attached.
    pub attachments: Vec<Attachment>,
}

/// What one attachment block holds, before it is written.
enum Content {
    Image(Vec<u8>),
    Text(String),
    Binary(Vec<u8>),
}

struct Pending {
    name: String,
    mime_type: String,
    content: Content,
    /// The size the model is told a binary file has: its decoded size, but for a misreading
    /// device.
    told_size: Option<usize>,
    /// A misreading device's: a binary file named with no size, a text not line-numbered.
    misread: bool,
}

impl Pending {
    fn size(&self) -> usize {
        match &self.content {
            Content::Image(bytes) | Content::Binary(bytes) => bytes.len(),
            Content::Text(text) => text.len(),
        }
    }
}

/// Reads a prompt's blocks. `attachments` is the session's attachment directory when the device
/// takes attachments (capability `attachments`); `None`: an `image` or `resource` block is
/// refused. The error is the sentence of the -32602.
#[cfg(test)]
pub fn read(prompt: &Value, attachments: Option<&Path>) -> Result<Prompt, String> {
    read_within(prompt, attachments, MAX_BLOCK_BYTES)
}

/// [`read`] with another limit for one block (a misbehaving device's, for the self-test); the
/// prompt's limit is two and a half blocks, as the spec's 10 MB and 25 MB are.
#[cfg(test)]
pub fn read_within(
    prompt: &Value,
    attachments: Option<&Path>,
    max_block: usize,
) -> Result<Prompt, String> {
    prepare(
        prompt,
        attachments.is_some(),
        max_block,
        Misreads::default(),
    )?
    .write(attachments)
}

/// A prompt whose blocks were all checked, its attachments not yet written.
pub struct Prepared {
    /// What the person wrote (see [`Prompt::typed`]).
    pub typed: String,
    pending: Vec<Pending>,
}

/// Checks a prompt's blocks, writing nothing yet (a turn the device already knows writes
/// nothing at all).
pub fn prepare(
    prompt: &Value,
    takes_attachments: bool,
    max_block: usize,
    misreads: Misreads,
) -> Result<Prepared, String> {
    let (typed, pending) = parse(prompt, takes_attachments, max_block, misreads)?;
    Ok(Prepared { typed, pending })
}

impl Prepared {
    /// Writes the attachments under `attachments` and says what they add for the model.
    pub fn write(self, attachments: Option<&Path>) -> Result<Prompt, String> {
        let Prepared { typed, pending } = self;
        let mut read = Prompt {
            typed,
            ..Prompt::default()
        };
        let Some(dir) = attachments.filter(|_| !pending.is_empty()) else {
            return Ok(read);
        };
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot keep the attachments: {e}"))?;
        for item in pending {
            let path = dir.join(unique_name(&item.name));
            let bytes: &[u8] = match &item.content {
                Content::Image(bytes) | Content::Binary(bytes) => bytes,
                Content::Text(text) => text.as_bytes(),
            };
            std::fs::write(&path, bytes).map_err(|e| format!("cannot keep an attachment: {e}"))?;
            let shown = path.display();
            let note = match &item.content {
                Content::Image(_) => format!("[image {} attached at {shown}]", item.name),
                // Misbehaving: the text as it is, with no line numbers.
                Content::Text(text) if item.misread => {
                    format!("{} (attached, at {shown}):\n{text}", item.name)
                }
                Content::Text(text) => {
                    format!("{} (attached, at {shown}):\n{}", item.name, numbered(text))
                }
                // Misbehaving: the binary file by its path, with no size.
                Content::Binary(_) if item.misread => {
                    format!("{} at {shown} (binary file)", item.name)
                }
                Content::Binary(bytes) => {
                    format!(
                        "{} at {shown} (binary file, {} bytes)",
                        item.name,
                        item.told_size.unwrap_or(bytes.len())
                    )
                }
            };
            read.attached_text.push_str("\n\n");
            read.attached_text.push_str(&note);
            read.attachments.push(Attachment {
                size: item.size(),
                name: item.name,
                mime_type: item.mime_type,
                path,
            });
        }
        Ok(read)
    }
}

/// Checks a prompt's blocks as a device reads them (their kinds, shapes and sizes), writing
/// nothing: what an instance may send (`takes_attachments`: the device listed `attachments`).
pub fn check(prompt: &Value, takes_attachments: bool) -> Result<(), String> {
    parse(
        prompt,
        takes_attachments,
        MAX_BLOCK_BYTES,
        Misreads::default(),
    )
    .map(|_| ())
}

/// The typed text and the attachments to write, every block checked and every size counted.
fn parse(
    prompt: &Value,
    takes_attachments: bool,
    max_block: usize,
    misreads: Misreads,
) -> Result<(String, Vec<Pending>), String> {
    let max_prompt = max_block / 2 * 5;
    let blocks = prompt
        .as_array()
        .ok_or("`prompt` must be a list of content blocks")?;
    let mut typed = Vec::new();
    let mut pending = Vec::new();
    let mut texts = 0;
    for (i, block) in blocks.iter().enumerate() {
        let kind = block
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("content block {i} has no `type`"))?;
        match kind {
            "text" => {
                let text = block
                    .get("text")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("text block {i} has no `text` string"))?
                    .to_string();
                // Misbehaving: a text block after the first is dropped.
                if !(misreads.first_text_only && texts > 0) {
                    typed.push(text);
                }
                texts += 1;
            }
            // Misbehaving: a resource_link leaves no trace in the model's text.
            "resource_link" if misreads.link_dropped => {}
            "resource_link" => {
                let uri = block.get("uri").and_then(Value::as_str).unwrap_or_default();
                typed.push(match misreads.bare_link {
                    true => uri.to_string(),
                    false => format!("(see {uri})"),
                });
            }
            "image" | "resource" if !takes_attachments => {
                return Err(format!(
                    "block {i} is an `{kind}`, and this device takes no attachments"
                ));
            }
            "image" => pending.push(image(i, block, max_block)?),
            "resource" => pending.push(resource(i, block, max_block, misreads)?),
            other => {
                return Err(format!(
                    "block {i} is of a kind this device does not read: `{other}`"
                ));
            }
        }
    }
    let total: usize = pending.iter().map(Pending::size).sum();
    if total > max_prompt {
        return Err(format!(
            "the prompt's attachments come to {total} bytes, over the {max_prompt} a prompt may hold"
        ));
    }
    let joiner = if misreads.joined_by_space {
        " "
    } else {
        "\n\n"
    };
    Ok((typed.join(joiner), pending))
}

/// Decodes base64, refusing more than one block may hold.
fn decode(i: usize, data: &str, max_block: usize) -> Result<Vec<u8>, String> {
    // Base64 is 4 characters for 3 bytes: a text this long decodes to over the limit.
    if data.len() / 4 * 3 > max_block.saturating_add(3) {
        return Err(format!(
            "block {i} holds over the {max_block} bytes a block may hold"
        ));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| format!("block {i}'s data is not base64: {e}"))?;
    if bytes.len() > max_block {
        return Err(format!(
            "block {i} holds {} bytes, over the {max_block} a block may hold",
            bytes.len()
        ));
    }
    Ok(bytes)
}

fn image(i: usize, block: &Value, max_block: usize) -> Result<Pending, String> {
    let mime_type = block
        .get("mimeType")
        .and_then(Value::as_str)
        .filter(|m| IMAGE_TYPES.contains(m))
        .ok_or_else(|| {
            format!(
                "image block {i} needs a `mimeType` of {}",
                IMAGE_TYPES.join(", ")
            )
        })?;
    let data = block
        .get("data")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("image block {i} has no base64 `data`"))?;
    let bytes = decode(i, data, max_block)?;
    let extension = mime_type.trim_start_matches("image/");
    Ok(Pending {
        name: name_from(block.get("uri"), &format!("image.{extension}")),
        mime_type: mime_type.to_string(),
        content: Content::Image(bytes),
        told_size: None,
        misread: false,
    })
}

fn resource(
    i: usize,
    block: &Value,
    max_block: usize,
    misreads: Misreads,
) -> Result<Pending, String> {
    let resource = block
        .get("resource")
        .filter(|r| r.is_object())
        .ok_or_else(|| format!("resource block {i} has no `resource` object"))?;
    let uri = resource
        .get("uri")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("resource block {i} has no `uri`"))?;
    let mime_type = resource.get("mimeType").and_then(Value::as_str);
    let name = name_from(Some(&json!(uri)), "attachment");
    match (resource.get("text"), resource.get("blob")) {
        (Some(Value::String(text)), None) => {
            if text.len() > max_block {
                return Err(format!(
                    "block {i} holds {} bytes, over the {max_block} a block may hold",
                    text.len()
                ));
            }
            Ok(Pending {
                name,
                mime_type: mime_type.unwrap_or("text/plain").to_string(),
                content: Content::Text(text.clone()),
                told_size: None,
                misread: misreads.unnumbered,
            })
        }
        (None, Some(Value::String(blob))) => {
            let bytes = decode(i, blob, max_block)?;
            let mime_type = mime_type.unwrap_or("application/octet-stream").to_string();
            let content = if IMAGE_TYPES.contains(&mime_type.as_str()) {
                Content::Image(bytes)
            } else {
                Content::Binary(bytes)
            };
            Ok(Pending {
                name,
                mime_type,
                content,
                told_size: misreads.encoded_size.then_some(blob.len()),
                misread: misreads.unsized_binary,
            })
        }
        _ => Err(format!(
            "resource block {i} needs either a `text` or a base64 `blob`"
        )),
    }
}

/// A file name from a `uri`'s last segment, kept to characters safe in a file name; `fallback`
/// when there is none.
fn name_from(uri: Option<&Value>, fallback: &str) -> String {
    let last = uri
        .and_then(Value::as_str)
        .and_then(|u| u.trim_end_matches('/').rsplit(['/', '\\']).next())
        .unwrap_or_default();
    let safe: String = last
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || "._- ".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let safe = safe.trim_matches(['.', ' ']).to_string();
    if safe.is_empty() {
        fallback.to_string()
    } else {
        safe.chars().take(120).collect()
    }
}

/// `<time>-<random>-<name>`: two uploads of one name stay two (a seeded run leaves the time
/// out, so its names repeat with the seed).
fn unique_name(name: &str) -> String {
    if harness::random::seeded() {
        return format!("{:016x}-{name}", harness::random::u64());
    }
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{millis}-{:08x}-{name}", harness::random::u32())
}

/// Lines numbered from 1, as an attached file reads to the model.
pub fn numbered(text: &str) -> String {
    text.lines()
        .enumerate()
        .map(|(n, line)| format!("{:>5}\t{line}", n + 1))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn text_and_links_make_the_typed_text() {
        let prompt =
            json!([{"type": "text", "text": "a"}, {"type": "resource_link", "uri": "file:///x"}]);
        let read = read(&prompt, None).expect("reads");
        assert_eq!(read.typed, "a\n\n(see file:///x)");
        assert!(read.attachments.is_empty());
        assert!(super::read(&json!("text"), None).is_err());
        assert!(super::read(&json!([{"text": "no type"}]), None).is_err());
    }

    #[test]
    fn attachments_are_written_under_names_of_their_own() {
        let dir = tempfile::tempdir().expect("dir");
        let prompt = json!([
            {"type": "text", "text": "look"},
            {"type": "image", "data": b64(b"png bytes"), "mimeType": "image/png", "uri": "file:///tmp/shot.png"},
            {"type": "resource", "resource": {"uri": "file:///w/notes.md", "text": "one\ntwo"}},
            {"type": "resource", "resource": {"uri": "file:///w/notes.md", "text": "again"}},
            {"type": "resource", "resource": {"uri": "file:///w/data.bin", "mimeType": "application/zip", "blob": b64(&[0, 1, 2])}},
        ]);
        let read = read(&prompt, Some(dir.path())).expect("reads");
        assert_eq!(read.typed, "look");
        let names: Vec<&str> = read.attachments.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["shot.png", "notes.md", "notes.md", "data.bin"]);
        assert_ne!(
            read.attachments[1].path, read.attachments[2].path,
            "two of one name stay two"
        );
        assert!(
            read.attachments
                .iter()
                .all(|a| a.path.starts_with(dir.path()) && a.path.exists())
        );
        assert_eq!(read.attachments[3].size, 3);
        assert!(read.attached_text.contains("    1\tone\n    2\ttwo"));
        assert!(read.attached_text.contains("(binary file, 3 bytes)"));
        assert!(read.attached_text.contains("[image shot.png attached at"));
    }

    #[test]
    fn blocks_over_the_limits_or_malformed_are_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().expect("dir");
        let big = b64(&vec![7u8; MAX_BLOCK_BYTES + 1]);
        let over_block = json!([{"type": "image", "data": big, "mimeType": "image/png"}]);
        assert!(
            read(&over_block, Some(dir.path()))
                .unwrap_err()
                .contains("a block may hold")
        );
        let nine = b64(&vec![7u8; 9 * 1024 * 1024]);
        let blocks: Vec<Value> = (0..3)
            .map(
                |_| json!({"type": "resource", "resource": {"uri": "file:///x.bin", "blob": nine}}),
            )
            .collect();
        assert!(
            read(&json!(blocks), Some(dir.path()))
                .unwrap_err()
                .contains("a prompt may hold")
        );
        let bad_type = json!([{"type": "image", "data": b64(b"x"), "mimeType": "image/bmp"}]);
        assert!(read(&bad_type, Some(dir.path())).is_err());
        let not_b64 = json!([{"type": "image", "data": "***", "mimeType": "image/png"}]);
        assert!(
            read(&not_b64, Some(dir.path()))
                .unwrap_err()
                .contains("base64")
        );
        let both =
            json!([{"type": "resource", "resource": {"uri": "x", "text": "a", "blob": "YQ=="}}]);
        assert!(read(&both, Some(dir.path())).is_err());
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("dir").count(),
            0,
            "nothing written"
        );
        let image = json!([{"type": "image", "data": b64(b"x"), "mimeType": "image/png"}]);
        assert!(read(&image, None).unwrap_err().contains("no attachments"));
    }

    #[test]
    fn names_from_uris_cannot_climb_out() {
        assert_eq!(
            name_from(Some(&json!("file:///a/../../etc/passwd")), "x"),
            "passwd"
        );
        assert_eq!(name_from(Some(&json!("..")), "x"), "x");
        assert_eq!(name_from(Some(&json!("file:///a/b%2F..")), "x"), "b_2F");
        assert_eq!(name_from(None, "image.png"), "image.png");
    }
}
