//! [`Figure`]: a value from elsewhere (an event store's counters, a cache's size) shown with the
//! statistics, read from a source closure at the moment of each request (see
//! [`Diagnostics::figures`](crate::Diagnostics::figures)), so this crate needs no dependency on
//! what it reads.

/// Whether a [`Figure`] only grows (a Prometheus counter) or goes up and down (a gauge).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FigureKind {
    /// Only grows; `/metrics` names it `NAME_total`.
    Counter,
    /// Any value now.
    Gauge,
}

/// One figure: a Prometheus metric name, one line of help (the label on the live page), its
/// kind and its value now.
///
/// # Examples
/// ```
/// use galleon_stats::{Figure, FigureKind};
///
/// let f = Figure::counter("galleon_events_appends", "appends stored (this process)", 12.0);
/// assert_eq!(f.kind, FigureKind::Counter);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figure {
    /// Metric name, e.g. `galleon_events_appends` (also its key in `stats.json`'s `events`).
    pub name: &'static str,
    /// One line of help.
    pub help: &'static str,
    /// Counter or gauge.
    pub kind: FigureKind,
    /// Its value now.
    pub value: f64,
    /// One Prometheus label (`("view", "/live/orders")`): figures of one name told apart by
    /// it, such as one per live view. Consecutive figures of a name share its description.
    pub label: Option<(&'static str, &'static str)>,
}

impl Figure {
    /// A counter.
    pub fn counter(name: &'static str, help: &'static str, value: f64) -> Figure {
        Figure {
            name,
            help,
            kind: FigureKind::Counter,
            value,
            label: None,
        }
    }

    /// A gauge.
    pub fn gauge(name: &'static str, help: &'static str, value: f64) -> Figure {
        Figure {
            name,
            help,
            kind: FigureKind::Gauge,
            value,
            label: None,
        }
    }

    /// This figure with label `key="value"`.
    ///
    /// # Examples
    /// ```
    /// let f = galleon_stats::Figure::gauge("galleon_live_views", "views joined", 3.0)
    ///     .with_label("view", "/live/orders");
    /// assert_eq!(f.label, Some(("view", "/live/orders")));
    /// ```
    pub fn with_label(mut self, key: &'static str, value: &'static str) -> Figure {
        self.label = Some((key, value));
        self
    }

    /// The figure's key in `stats.json`: its name, and its label as `name{key="value"}`.
    pub(crate) fn key(&self) -> String {
        match self.label {
            Some((k, v)) => format!("{}{{{k}=\"{v}\"}}", self.name),
            None => self.name.to_owned(),
        }
    }

    /// The figure's row label on the stats page: its help, and its label's value.
    pub(crate) fn row_label(&self) -> String {
        match self.label {
            Some((_, v)) => format!("{} ({v})", self.help),
            None => self.help.to_owned(),
        }
    }
}
