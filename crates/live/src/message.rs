//! Phoenix channel messages in the v2 JSON serializer's shape: each text frame is the array
//! `[join_ref, ref, topic, event, payload]`, as `phoenix` 1.8's `serializer.js` writes and reads.

use serde_json::Value;

/// The longest topic or event name accepted, in bytes: real ones (`lv:phx-…`, `phx_join`,
/// `event`) are far shorter, and a cap keeps a hostile client from making the server store or
/// echo large names.
pub(crate) const MAX_NAME_BYTES: usize = 256;

/// One channel message, in either direction.
///
/// `join_ref` is the ref of the `phx_join` that opened the channel the message belongs to
/// (`None` for the socket-wide `phoenix` topic); `msg_ref` is the ref a reply echoes back (`None`
/// for server pushes).
///
/// # Examples
///
/// ```
/// use galleon_live::Message;
///
/// let m = Message::decode(r#"["1","1","lv:phx-x","phx_join",{"url":"/"}]"#).unwrap();
/// assert_eq!(m.event, "phx_join");
/// let reply = Message::reply(m.join_ref.clone(), m.msg_ref.clone(), &m.topic, "ok",
///     serde_json::json!({}));
/// assert_eq!(reply.encode(),
///     r#"["1","1","lv:phx-x","phx_reply",{"response":{},"status":"ok"}]"#);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// The ref of the join that opened this message's channel, if any.
    pub join_ref: Option<String>,
    /// The message's own ref, echoed by its reply; `None` on pushes.
    pub msg_ref: Option<String>,
    /// The channel's topic, such as `lv:phx-F8...` or `phoenix`.
    pub topic: String,
    /// The event name, such as `phx_join`, `event`, `heartbeat` or `phx_reply`.
    pub event: String,
    /// The event's payload (any JSON value; the client sends objects).
    pub payload: Value,
}

/// Why a text frame is not a channel message. The messages name what was wrong and may be shown
/// to the client that sent it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// The frame does not parse as JSON.
    #[error("the message is not JSON: {0}")]
    NotJson(String),
    /// The frame is JSON but not an array.
    #[error("the message is not an array [join_ref, ref, topic, event, payload]")]
    NotAnArray,
    /// The frame is an array of the wrong length.
    #[error("the message has {0} elements; expected 5: [join_ref, ref, topic, event, payload]")]
    WrongLength(usize),
    /// `join_ref` or `ref` is neither a string nor null.
    #[error("{0} must be a string or null")]
    BadRef(&'static str),
    /// `topic` or `event` is not a string.
    #[error("{0} must be a string")]
    NotAString(&'static str),
    /// `topic` or `event` is the empty string.
    #[error("{0} must not be empty")]
    Empty(&'static str),
    /// `topic` or `event` is longer than 256 bytes.
    #[error("{field} is {len} bytes long; the limit is {MAX_NAME_BYTES}")]
    TooLong {
        /// Which element: `topic` or `event`.
        field: &'static str,
        /// Its length in bytes.
        len: usize,
    },
}

impl Message {
    /// Parses one text frame.
    ///
    /// # Errors
    ///
    /// A [`MessageError`] saying what is wrong with the frame; never panics.
    pub fn decode(text: &str) -> Result<Message, MessageError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| MessageError::NotJson(e.to_string()))?;
        let Value::Array(items) = value else {
            return Err(MessageError::NotAnArray);
        };
        let [join_ref, msg_ref, topic, event, payload]: [Value; 5] = items
            .try_into()
            .map_err(|items: Vec<Value>| MessageError::WrongLength(items.len()))?;
        Ok(Message {
            join_ref: reference(join_ref, "join_ref")?,
            msg_ref: reference(msg_ref, "ref")?,
            topic: name(topic, "topic")?,
            event: name(event, "event")?,
            payload,
        })
    }

    /// The frame's text: `[join_ref, ref, topic, event, payload]` as compact JSON.
    pub fn encode(&self) -> String {
        encode_raw(
            self.join_ref.as_deref(),
            self.msg_ref.as_deref(),
            &self.topic,
            &self.event,
            &self.payload.to_string(),
        )
    }

    /// A `phx_reply` to the message with refs `join_ref`/`msg_ref`, payload
    /// `{"status": status, "response": response}` (status is `ok` or `error`).
    pub fn reply(
        join_ref: Option<String>,
        msg_ref: Option<String>,
        topic: &str,
        status: &str,
        response: Value,
    ) -> Message {
        let mut payload = serde_json::Map::new();
        payload.insert("status".to_owned(), Value::String(status.to_owned()));
        payload.insert("response".to_owned(), response);
        Message {
            join_ref,
            msg_ref,
            topic: topic.to_owned(),
            event: "phx_reply".to_owned(),
            payload: Value::Object(payload),
        }
    }

    /// A server push on the channel opened by `join_ref`: `ref` is null, as no reply is expected.
    pub fn push(join_ref: Option<String>, topic: &str, event: &str, payload: Value) -> Message {
        Message {
            join_ref,
            msg_ref: None,
            topic: topic.to_owned(),
            event: event.to_owned(),
            payload,
        }
    }

    /// `phx_error` on a channel: the server side of it crashed, and the client will rejoin.
    pub fn error(join_ref: Option<String>, topic: &str) -> Message {
        Message::push(
            join_ref,
            topic,
            "phx_error",
            Value::Object(serde_json::Map::new()),
        )
    }

    /// `phx_close` on a channel: the server closed it, and the client will not rejoin.
    pub fn close(join_ref: Option<String>, topic: &str) -> Message {
        Message::push(
            join_ref,
            topic,
            "phx_close",
            Value::Object(serde_json::Map::new()),
        )
    }
}

/// A frame's text built around `payload_json`, JSON the caller has already serialized (a
/// rendered diff, say), so it is not parsed and written again. The strings are escaped here;
/// `payload_json` is spliced in as is and must be valid JSON.
pub(crate) fn encode_raw(
    join_ref: Option<&str>,
    msg_ref: Option<&str>,
    topic: &str,
    event: &str,
    payload_json: &str,
) -> String {
    let mut out = String::with_capacity(
        payload_json.len() + topic.len() + event.len() + 32 + join_ref.map_or(0, str::len),
    );
    out.push('[');
    push_ref(&mut out, join_ref);
    out.push(',');
    push_ref(&mut out, msg_ref);
    out.push(',');
    push_str(&mut out, topic);
    out.push(',');
    push_str(&mut out, event);
    out.push(',');
    out.push_str(payload_json);
    out.push(']');
    out
}

fn push_ref(out: &mut String, r: Option<&str>) {
    match r {
        Some(s) => push_str(out, s),
        None => out.push_str("null"),
    }
}

fn push_str(out: &mut String, s: &str) {
    // Serializing a `str` into memory has no way to fail (no I/O, no non-string map keys).
    out.push_str(&serde_json::to_string(s).expect("a str always serializes"));
}

fn reference(value: Value, field: &'static str) -> Result<Option<String>, MessageError> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        _ => Err(MessageError::BadRef(field)),
    }
}

fn name(value: Value, field: &'static str) -> Result<String, MessageError> {
    let Value::String(s) = value else {
        return Err(MessageError::NotAString(field));
    };
    if s.is_empty() {
        return Err(MessageError::Empty(field));
    }
    if s.len() > MAX_NAME_BYTES {
        return Err(MessageError::TooLong {
            field,
            len: s.len(),
        });
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn decodes_a_join() {
        let m = Message::decode(r#"["4","4","lv:phx-abc","phx_join",{"url":"/x","params":{}}]"#)
            .unwrap();
        assert_eq!(m.join_ref.as_deref(), Some("4"));
        assert_eq!(m.msg_ref.as_deref(), Some("4"));
        assert_eq!(m.topic, "lv:phx-abc");
        assert_eq!(m.event, "phx_join");
        assert_eq!(m.payload, json!({"url": "/x", "params": {}}));
    }

    #[test]
    fn decodes_a_heartbeat_with_null_join_ref() {
        let m = Message::decode(r#"[null,"7","phoenix","heartbeat",{}]"#).unwrap();
        assert_eq!(m.join_ref, None);
        assert_eq!(m.msg_ref.as_deref(), Some("7"));
        assert_eq!(m.topic, "phoenix");
        assert_eq!(m.event, "heartbeat");
        assert_eq!(m.payload, json!({}));
    }

    #[test]
    fn round_trips() {
        let messages = [
            Message::reply(
                Some("1".into()),
                Some("2".into()),
                "lv:a",
                "ok",
                json!({"x": [1]}),
            ),
            Message::push(
                Some("1".into()),
                "lv:a",
                "diff",
                json!({"0": "hi \"there\"\n"}),
            ),
            Message::error(Some("3".into()), "lv:b"),
            Message::close(None, "lv:c"),
            Message {
                join_ref: None,
                msg_ref: Some("9".into()),
                topic: "t\u{e9}\u{1F600}\\/".into(),
                event: "ev\u{0}\t".into(),
                payload: json!(null),
            },
        ];
        for m in messages {
            let text = m.encode();
            assert_eq!(Message::decode(&text).unwrap(), m, "{text}");
        }
    }

    #[test]
    fn encodes_exactly_as_the_js_serializer_expects() {
        assert_eq!(
            Message::reply(None, Some("5".into()), "phoenix", "ok", json!({})).encode(),
            r#"[null,"5","phoenix","phx_reply",{"response":{},"status":"ok"}]"#
        );
        assert_eq!(
            Message::push(Some("1".into()), "lv:x", "diff", json!({"0": 1})).encode(),
            r#"["1",null,"lv:x","diff",{"0":1}]"#
        );
        assert_eq!(
            Message::error(Some("1".into()), "lv:x").encode(),
            r#"["1",null,"lv:x","phx_error",{}]"#
        );
        assert_eq!(
            Message::close(Some("1".into()), "lv:x").encode(),
            r#"["1",null,"lv:x","phx_close",{}]"#
        );
    }

    #[test]
    fn encode_raw_splices_the_payload_and_escapes_the_strings() {
        let text = encode_raw(
            Some("a\"b"),
            None,
            "to\npic",
            "ev</script>",
            r#"{"d":[1,2]}"#,
        );
        assert_eq!(text, r#"["a\"b",null,"to\npic","ev</script>",{"d":[1,2]}]"#);
        let m = Message::decode(&text).unwrap();
        assert_eq!(m.join_ref.as_deref(), Some("a\"b"));
        assert_eq!(m.topic, "to\npic");
        assert_eq!(m.event, "ev</script>");
        assert_eq!(m.payload, json!({"d": [1, 2]}));
    }

    #[test]
    fn rejects_what_is_not_json() {
        for text in ["", "[", "nope", r#"["1","1","t","e",{}"#, "[1,]"] {
            assert!(
                matches!(Message::decode(text), Err(MessageError::NotJson(_))),
                "{text:?}"
            );
        }
    }

    #[test]
    fn rejects_what_is_not_an_array() {
        for text in ["{}", "null", "\"x\"", "5", r#"{"topic":"t"}"#] {
            assert_eq!(
                Message::decode(text),
                Err(MessageError::NotAnArray),
                "{text:?}"
            );
        }
    }

    #[test]
    fn rejects_the_wrong_number_of_elements() {
        assert_eq!(Message::decode("[]"), Err(MessageError::WrongLength(0)));
        assert_eq!(
            Message::decode(r#"["1","1","t","e"]"#),
            Err(MessageError::WrongLength(4))
        );
        assert_eq!(
            Message::decode(r#"["1","1","t","e",{},{}]"#),
            Err(MessageError::WrongLength(6))
        );
    }

    #[test]
    fn rejects_refs_that_are_not_strings_or_null() {
        for bad in ["1", "true", "{}", "[]", "1.5"] {
            assert_eq!(
                Message::decode(&format!(r#"[{bad},"1","t","e",{{}}]"#)),
                Err(MessageError::BadRef("join_ref")),
                "{bad}"
            );
            assert_eq!(
                Message::decode(&format!(r#"["1",{bad},"t","e",{{}}]"#)),
                Err(MessageError::BadRef("ref")),
                "{bad}"
            );
        }
    }

    #[test]
    fn rejects_topics_and_events_that_are_not_strings() {
        for bad in ["null", "1", "false", "{}", "[\"t\"]"] {
            assert_eq!(
                Message::decode(&format!(r#"["1","1",{bad},"e",{{}}]"#)),
                Err(MessageError::NotAString("topic")),
                "{bad}"
            );
            assert_eq!(
                Message::decode(&format!(r#"["1","1","t",{bad},{{}}]"#)),
                Err(MessageError::NotAString("event")),
                "{bad}"
            );
        }
    }

    #[test]
    fn rejects_empty_topics_and_events() {
        assert_eq!(
            Message::decode(r#"["1","1","","e",{}]"#),
            Err(MessageError::Empty("topic"))
        );
        assert_eq!(
            Message::decode(r#"["1","1","t","",{}]"#),
            Err(MessageError::Empty("event"))
        );
    }

    #[test]
    fn rejects_topics_and_events_over_the_limit_and_accepts_at_it() {
        let at = "a".repeat(MAX_NAME_BYTES);
        let over = "a".repeat(MAX_NAME_BYTES + 1);
        assert!(Message::decode(&format!(r#"["1","1","{at}","{at}",{{}}]"#)).is_ok());
        assert_eq!(
            Message::decode(&format!(r#"["1","1","{over}","e",{{}}]"#)),
            Err(MessageError::TooLong {
                field: "topic",
                len: MAX_NAME_BYTES + 1
            })
        );
        assert_eq!(
            Message::decode(&format!(r#"["1","1","t","{over}",{{}}]"#)),
            Err(MessageError::TooLong {
                field: "event",
                len: MAX_NAME_BYTES + 1
            })
        );
        // The limit is on bytes, not characters: 129 two-byte characters are 258 bytes.
        let wide = "\u{e9}".repeat(129);
        assert_eq!(
            Message::decode(&format!(r#"["1","1","{wide}","e",{{}}]"#)),
            Err(MessageError::TooLong {
                field: "topic",
                len: 258
            })
        );
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let text = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(matches!(
            Message::decode(&text),
            Err(MessageError::NotJson(_))
        ));
    }

    #[test]
    fn errors_read_well() {
        assert_eq!(
            MessageError::WrongLength(4).to_string(),
            "the message has 4 elements; expected 5: [join_ref, ref, topic, event, payload]"
        );
        assert_eq!(
            MessageError::TooLong {
                field: "event",
                len: 300
            }
            .to_string(),
            "event is 300 bytes long; the limit is 256"
        );
        assert_eq!(
            MessageError::BadRef("ref").to_string(),
            "ref must be a string or null"
        );
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            ".*".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(".*", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in ".*") {
            let _ = Message::decode(&text);
        }

        #[test]
        fn arbitrary_json_never_panics(value in arb_json()) {
            let _ = Message::decode(&value.to_string());
        }

        #[test]
        fn arbitrary_five_element_arrays_never_panic(
            items in prop::collection::vec(arb_json(), 5..=5)
        ) {
            let _ = Message::decode(&Value::Array(items).to_string());
        }

        #[test]
        fn valid_messages_round_trip(
            join_ref in proptest::option::of(".*"),
            msg_ref in proptest::option::of(".*"),
            topic in ".{1,64}",
            event in ".{1,64}",
            payload in arb_json(),
        ) {
            let m = Message { join_ref, msg_ref, topic, event, payload };
            prop_assert_eq!(Message::decode(&m.encode()), Ok(m));
        }
    }
}
