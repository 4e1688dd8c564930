//! The site's one entry point: [`Site::open`] builds every route of the example site (pages,
//! compiled pages, static files, rules, the seed jobs, `/fortunes` and the pool's statistics) from a
//! [`SiteConfig`], with the CPU pool they run on and the reload triggers that must live as long
//! as the server.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context;
use galleon_http::{Guard, Router};
use galleon_offload::Pool;
use galleon_state::Watch;

use crate::offload::OffloadConfig;
use crate::pages::PagesConfig;
use crate::rules::RulesConfig;
use crate::templates::Templates;
use crate::whole::WholePages;

/// Everything the site is built from; `Default` is `galleon serve`'s defaults (the site in
/// `./site`, SIGHUP reloading on).
#[derive(Debug, Clone)]
pub struct SiteConfig {
    /// The site directory: `pages/*.html.eex`, `data/*.json`, `static/`, `layout.html.eex`.
    pub dir: PathBuf,
    /// How pages render and whether templates are watched.
    pub pages: PagesConfig,
    /// The CPU pool and the seed jobs' bounds.
    pub offload: OffloadConfig,
    /// The rules example.
    pub rules: RulesConfig,
    /// The server's bulk writers (`ServerConfig::bulk_writers`): with none, streamed pages are
    /// written on the request workers, so their chunks always go to the pool.
    pub bulk_writers: usize,
    /// Who may read `/_galleon/offload` (loopback peers by default) and use the reload routes
    /// (`POST /templates/reload`, `POST /rules/reload`: never opened to every peer, but with a
    /// token set only requests that send it, loopback included).
    pub diagnostics: Guard,
    /// Reload the templates and the rules on SIGHUP (a task on the current tokio runtime).
    pub reload_on_sighup: bool,
    /// The live pages (`/live/...`).
    pub live: crate::live_pages::LiveConfig,
    /// The event store, opened by the caller: the live orders page then keeps its orders
    /// there (`order-N` streams) and follows them across every node of the store.
    pub events: Option<galleon_eventstore::Store>,
    /// `/fortunes` (TechEmpower's Fortunes) and its database.
    pub fortunes: crate::fortunes::FortunesConfig,
}

impl Default for SiteConfig {
    fn default() -> SiteConfig {
        SiteConfig {
            dir: PathBuf::from("site"),
            pages: PagesConfig::default(),
            offload: OffloadConfig::default(),
            rules: RulesConfig::default(),
            bulk_writers: galleon_http::default_bulk_writers(),
            diagnostics: Guard::default(),
            reload_on_sighup: true,
            live: crate::live_pages::LiveConfig::default(),
            events: None,
            fortunes: crate::fortunes::FortunesConfig::default(),
        }
    }
}

/// The example site, ready to serve: its router, the pool its renders and jobs run on (give it
/// to `Server::with_offload` and `join` it after the server stops), its templates, and the
/// guards of its reloading.
#[derive(Debug)]
pub struct Site {
    /// Every route of the site.
    pub router: Router,
    /// The CPU pool of the renders, stream chunks, `/seal` and `/hash`.
    pub cpu: Pool,
    /// The templates the pages render with (reloadable).
    pub templates: Templates,
    /// Keep while serving: dropping it stops the rules' file polling and the template watch.
    pub guards: Guards,
    /// The live pages' mount (its statistics), when they are on.
    pub live: Option<galleon_live::Live>,
    /// `/fortunes`'s PostgreSQL connections, when that is its database (connect them before
    /// serving with `Postgres::connect_all`).
    pub fortunes: crate::fortunes::Mounted,
}

/// What keeps the site's background reloading alive (the rules' polling, `--watch`'s thread).
#[derive(Debug)]
pub struct Guards {
    _rules: crate::rules::Running,
    _templates: Option<Watch>,
}

impl Site {
    /// Checks `config`, starts the pool, loads the templates, data files and rules, and mounts
    /// every route. Call it inside a tokio runtime when `config.reload_on_sighup` (the SIGHUP
    /// handlers are tasks on it). Errors name `galleon serve`'s flag of a bad bound.
    ///
    /// # Examples
    /// ```no_run
    /// # fn main() -> anyhow::Result<()> {
    /// let rt = tokio::runtime::Runtime::new()?;
    /// rt.block_on(async {
    ///     let site = galleon_site::Site::open(galleon_site::SiteConfig {
    ///         dir: "site".into(),
    ///         ..galleon_site::SiteConfig::default()
    ///     })?;
    ///     let listener = tokio::net::TcpListener::bind("127.0.0.1:4000").await?;
    ///     galleon_http::Server::new(site.router, galleon_http::ServerConfig::default())
    ///         .with_offload(site.cpu.clone())
    ///         .serve(listener, galleon_http::shutdown_signal())
    ///         .await?;
    ///     site.cpu.join();
    ///     anyhow::Ok(())
    /// })
    /// # }
    /// ```
    pub fn open(config: SiteConfig) -> anyhow::Result<Site> {
        config.pages.validate()?;
        let (cpu, work_limits) = crate::offload::pool(&config.offload, config.bulk_writers)?;
        let (dir, guard) = (&config.dir, &config.diagnostics);
        // The same templates compiled into Rust (`/compiled/...`), beside the runtime pages.
        // One budget for the whole pages of both (`--max-whole-pages`).
        let whole = WholePages::new(config.pages.max_whole_pages);
        let router = crate::compiled_pages::routes(Router::new(), dir, &config.pages, &whole)?;
        let (router, rules) =
            crate::rules::mount(router, dir, &config.rules, config.reload_on_sighup, guard)?;
        let router = crate::offload::mount(router, &cpu, work_limits, guard);
        let (router, fortunes) = crate::fortunes::mount(router, &config.fortunes, &cpu)?;
        let (router, live) =
            crate::live_pages::mount(router, dir, &config.live, config.events.as_ref())?;
        let links: Vec<String> = live
            .as_ref()
            .map(|l| l.paths().into_iter().map(str::to_owned).collect())
            .unwrap_or_default();
        // The pages last: every other route wins over a page of the same name (`/rules`).
        let (router, templates) =
            crate::pages::mount(router, dir, &config.pages, &cpu, guard, &whole, &links)
                .with_context(|| format!("loading the site in {}", dir.display()))?;
        let watch = watch_templates(&templates, config.reload_on_sighup)?;
        Ok(Site {
            router,
            cpu,
            templates,
            guards: Guards {
                _rules: rules,
                _templates: watch,
            },
            live,
            fortunes,
        })
    }
}

/// The templates' reload triggers: SIGHUP when `on_sighup`, and when watching a thread polling
/// the files (stopped when the returned watch is dropped).
fn watch_templates(templates: &Templates, on_sighup: bool) -> anyhow::Result<Option<Watch>> {
    if on_sighup {
        let on_hup = templates.clone();
        galleon_state::on_sighup(move || {
            let _ = on_hup.reload();
        })
        .context("installing the SIGHUP handler")?;
    }
    if !templates.watching() {
        return Ok(None);
    }
    let polled = templates.clone();
    let watch = Watch::every(
        "galleon-templates-watch",
        galleon_state::DEFAULT_POLL_INTERVAL,
        move || {
            let _ = polled.reload_if_changed();
        },
    )?;
    // Ignoring a failed write: a stderr nobody reads must not stop the site.
    let _ = writeln!(
        std::io::stderr(),
        "galleon: watching the templates for changes"
    );
    Ok(Some(watch))
}
