use super::*;
use crate::a2a::task::State;

fn header(kind: Kind, id: &str, seq: u64) -> Header {
    Header {
        kind,
        id: id.into(),
        turn: 1,
        summary: Summary {
            owner: "public".into(),
            seq,
            context_id: "ctx".into(),
            state: State::Completed,
            updated: 7,
        },
    }
}

fn journal(entries: &[(Kind, &str, u64, &[u8])]) -> Vec<u8> {
    let mut bytes = MAGIC.to_vec();
    for (kind, id, seq, body) in entries {
        encode(&mut bytes, &header(*kind, id, *seq), body);
    }
    bytes
}

#[test]
fn entries_read_back_as_written() {
    let bytes = journal(&[
        (Kind::Started, "a", 0, b"{}"),
        (Kind::Ended, "a", 0, b"[1]"),
    ]);
    let (entries, damage) = read(&bytes);
    assert_eq!(damage, None);
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1].header.kind, Kind::Ended);
    assert_eq!(&*entries[1].body, b"[1]");
}

#[test]
fn a_short_last_entry_is_a_torn_tail_and_what_came_before_reads() {
    let whole = journal(&[(Kind::Ended, "a", 0, b"one"), (Kind::Ended, "b", 1, b"two")]);
    let first = journal(&[(Kind::Ended, "a", 0, b"one")]).len();
    for cut in first + 1..whole.len() {
        let (entries, damage) = read(&whole[..cut]);
        assert_eq!(entries.len(), 1, "cut at {cut}");
        assert_eq!(damage, Some(Damage::Torn { valid: first }), "cut at {cut}");
    }
    assert_eq!(read(&MAGIC[..5]).1, Some(Damage::Torn { valid: 0 }));
    assert_eq!(read(b"").1, None);
}

#[test]
fn a_flipped_byte_before_the_end_is_corruption_not_a_tear() {
    let mut bytes = journal(&[(Kind::Ended, "a", 0, b"one"), (Kind::Ended, "b", 1, b"two")]);
    let at = MAGIC.len() + ENTRY_HEAD + 3;
    bytes[at] ^= 1;
    let (entries, damage) = read(&bytes);
    assert!(entries.is_empty());
    assert!(matches!(damage, Some(Damage::Corrupt { valid, .. }) if valid == MAGIC.len()));
    assert!(matches!(
        read(b"not a journal at all").1,
        Some(Damage::Corrupt { .. })
    ));
    let mut huge = MAGIC.to_vec();
    huge.extend_from_slice(&u32::MAX.to_le_bytes());
    huge.extend_from_slice(&[0; 40]);
    assert!(matches!(read(&huge).1, Some(Damage::Corrupt { .. })));
}

#[test]
fn an_end_wins_over_a_start_in_either_order_and_the_bounds_hold() {
    let mut rows: Vec<(Kind, String, u64)> = vec![
        (Kind::Ended, "early".into(), 0),
        (Kind::Started, "early".into(), 0),
        (Kind::Started, "running".into(), 1),
    ];
    for seq in 2..(KEPT_TASKS as u64 + 12) {
        rows.push((Kind::Ended, format!("t{seq}"), seq));
    }
    let entries = rows
        .iter()
        .map(|(kind, id, seq)| Entry {
            header: header(*kind, id, *seq),
            body: b"{}".as_slice().into(),
        })
        .collect();
    let reduced = reduce(entries);
    assert_eq!(reduced.unended.len(), 1);
    assert_eq!(reduced.unended[0].header.id, "running");
    assert_eq!(reduced.ended.len(), KEPT_TASKS);
    assert!(
        reduced.ended.iter().all(|e| e.header.id != "early"),
        "the oldest went"
    );
    let seqs: Vec<u64> = reduced.ended.iter().map(|e| e.header.summary.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "oldest first");
}

#[test]
fn of_a_task_not_ended_the_latest_turn_is_its_last_word_in_either_order() {
    let entry = |kind, turn| Entry {
        header: Header {
            turn,
            ..header(kind, "asking", 3)
        },
        body: b"{}".as_slice().into(),
    };
    let asked_then_answered = vec![entry(Kind::Waiting, 2), entry(Kind::Started, 3)];
    let answered_then_asked = vec![entry(Kind::Started, 3), entry(Kind::Waiting, 2)];
    for entries in [asked_then_answered, answered_then_asked] {
        let reduced = reduce(entries);
        assert_eq!(reduced.unended.len(), 1);
        assert_eq!(reduced.unended[0].header.kind, Kind::Started);
        assert_eq!(reduced.unended[0].header.turn, 3);
    }
    let reduced = reduce(vec![entry(Kind::Started, 2), entry(Kind::Waiting, 2)]);
    assert_eq!(
        reduced.unended[0].header.kind,
        Kind::Waiting,
        "of one turn, the later"
    );
    let reduced = reduce(vec![entry(Kind::Ended, 0), entry(Kind::Waiting, 2)]);
    assert!(reduced.unended.is_empty(), "an end is final");
}
