use super::*;
use crate::secret::Secret;

use std::os::unix::fs::PermissionsExt;

/// A scratch directory, and the same directory opened as a [`Dir`].
struct Scratch(crate::scratch::Scratch, Dir);
fn dir(tag: &str) -> Scratch {
    let scratch = crate::scratch::Scratch::new(&format!("running-{tag}"));
    let opened = Dir::open(scratch.path()).unwrap();
    Scratch(scratch, opened)
}
fn record_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(record_name(id))
}
fn control_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(control_name(id))
}
fn mode_of(path: &Path) -> u32 {
    crate::sys::fs::mode_of(path).unwrap()
}

fn record(hex_tail: char) -> RunningRecord {
    let id = format!("ses_0199c4e2f1b7712a9d3e4f506172839{hex_tail}");
    let json = serde_json::json!({
        "session_id": id, "url": "127.0.0.1:1", "pid": std::process::id(),
        "process_start": crate::sys::proc::process_start_token(std::process::id()).unwrap(),
        "capsule_name": "demo", "capsule_version": "0.1.0", "workdir": "/tmp",
        "outlives_launcher": true, "started_at": "2026-01-01T00:00:00Z"});
    RunningRecord::from_slice(json.to_string().as_bytes()).unwrap()
}

#[test]
fn scan_orders_newest_first_and_leaves_staging_control_and_broken_files() {
    let d = dir("scan");
    let (older, newer) = (record('0'), record('1'));
    let _a = RecordGuard::write(&d.1, &older).unwrap();
    let _b = RecordGuard::write(&d.1, &newer).unwrap();
    std::fs::write(d.0.join("broken.json"), "{").unwrap();
    std::fs::write(d.0.join(".x.json.1.2.tmp"), "{").unwrap();
    std::fs::write(control_path(&d.0, older.session_id.as_str()), "ctl1.a.b").unwrap();

    let found: Scan = scan(&d.1).unwrap();
    let ids: Vec<_> = found.entries.iter().map(|e| e.record.clone()).collect();
    assert_eq!(ids, vec![newer, older]);
    assert_eq!(found.unreadable.len(), 1);
    assert!(found.unreadable[0].invalid);
    assert!(d.0.join("broken.json").exists(), "scan removes nothing");

    let listed: Scan = scan_pruning(&d.1).unwrap();
    assert_eq!(listed.entries.len(), 2);
    assert!(
        !d.0.join("broken.json").exists(),
        "list prunes what is not a record"
    );
    assert!(d.0.join(".x.json.1.2.tmp").exists());
    assert!(control_path(&d.0, "ses_0199c4e2f1b7712a9d3e4f5061728390").exists());
}

#[test]
fn a_record_others_may_read_is_remoded_and_one_others_may_write_is_kept_untrusted() {
    let d = dir("trust");
    let (readable, writable) = (record('4'), record('5'));
    let _a = RecordGuard::write(&d.1, &readable).unwrap();
    let _b = RecordGuard::write(&d.1, &writable).unwrap();
    let readable_path = record_path(&d.0, readable.session_id.as_str());
    let writable_path = record_path(&d.0, writable.session_id.as_str());
    std::fs::set_permissions(&readable_path, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&writable_path, std::fs::Permissions::from_mode(0o666)).unwrap();

    let listed: Scan = scan_pruning(&d.1).unwrap();
    let ids: Vec<_> = listed.entries.iter().map(|e| e.record.clone()).collect();
    assert_eq!(ids, vec![readable], "only the trusted record is an entry");
    assert_eq!(
        mode_of(&readable_path),
        0o600,
        "ours and readable: re-moded"
    );
    assert_eq!(listed.unreadable.len(), 1);
    let kept = &listed.unreadable[0];
    assert!(!kept.invalid, "untrusted is not evidence");
    assert!(
        kept.reason.contains("0666") && kept.reason.contains("chmod 600"),
        "{}",
        kept.reason
    );
    assert_eq!(mode_of(&writable_path), 0o666, "not trusted: not re-moded");
    assert!(writable_path.exists(), "not trusted: not removed");
    assert!(read(&d.1, writable.session_id.as_str()).is_none());
}

/// The running directory is renamed away and a link to an outside directory put in its place
/// after it was opened: listing, pruning and the guards still work in the directory opened.
#[test]
fn a_running_dir_swapped_for_a_link_after_opening_redirects_nothing() {
    let d = dir("swap");
    let running = d.0.join("running");
    std::fs::create_dir(&running).unwrap();
    let opened = Dir::open(&running).unwrap();
    let moved = d.0.join("moved");
    std::fs::rename(&running, &moved).unwrap();
    let outside = d.0.join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("junk.json"), "{").unwrap();
    std::os::unix::fs::symlink(&outside, &running).unwrap();

    let rec = record('6');
    let id = rec.session_id.as_str().to_string();
    let guard = RecordGuard::write(&opened, &rec).unwrap();
    assert!(record_path(&moved, &id).exists() && !record_path(&outside, &id).exists());
    let listed = scan_pruning(&opened).unwrap();
    assert_eq!(listed.entries.len(), 1);
    assert!(listed.unreadable.is_empty());
    assert!(
        outside.join("junk.json").exists(),
        "nothing outside is pruned"
    );
    prune(&listed.entries[0], End::Gone).unwrap();
    assert!(!record_path(&moved, &id).exists());
    std::mem::forget(guard);
}

#[test]
fn prune_and_either_guard_take_the_record_and_its_control_file() {
    let d = dir("guards");
    let rec = record('2');
    let id = rec.session_id.as_str().to_string();
    let token = Secret::new("ctl1.token.mac".into());

    let control = ControlGuard::write(&d.1, &id, &token).unwrap();
    let guard = RecordGuard::write(&d.1, &rec).unwrap();
    assert_eq!(mode_of(&control_path(&d.0, &id)), 0o600);
    assert_eq!(mode_of(&record_path(&d.0, &id)), 0o600);
    let entry = scan(&d.1).unwrap().entries.remove(0);
    prune(&entry, End::Gone).unwrap();
    assert!(!record_path(&d.0, &id).exists() && !control_path(&d.0, &id).exists());
    std::mem::forget(control);
    std::mem::forget(guard);

    // The record guard dropping takes the control file too…
    let _control = ControlGuard::write(&d.1, &id, &token).unwrap();
    drop(RecordGuard::write(&d.1, &rec).unwrap());
    assert!(!control_path(&d.0, &id).exists());
    // …and the control guard dropping takes the record.
    let _record = RecordGuard::write(&d.1, &rec).unwrap();
    drop(ControlGuard::write(&d.1, &id, &token).unwrap());
    assert!(!record_path(&d.0, &id).exists());
}

/// A live session's record copied under another session's name, with a pid that is gone
/// (as a stale backup put back would be): reported and kept, never pruned — so nothing in
/// the live session's name is removed — and `prune` refuses such an entry however it was
/// built.
#[test]
fn a_record_under_another_sessions_name_is_reported_kept_and_never_pruned() {
    let d = dir("misnamed");
    let live = record('8');
    let _guard = RecordGuard::write(&d.1, &live).unwrap();
    let mut copy = live.clone();
    copy.pid = 0;
    let other = record('9').session_id;
    let copy_name = record_name(other.as_str());
    d.1.write_private(&copy_name, &copy.to_bytes()).unwrap();

    let swept = sweep(&d.1, Depth::Process, &InFlight::default()).unwrap();
    let kept: Vec<_> = swept.kept.iter().map(|k| k.entry.record.clone()).collect();
    assert_eq!(kept, vec![live.clone()], "the record under its own name");
    assert!(swept.pruned.is_empty(), "{:?}", swept.pruned);
    assert_eq!(swept.unreadable.len(), 1, "{:?}", swept.unreadable);
    let reported = &swept.unreadable[0];
    assert_eq!(reported.path, d.0.join(&copy_name));
    assert!(!reported.invalid, "kept, not removed as junk");
    assert!(
        reported.reason.contains(live.session_id.as_str()) && reported.reason.contains("file name"),
        "{}",
        reported.reason
    );
    assert!(d.0.join(&copy_name).exists(), "reported, never removed");
    assert!(read(&d.1, other.as_str()).is_none());

    let built = Entry::new(&d.1, copy_name.clone(), copy);
    assert!(
        prune(&built, End::Gone).is_err(),
        "prune checks the name too"
    );
    assert!(d.0.join(&copy_name).exists());
}

#[test]
fn a_live_process_behind_a_silent_port_is_unreachable_not_gone() {
    let mut rec = record('3');
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    rec.url = listener.local_addr().unwrap().to_string();
    drop(listener);
    assert!(matches!(verify(&rec), Liveness::Unreachable(_)));
    rec.process_start = "not-this-process".into();
    assert!(matches!(verify(&rec), Liveness::Gone(why) if why.contains("another time")));
    rec.pid = 0;
    assert!(matches!(verify(&rec), Liveness::Gone(_)));
}
