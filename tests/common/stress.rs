//! What the stress and fault tests share: the work scale, and a small tmpfs.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `MUR_PROVE_SCALE` (default 1): how many times the default amount of work a stress test does.
pub fn scale() -> usize {
    std::env::var("MUR_PROVE_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(1)
}

/// A tmpfs mounted on a directory for as long as this guard lives: unmounted (lazily, if busy)
/// on drop, whatever the test did.
pub struct Mount {
    pub dir: PathBuf,
}

impl Mount {
    /// `mount -t tmpfs -o OPTIONS tmpfs DIR`; the `Err` is why it could not be done.
    pub fn tmpfs(dir: &Path, options: &str) -> Result<Mount, String> {
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs -o {options} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Mount {
            dir: dir.to_path_buf(),
        })
    }

    /// `mount -o remount,MODE DIR` (`ro` or `rw`).
    #[track_caller]
    pub fn remount(&self, mode: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,{mode}")])
            .arg(&self.dir)
            .status()
            .expect("run mount");
        assert!(status.success(), "remount {mode} {}", self.dir.display());
    }

    /// Write a file until the filesystem says it is full; how many bytes went in.
    pub fn fill(&self) -> u64 {
        let mut file = fs::File::create(self.dir.join("filler")).expect("create the filler");
        let chunk = [0x5au8; 4096];
        let mut written = 0u64;
        loop {
            match file.write(&chunk) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(_) => break,
            }
        }
        let _ = file.sync_all();
        written
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(&self.dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}
