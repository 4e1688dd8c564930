//! `galleon trace` (being built in this session; replaced before any commit).

/// Arguments of `galleon trace`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("galleon trace is not built yet")
}
