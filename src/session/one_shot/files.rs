//! The parts of a `--task` answer that are not its text — the files a handler left in `out/`,
//! JSON it returned, a file by URL — which stdout cannot carry beside the text: written to
//! `--out DIR`, or named on stderr, never dropped without a word.
//!
//! A part's file name is the handler's (the name it gave the file in `out/`), used only when it
//! is one plain component; anything else (`..`, a `/`, none at all) is `part-N` instead, so no
//! answer can write outside DIR. Each file is written as the session writes its own: staged and
//! renamed into place, mode 0600, never through a link.

use std::path::Path;

use serde_json::{Value, json};

use crate::a2a::message::{Content, Part};
use crate::sys::dir::Dir;

/// One part that is not text, as `--json` reports it.
pub struct File {
    name: String,
    media_type: Option<String>,
    /// Its bytes; `None` for a file by URL.
    bytes: Option<Vec<u8>>,
    url: Option<String>,
    /// Where it was written.
    written: Option<String>,
}

impl File {
    pub fn json(&self) -> Value {
        json!({
            "name": self.name,
            "media_type": self.media_type,
            "bytes": self.bytes.as_ref().map(Vec::len),
            "url": self.url,
            "path": self.written,
        })
    }

    fn said(&self) -> String {
        match (&self.bytes, &self.url) {
            (Some(bytes), _) => format!("{} ({} bytes)", self.name, bytes.len()),
            (None, Some(url)) => format!("{} (at {url})", self.name),
            (None, None) => self.name.clone(),
        }
    }
}

/// Every part of `answer` but its text, written into `out` when given (each said on stderr),
/// else named on stderr with the way to have them.
pub fn deliver(answer: &[Part], out: Option<&Path>) -> Vec<File> {
    let mut files: Vec<File> = answer
        .iter()
        .enumerate()
        .filter_map(|(i, part)| file_of(i, part))
        .collect();
    if files.is_empty() {
        return files;
    }
    let Some(out) = out else {
        let names: Vec<String> = files.iter().map(File::said).collect();
        crate::cli::warn(
            "run",
            &format!(
                "the answer has {} file{} not written: {}; --out DIR writes them",
                files.len(),
                if files.len() == 1 { "" } else { "s" },
                names.join(", ")
            ),
        );
        return files;
    };
    let dir = match Dir::open(&std::fs::canonicalize(out).unwrap_or_else(|_| out.into())) {
        Ok(dir) => dir,
        Err(err) => {
            let why = crate::sys::dir::explain(out, &err);
            crate::cli::warn(
                "run",
                &format!("--out {why}: the answer's files not written"),
            );
            return files;
        }
    };
    for file in &mut files {
        let Some(bytes) = &file.bytes else {
            crate::cli::warn(
                "run",
                &format!("not written: {}: a file by URL", file.said()),
            );
            continue;
        };
        match dir.write_private(&file.name, bytes) {
            Ok(()) => {
                let path = dir.join(&file.name).display().to_string();
                crate::cli::warn("run", &format!("wrote {path} ({} bytes)", bytes.len()));
                file.written = Some(path);
            }
            Err(why) => crate::cli::warn("run", &why),
        }
    }
    files
}

/// Part `i` as a file, unless it is text.
fn file_of(i: usize, part: &Part) -> Option<File> {
    let (bytes, url) = match &part.content {
        Content::Text(_) => return None,
        Content::Raw(base64) => (crate::b64::decode_any(base64), None),
        Content::Data(data) => (Some(data.get().as_bytes().to_vec()), None),
        Content::Url(url) => (None, Some(url.clone())),
    };
    let name = part
        .filename
        .as_deref()
        .filter(|name| plain(name))
        .map_or_else(|| format!("part-{i}"), str::to_string);
    Some(File {
        name,
        media_type: part.media_type.clone(),
        bytes,
        url,
        written: None,
    })
}

/// One normal path component: no separator, not `.` or `..`, not empty, no NUL.
fn plain(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\0'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plain_component_is_kept_as_a_name() {
        for name in ["card.txt", "a b", ".hidden", "..x"] {
            assert!(plain(name), "{name}");
        }
        for name in ["", ".", "..", "../x", "a/b", "/etc/passwd", "nul\0"] {
            assert!(!plain(name), "{name:?}");
        }
        let mut part = Part::text("x");
        assert!(file_of(0, &part).is_none(), "text is printed, not a file");
        part.content = Content::Raw("aGk".into());
        part.filename = Some("../../evil".into());
        let file = file_of(3, &part).unwrap();
        assert_eq!(file.name, "part-3");
        assert_eq!(file.bytes.as_deref(), Some(&b"hi"[..]));
    }
}
