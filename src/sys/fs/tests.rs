use super::*;
use crate::scratch::Scratch;

fn scratch_dir() -> Scratch {
    Scratch::new("fs")
}

#[test]
fn links_fifos_and_large_files_are_refused() {
    let root = scratch_dir();
    let big = root.join("big");
    fs::write(&big, vec![b'x'; 2048]).unwrap();
    assert!(matches!(
        read_small_regular(&big, 1024),
        Err(ReadRefusal::Invalid(_))
    ));
    assert_eq!(read_small_regular(&big, 4096).unwrap().len(), 2048);
    let link = root.join("link");
    std::os::unix::fs::symlink(&big, &link).unwrap();
    assert_eq!(
        read_small_regular(&link, 4096),
        Err(ReadRefusal::Invalid("is a symbolic link".into()))
    );
    let fifo = root.join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    assert!(matches!(
        read_small_regular(&fifo, 4096),
        Err(ReadRefusal::Invalid(_))
    ));
    assert_eq!(
        read_small_regular(&root.join("none"), 1),
        Err(ReadRefusal::Vanished)
    );
}

#[test]
fn path_lookup_searches_absolute_entries_only() {
    let root = scratch_dir();
    let (abs, plain) = (root.join("abs"), root.join("plain"));
    fs::create_dir_all(&abs).unwrap();
    fs::create_dir_all(&plain).unwrap();
    for (dir, mode) in [(&abs, 0o755), (&plain, 0o644)] {
        let file = dir.join("prog");
        fs::write(&file, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(mode)).unwrap();
    }
    let prog = OsStr::new("prog");
    let path = |p: String| std::ffi::OsString::from(p);
    // Not executable: skipped for the next entry.
    let both = path(format!("{}:{}", plain.display(), abs.display()));
    assert_eq!(find_on_path(prog, &both), Some(abs.join("prog")));
    assert_eq!(find_on_path(prog, plain.as_os_str()), None);
    assert_eq!(find_on_path(OsStr::new("none"), &both), None);
    // The same directory named relatively (up from the current directory to / and down
    // again) is never searched, though it names the program from here.
    let cwd = std::env::current_dir().unwrap();
    let up = "../".repeat(cwd.components().count() - 1);
    let relative = PathBuf::from(format!("{up}{}", abs.strip_prefix("/").unwrap().display()));
    assert!(relative.is_relative() && is_executable(&relative.join("prog")));
    assert_eq!(find_on_path(prog, relative.as_os_str()), None);
    for entries in ["", ".", ":", "::.", "./abs:abs"] {
        assert_eq!(find_on_path(prog, OsStr::new(entries)), None, "{entries:?}");
    }
    assert!(is_executable(&abs.join("prog")));
    assert!(!is_executable(&plain.join("prog")));
    assert!(!is_executable(&abs));
}
