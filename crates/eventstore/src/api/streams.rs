//! The HTTP face of stream metadata and soft delete (see `crate::stream_meta`):
//! `GET`/`PUT /streams/{id}/metadata`, `POST /streams/{id}/delete`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::response::ApiResponse;
use crate::store::Store;
use crate::types::StreamMetadata;

/// `{"stream_id", "max_count", "max_age_ms", "truncate_before", "deleted"}`.
#[derive(Serialize)]
struct MetaBody<'a> {
    stream_id: &'a str,
    max_count: Option<u64>,
    max_age_ms: Option<u128>,
    truncate_before: Option<u64>,
    deleted: bool,
}

fn meta_body<'a>(stream: &'a str, m: &StreamMetadata) -> MetaBody<'a> {
    MetaBody {
        stream_id: stream,
        max_count: m.max_count,
        max_age_ms: m.max_age.map(|a| a.as_millis()),
        truncate_before: m.truncate_before,
        deleted: m.deleted,
    }
}

/// `GET /streams/{id}/metadata`: the stream's metadata (`null`s and `"deleted": false` when it
/// has none).
pub async fn stream_metadata(store: &Store, stream: &str) -> ApiResponse {
    match store.stream_metadata(stream).await {
        Ok(m) => ApiResponse::json(200, &meta_body(stream, &m)),
        Err(e) => ApiResponse::from_store_error(&e),
    }
}

/// `PUT /streams/{id}/metadata` with `{"max_count"?, "max_age_ms"?, "truncate_before"?}`:
/// replaces the stream's read rules (a field left out removes its rule); 200 the metadata; 400
/// for a bad body or a limit of 0.
pub async fn set_stream_metadata(store: &Store, stream: &str, body: &[u8]) -> ApiResponse {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct SetBody {
        max_count: Option<u64>,
        max_age_ms: Option<u64>,
        truncate_before: Option<u64>,
    }
    let b: SetBody = match serde_json::from_slice(body) {
        Ok(b) => b,
        Err(e) => {
            return ApiResponse::error(
                400,
                &format!(
                    "invalid request body (expected {{\"max_count\"?, \"max_age_ms\"?, \"truncate_before\"?}}, non-negative integers): {e}"
                ),
            );
        }
    };
    let meta = StreamMetadata {
        max_count: b.max_count,
        max_age: b.max_age_ms.map(Duration::from_millis),
        truncate_before: b.truncate_before,
        deleted: false,
    };
    if let Err(e) = store.set_stream_metadata(stream, meta).await {
        return ApiResponse::from_store_error(&e);
    }
    stream_metadata(store, stream).await
}

/// `POST /streams/{id}/delete`: soft delete; 200 `{"stream_id", "truncate_before"}`; 404 when the
/// stream has no events (or none since an earlier delete).
pub async fn delete_stream(store: &Store, stream: &str) -> ApiResponse {
    #[derive(Serialize)]
    struct Body<'a> {
        stream_id: &'a str,
        truncate_before: u64,
    }
    match store.delete_stream(stream).await {
        Ok(truncate_before) => ApiResponse::json(
            200,
            &Body {
                stream_id: stream,
                truncate_before,
            },
        ),
        Err(e) => ApiResponse::from_store_error(&e),
    }
}
