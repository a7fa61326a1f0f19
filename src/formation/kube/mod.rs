//! `mur formation ROSTER --emit kubernetes`: the manifests that run an admitted roster on
//! Kubernetes instead of launching it here.
//!
//! The roster is admitted exactly as for a launch, and the joining material minted exactly as a
//! launcher mints it ([`super::material`]); what a launcher writes down each member's channel
//! goes into that member's Secret instead, and the cluster's lifecycle replaces the lifelines.
//! Per member, in roster order: a Secret (`objects::secret`), a Deployment (`pod`), a
//! Service and a NetworkPolicy (`objects`). The output is multi-document YAML whose documents
//! are JSON objects (YAML 1.2 is a superset of JSON), so no YAML library is needed.
//!
//! Invariants:
//! - Each Secret holds exactly one member's material: its own door key, and tokens for exactly
//!   the members the roster lets it call. No other object holds a secret.
//! - Every object carries the formation's labels (`objects::labels`), so one selector
//!   addresses the whole formation (`kubectl delete all,secret,networkpolicy -l …`).
//! - The names are the member names (DNS labels by admission), so a member's Service is found
//!   by its name.

mod objects;
mod pod;
pub mod ready;

use std::path::PathBuf;

use serde_json::Value;

use super::admission::Formation;
use super::material::Material;

/// Where each member's door listens in its pod, and its Service's port.
pub const DOOR_PORT: u16 = 8080;

/// What `--emit kubernetes` was asked for.
pub struct Options {
    pub roster: PathBuf,
    /// The image holding `/bin/mur` and each member's capsule at `/capsules/<member>/`.
    pub image: String,
    pub namespace: Option<String>,
    /// The DNS domain the Services are reached under (`<member>.<domain>`), which each card
    /// advertises; default `<namespace>.svc` with a namespace, else the bare Service name.
    pub advertise_domain: Option<String>,
}

/// The formation being emitted: its roster, material and where things are.
struct Emit<'a> {
    formation: &'a Formation,
    material: Material,
    /// `app.kubernetes.io/part-of`: the roster directory's name, made a label value.
    part_of: String,
    options: &'a Options,
}

impl Emit<'_> {
    /// Member `name`'s door as its peers dial it: `host:port`.
    fn address(&self, name: &str) -> String {
        let host = match (&self.options.advertise_domain, &self.options.namespace) {
            (Some(domain), _) => format!("{name}.{domain}"),
            (None, Some(namespace)) => format!("{name}.{namespace}.svc"),
            (None, None) => name.to_string(),
        };
        format!("{host}:{DOOR_PORT}")
    }
}

/// Admit the roster, mint its material and render every object; the YAML stream.
pub fn emit(options: &Options) -> Result<String, String> {
    check_options(options)?;
    let formation = super::admission::admit(&options.roster)?;
    let emit = Emit {
        part_of: label_value(&formation.project_dir),
        material: Material::mint()?,
        formation: &formation,
        options,
    };
    let mut documents: Vec<Value> = Vec::new();
    for member in &formation.members {
        documents.push(objects::secret(&emit, member));
        documents.push(pod::deployment(&emit, member));
        documents.push(objects::service(&emit, member));
        documents.push(objects::network_policy(&emit, member));
    }
    Ok(documents
        .iter()
        .map(|doc| format!("---\n{doc:#}\n"))
        .collect())
}

/// The flags' values, checked before the roster is read: the image a plain reference, the
/// namespace a DNS label, the domain a DNS name.
fn check_options(options: &Options) -> Result<(), String> {
    if options.image.is_empty() || options.image.bytes().any(|b| !b.is_ascii_graphic()) {
        return Err(format!(
            "--image '{}': not an image reference (e.g. registry.example/mur-review:1)",
            options.image.escape_debug()
        ));
    }
    if let Some(ns) = &options.namespace
        && !is_dns_label(ns)
    {
        return Err(format!(
            "--namespace '{}': not a namespace name (a-z, 0-9, '-', at most 63, starting and ending with a letter or digit)",
            ns.escape_debug()
        ));
    }
    if let Some(domain) = &options.advertise_domain
        && (domain.len() > 200 || !domain.split('.').all(is_dns_label))
    {
        return Err(format!(
            "--advertise-domain '{}': not a DNS name (labels of a-z, 0-9, '-', joined by '.')",
            domain.escape_debug()
        ));
    }
    Ok(())
}

/// RFC 1123 label: what Kubernetes takes for a namespace or Service name.
fn is_dns_label(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'))
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

/// A directory's name as a label value: letters, digits, `-_.`, at most 63, alphanumeric at
/// both ends; `formation` if nothing is left.
fn label_value(dir: &std::path::Path) -> String {
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let kept: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    let trimmed = kept.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if trimmed.is_empty() {
        "formation".into()
    } else {
        trimmed.to_string()
    }
}

#[cfg(test)]
mod tests;
