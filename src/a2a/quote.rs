//! Text a client sent, as an error quotes it back: a leaf every refusal uses (the version
//! header's, a part's, an envelope's), so none of them needs the error module for it.

/// Text a client sent, quoted back in an error: at most 100 characters, escaped, so no answer
/// repeats a megabyte of input or carries a control character to a terminal.
pub fn quoted(text: &str) -> String {
    text.chars()
        .take(100)
        .collect::<String>()
        .escape_debug()
        .to_string()
}
