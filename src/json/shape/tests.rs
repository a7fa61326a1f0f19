use super::*;
use serde_json::json;

const INNER: Shape = Shape::Object(&[
    Field::required("id", Shape::Whole(10)),
    Field::optional("on", Shape::Flag),
]);

const DOC: Shape = Shape::Object(&[
    Field::required("name", Shape::Text),
    Field::optional("mode", Shape::Choice(&["a", "b"])),
    Field::optional("items", Shape::List(&INNER)),
    Field::optional(
        "either",
        Shape::Either(&[Shape::Choice(&["all"]), Shape::List(&Shape::Text)]),
    ),
    Field::optional("maybe", Shape::OrNull(&Shape::Text)),
]);

fn checked(mut value: Value) -> (Value, Problems, bool) {
    let mut problems = Problems::default();
    let kept = check(&mut value, &DOC, "", &mut problems);
    (value, problems, kept)
}

#[test]
fn a_right_document_is_kept_whole() {
    let doc = json!({"name": "n", "mode": "b", "items": [{"id": 10, "on": true}],
        "either": "all", "maybe": null});
    let (value, problems, kept) = checked(doc.clone());
    assert!(kept && problems.into_result().is_ok());
    assert_eq!(value, doc);
    let (_, problems, _) = checked(json!({"name": "n", "either": ["x"], "maybe": "y"}));
    assert!(problems.into_result().is_ok());
}

#[test]
fn every_wrong_value_is_noted_under_its_path_and_pruned() {
    let (value, problems, kept) = checked(json!({
        "mode": "c", "items": [{"id": 11}, {"on": 1, "x": 2}], "either": 3, "extra": [],
        "maybe": 2
    }));
    assert!(!kept, "the document lacks its name");
    assert_eq!(value, json!({}), "every wrong value went");
    for path in [
        "name",
        "mode",
        "items",
        "items[0].id",
        "either",
        "extra",
        "maybe",
    ] {
        assert!(problems.covers(path), "{path}");
    }
    assert!(!problems.covers("other"));
    assert!(problems.about("items") && !problems.about("item"));
    let err = problems.into_result().unwrap_err();
    assert_eq!(
        err,
        "9 problems:\n  \
         unknown field `extra` (the fields here: name, mode, items, either, maybe)\n  \
         mode: 'c' is not one of a, b\n  \
         items[0].id: 11 is too large (at most 10)\n  \
         items[1]: unknown field `x` (the fields here: id, on)\n  \
         items[1].on: expected true or false, found the number 1\n  \
         items[1].id: missing (a whole number is required)\n  \
         either: expected one of \"all\" or a list of strings, found the number 3\n  \
         maybe: expected a string or null, found the number 2\n  \
         name: missing (a string is required)"
    );
}

#[test]
fn a_document_of_the_wrong_kind_is_one_problem() {
    let (_, problems, kept) = checked(json!("text"));
    assert!(!kept && problems.covers("anything"));
    assert_eq!(
        problems.into_result().unwrap_err(),
        "expected an object, found a string"
    );
    let (value, problems, kept) = checked(json!({"name": "n", "items": [{"on": true}]}));
    assert!(kept && problems.covers("items") && !problems.covers("name"));
    assert_eq!(value, json!({"name": "n"}));
}

#[test]
fn a_rule_about_a_pruned_value_is_dropped() {
    let (_, mut problems, _) = checked(json!({"items": [{"id": "x"}], "name": "n"}));
    problems.rule("items", "would blame the default");
    problems.rule("items[0].id", "inside it");
    problems.rule("name", "a real one");
    assert_eq!(
        problems.into_result().unwrap_err(),
        "2 problems:\n  items[0].id: expected a whole number, found a string\n  name: a real one"
    );
}
