//! `hyper-peer ADDR FILE`: a minimal hyper 1.x HTTP/1.1 server that answers every request with
//! the bytes of FILE, read once at startup and held pre-flattened (one `Bytes`), with the headers
//! galleon sends (`content-type`; hyper adds `content-length` and `date`). Per request it clones
//! one `Bytes` and does nothing else: no routing, no lookup, so it is the floor a server that
//! renders its page every time is measured against. `bench/http.sh` runs one per page.
//! `--pipeline-flush` sets hyper's `pipeline_flush(true)`: responses to pipelined requests are
//! gathered while more requests are buffered and flushed together (`bench/pipeline.sh`).
//! `--current-thread` runs it on a current-thread tokio runtime (default: `#[tokio::main]`'s
//! multi-thread one), as galleon runs one worker.

use std::convert::Infallible;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

const USAGE: &str = "usage: hyper-peer ADDR FILE [--pipeline-flush] [--current-thread]";

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(addr), Some(file)) = (args.next(), args.next()) else {
        eprintln!("{USAGE}");
        std::process::exit(2);
    };
    let (mut pipeline_flush, mut current_thread) = (false, false);
    for a in args {
        match a.as_str() {
            "--pipeline-flush" => pipeline_flush = true,
            "--current-thread" => current_thread = true,
            other => {
                eprintln!("hyper-peer: unknown argument {other:?}; {USAGE}");
                std::process::exit(2);
            }
        }
    }
    let rt = if current_thread {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Runtime::new()?
    };
    rt.block_on(serve(addr, file, pipeline_flush))
}

async fn serve(addr: String, file: String, pipeline_flush: bool) -> std::io::Result<()> {
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
