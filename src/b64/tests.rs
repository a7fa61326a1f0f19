use super::*;

/// RFC 4648 §10 vectors, unpadded.
#[test]
fn rfc_4648_vectors() {
    for (plain, coded) in [
        ("", ""),
        ("f", "Zg"),
        ("fo", "Zm8"),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg"),
        ("fooba", "Zm9vYmE"),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(encode(plain.as_bytes()), coded);
        assert_eq!(decode(coded).unwrap(), plain.as_bytes());
    }
}

#[test]
fn url_alphabet_and_refusals() {
    assert_eq!(encode(&[0xfb, 0xff]), "-_8");
    assert_eq!(decode("-_8").unwrap(), [0xfb, 0xff]);
    for bad in ["Zg==", "Z", "Zh", "Zm9+", "Zm9/", "Zm 9", "Zm9vY"] {
        assert_eq!(decode(bad), None, "{bad}");
    }
}

#[test]
fn either_alphabet_padded_or_not() {
    for coded in ["aGVsbG8=", "aGVsbG8", "+/8=", "-_8", "", "Zm9v"] {
        assert!(decode_any(coded).is_some(), "{coded}");
    }
    assert_eq!(decode_any("+/8=").unwrap(), [0xfb, 0xff]);
    assert_eq!(encode_standard(&[0xfb, 0xff]), "+/8=");
    assert_eq!(encode_standard(b"hello"), "aGVsbG8=");
    assert_eq!(encode_standard(b""), "");
    for bad in [
        "aGVsbG8==",
        "Zg===",
        "Zg=",
        "+_8=",
        "a b=",
        "Z",
        "=",
        "not base64!",
    ] {
        assert_eq!(decode_any(bad), None, "{bad}");
    }
}

#[test]
fn every_length_round_trips() {
    let bytes: Vec<u8> = (0..=255).collect();
    for len in 0..bytes.len() {
        assert_eq!(decode(&encode(&bytes[..len])).unwrap(), &bytes[..len]);
    }
}

/// Every byte value survives a round trip, and every byte outside the alphabet is refused
/// wherever it stands in a group.
#[test]
fn all_byte_values_and_every_foreign_byte() {
    let all: Vec<u8> = (0..=255).collect();
    assert_eq!(decode(&encode(&all)).unwrap(), all);
    for b in 0..=255u8 {
        assert_eq!(decode(&encode(&[b])).unwrap(), [b], "{b}");
        let known = ALPHABET.contains(&b);
        for at in 0..4 {
            let mut group = *b"AAAA";
            group[at] = b;
            // A byte that is not UTF-8 on its own cannot be in a &str: decode the bytes'
            // text only where they form one, and check the table for the rest.
            if let Ok(text) = std::str::from_utf8(&group) {
                assert_eq!(decode(text).is_some(), known, "{b} at {at}");
            }
        }
        assert_eq!(DECODE[usize::from(b)] != INVALID, known, "{b}");
    }
}
