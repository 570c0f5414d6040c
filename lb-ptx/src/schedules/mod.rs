//! The schedule templates, one file each, and the `Schedule` names the attribute accepts.

/// A built-in schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Schedule {
    /// One tile per thread, grid-stride (thesis §3.3.1).
    ThreadMapped,
}

impl Schedule {
    /// Every built-in schedule, in the order `"auto"` expands to.
    pub const ALL: &'static [Schedule] = &[Schedule::ThreadMapped];

    /// The name written in the attribute and in plans.
    pub fn name(self) -> &'static str {
        match self {
            Schedule::ThreadMapped => "thread_mapped",
        }
    }

    pub fn from_name(name: &str) -> Option<Schedule> {
        Self::ALL.iter().copied().find(|s| s.name() == name)
    }
}
