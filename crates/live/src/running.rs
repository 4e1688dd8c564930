//! One mounted view: its [`LiveView`], its [`Socket`], its template and the render its client
//! holds. Turns mounts, events, patches and messages into the JSON the client merges: the
//! whole `rendered` at a join, then diffs of what changed. A handler's error or panic is the
//! view's crash: reported as an error, the view is not to be used again.

use std::panic::{AssertUnwindSafe, catch_unwind};

use galleon_template::{Changed, LiveRender, LiveTemplate};
use serde_json::Value as Json;

use crate::params::{decode_form, key_path};
use crate::view::{Info, LiveView, Navigation, Socket, ViewError};

/// What a handler produced for the client.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Update {
    /// The diff as a JSON object (`None`: nothing changed).
    pub(crate) diff: Option<String>,
    /// Where the handler asked the client to go.
    pub(crate) navigation: Option<Navigation>,
}

/// A mounted view.
pub(crate) struct Running {
    view: Box<dyn LiveView>,
    socket: Socket,
    template: LiveTemplate,
    held: Option<LiveRender>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("template", &self.template.name())
            .field("socket", &self.socket)
            .finish()
    }
}

/// Runs a handler, a panic turned into its error.
fn guarded<T>(f: impl FnOnce() -> Result<T, ViewError>) -> Result<T, ViewError> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let why = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        Err(ViewError(format!("handler panicked: {why}")))
    })
}

impl Running {
    /// Mounts `view`: `mount` then `handle_params` with the URL's query. `connected`: joined
    /// over the socket (else the HTTP render).
    pub(crate) fn mount(
        view: Box<dyn LiveView>,
        template: LiveTemplate,
        url: &str,
        session: &Json,
        connected: bool,
    ) -> Result<Running, ViewError> {
        let mut r = Running {
            view,
            socket: Socket::new(connected),
            template,
            held: None,
        };
        let params = query_params(url);
        let (view, socket) = (&mut r.view, &mut r.socket);
        guarded(|| {
            view.mount(&params, session, socket)?;
            view.handle_params(&params, url, socket)
        })?;
        Ok(r)
    }

    /// The page's HTML (the HTTP render), and the title if one was set.
    pub(crate) fn html(&mut self) -> Result<(String, Option<String>), ViewError> {
        let r = self.render(true)?;
        let html = self.template.to_html(&r);
        self.held = Some(r);
        let (_, title) = self.socket.take_changes();
        Ok((html, title))
    }

    /// The whole `rendered` of a join reply (statics included), title as `"t"`.
    pub(crate) fn rendered(&mut self) -> Result<String, ViewError> {
        let r = self.render(true)?;
        let mut json = String::new();
        self.template.diff(None, &r, &mut json);
        self.held = Some(r);
        let (_, title) = self.socket.take_changes();
        with_title(&mut json, title);
        Ok(json)
    }

    /// A client event (`type` as the client names it: "click", "form", "keyup", ...). A
    /// form's `value` is its urlencoded fields, decoded here; the client sends the field that
    /// changed (`_target`) and the form's `phx-value-*` apart, in `meta`, which is merged in
    /// as Phoenix does: `_target` as its key path (`["user", "name"]`).
    pub(crate) fn event(
        &mut self,
        kind: &str,
        event: &str,
        value: &Json,
        meta: Option<&Json>,
    ) -> Result<Update, ViewError> {
        let mut decoded;
        let value = match (kind, value) {
            ("form", Json::String(s)) => {
                decoded = decode_form(s);
                if let (Json::Object(form), Some(Json::Object(meta))) = (&mut decoded, meta) {
                    for (k, v) in meta {
                        form.insert(k.clone(), v.clone());
                    }
                }
                if let Some(t) = decoded.get_mut("_target")
                    && let Some(name) = t.as_str()
                {
                    *t = key_path(name);
                }
                &decoded
            }
            _ => value,
        };
        let (view, socket) = (&mut self.view, &mut self.socket);
        guarded(|| view.handle_event(event, value, socket))?;
        self.update()
    }

    /// `live_patch` from the client: `handle_params` with the new URL.
    pub(crate) fn patch(&mut self, url: &str) -> Result<Update, ViewError> {
        let params = query_params(url);
        let (view, socket) = (&mut self.view, &mut self.socket);
        guarded(|| view.handle_params(&params, url, socket))?;
        self.update()
    }

    /// A message from outside.
    pub(crate) fn info(&mut self, info: Info) -> Result<Update, ViewError> {
        let (view, socket) = (&mut self.view, &mut self.socket);
        guarded(|| view.handle_info(info, socket))?;
        self.update()
    }

    /// Topics the view subscribed to since the last call.
    pub(crate) fn take_subscriptions(&mut self) -> Vec<String> {
        self.socket.take_subscriptions()
    }

    /// Broadcasts the view asked for since the last call.
    pub(crate) fn take_broadcasts(&mut self) -> Vec<(String, Info)> {
        self.socket.take_broadcasts()
    }

    /// The diff of what the last handler changed. A `push_patch` runs `handle_params` with the
    /// new URL first (as LiveView does: the client only updates its address bar).
    fn update(&mut self) -> Result<Update, ViewError> {
        let mut navigation = self.socket.take_navigation();
        if let Some(Navigation::Patch(to)) = &navigation {
            let params = query_params(to);
            let (view, socket) = (&mut self.view, &mut self.socket);
            guarded(|| view.handle_params(&params, to, socket))?;
            // A patch from handle_params itself replaces the first.
            if let Some(again) = self.socket.take_navigation() {
                navigation = Some(again);
            }
        }
        let r = self.render(false)?;
        let (_, title) = self.socket.take_changes();
        let mut json = String::new();
        let any = self.template.diff(self.held.as_ref(), &r, &mut json);
        self.held = Some(r);
        let diff = (any || title.is_some()).then(|| {
            with_title(&mut json, title);
            json
        });
        Ok(Update { diff, navigation })
    }

    fn render(&mut self, whole: bool) -> Result<LiveRender, ViewError> {
        let assigns = self.socket.assigns();
        let changed = |n: &str| self.socket.changed(n);
        let changed = if whole || self.held.is_none() {
            Changed::All
        } else {
            Changed::Only(&changed)
        };
        let r = self
            .template
            .render(|n| assigns.get(n).cloned(), changed, self.held.as_ref());
        r.map_err(|e| {
            // Logged in full (the template's name, line and column); the client sees nothing
            // of it.
            tracing::error!(template = self.template.name(), error = %e, "live render failed");
            ViewError(format!("render of {} failed", self.template.name()))
        })
    }
}

/// Adds `"t": title` to the JSON object `json`.
fn with_title(json: &mut String, title: Option<String>) {
    let Some(t) = title else { return };
    let t = Json::String(t).to_string();
    if json == "{}" {
        *json = format!("{{\"t\":{t}}}");
    } else if json.ends_with('}') {
        json.pop();
        json.push_str(",\"t\":");
        json.push_str(&t);
        json.push('}');
    }
}

/// The query of `url` (absolute or a path) as a JSON object.
pub(crate) fn query_params(url: &str) -> Json {
    let q = url.split_once('?').map_or("", |(_, q)| q);
    let q = q.split_once('#').map_or(q, |(q, _)| q);
    decode_form(q)
}

#[cfg(test)]
mod tests {
    use super::*;
    use galleon_template::Engine;
    use serde_json::json;

    struct Counter;

    impl LiveView for Counter {
        fn mount(&mut self, _: &Json, session: &Json, s: &mut Socket) -> Result<(), ViewError> {
            s.assign("count", 0);
            s.assign("user", session["user"].as_str().unwrap_or("anon"));
            s.page_title("Counter");
            Ok(())
        }
        fn handle_event(&mut self, event: &str, v: &Json, s: &mut Socket) -> Result<(), ViewError> {
            match event {
                "inc" => s.update_int("count", |n| n + 1),
                "same" => s.update_int("count", |n| n),
                "name" => {
                    s.assign("user", v["user"]["name"].as_str().unwrap_or(""));
                }
                "boom" => panic!("exploded"),
                "fail" => return Err("no".into()),
                "go" => s.push_patch("/live/counter?page=2"),
                _ => return Err(format!("unknown event {event}").into()),
            }
            Ok(())
        }
        fn handle_params(&mut self, p: &Json, _: &str, s: &mut Socket) -> Result<(), ViewError> {
            s.assign("page", p["page"].as_str().unwrap_or("1"));
            Ok(())
        }
        fn handle_info(&mut self, info: Info, s: &mut Socket) -> Result<(), ViewError> {
            if let Some(n) = info.downcast_ref::<i64>() {
                s.update_int("count", |c| c + n);
            }
            Ok(())
        }
    }

    fn running() -> Running {
        let engine = Engine::builder()
            .live(true)
            .from_source(
                "c",
                "<p><%= @count %></p><b><%= @user %></b><i><%= @page %></i>",
            )
            .unwrap();
        let t = engine.live("c").unwrap();
        Running::mount(
            Box::new(Counter),
            t,
            "/live/counter?page=3",
            &json!({"user": "ada"}),
            true,
        )
        .unwrap()
    }

    #[test]
    fn join_then_diffs_of_what_changed() {
        let mut r = running();
        assert_eq!(
            r.rendered().unwrap(),
            r#"{"0":"0","1":"ada","2":"3","s":["<p>","</p><b>","</b><i>","</i>"],"t":"Counter"}"#
        );
        let u = r.event("click", "inc", &json!({}), None).unwrap();
        assert_eq!(u.diff.as_deref(), Some(r#"{"0":"1"}"#));
        // Setting an assign to its value is no change: nothing to send.
        assert_eq!(
            r.event("click", "same", &json!({}), None).unwrap().diff,
            None
        );
        let u = r
            .event("form", "name", &json!("user%5Bname%5D=Bob+%3Cb%3E"), None)
            .unwrap();
        assert_eq!(u.diff.as_deref(), Some(r#"{"1":"Bob &lt;b&gt;"}"#));
        // push_patch runs handle_params with the new URL: the diff is the patched page.
        let u = r.event("click", "go", &json!({}), None).unwrap();
        assert_eq!(
            u.navigation,
            Some(Navigation::Patch("/live/counter?page=2".into()))
        );
        assert_eq!(u.diff.as_deref(), Some(r#"{"2":"2"}"#));
        let u = r.patch("http://h/live/counter?page=5").unwrap();
        assert_eq!(u.diff.as_deref(), Some(r#"{"2":"5"}"#));
        let u = r.info(Info::new(10i64)).unwrap();
        assert_eq!(u.diff.as_deref(), Some(r#"{"0":"11"}"#));
        // A message the view ignores changes nothing.
        assert_eq!(r.info(Info::new("other")).unwrap().diff, None);
    }

    struct Echo;

    impl LiveView for Echo {
        fn mount(&mut self, _: &Json, _: &Json, s: &mut Socket) -> Result<(), ViewError> {
            s.assign("got", "");
            Ok(())
        }
        fn handle_event(&mut self, _: &str, v: &Json, s: &mut Socket) -> Result<(), ViewError> {
            s.assign("got", v.to_string());
            Ok(())
        }
    }

    #[test]
    fn a_forms_meta_is_merged_and_its_target_is_a_key_path() {
        let engine = Engine::builder()
            .live(true)
            .from_source("e", "<%= raw(@got) %>")
            .unwrap();
        let mut r = Running::mount(
            Box::new(Echo),
            engine.live("e").unwrap(),
            "/",
            &json!({}),
            true,
        )
        .unwrap();
        r.rendered().unwrap();
        // As phoenix_live_view 1.2 sends a phx-change: `_target` and phx-value-* in meta.
        let meta = json!({"_target": "user[name]", "step": "2"});
        let u = r
            .event("form", "v", &json!("user%5Bname%5D=Al"), Some(&meta))
            .unwrap();
        let got: Json = serde_json::from_str(
            serde_json::from_str::<Json>(&u.diff.unwrap()).unwrap()["0"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            got,
            json!({"user": {"name": "Al"}, "_target": ["user", "name"], "step": "2"})
        );
        // An older client's `_target` inside the form decodes the same way; meta that is not
        // an object is ignored; a click's value is passed as it came.
        let u = r
            .event("form", "v", &json!("q=1&_target=q"), Some(&json!(3)))
            .unwrap();
        assert!(u.diff.unwrap().contains(r#"\"_target\":[\"q\"]"#));
        let u = r
            .event("click", "v", &json!({"_target": "a[b]"}), Some(&meta))
            .unwrap();
        assert!(u.diff.unwrap().contains(r#"\"_target\":\"a[b]\""#));
    }

    #[test]
    fn a_panic_or_an_error_in_a_handler_is_the_views_error() {
        let mut r = running();
        r.rendered().unwrap();
        let e = r.event("click", "boom", &json!({}), None).unwrap_err();
        assert!(e.0.contains("exploded"), "{e}");
        assert_eq!(
            r.event("click", "fail", &json!({}), None).unwrap_err().0,
            "no"
        );
    }

    #[test]
    fn the_http_render_is_the_page() {
        let mut r = running();
        let (html, title) = r.html().unwrap();
        assert_eq!(html, "<p>0</p><b>ada</b><i>3</i>");
        assert_eq!(title.as_deref(), Some("Counter"));
    }

    #[test]
    fn titles_join_the_diff() {
        let mut s = String::from("{}");
        with_title(&mut s, Some("a\"b".into()));
        assert_eq!(s, r#"{"t":"a\"b"}"#);
        let mut s = String::from(r#"{"0":"1"}"#);
        with_title(&mut s, Some("x".into()));
        assert_eq!(s, r#"{"0":"1","t":"x"}"#);
    }
}
