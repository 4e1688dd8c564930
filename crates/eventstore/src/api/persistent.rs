//! The HTTP face of persistent subscriptions (see `crate::persistent`): create, inspect, list,
//! delete, acknowledge; consuming is server-sent events the server drives with
//! [`consume_from`], [`crate::Store::subscribe`] and [`super::sse_frame`].

use serde::{Deserialize, Serialize};

use super::query::{after_last_event_id, filter};
use super::response::ApiResponse;
use crate::store::Store;
use crate::types::SubscriptionInfo;

/// `{"name","category","types","checkpoint","created_at"}`.
#[derive(Serialize)]
struct InfoBody<'a> {
    name: &'a str,
    category: Option<&'a str>,
    types: &'a [String],
    checkpoint: u64,
    created_at: String,
}

impl<'a> From<&'a SubscriptionInfo> for InfoBody<'a> {
    fn from(i: &'a SubscriptionInfo) -> InfoBody<'a> {
        InfoBody {
            name: &i.name,
            category: i.filter.category_name(),
            types: i.filter.event_types(),
            checkpoint: i.checkpoint,
            created_at: i.created_at.to_string(),
        }
    }
}

/// Where a new subscription starts: a position, or `"end"` (only events not yet readable).
#[derive(Deserialize)]
#[serde(untagged)]
enum Start {
    Position(u64),
    Named(String),
}

/// The body of `PUT /subscriptions/{name}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    from: Option<Start>,
    category: Option<String>,
    #[serde(default)]
    types: Vec<String>,
}

/// `PUT /subscriptions/{name}` with `{"from"?: 0 | "end", "category"?, "types"?: [...]}` (an
/// empty body: everything from position 0): creates the subscription, or returns the existing
/// one if its filter is the same (its checkpoint kept), 200 either way; 409 when it exists with
/// another filter.
pub async fn create_subscription(store: &Store, name: &str, body: &[u8]) -> ApiResponse {
    let body: CreateBody = if body.iter().all(u8::is_ascii_whitespace) {
        CreateBody {
            from: None,
            category: None,
            types: Vec::new(),
        }
    } else {
        match serde_json::from_slice(body) {
            Ok(b) => b,
            Err(e) => {
                return ApiResponse::error(
                    400,
                    &format!(
                        "invalid request body (expected {{\"from\"?: position or \"end\", \"category\"?, \"types\"?: [...]}}): {e}"
                    ),
                );
            }
        }
    };
    let f = match filter(
        body.category.as_deref(),
        body.types.iter().map(String::as_str).collect(),
    ) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let from = match body.from {
        None => 0,
        Some(Start::Position(p)) => p,
        Some(Start::Named(n)) if n == "end" => match store.head_position().await {
            Ok(p) => p,
            Err(e) => return ApiResponse::from_store_error(&e),
        },
        Some(Start::Named(n)) => {
            return ApiResponse::error(
                400,
                &format!("\"from\": {n:?} is neither a position nor \"end\""),
            );
        }
    };
    match store.create_subscription(name, from, f).await {
        Ok(info) => ApiResponse::json(200, &InfoBody::from(&info)),
        Err(e) => ApiResponse::from_store_error(&e),
    }
}

/// `GET /subscriptions/{name}`: the subscription and its checkpoint; 404 when unknown.
pub async fn subscription_info(store: &Store, name: &str) -> ApiResponse {
    match store.subscription_info(name).await {
        Ok(info) => ApiResponse::json(200, &InfoBody::from(&info)),
        Err(e) => ApiResponse::from_store_error(&e),
    }
}

/// `GET /subscriptions`: `{"subscriptions": [...]}`, by name.
pub async fn list_subscriptions(store: &Store) -> ApiResponse {
    #[derive(Serialize)]
    struct Body<'a> {
        subscriptions: Vec<InfoBody<'a>>,
    }
    match store.list_subscriptions().await {
        Ok(list) => ApiResponse::json(
            200,
            &Body {
                subscriptions: list.iter().map(InfoBody::from).collect(),
            },
        ),
        Err(e) => ApiResponse::from_store_error(&e),
    }
}

/// `DELETE /subscriptions/{name}`: 200 `{"deleted": name}`; 404 when unknown.
pub async fn delete_subscription(store: &Store, name: &str) -> ApiResponse {
    #[derive(Serialize)]
    struct Body<'a> {
        deleted: &'a str,
    }
    match store.delete_subscription(name).await {
        Ok(()) => ApiResponse::json(200, &Body { deleted: name }),
        Err(e) => ApiResponse::from_store_error(&e),
    }
}

/// `POST /subscriptions/{name}/ack` with `{"position": N}`: everything up to and including `N`
/// is done; 200 `{"name", "checkpoint"}` (the checkpoint never moves back).
pub async fn ack(store: &Store, name: &str, body: &[u8]) -> ApiResponse {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct AckBody {
        position: u64,
    }
    #[derive(Serialize)]
    struct Body<'a> {
        name: &'a str,
        checkpoint: u64,
    }
    let position = match serde_json::from_slice::<AckBody>(body) {
        Ok(b) => b.position,
        Err(e) => {
            return ApiResponse::error(
                400,
                &format!(
                    "invalid request body (expected {{\"position\": the id: of the last event handled}}): {e}"
                ),
            );
        }
    };
    match store.ack(name, position).await {
        Ok(checkpoint) => ApiResponse::json(200, &Body { name, checkpoint }),
        Err(e) => ApiResponse::from_store_error(&e),
    }
}

/// Where `GET /subscriptions/{name}/events` starts, and the subscription: its checkpoint, or one
/// past `Last-Event-ID` when a reconnecting `EventSource` has seen further (its unacknowledged
/// events are its own to finish). 404 when unknown, 400 for a malformed `Last-Event-ID`.
pub async fn consume_from(
    store: &Store,
    name: &str,
    last_event_id: Option<&str>,
) -> Result<(SubscriptionInfo, u64), ApiResponse> {
    let after = after_last_event_id(last_event_id)?;
    let info = store
        .subscription_info(name)
        .await
        .map_err(|e| ApiResponse::from_store_error(&e))?;
    let from = info.checkpoint.max(after);
    Ok((info, from))
}
