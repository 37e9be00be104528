//! Which generations a lifetime analysis keeps, and which points it replays.

use std::sync::Arc;

use serde::Serialize;

use crate::error::{MemoryError, Result};
use crate::state::MemoryState;

/// What to keep, by point index (`MemoryState::identity.index`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Selection {
    /// Every generation live at the first point or born after it.
    All,
    /// Generations not reusable by the allocator at this point (owner-active or awaiting
    /// free).
    ActiveAt { point: i64 },
    /// Generations whose `alloc` event lies in `(start, end]`.
    BornBetween { start: i64, end: i64 },
}

impl Selection {
    pub fn kind(&self) -> &'static str {
        match self {
            Selection::All => "all",
            Selection::ActiveAt { .. } => "active_at",
            Selection::BornBetween { .. } => "born_between",
        }
    }
}

/// Positions (into the states slice) the replay covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The range-start state: its live blocks are the generations the replay starts with.
    pub start: usize,
    /// The last analysed point.
    pub through: usize,
    /// Birth windows kept by `born_between`: windows `k` with `lo < k <= hi`.
    pub born: Option<(usize, usize)>,
    /// `active_at`: only the range-start generations are kept.
    pub active_only: bool,
}

impl Plan {
    /// Whether a generation is kept: `initial` ones were live in the range-start state,
    /// the others were born by an `alloc` event in window `k`.
    pub fn keeps(&self, k: usize, initial: bool) -> bool {
        if self.active_only {
            return initial;
        }
        match self.born {
            None => true,
            Some((lo, hi)) => !initial && k > lo && k <= hi,
        }
    }
}

fn position(states: &[Arc<MemoryState>], index: i64, what: &str) -> Result<usize> {
    states
        .iter()
        .position(|s| s.identity.index == index)
        .ok_or_else(|| {
            MemoryError::invalid(format!(
                "{what}: the run has no point with index {index} (points: {})",
                states
                    .iter()
                    .map(|s| format!("{} '{}'", s.identity.index, s.identity.label))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

fn name(states: &[Arc<MemoryState>], pos: usize) -> String {
    let s = &states[pos].identity;
    format!("'{}' (index {})", s.label, s.index)
}

/// Refuses a `through` point before the selection's point at `pos` (`what` names it).
fn through_reaches(
    states: &[Arc<MemoryState>],
    through: usize,
    pos: usize,
    what: &str,
) -> Result<()> {
    if through < pos {
        return Err(MemoryError::invalid(format!(
            "through {} precedes the {what} {}; give a later through point",
            name(states, through),
            name(states, pos)
        )));
    }
    Ok(())
}

/// Resolves a selection and `through` against a run's states (in commit order).
pub(crate) fn plan(
    states: &[Arc<MemoryState>],
    selection: Selection,
    through: Option<i64>,
) -> Result<Plan> {
    if states.is_empty() {
        return Err(MemoryError::invalid(
            "lifetimes need at least one recorded point; the run has none",
        ));
    }
    let through_pos = match through {
        Some(t) => position(states, t, "through")?,
        None => states.len() - 1,
    };
    let (start, born, active_only) = match selection {
        Selection::All => (0, None, false),
        Selection::ActiveAt { point } => {
            let p = position(states, point, "active_at")?;
            through_reaches(states, through_pos, p, "active_at anchor")?;
            (p, None, true)
        }
        Selection::BornBetween { start, end } => {
            let a = position(states, start, "born_between start")?;
            let b = position(states, end, "born_between end")?;
            if b < a {
                return Err(MemoryError::invalid(format!(
                    "born_between({}, {}): the end comes before the start",
                    name(states, a),
                    name(states, b)
                )));
            }
            through_reaches(states, through_pos, b, "born_between end")?;
            (a, Some((a, b)), false)
        }
    };
    Ok(Plan {
        start,
        through: through_pos,
        born,
        active_only,
    })
}
