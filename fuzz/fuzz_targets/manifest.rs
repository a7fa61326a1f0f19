//! The manifest: a manifest that passes its checks has a valid name, a handler, and credentials
//! whose scopes are all door methods and none named `operator`.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mur::json::manifest::{Manifest, is_valid_name};
use mur::a2a::rpc::is_scope;

fuzz_target!(|data: &[u8]| {
    let Ok(manifest) = serde_json::from_slice::<Manifest>(data) else {
        return;
    };
    if manifest.check().is_ok() {
        assert!(is_valid_name(&manifest.name));
        assert!(!manifest.run.is_empty());
        assert!(manifest.lifecycle.concurrency >= 1);
        if let Some(auth) = &manifest.network.authentication {
            for credential in &auth.credentials {
                assert_ne!(credential.name, "operator");
                assert!(
                    credential
                        .scopes
                        .iter()
                        .all(|s| is_scope(s))
                );
            }
        }
    }
});
