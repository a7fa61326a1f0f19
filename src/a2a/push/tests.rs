use super::*;

#[test]
fn a_set_reads_either_generation_and_renders_back_as_sent_without_its_secrets() {
    let v03 = json!({"taskId": "t1", "pushNotificationConfig": {"id": "c1", "url": "http://127.0.0.1:9/hook", "token": "SECRET-t", "authentication": {"schemes": ["Bearer"], "credentials": "SECRET-c"}}});
    let (task, config) = set(&v03, Generation::V0_3).unwrap();
    assert_eq!((task.as_str(), config.id.as_str()), ("t1", "c1"));
    let mut shown = v03.clone();
    let inner = &mut shown["pushNotificationConfig"];
    inner.as_object_mut().unwrap().remove("token");
    inner["authentication"]
        .as_object_mut()
        .unwrap()
        .remove("credentials");
    assert_eq!(config.render("t1", Generation::V0_3), shown);
    let debug = format!("{config:?}");
    assert!(!debug.contains("SECRET"), "{debug}");
    assert_eq!(
        config.headers(),
        [
            ("X-A2A-Notification-Token", "SECRET-t".to_string()),
            ("Authorization", "Bearer SECRET-c".to_string())
        ]
    );
    let v10 = json!({"taskId": "t1", "url": "http://h.example/x", "authentication": {"scheme": "Basic", "credentials": "dTpw"}});
    let (_, config) = set(&v10, Generation::V1_0).unwrap();
    assert_eq!(config.id, "t1", "the task's id when none is given");
    let shown = json!({"taskId": "t1", "id": "t1", "url": "http://h.example/x", "authentication": {"scheme": "Basic"}});
    assert_eq!(config.render("t1", Generation::V1_0), shown);
    assert_eq!(
        config.headers(),
        [("Authorization", "Basic dTpw".to_string())]
    );
}

#[test]
fn a_bad_config_is_refused_naming_its_member() {
    for (params, generation, member) in [
        (
            json!({"pushNotificationConfig": {"url": "http://h/"}}),
            Generation::V0_3,
            "params.taskId",
        ),
        (
            json!({"taskId": "t"}),
            Generation::V0_3,
            "params.pushNotificationConfig",
        ),
        (
            json!({"taskId": "t", "url": "http://u@h/"}),
            Generation::V1_0,
            "params.url",
        ),
        (json!({"taskId": "t"}), Generation::V1_0, "params.url"),
        (
            json!({"taskId": "t", "url": "http://h/", "token": "a\r\nX-Evil: 1"}),
            Generation::V1_0,
            "params.token",
        ),
        (
            json!({"taskId": "t", "url": "http://h/", "authentication": {"scheme": "Bea rer"}}),
            Generation::V1_0,
            "params.authentication.scheme",
        ),
        (
            json!({"taskId": "t", "pushNotificationConfig": {"url": "http://h/", "authentication": {"schemes": ["Bea rer"]}}}),
            Generation::V0_3,
            "params.pushNotificationConfig.authentication.schemes[0]",
        ),
        (
            json!({"taskId": "t", "url": "http://h/", "authentication": {"scheme": "Bearer", "credentials": "x\n"}}),
            Generation::V1_0,
            "params.authentication.credentials",
        ),
    ] {
        let err = set(&params, generation).unwrap_err();
        assert!(err.message.contains(member), "{params}: {}", err.message);
        assert!(
            !err.message.contains("Evil"),
            "a secret is never quoted back"
        );
    }
}

#[test]
fn references_name_the_task_and_config_in_each_generation() {
    let got = config_ref(
        &json!({"id": "t", "pushNotificationConfigId": "c"}),
        Generation::V0_3,
        true,
    );
    assert_eq!(got.unwrap(), ("t".into(), Some("c".into())));
    let got = config_ref(&json!({"taskId": "t", "id": "c"}), Generation::V1_0, true);
    assert_eq!(got.unwrap(), ("t".into(), Some("c".into())));
    assert_eq!(
        config_ref(&json!({"id": "t"}), Generation::V0_3, false)
            .unwrap()
            .1,
        None
    );
    assert!(config_ref(&json!({"taskId": "t"}), Generation::V1_0, true).is_err());
}
