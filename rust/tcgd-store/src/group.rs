//! What every run group checks of its runs, whatever they record: one name, one run per
//! rank (ranks 0 or more), and one sequence of point labels, which a rank that crashed
//! stops early in. A rank problem reads the same in every kind of group (tensor runs,
//! memory runs); each kind words its other problems for its users and adds its own
//! checks.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::manifest::Manifest;

/// One rank's run as a group holds it: where it is, what its manifest says of it, and
/// its points' labels. Each kind of group keeps it beside what it reads of the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankRun {
    pub rank: i64,
    /// The job root holding the run.
    pub path: PathBuf,
    /// The run's name in that root.
    pub name: String,
    pub run_id: String,
    pub complete: bool,
    pub world_size: Option<i64>,
    /// Its points' labels, in order.
    pub labels: Vec<String>,
}

impl RankRun {
    /// The run in `path` whose manifest is `manifest`, placed at `rank`.
    pub fn new(path: &Path, manifest: &Manifest, rank: i64, labels: Vec<String>) -> RankRun {
        RankRun {
            rank,
            path: path.to_path_buf(),
            name: manifest.header.name.clone(),
            run_id: manifest.header.run_id.clone(),
            complete: manifest.complete,
            world_size: manifest.header.world_size,
            labels,
        }
    }
}

impl AsRef<RankRun> for RankRun {
    fn as_ref(&self) -> &RankRun {
        self
    }
}

/// The first run named differently from the first run.
pub fn other_name<R: AsRef<RankRun>>(runs: &[R]) -> Option<&R> {
    let first = runs.first()?.as_ref();
    runs.iter().find(|r| r.as_ref().name != first.name)
}

/// Why runs cannot be placed by rank: the first problem in the order the runs came.
#[derive(Debug)]
pub enum RankProblem<R> {
    /// A rank below 0.
    Negative(R),
    /// Two runs of one rank, in the order they came.
    Twice(R, R),
}

impl<R: AsRef<RankRun>> std::fmt::Display for RankProblem<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RankProblem::Negative(run) => {
                let run = run.as_ref();
                write!(
                    f,
                    "run '{}' in '{}' has rank {}; ranks are 0 or more",
                    run.name,
                    run.path.display(),
                    run.rank
                )
            }
            RankProblem::Twice(first, second) => write!(
                f,
                "rank {} has two runs ('{}' and '{}'); a group holds one run per rank",
                second.as_ref().rank,
                first.as_ref().path.display(),
                second.as_ref().path.display()
            ),
        }
    }
}

/// The runs by rank, ascending.
pub fn by_rank<R: AsRef<RankRun>>(
    runs: impl IntoIterator<Item = R>,
) -> Result<Vec<R>, RankProblem<R>> {
    let mut ranked: BTreeMap<i64, R> = BTreeMap::new();
    for run in runs {
        let rank = run.as_ref().rank;
        if rank < 0 {
            return Err(RankProblem::Negative(run));
        }
        if let Some(first) = ranked.remove(&rank) {
            return Err(RankProblem::Twice(first, run));
        }
        ranked.insert(rank, run);
    }
    Ok(ranked.into_values().collect())
}

/// Ranks below `world_size` that have no run.
pub fn missing_ranks<R: AsRef<RankRun>>(runs: &[R], world_size: i64) -> Vec<i64> {
    (0..world_size)
        .filter(|rank| !runs.iter().any(|r| r.as_ref().rank == *rank))
        .collect()
}

/// The run with the most points (the lowest rank of those): its labels are the group's
/// sequence, which every other rank's labels must be or begin.
pub fn longest<R: AsRef<RankRun>>(runs: &[R]) -> Option<&R> {
    runs.iter()
        .max_by_key(|r| (r.as_ref().labels.len(), Reverse(r.as_ref().rank)))
}

/// The first point at which `run`'s labels leave `longest`'s; `None` when they are the
/// same sequence or begin it (a rank that stopped early).
pub fn label_mismatch(run: &RankRun, longest: &RankRun) -> Option<usize> {
    run.labels
        .iter()
        .zip(&longest.labels)
        .position(|(a, b)| a != b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(rank: i64, name: &str, labels: &[&str]) -> RankRun {
        RankRun {
            rank,
            path: PathBuf::from("root"),
            name: name.to_owned(),
            run_id: format!("run-{rank}"),
            complete: true,
            world_size: None,
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
        }
    }

    fn run(rank: i64, labels: &[&str]) -> RankRun {
        named(rank, "job", labels)
    }

    #[test]
    fn ranks_are_unique_and_ordered() {
        let runs = by_rank([run(2, &[]), run(0, &[])]).unwrap();
        assert_eq!(runs.iter().map(|r| r.rank).collect::<Vec<_>>(), [0, 2]);
        assert_eq!(missing_ranks(&runs, 4), [1, 3]);
        assert!(matches!(
            by_rank([run(1, &[]), run(1, &[])]),
            Err(RankProblem::Twice(..))
        ));
        assert!(matches!(
            by_rank([run(-1, &[])]),
            Err(RankProblem::Negative(_))
        ));
        assert!(other_name(&[run(0, &[]), named(1, "other", &[])]).is_some());
    }

    #[test]
    fn a_crashed_rank_is_a_prefix_of_the_longest() {
        let runs = [run(0, &["a"]), run(1, &["a", "b"]), run(2, &["a", "b"])];
        let longest = longest(&runs).unwrap();
        assert_eq!(longest.rank, 1);
        assert_eq!(label_mismatch(&runs[0], longest), None);
        assert_eq!(label_mismatch(&run(3, &["a", "c"]), longest), Some(1));
    }
}
