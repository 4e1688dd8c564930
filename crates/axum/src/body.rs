//! `PageBody`: a rendered page as an `http_body::Body` of owned `Bytes` frames, whole (with an
//! exact length) or streamed (each chunk rendered on tokio's blocking pool, one ahead).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use galleon_iolist::{IoList, OwnedFrames, Owners, WritePolicy, to_frames};
use http_body::{Frame, SizeHint};
use tokio::task::JoinHandle;

/// A render handing out its output a chunk at a time: the engine's `RenderStream` or a
/// compiled template's `Stream`.
pub(crate) type Chunks = Box<dyn Iterator<Item = Result<IoList, galleon_template::Error>> + Send>;

/// How lists become frames: the write policy's copy threshold, and the allocations the
/// engine's renders pin (its templates' static text), so that those are referenced.
#[derive(Debug, Clone)]
pub(crate) struct Framer {
    pub(crate) policy: WritePolicy,
    pub(crate) owners: Arc<Owners>,
}

impl Framer {
    pub(crate) fn frames(&self, list: &IoList) -> OwnedFrames {
        to_frames(list, self.policy, &self.owners)
    }
}

/// The body of a [`Page`](crate::Page): an [`http_body::Body`] whose data frames are owned
/// [`Bytes`], most of them references to the templates' static text (see
/// [`galleon_iolist::to_frames`]).
///
/// - A whole render has an exact [`size_hint`](http_body::Body::size_hint), so hyper sends it
///   with `content-length`, and its few frames (a 410 KB Blah page: 13) fit in one of hyper's
///   flushes (at most 16 buffers, one `writev`).
/// - A streamed render has no length (hyper sends it chunked). Each chunk of the render is
///   computed, and turned into frames, on tokio's blocking pool, never on an async worker; the
///   next chunk starts when the previous one is handed out, so at most one finished chunk waits
///   ahead of the socket and a slow reader holds memory, not a thread. Dropping the body (the
///   client went away) stops the render after the chunk in progress.
///
/// A render error in the middle of a stream ends the body with a [`BodyError`] (hyper then cuts
/// the response, so the client sees a truncated body, not a complete-looking one); the error
/// is logged through `tracing`.
pub struct PageBody {
    state: State,
}

enum State {
    Whole {
        frames: std::vec::IntoIter<Bytes>,
        remaining: u64,
    },
    Streaming(Box<Streaming>),
}

struct Streaming {
    /// Frames of the chunk being handed out.
    ready: std::vec::IntoIter<Bytes>,
    next: Next,
    framer: Framer,
}

enum Next {
    /// Not started: made outside a tokio runtime; starts at the first poll.
    Idle(Chunks),
    /// The next chunk, being computed on the blocking pool.
    Computing(JoinHandle<Step>),
    /// The render ended (or failed).
    Done,
}

/// A chunk as frames (`None`: the render ended), and the render to continue from.
type Step = (Option<Result<OwnedFrames, galleon_template::Error>>, Chunks);

fn step(mut render: Chunks, framer: &Framer) -> Step {
    let item = render
        .next()
        .map(|chunk| chunk.map(|list| framer.frames(&list)));
    (item, render)
}

fn compute(render: Chunks, framer: &Framer) -> JoinHandle<Step> {
    let framer = framer.clone();
    tokio::task::spawn_blocking(move || step(render, &framer))
}

impl PageBody {
    /// A whole page: its frames, sent with `content-length`.
    pub(crate) fn whole(frames: OwnedFrames) -> PageBody {
        PageBody {
            state: State::Whole {
                remaining: frames.len() as u64,
                frames: frames.into_frames().into_iter(),
            },
        }
    }

    /// A streamed page: `first` (what was rendered already, if anything), then `rest`'s chunks.
    /// The first chunk of `rest` starts computing now when there is a tokio runtime, else at
    /// the first poll.
    pub(crate) fn streaming(first: Option<OwnedFrames>, rest: Chunks, framer: Framer) -> PageBody {
        let next = match tokio::runtime::Handle::try_current() {
            Ok(_) => Next::Computing(compute(rest, &framer)),
            Err(_) => Next::Idle(rest),
        };
        PageBody {
            state: State::Streaming(Box::new(Streaming {
                ready: first
                    .map(OwnedFrames::into_frames)
                    .unwrap_or_default()
                    .into_iter(),
                next,
                framer,
            })),
        }
    }

    /// The body's length when it is known (a whole render), else `None` (a stream).
    pub fn len(&self) -> Option<u64> {
        match &self.state {
            State::Whole { remaining, .. } => Some(*remaining),
            State::Streaming(_) => None,
        }
    }

    /// True for a whole body with no bytes left.
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// True when the body is a streamed render (sent chunked).
    pub fn is_streaming(&self) -> bool {
        matches!(self.state, State::Streaming(_))
    }

    /// Frames not yet handed out, for a whole body (`None` for a stream): how many buffers
    /// hyper will queue.
    pub fn frame_count(&self) -> Option<usize> {
        match &self.state {
            State::Whole { frames, .. } => Some(frames.len()),
            State::Streaming(_) => None,
        }
    }
}

impl fmt::Debug for PageBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.state {
            State::Whole { frames, remaining } => f
                .debug_struct("PageBody::Whole")
                .field("frames", &frames.len())
                .field("remaining", remaining)
                .finish(),
            State::Streaming(s) => f
                .debug_struct("PageBody::Streaming")
                .field("ready", &s.ready.len())
                .field(
                    "next",
                    &match s.next {
                        Next::Idle(_) => "idle",
                        Next::Computing(_) => "computing",
                        Next::Done => "done",
                    },
                )
                .finish(),
        }
    }
}

impl http_body::Body for PageBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match &mut self.get_mut().state {
            State::Whole { frames, remaining } => Poll::Ready(frames.next().map(|f| {
                *remaining -= f.len() as u64;
                Ok(Frame::data(f))
            })),
            State::Streaming(s) => s.poll_next(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.state {
            State::Whole { remaining, .. } => *remaining == 0,
            State::Streaming(s) => s.ready.len() == 0 && matches!(s.next, Next::Done),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.state {
            State::Whole { remaining, .. } => SizeHint::with_exact(*remaining),
            State::Streaming(s) => {
                let mut hint = SizeHint::new();
                hint.set_lower(s.ready.as_slice().iter().map(|f| f.len() as u64).sum());
                hint
            }
        }
    }
}

impl Streaming {
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        loop {
            if let Some(f) = self.ready.next() {
                return Poll::Ready(Some(Ok(Frame::data(f))));
            }
            let computing = match &mut self.next {
                Next::Done => return Poll::Ready(None),
                Next::Computing(h) => h,
                Next::Idle(_) => {
                    let Next::Idle(render) = std::mem::replace(&mut self.next, Next::Done) else {
                        unreachable!("matched Idle above");
                    };
                    self.next = Next::Computing(compute(render, &self.framer));
                    continue;
                }
            };
            let result = ready!(Pin::new(computing).poll(cx));
            self.next = Next::Done;
            match result {
                Ok((Some(Ok(frames)), render)) => {
                    // Hand this chunk out while the next one renders: one chunk ahead.
                    self.next = Next::Computing(compute(render, &self.framer));
                    self.ready = frames.into_frames().into_iter();
                }
                Ok((None, _)) => return Poll::Ready(None),
                Ok((Some(Err(e)), _)) => {
                    tracing::error!(error = %e, "streamed page: render failed mid-stream");
                    return Poll::Ready(Some(Err(BodyError::Render)));
                }
                Err(e) => {
                    tracing::error!(error = %e, "streamed page: a chunk's render panicked");
                    return Poll::Ready(Some(Err(BodyError::Panicked)));
                }
            }
        }
    }
}

/// Why a streamed [`PageBody`] ended early. It says nothing about the template (the details
/// are in the log), since a body error can reach a client or a proxy's logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BodyError {
    /// The render failed in the middle of the page (a limit, a type error on a later value).
    Render,
    /// A chunk's render panicked (or the runtime shut down under it).
    Panicked,
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BodyError::Render => "the page's render failed mid-stream",
            BodyError::Panicked => "the page's render panicked mid-stream",
        })
    }
}

impl std::error::Error for BodyError {}

#[cfg(test)]
mod tests {
    use super::*;
    use galleon_template::Engine;
    use http_body::Body as _;

    async fn collect(mut body: PageBody) -> (Vec<u8>, usize, Option<BodyError>) {
        let mut out = Vec::new();
        let mut frames = 0;
        while let Some(f) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            match f {
                Ok(f) => {
                    out.extend_from_slice(f.data_ref().expect("data frames only"));
                    frames += 1;
                }
                Err(e) => return (out, frames, Some(e)),
            }
        }
        assert!(body.is_end_stream());
        (out, frames, None)
    }

    fn framer(engine: &Engine) -> Framer {
        Framer {
            policy: WritePolicy::default(),
            owners: Arc::new(Owners::new(
                engine
                    .names()
                    .filter_map(|n| engine.static_text(n).cloned()),
            )),
        }
    }

    #[tokio::test]
    async fn a_whole_body_has_an_exact_size_and_counts_down() {
        let engine =
            Engine::from_source("t", "<%= for _ <- 1..@n do %>0123456789<% end %>").unwrap();
        let list = engine
            .render_with("t", |k| (k == "n").then(|| 1000.into()))
            .unwrap();
        let body = PageBody::whole(framer(&engine).frames(&list));
        assert_eq!(body.size_hint().exact(), Some(10_000));
        assert_eq!(body.len(), Some(10_000));
        assert!(!body.is_end_stream());
        let (out, frames, err) = collect(body).await;
        assert_eq!(out, list.to_vec());
        assert!(frames <= 3, "{frames} frames");
        assert!(err.is_none());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stream_yields_the_render_in_order_and_ends() {
        let engine =
            Engine::from_source("t", "<%= for i <- 1..@n do %><%= i %>,<% end %>").unwrap();
        let n = |k: &str| (k == "n").then(|| 20_000.into());
        let render = engine.stream_with("t", n, 4096).unwrap();
        let body = PageBody::streaming(None, Box::new(render), framer(&engine));
        assert!(body.is_streaming());
        assert_eq!(body.size_hint().exact(), None);
        let (out, frames, err) = collect(body).await;
        assert!(err.is_none());
        assert_eq!(out, engine.render_with("t", n).unwrap().to_vec());
        assert!(frames > 10, "{frames}");
    }

    #[test]
    fn a_stream_made_outside_a_runtime_starts_at_the_first_poll() {
        let engine =
            Engine::from_source("t", "<%= for i <- 1..@n do %><%= i %>,<% end %>").unwrap();
        let n = |k: &str| (k == "n").then(|| 100.into());
        let body = PageBody::streaming(
            None,
            Box::new(engine.stream_with("t", n, 64).unwrap()),
            framer(&engine),
        );
        assert!(format!("{body:?}").contains("idle"));
        let rt = tokio::runtime::Runtime::new().unwrap();
        let (out, _, err) = rt.block_on(collect(body));
        assert!(err.is_none());
        assert_eq!(out, engine.render_with("t", n).unwrap().to_vec());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_error_mid_stream_ends_the_body_with_an_error_after_the_good_part() {
        // Each item is rendered as it comes: the string at the end fails `+ 1`, long after
        // the first chunks went out.
        let engine =
            Engine::from_source("t", "<%= for x <- @xs do %><%= x + 1 %>,<% end %>").unwrap();
        let xs = galleon_template::Value::list(
            (0..5000)
                .map(galleon_template::Value::from)
                .chain([galleon_template::Value::str("oops")]),
        );
        let render = engine
            .stream_with("t", |k| (k == "xs").then(|| xs.clone()), 1024)
            .unwrap();
        let (out, _, err) =
            collect(PageBody::streaming(None, Box::new(render), framer(&engine))).await;
        assert_eq!(err, Some(BodyError::Render));
        assert!(out.starts_with(b"1,2,3,"));
        assert!(out.len() > 1024);
        assert!(!String::from_utf8_lossy(&out).contains("oops"));
    }
}
