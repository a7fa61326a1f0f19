//! A child's environment: what it inherits, rendered once and shared by every child started
//! with it ([`Inherited`]), and its own variables, which win over an inherited one of the same
//! name.
//!
//! Why rendered once: a handler inherits mur's environment less the session's own variables,
//! and copying that into fresh strings — each pair read out of the process's environment,
//! joined with `=`, made a C string — was a hundred-odd allocations and frees on every task's
//! way, on the door worker before the handler starts (11 µs a task in a profile of a session
//! with 35 variables). Now a task renders only its own few variables; the inherited ones are
//! pointed at where they already are.
//!
//! mur never changes its own environment (`set_var` appears nowhere), so what it was at the
//! first render is what it is at every later one.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::Arc;

/// Variables rendered as `execve` takes them, `NAME=value`.
#[derive(Default)]
pub struct Inherited {
    entries: Vec<CString>,
}

impl Inherited {
    /// This process's environment less the variables named in `hide`.
    pub fn from_process(hide: &[&str]) -> Self {
        let entries = std::env::vars_os()
            .filter(|(name, _)| !hide.iter().any(|h| name == h))
            // A variable of the process's environment holds no NUL: it was read out of a C
            // string. So none is skipped here.
            .filter_map(|(name, value)| CString::new(joined(&name, &value)).ok())
            .collect();
        Self { entries }
    }

    /// Each variable's name and value.
    fn pairs(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.entries.iter().map(|entry| split(entry))
    }
}

/// A child's whole environment: nothing outside it reaches the child.
#[derive(Default)]
pub struct Environment {
    inherited: Arc<Inherited>,
    own: Vec<(OsString, OsString)>,
}

impl Environment {
    /// `own` alone.
    pub fn of(own: Vec<(OsString, OsString)>) -> Self {
        Self {
            inherited: Arc::default(),
            own,
        }
    }

    /// `inherited`, and `own` over it.
    pub fn inheriting(inherited: Arc<Inherited>, own: Vec<(OsString, OsString)>) -> Self {
        Self { inherited, own }
    }

    /// Set a variable of the child's own: over an inherited one of the same name, and in place
    /// of one of its own, so the child sees this value whatever reads its environment.
    pub fn push(&mut self, name: impl Into<OsString>, value: impl Into<OsString>) {
        let (name, value) = (name.into(), value.into());
        match self.own.iter_mut().find(|(k, _)| *k == name) {
            Some(own) => own.1 = value,
            None => self.own.push((name, value)),
        }
    }

    /// The value the child's `getenv` finds for `name`: the first of its own of that name
    /// (`of` and `inheriting` take the list as given), else the inherited one.
    pub fn get(&self, name: &str) -> Option<&OsStr> {
        let own = self.own.iter().find(|(k, _)| k == name);
        own.map(|(_, v)| v.as_os_str()).or_else(|| {
            let inherited = self.inherited.pairs().find(|(k, _)| *k == name);
            inherited.map(|(_, v)| v)
        })
    }

    /// What the child sees, pair by pair: the inherited variables none of its own replaces,
    /// then its own.
    pub fn pairs(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.kept()
            .map(split)
            .chain(self.own.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str())))
    }

    /// The inherited entries none of the child's own variables replaces, as rendered.
    pub(super) fn kept(&self) -> impl Iterator<Item = &CStr> {
        let replaced = |name: &OsStr| self.own.iter().any(|(k, _)| k == name);
        self.inherited
            .entries
            .iter()
            .map(CString::as_c_str)
            .filter(move |entry| !replaced(split(entry).0))
    }

    /// The child's own variables, each `NAME=value`; `Err` naming one holding a NUL (never its
    /// value, which may be a control-plane secret), which no environment can carry.
    // Read by the Linux plan alone (`exec.rs`); elsewhere `std` starts the child.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) fn own_rendered(&self) -> std::io::Result<Vec<CString>> {
        self.own
            .iter()
            .map(|(k, v)| {
                CString::new(joined(k, v)).map_err(|_| {
                    let why = format!(
                        "the environment variable {} holds a NUL byte, which no process's \
                         environment can carry",
                        k.to_string_lossy()
                    );
                    std::io::Error::new(std::io::ErrorKind::InvalidInput, why)
                })
            })
            .collect()
    }

    /// The environment shared with a child's plan: what keeps the inherited entries [`kept`]
    /// points at alive for as long as the plan is.
    ///
    /// [`kept`]: Environment::kept
    // Read by the Linux plan alone (`exec.rs`); elsewhere `std` starts the child.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) fn inherited(&self) -> Arc<Inherited> {
        self.inherited.clone()
    }
}

/// `name=value`, as bytes.
fn joined(name: &OsStr, value: &OsStr) -> Vec<u8> {
    let mut pair = OsString::with_capacity(name.len() + 1 + value.len());
    pair.push(name);
    pair.push("=");
    pair.push(value);
    pair.into_vec()
}

/// A rendered entry's name and value, split at its first `=` past its first byte, as `std`
/// reads the environment (a name of one's own holds none; one inherited may begin with one); an
/// entry without one is all name.
fn split(entry: &CStr) -> (&OsStr, &OsStr) {
    let bytes = entry.to_bytes();
    let after_first = bytes.iter().skip(1).position(|&b| b == b'=');
    let at = after_first.map_or(bytes.len(), |p| p + 1);
    let value = bytes.get(at + 1..).unwrap_or_default();
    (OsStr::from_bytes(&bytes[..at]), OsStr::from_bytes(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inherited(pairs: &[(&str, &str)]) -> Arc<Inherited> {
        let entries = pairs
            .iter()
            .map(|(k, v)| CString::new(format!("{k}={v}")).unwrap())
            .collect();
        Arc::new(Inherited { entries })
    }

    #[test]
    fn a_childs_own_variable_replaces_the_inherited_one_of_its_name_and_only_that() {
        let base = inherited(&[("PATH", "/bin"), ("HOME", "/root"), ("EMPTY", "")]);
        let mut env = Environment::inheriting(base, vec![("HOME".into(), "/nowhere".into())]);
        env.push("X", "a=b");
        env.push("HOME", "/tmp");
        let seen: Vec<(String, String)> = env
            .pairs()
            .map(|(k, v)| (k.to_string_lossy().into(), v.to_string_lossy().into()))
            .collect();
        let want = [
            ("PATH", "/bin"),
            ("EMPTY", ""),
            ("HOME", "/tmp"),
            ("X", "a=b"),
        ];
        assert_eq!(seen, want.map(|(k, v)| (k.to_string(), v.to_string())));
        assert_eq!(env.get("HOME"), Some(OsStr::new("/tmp")));
        assert_eq!(env.get("PATH"), Some(OsStr::new("/bin")));
        assert_eq!(env.get("X"), Some(OsStr::new("a=b")));
        assert_eq!(env.get("NONE"), None);
        let own: Vec<CString> = env.own_rendered().unwrap();
        assert_eq!(own, [c"HOME=/tmp".to_owned(), c"X=a=b".to_owned()]);
    }

    #[test]
    fn the_process_environment_is_inherited_less_what_is_hidden() {
        let all = Inherited::from_process(&[]);
        let hidden = Inherited::from_process(&["PATH"]);
        assert!(
            all.pairs().any(|(k, _)| k == "PATH"),
            "the tests run with a PATH"
        );
        assert!(!hidden.pairs().any(|(k, _)| k == "PATH"));
        assert_eq!(hidden.entries.len() + 1, all.entries.len());
    }

    #[test]
    fn a_name_is_split_at_its_first_equals_sign_past_its_first_byte() {
        fn name_value(entry: &CStr) -> (&str, &str) {
            let (k, v) = split(entry);
            (k.to_str().unwrap(), v.to_str().unwrap())
        }
        assert_eq!(name_value(c"A=b=c"), ("A", "b=c"));
        assert_eq!(name_value(c"=A=b"), ("=A", "b"));
        assert_eq!(name_value(c"A="), ("A", ""));
        assert_eq!(name_value(c"A"), ("A", ""));
    }

    #[test]
    fn an_own_variable_holding_a_nul_is_refused() {
        let held = OsString::from_vec(b"sec\0ret".to_vec());
        let env = Environment::of(vec![("MY_VAR".into(), held)]);
        let why = env.own_rendered().unwrap_err().to_string();
        assert!(why.contains("MY_VAR") && why.contains("NUL"), "{why}");
        assert!(
            !why.contains("sec") && !why.contains("ret"),
            "never the value: {why}"
        );
    }
}
