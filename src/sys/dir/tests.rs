use super::*;
use crate::scratch::Scratch;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;

fn scratch(tag: &str) -> Scratch {
    Scratch::new(&format!("dir-{tag}"))
}

#[test]
fn a_tree_thousands_deep_is_removed_on_a_small_stack_with_few_descriptors() {
    let root = scratch("deep");
    let dir = Dir::open(root.path()).unwrap();
    let mut level = dir.create_child("nest").unwrap();
    for n in 0..3_000 {
        if n % 100 == 0 {
            level.write_private("f", b"x").unwrap();
        }
        // (By path, so only while the path is shorter than PATH_MAX.)
        if n % 100 == 0 && n < 1_500 {
            std::os::unix::fs::symlink("/", level.join("link")).unwrap();
        }
        level = level.create_child("a").unwrap();
    }
    drop(level);
    // 64 KiB of stack and a descriptor per level would not last 3,000 levels.
    std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(move || dir.remove_tree("nest"))
        .unwrap()
        .join()
        .unwrap()
        .unwrap();
    assert!(!root.join("nest").exists());
    assert!(Path::new("/").exists(), "no link followed");
}

/// Under `root` (ours): a tree whose directories a handler chmod-ed — `000` nested three
/// deep, `0500` above a `000`, `0300`, the top itself `000` — holding a link to a `000`
/// directory outside. [`Dir::remove_tree`] takes it all and re-modes nothing outside.
fn remove_a_chmodded_tree(root: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let chmod = |path: &Path, mode: u32| {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap()
    };
    let outside = root.join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("keep"), "k").unwrap();
    let tree = root.join("tree");
    fs::create_dir_all(tree.join("a/b/c")).unwrap();
    fs::write(tree.join("a/b/c/f"), "f").unwrap();
    fs::create_dir_all(tree.join("d/e")).unwrap();
    fs::write(tree.join("d/f"), "f").unwrap();
    fs::create_dir(tree.join("w")).unwrap();
    fs::write(tree.join("w/f"), "f").unwrap();
    std::os::unix::fs::symlink(&outside, tree.join("a/link")).unwrap();
    for (dir, mode) in [
        ("a/b/c", 0o000),
        ("a/b", 0o000),
        ("a", 0o000),
        ("d/e", 0o000),
        ("d", 0o500),
        ("w", 0o300),
        ("", 0o000),
    ] {
        chmod(&tree.join(dir), mode);
    }
    chmod(&outside, 0o000);

    let removed = Dir::open(root).unwrap().remove_tree("tree");
    chmod(&outside, 0o700);
    removed.unwrap();
    assert!(fs::symlink_metadata(&tree).is_err(), "the whole tree goes");
    assert_eq!(fs::read(outside.join("keep")).unwrap(), b"k");
}

/// The child half of the test below: runs only when that test re-executes this binary as
/// uid 65534, with the directory to work in named by `MUR_UNIT_OWNER_DIR`.
#[test]
fn a_chmodded_tree_as_uid_65534() {
    if let Some(root) = std::env::var_os("MUR_UNIT_OWNER_DIR") {
        assert_ne!(super::super::proc::euid(), 0, "the point is not being root");
        remove_a_chmodded_tree(Path::new(&root));
    }
}

/// Mode `000` keeps no directory of ours in place. Root is not bound by modes, so as root
/// the case that matters — a non-root owner, as a handler and its session are — is run by
/// this very test binary re-executed as uid 65534 on a directory that uid owns, and its
/// verdict read back; as another user it runs here, as that user.
#[test]
fn a_tree_chmodded_to_000_is_removed_by_its_owner_without_following_links() {
    let root = scratch("chmodded");
    if super::super::proc::euid() != 0 {
        return remove_a_chmodded_tree(root.path());
    }
    remove_a_chmodded_tree(root.path());
    let owned = root.join("nobody");
    fs::create_dir(&owned).unwrap();
    std::os::unix::fs::chown(root.path(), Some(65534), Some(65534)).unwrap();
    std::os::unix::fs::chown(&owned, Some(65534), Some(65534)).unwrap();
    let child = "sys::dir::tests::a_chmodded_tree_as_uid_65534";
    let ran = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", child, "--nocapture", "--test-threads=1"])
        .env("MUR_UNIT_OWNER_DIR", &owned)
        .uid(65534)
        .gid(65534)
        .output();
    let ran = match ran {
        Ok(ran) => ran,
        Err(err) => {
            // (A test binary uid 65534 cannot execute: a private target directory.)
            eprintln!("\n*** SKIPPED the uid 65534 half of this test: {err} ***\n");
            return;
        }
    };
    let said = String::from_utf8_lossy(&ran.stdout);
    assert!(
        ran.status.success() && said.contains(&format!("test {child} ... ok")),
        "{}\n{said}\n{}",
        ran.status,
        String::from_utf8_lossy(&ran.stderr)
    );
}

#[test]
fn a_private_file_is_rewritten_in_place_and_anything_else_replaced_without_following_it() {
    use std::os::unix::fs::PermissionsExt;
    let root = scratch("overwrite");
    let dir = Dir::open(root.path()).unwrap();
    let target = root.join("target");
    fs::write(&target, "precious").unwrap();
    fs::set_permissions(&target, fs::Permissions::from_mode(0o600)).unwrap();
    let read = |name: &str| fs::read_to_string(root.join(name)).unwrap();
    let inode = |name: &str| fs::symlink_metadata(root.join(name)).unwrap().ino();

    dir.overwrite_private("m", b"a longer first message")
        .unwrap();
    let first = inode("m");
    dir.overwrite_private("m", b"second").unwrap();
    assert_eq!(
        (read("m"), inode("m")),
        ("second".into(), first),
        "in place"
    );
    dir.clear_private("m").unwrap();
    assert_eq!((read("m"), inode("m")), (String::new(), first));

    // Each of these is replaced by a new private file, and the target never written.
    std::os::unix::fs::symlink(&target, root.join("symlink")).unwrap();
    fs::hard_link(&target, root.join("hardlink")).unwrap();
    fs::create_dir(root.join("dir")).unwrap();
    fs::write(root.join("dir/inside"), "x").unwrap();
    fs::write(root.join("open"), "x").unwrap();
    fs::set_permissions(root.join("open"), fs::Permissions::from_mode(0o644)).unwrap();
    for name in ["symlink", "hardlink", "dir", "open"] {
        dir.overwrite_private(name, b"new").unwrap();
        let meta = fs::symlink_metadata(root.join(name)).unwrap();
        assert!(meta.is_file() && meta.nlink() == 1, "{name}");
        assert_eq!(meta.mode() & 0o7777, 0o600, "{name}");
        assert_eq!(read(name), "new", "{name}");
    }
    fs::hard_link(&target, root.join("cleared")).unwrap();
    dir.clear_private("cleared").unwrap();
    assert!(
        fs::symlink_metadata(root.join("cleared")).is_err(),
        "a link is removed"
    );
    assert_eq!(read("target"), "precious");
}

#[test]
fn a_link_in_the_place_of_a_directory_is_refused_naming_it() {
    let root = scratch("link");
    let outside = root.join("outside");
    fs::create_dir(&outside).unwrap();
    let link = root.join("running");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let err = Dir::open(&link).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ELOOP));
    let said = explain(&link, &err);
    assert!(said.starts_with(&link.display().to_string()), "{said}");
    assert!(said.contains("symbolic link"), "{said}");
    let parent = Dir::open(root.path()).unwrap();
    assert_eq!(
        parent.open_child("running").unwrap_err().raw_os_error(),
        Some(libc::ELOOP)
    );
    assert_eq!(
        parent.create_child("running").unwrap_err().raw_os_error(),
        Some(libc::ELOOP)
    );
    assert!(parent.open_child("../x").is_err() && parent.open_child("..").is_err());
}

/// The directory is renamed away and a link to an outside directory put in its place after
/// it was opened: every operation still lands in the directory that was opened.
#[test]
fn a_directory_swapped_for_a_link_after_opening_redirects_nothing() {
    let root = scratch("swap");
    let running = root.join("running");
    fs::create_dir(&running).unwrap();
    fs::write(running.join("a.json"), "a").unwrap();
    let outside = root.join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("a.json"), "outside").unwrap();
    fs::write(outside.join("b.json"), "outside").unwrap();
    fs::set_permissions(&outside, Permissions::from_mode(0o751)).unwrap();

    let dir = Dir::open(&running).unwrap();
    let moved = root.join("moved");
    fs::rename(&running, &moved).unwrap();
    std::os::unix::fs::symlink(&outside, &running).unwrap();

    assert_eq!(dir.read_small("a.json", 64).unwrap().bytes, b"a");
    dir.write_private("c.json", b"new").unwrap();
    dir.unlink("a.json").unwrap();
    dir.unlink("b.json").unwrap();
    dir.set_mode(0o700).unwrap();
    dir.create_child("sub").unwrap();
    dir.remove_tree("sub").unwrap();
    let mut names = dir.names().unwrap();
    names.sort();
    assert_eq!(names, vec![OsString::from("c.json")]);

    assert_eq!(fs::read(moved.join("c.json")).unwrap(), b"new");
    assert!(!moved.join("a.json").exists());
    assert_eq!(fs::read(outside.join("a.json")).unwrap(), b"outside");
    assert_eq!(fs::read(outside.join("b.json")).unwrap(), b"outside");
    assert!(!outside.join("c.json").exists() && !outside.join("sub").exists());
    assert_eq!(fs::metadata(&outside).unwrap().mode() & 0o7777, 0o751);
}

#[test]
fn a_private_write_is_0600_staged_and_listed_once() {
    let root = scratch("write");
    let dir = Dir::open(root.path()).unwrap();
    dir.write_private("x.json", b"one").unwrap();
    dir.write_private("x.json", b"two").unwrap();
    let read = dir.read_small("x.json", 16).unwrap();
    assert_eq!(read.bytes, b"two");
    assert_eq!(read.meta.mode() & 0o7777, 0o600);
    assert_eq!(dir.names().unwrap(), vec![OsString::from("x.json")]);
    assert_eq!(
        dir.names().unwrap().len(),
        1,
        "a second listing starts over"
    );
}

#[test]
fn links_fifos_and_large_files_are_refused_without_blocking() {
    let root = scratch("read");
    let dir = Dir::open(root.path()).unwrap();
    fs::write(root.join("big"), vec![b'x'; 2048]).unwrap();
    assert!(matches!(
        dir.read_small("big", 1024),
        Err(ReadRefusal::Invalid(_))
    ));
    std::os::unix::fs::symlink(root.join("big"), root.join("link")).unwrap();
    assert_eq!(
        dir.read_small("link", 4096).unwrap_err(),
        ReadRefusal::Invalid("is a symbolic link".into())
    );
    let fifo = CString::new(root.join("fifo").as_os_str().as_bytes()).unwrap();
    // SAFETY: `fifo` is a NUL-terminated path alive for the call.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    assert!(matches!(
        dir.read_small("fifo", 4096),
        Err(ReadRefusal::Invalid(_))
    ));
    assert_eq!(
        dir.read_small("none", 1).unwrap_err(),
        ReadRefusal::Vanished
    );
}

#[test]
fn a_tree_is_removed_without_following_its_links() {
    let root = scratch("tree");
    let outside = root.join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("keep"), "k").unwrap();
    let tree = root.join("tree");
    fs::create_dir_all(tree.join("a/b")).unwrap();
    fs::write(tree.join("a/b/f"), "f").unwrap();
    std::os::unix::fs::symlink(&outside, tree.join("a/link")).unwrap();
    let dir = Dir::open(root.path()).unwrap();
    dir.remove_tree("tree").unwrap();
    assert!(!tree.exists());
    assert_eq!(fs::read(outside.join("keep")).unwrap(), b"k");
    dir.remove_tree("tree").unwrap();
}

/// More names than one `getdents64` buffer holds (4 KiB: some 40 of these), listed whole,
/// twice over (each listing starts at the beginning); and an entry seen for what it is.
#[test]
fn a_listing_longer_than_one_read_is_whole_and_entries_are_not_followed() {
    let root = scratch("many");
    let dir = Dir::open(root.path()).unwrap();
    let long = "n".repeat(100);
    let mut made: Vec<OsString> = (0..300)
        .map(|n| OsString::from(format!("{long}{n}")))
        .collect();
    for name in &made {
        fs::write(root.join(name), b"").unwrap();
    }
    made.sort();
    for _ in 0..2 {
        let mut names = dir.names().unwrap();
        names.sort();
        assert_eq!(names, made);
    }
    std::os::unix::fs::symlink(root.path(), root.join("link")).unwrap();
    let link = dir.entry("link").unwrap();
    assert!(link.is_link() && !link.is_dir(), "described, not followed");
    let itself = Entry::of(&dir.stat().unwrap());
    assert!(!link.same_inode(&itself));
    let sub = dir.create_child("sub").unwrap();
    assert!(
        dir.entry("sub")
            .unwrap()
            .same_inode(&Entry::of(&sub.stat().unwrap()))
    );
    let moved = sub.renamed(&dir, "moved").unwrap();
    dir.rename(OsStr::new("sub"), OsStr::new("moved")).unwrap();
    assert_eq!(moved.path(), root.join("moved"));
    assert!(matches!(dir.entry("sub"), Err(e) if e.kind() == std::io::ErrorKind::NotFound));
}
