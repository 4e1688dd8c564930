//! `galleon serve` (being built in this session; replaced before any commit).

/// Arguments of `galleon serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("galleon serve is not built yet")
}
