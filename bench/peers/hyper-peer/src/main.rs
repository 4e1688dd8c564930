//! `hyper-peer ADDR FILE`: a minimal hyper 1.x HTTP/1.1 server that answers every request with
//! the bytes of FILE, read once at startup and held pre-flattened (one `Bytes`), with the headers
//! galleon sends (`content-type`; hyper adds `content-length` and `date`). Per request it clones
//! one `Bytes` and does nothing else: no routing, no lookup, so it is the floor a server that
//! renders its page every time is measured against. `bench/http.sh` runs one per page.
//! `--pipeline-flush` sets hyper's `pipeline_flush(true)`: responses to pipelined requests are
//! gathered while more requests are buffered and flushed together (`bench/pipeline.sh`).

use std::convert::Infallible;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(addr), Some(file)) = (args.next(), args.next()) else {
        eprintln!("usage: hyper-peer ADDR FILE [--pipeline-flush]");
        std::process::exit(2);
    };
    let pipeline_flush = match args.next().as_deref() {
        None => false,
        Some("--pipeline-flush") => true,
        Some(other) => {
            eprintln!(
                "hyper-peer: unknown argument {other:?}; usage: hyper-peer ADDR FILE [--pipeline-flush]"
            );
            std::process::exit(2);
        }
    };
    let page = Bytes::from(std::fs::read(&file)?);
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!(
        "hyper-peer: serving {file} ({} bytes) at http://{addr}/",
        page.len()
    );
    loop {
        let (stream, _) = listener.accept().await?;
        // galleon sets TCP_NODELAY on every connection too.
        let _ = stream.set_nodelay(true);
        let page = page.clone();
        tokio::spawn(async move {
            let service = service_fn(move |_req: Request<Incoming>| {
                let body = page.clone();
                async move {
                    Ok::<_, Infallible>(
                        Response::builder()
                            .header("content-type", "text/html; charset=utf-8")
                            .body(Full::new(body))
                            .expect("static response"),
                    )
                }
            });
            let _ = http1::Builder::new()
                .pipeline_flush(pipeline_flush)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
