//! `galleon render` (being built in this session; replaced before any commit).

/// Arguments of `galleon render`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("galleon render is not built yet")
}
