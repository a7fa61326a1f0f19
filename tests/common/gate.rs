//! A gate: a file a handler waits for, so that the test decides when the handler goes on — to
//! see what reaches a client while the handler still runs (a first chunk, a working task), or to
//! hold many readers on one task before its answer comes.

use std::fs;
use std::path::PathBuf;

use super::home::Home;

/// How long a handler waits at a closed gate before it gives up: `TRIES` polls `POLL` apart
/// (60 s), so a test that fails before opening it leaves no handler waiting forever.
const TRIES: u32 = 1200;
const POLL: &str = "0.05";

/// A closed gate until [`Gate::open`]: the file does not exist yet.
pub struct Gate {
    file: PathBuf,
}

impl Gate {
    /// A gate in a directory of its own under `home` (`gate/open`).
    pub fn new(home: &Home) -> Gate {
        Gate::at(home.dir("gate").join("open"))
    }

    /// A gate at `file`, whose directory exists and which does not.
    pub fn at(file: PathBuf) -> Gate {
        assert!(
            !file.exists(),
            "a gate starts closed: {} exists",
            file.display()
        );
        Gate { file }
    }

    /// Shell lines that wait until the gate is open. Past the bound the handler fails (exit 3,
    /// saying so on stderr) rather than answer as if it had been let through.
    pub fn wait(&self) -> String {
        format!(
            "i=0\nwhile [ ! -e '{}' ]; do\n  i=$((i+1))\n  \
             if [ $i -gt {TRIES} ]; then echo 'the gate never opened' >&2; exit 3; fi\n  \
             sleep {POLL}\ndone\n",
            self.file.display()
        )
    }

    /// A handler script that reads its input, writes `first` and a newline, waits at the gate,
    /// then writes `second` and a newline: its first line reaching a client before the gate opens
    /// shows that output streams as it is written.
    pub fn two_steps(&self) -> String {
        format!(
            "#!/bin/sh\ncat >/dev/null\necho first\n{}echo second\n",
            self.wait()
        )
    }

    /// A capsule `gated` in `home` whose handler answers `done <stdin>` once the gate is open;
    /// its manifest's path.
    pub fn capsule(&self, home: &Home) -> String {
        let script = format!(
            "#!/bin/sh\ninput=$(cat)\n{}echo \"done $input\"\n",
            self.wait()
        );
        let manifest = home.write_capsule(
            "gated",
            serde_json::json!({"name": "gated", "version": "1.0.0"}),
            Some(&script),
        );
        manifest.to_str().unwrap().to_string()
    }

    /// Open the gate: the waiting handler goes on.
    pub fn open(&self) {
        fs::write(&self.file, "").unwrap();
    }
}
