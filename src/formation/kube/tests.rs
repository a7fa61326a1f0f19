use std::path::Path;

use super::*;

fn options(image: &str, namespace: Option<&str>, domain: Option<&str>) -> Options {
    Options {
        roster: PathBuf::from("roster.json"),
        image: image.into(),
        namespace: namespace.map(str::to_string),
        advertise_domain: domain.map(str::to_string),
    }
}

#[test]
fn flags_are_checked_before_the_roster_is_read() {
    assert!(
        check_options(&options(
            "reg.example/mur:1",
            Some("review"),
            Some("review.svc")
        ))
        .is_ok()
    );
    let err = check_options(&options("has space", None, None)).unwrap_err();
    assert!(err.starts_with("--image"), "{err}");
    assert!(check_options(&options("", None, None)).is_err());
    let err = check_options(&options("i", Some("Review"), None)).unwrap_err();
    assert!(err.starts_with("--namespace"), "{err}");
    assert!(check_options(&options("i", Some("-a"), None)).is_err());
    let err = check_options(&options("i", None, Some("a..b"))).unwrap_err();
    assert!(err.starts_with("--advertise-domain"), "{err}");
}

#[test]
fn dns_labels_and_label_values() {
    assert!(is_dns_label("a"));
    assert!(is_dns_label("lead-2"));
    assert!(!is_dns_label(""));
    assert!(!is_dns_label("a-"));
    assert!(!is_dns_label(&"a".repeat(64)));
    assert_eq!(label_value(Path::new("/x/review")), "review");
    assert_eq!(label_value(Path::new("/x/my project!")), "my-project");
    assert_eq!(label_value(Path::new("/")), "formation");
    assert_eq!(label_value(Path::new("/x/__")), "formation");
    assert_eq!(label_value(&Path::new("/x").join("b".repeat(80))).len(), 63);
}
