//! `hyper-peer ADDR TARGET=FILE...`: a minimal hyper 1.x HTTP/1.1 server that answers each
//! request target (path and query, exactly as sent; split from FILE at the last `=`) with the bytes of FILE, read once at startup
//! and held pre-flattened (one `Bytes`), so it renders nothing per request. Unknown targets: 404.
//! The peer of galleon in `bench/http.sh`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().expect("usage: hyper-peer ADDR TARGET=FILE...");
    let mut pages = HashMap::new();
    for a in args {
        let (target, file) = a.rsplit_once('=').expect("TARGET=FILE");
        pages.insert(target.to_owned(), Bytes::from(std::fs::read(file)?));
    }
    let pages = Arc::new(pages);
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!(
        "hyper-peer: serving {} targets at http://{addr}/",
        pages.len()
    );
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let pages = pages.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let body = req
                    .uri()
                    .path_and_query()
                    .and_then(|pq| pages.get(pq.as_str()))
                    .cloned();
                async move {
                    Ok::<_, Infallible>(match body {
                        Some(b) => Response::builder()
                            .header("content-type", "text/html; charset=utf-8")
                            .body(Full::new(b))
                            .expect("static response"),
                        None => Response::builder()
                            .status(StatusCode::NOT_FOUND)
                            .body(Full::new(Bytes::from_static(b"not found\n")))
                            .expect("static response"),
                    })
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
