use super::super::{Journal, Pending, rewrite};
use super::super::{KEPT_TASKS, Summary};
use super::*;
use crate::a2a::task::State;
use crate::scratch::Scratch;
use crate::sys::dir::Dir;

/// An empty journal in `scratch`, its writer started.
fn journal(scratch: &Scratch) -> Journal {
    let dir = Dir::open(scratch.path()).unwrap();
    let (file, index) = rewrite(&dir, &[]).unwrap();
    Journal::start(dir, "test", file, index).unwrap()
}

/// Task `n`'s end, its body naming it.
fn ended(n: u64) -> Pending {
    Pending::Ended {
        id: format!("t{n}"),
        summary: Summary {
            owner: "public".into(),
            seq: n,
            context_id: "ctx".into(),
            state: State::Completed,
            updated: 7,
        },
        body: format!("{{\"n\":{n}}}").into_bytes().into(),
    }
}

/// The journal's entries as a start would read them; none may be damaged.
fn entries(scratch: &Scratch) -> Vec<format::Entry> {
    let bytes = std::fs::read(scratch.join(JOURNAL)).unwrap();
    let (entries, damage) = format::read(&bytes);
    assert_eq!(damage, None);
    entries
}

#[test]
fn a_rewrite_copies_the_kept_entries_and_what_was_appended_meanwhile_byte_for_byte() {
    let scratch = Scratch::new("compact");
    let journal = journal(&scratch);
    // Under twice the bound: the writer leaves the rewrite to this test.
    (0..1500).for_each(|n| journal.append(vec![ended(n)]));
    let shared = journal.shared.clone();
    std::thread::scope(|scope| {
        scope.spawn(|| (1500..1900).for_each(|n| journal.append(vec![ended(n)])));
        shared.compact();
    });
    let read = entries(&scratch);
    let reduced = format::reduce(read.clone());
    assert_eq!(reduced.ended.len(), KEPT_TASKS);
    let seqs: Vec<u64> = reduced.ended.iter().map(|e| e.header.summary.seq).collect();
    assert_eq!(seqs, (900..1900).collect::<Vec<u64>>());
    for entry in &read {
        let n = entry.header.summary.seq;
        assert_eq!(&*entry.body, format!("{{\"n\":{n}}}").as_bytes());
    }
    assert!(read.len() < 1900, "the oldest went: {}", read.len());
    // The index says where each entry lies in the new file, and appends go on there.
    let appender = shared.lock();
    assert_eq!(appender.index.len(), read.len());
    let file = std::fs::File::open(scratch.join(JOURNAL)).unwrap();
    for (slot, entry) in appender.index.iter().zip(&read) {
        assert_eq!(slot.id, entry.header.id);
        let mut len = [0; 4];
        file.read_exact_at(&mut len, slot.at).unwrap();
        assert_eq!(
            u64::from(u32::from_le_bytes(len)) + ENTRY_HEAD as u64,
            slot.len
        );
    }
    assert_eq!(appender.bytes, file.metadata().unwrap().len());
    drop(appender);
    journal.append(vec![ended(1900)]);
    let last = entries(&scratch).pop().unwrap();
    assert_eq!(last.header.id, "t1900");
    assert!(!scratch.join(REWRITE).exists());
}

#[test]
fn damage_found_by_a_rewrite_stops_it_and_leaves_the_journal_as_it_was() {
    let scratch = Scratch::new("compact-damage");
    let journal = journal(&scratch);
    (0..1200).for_each(|n| journal.append(vec![ended(n)]));
    // A kept entry's length overwritten where the index puts it.
    let at = journal.shared.lock().index[1100].at;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(scratch.join(JOURNAL))
        .unwrap();
    file.write_all_at(&[0xff; 4], at).unwrap();
    let before = std::fs::read(scratch.join(JOURNAL)).unwrap();
    journal.shared.compact();
    assert_eq!(std::fs::read(scratch.join(JOURNAL)).unwrap(), before);
    assert!(!scratch.join(REWRITE).exists());
    let appender = journal.shared.lock();
    assert_eq!(appender.index.len(), 1200, "the index is whole again");
    assert_ne!(appender.failed_at, (0, 0), "the next try waits");
}

#[test]
fn a_journal_dropped_unclosed_ends_its_writer() {
    let scratch = Scratch::new("compact-drop");
    let journal = journal(&scratch);
    let shared = journal.shared.clone();
    journal.append(vec![ended(0)]);
    drop(journal);
    // The writer held the other reference: once it has ended, this is the last.
    assert_eq!(Arc::strong_count(&shared), 1);
    assert!(shared.lock().closed);
}
