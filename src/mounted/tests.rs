use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::scratch::Scratch;

const ID: &str = "frm_0199c4e2f1b7712a9d3e4f5061728390";

/// A member directory as a Secret volume without Kubernetes' links lays it out.
fn member_dir(tag: &str) -> Scratch {
    let dir = Scratch::new(&format!("mounted-{tag}"));
    let key = crate::b64::encode(&[7u8; 32]);
    for (name, text, mode) in [
        (files::FORMATION_ID, ID, 0o400),
        (files::MEMBER, "lead", 0o400),
        (files::DOOR_KEY, key.as_str(), 0o400),
        ("token.reviewer", "mft1.a.b", 0o400),
        ("address.reviewer", "10.0.0.2:8080\n", 0o400),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    dir
}

#[test]
fn a_member_directory_reads_whole_and_debug_redacts() {
    let dir = member_dir("whole");
    let mounted = read(&dir).unwrap();
    assert_eq!(mounted.formation_id.as_str(), ID);
    assert_eq!(mounted.member, "lead");
    assert_eq!(mounted.door_key.as_bytes(), &[7u8; 32]);
    assert_eq!(mounted.calls["reviewer"].expose(), "mft1.a.b");
    assert_eq!(mounted.addresses["reviewer"], "10.0.0.2:8080");
    let debug = format!("{mounted:?}");
    assert!(!debug.contains("mft1"), "{debug}");
}

#[test]
fn kubernetes_data_link_is_followed_once_and_only_to_a_sibling() {
    let root = member_dir("k8s-root");
    let data = member_dir("k8s-data");
    let stamp = root.join("..2026_12_01");
    std::fs::rename(&data, &stamp).unwrap();
    for name in std::fs::read_dir(&root).unwrap() {
        let name = name.unwrap().file_name();
        if name.to_str().is_some_and(|n| !n.starts_with("..")) {
            std::fs::remove_file(root.join(&name)).unwrap();
            std::os::unix::fs::symlink(Path::new("..data").join(&name), root.join(&name)).unwrap();
        }
    }
    std::os::unix::fs::symlink("..2026_12_01", root.join("..data")).unwrap();
    assert_eq!(read(&root).unwrap().member, "lead");
    std::fs::remove_file(root.join("..data")).unwrap();
    std::os::unix::fs::symlink("/etc", root.join("..data")).unwrap();
    let err = read(&root).unwrap_err();
    assert!(err.contains("points outside"), "{err}");
    // Without the link, the links in the directory itself are not followed.
    std::fs::remove_file(root.join("..data")).unwrap();
    let err = read(&root).unwrap_err();
    assert!(err.contains("symbolic link"), "{err}");
}

#[test]
fn refusals_name_the_file_and_the_fix() {
    let dir = member_dir("refusals");
    let token = dir.join("token.reviewer");
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = read(&dir).unwrap_err();
    assert!(
        err.contains(&token.display().to_string()) && err.contains("chmod 0400"),
        "{err}"
    );
    assert!(!err.contains("mft1"), "{err}");
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o400)).unwrap();
    std::fs::remove_file(dir.join("address.reviewer")).unwrap();
    let err = read(&dir).unwrap_err();
    assert!(
        err.contains("address.reviewer: missing") && err.contains("--emit kubernetes"),
        "{err}"
    );
    std::fs::remove_file(dir.join(files::DOOR_KEY)).unwrap();
    let err = read(&dir).unwrap_err();
    assert!(err.contains("door-key: missing"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
    let err = read(&dir).unwrap_err();
    assert!(err.contains("formation directory"), "{err}");
}

#[test]
fn names_resolve_and_addresses_pass_through() {
    let now = std::time::Duration::ZERO;
    assert_eq!(resolve_door("10.1.2.3:8080", now).unwrap(), "10.1.2.3:8080");
    assert_eq!(
        resolve_door("http://10.1.2.3:8080/", now).unwrap(),
        "10.1.2.3:8080"
    );
    let local = resolve_door("localhost:8080", now).unwrap();
    assert!(local.ends_with(":8080"), "{local}");
    let malformed = resolve_door("no port", CALL_PATIENCE).unwrap_err();
    assert!(
        !malformed.contains("tries"),
        "not a name: said at once: {malformed}"
    );
}

#[test]
fn a_name_that_does_not_resolve_is_looked_up_again_while_patience_lasts() {
    let started = std::time::Instant::now();
    let err = resolve_door("no-such-peer.invalid:8080", CALL_PATIENCE).unwrap_err();
    assert!(
        err.contains("cannot resolve 'no-such-peer.invalid:8080'"),
        "{err}"
    );
    assert!(err.contains(" tries, 200 ms apart)"), "{err}");
    assert!(started.elapsed() >= CALL_PATIENCE - 2 * RESOLVE_AGAIN);
    let once = resolve_door("no-such-peer.invalid:8080", std::time::Duration::ZERO).unwrap_err();
    assert!(!once.contains("tries"), "no patience, one lookup: {once}");
}
