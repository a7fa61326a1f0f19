//! The four push-config methods of both generations, at the method layer (any binding that
//! dispatches a [`Method`] reaches them): set, get, list and delete a task's webhook configs.
//!
//! A caller reaches only the configs of tasks it may see — its own; the operator every task's —
//! and a task it may not see answers exactly like one that does not exist (-32001). Where
//! `network.push` is off every one of them is -32003 (`PushNotificationNotSupportedError`), as
//! the spec requires of a card saying `pushNotifications: false`.

use serde_json::{Value, json};

use super::super::auth::Caller;
use super::super::push::{Push, Refused};
use super::super::tasks::Lookup;
use super::{BUDGET_FULL, Door, not_found};
use crate::a2a::error::RpcError;
use crate::a2a::push::{self, Config};
use crate::a2a::rpc::{self, Method};
use crate::a2a::task::State;
use crate::a2a::version::Generation;
use crate::methods::{PushAction, push_action};

impl Door {
    /// Answer push-config method `method`.
    pub(super) fn push_config(
        &self,
        method: &Method,
        params: &Value,
        caller: &Caller,
        generation: Generation,
    ) -> Result<Value, RpcError> {
        let Some(push) = self.engine.push() else {
            return Err(RpcError::new(
                rpc::PUSH_NOT_SUPPORTED,
                "push notifications are not supported: this capsule does not declare network.push (capabilities.pushNotifications is false)",
            ));
        };
        let action = push_action(method)
            .ok_or_else(|| RpcError::new(rpc::INTERNAL_ERROR, "not a push-config method"))?;
        let viewer = caller.viewer();
        let sees = |task: &str| match self.engine.sees(task, viewer) {
            Ok(state) => Ok(state),
            Err(Lookup::NotFound) => Err(not_found()),
            Err(Lookup::Ended(state)) => Ok(state),
        };
        match action {
            PushAction::Set => {
                let (task, config) = push::set(params, generation)?;
                let state = sees(&task)?;
                set(push, &task, config, state)
            }
            PushAction::Get => {
                let (task, wanted) = push::config_ref(params, generation, false)?;
                sees(&task)?;
                let configs = push.list(&task);
                // 0.3's get names the config optionally, and a client that set one without an
                // id cannot know the id it got (the TCK asks for "default"; a2a-sdk answers the
                // first config whatever is asked): any id that names none finds an unnamed one.
                let unnamed = || match generation {
                    Generation::V0_3 => configs.iter().find(|c| !c.named),
                    Generation::V1_0 => None,
                };
                let found = match &wanted {
                    Some(id) => configs.iter().find(|c| &c.id == id).or_else(unnamed),
                    None => configs.first(),
                };
                let config = found.ok_or_else(|| {
                    let missing = match &wanted {
                        Some(id) => {
                            format!("push notification config '{id}' not found for task '{task}'")
                        }
                        None => format!("task '{task}' has no push notification config"),
                    };
                    RpcError::new(rpc::TASK_NOT_FOUND, missing)
                })?;
                Ok(config.render(&task, generation))
            }
            PushAction::List => {
                let (task, _) = push::config_ref(params, generation, false)?;
                sees(&task)?;
                let shown: Vec<Value> = push
                    .list(&task)
                    .iter()
                    .map(|c| c.render(&task, generation))
                    .collect();
                Ok(match generation {
                    Generation::V0_3 => Value::Array(shown),
                    Generation::V1_0 => json!({"configs": shown, "nextPageToken": ""}),
                })
            }
            PushAction::Delete => {
                let (task, config) = push::config_ref(params, generation, true)?;
                sees(&task)?;
                // Idempotent, as the spec asks: deleting what is gone again succeeds.
                push.delete(&task, config.as_deref().unwrap_or_default());
                Ok(match generation {
                    Generation::V0_3 => Value::Null,
                    Generation::V1_0 => json!({}),
                })
            }
        }
    }

    /// The webhook config a send carried, read and checked, when push notifications are on;
    /// `None` when it carried none or they are off (then it is ignored, as the reference servers
    /// ignore it).
    pub(super) fn push_in_send(
        &self,
        carried: Option<&Value>,
        generation: Generation,
    ) -> Result<Option<Config>, RpcError> {
        let (Some(push), Some(value)) = (self.engine.push(), carried) else {
            return Ok(None);
        };
        let config = push::in_send(value, generation)?;
        checked(
            push,
            &config,
            &format!("params.configuration.{}.url", push::send_key(generation)),
        )?;
        Ok(Some(config))
    }
}

/// Set `config` on `task` (in `state`), refused when its host is an address no webhook may reach.
fn set(push: &Push, task: &str, config: Config, state: State) -> Result<Value, RpcError> {
    let at = match config.generation {
        Generation::V0_3 => "params.pushNotificationConfig.url",
        Generation::V1_0 => "params.url",
    };
    checked(push, &config, at)?;
    let generation = config.generation;
    let said = super::super::push::undeliverable(&config);
    let set = push
        .set(task, config, state.is_final())
        .map_err(|refused| match refused {
            Refused::PerTask => RpcError::invalid("params", refused),
            Refused::Full(why) => RpcError::new(BUDGET_FULL, why),
        })?;
    if let Some(line) = said {
        super::super::log::event(task, &line);
    }
    Ok(set.render(task, generation))
}

/// Refuse `config` when its URL's host is an IP address no webhook may reach (a name is judged
/// at each delivery, once resolved).
fn checked(push: &Push, config: &Config, at: &str) -> Result<(), RpcError> {
    push.check_literal(&config.target)
        .map_err(|why| RpcError::invalid(at, format!("no webhook may reach it: {why}")))
}
