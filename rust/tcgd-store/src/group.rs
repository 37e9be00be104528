//! What every run group checks of its runs, whatever they record: one name, one run per
//! rank (ranks 0 or more), and one sequence of point labels, which a rank that crashed
//! stops early in. Each kind of group (tensor runs, memory runs) words the problems for
//! its users and adds its own checks.

use std::cmp::Reverse;
use std::collections::BTreeMap;

/// A run as a group sees it.
pub trait GroupRun {
    fn rank(&self) -> i64;
    fn name(&self) -> &str;
    /// Its points' labels, in order.
    fn labels(&self) -> &[String];
}

/// The first run named differently from the first run.
pub fn other_name<R: GroupRun>(runs: &[R]) -> Option<&R> {
    let first = runs.first()?;
    runs.iter().find(|r| r.name() != first.name())
}

/// Why runs cannot be placed by rank: the first problem in the order the runs came.
#[derive(Debug)]
pub enum RankProblem<R> {
    /// A rank below 0.
    Negative(R),
    /// Two runs of one rank, in the order they came.
    Twice(R, R),
}

/// The runs by rank, ascending.
pub fn by_rank<R: GroupRun>(runs: impl IntoIterator<Item = R>) -> Result<Vec<R>, RankProblem<R>> {
    let mut ranked: BTreeMap<i64, R> = BTreeMap::new();
    for run in runs {
        let rank = run.rank();
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
pub fn missing_ranks<R: GroupRun>(runs: &[R], world_size: i64) -> Vec<i64> {
    (0..world_size)
        .filter(|rank| !runs.iter().any(|r| r.rank() == *rank))
        .collect()
}

/// The run with the most points (the lowest rank of those): its labels are the group's
/// sequence, which every other rank's labels must be or begin.
pub fn longest<R: GroupRun>(runs: &[R]) -> Option<&R> {
    runs.iter()
        .max_by_key(|r| (r.labels().len(), Reverse(r.rank())))
}

/// The first point at which `run`'s labels leave `longest`'s; `None` when they are the
/// same sequence or begin it (a rank that stopped early).
pub fn label_mismatch<R: GroupRun>(run: &R, longest: &R) -> Option<usize> {
    run.labels()
        .iter()
        .zip(longest.labels())
        .position(|(a, b)| a != b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Run(i64, &'static str, Vec<String>);

    impl GroupRun for Run {
        fn rank(&self) -> i64 {
            self.0
        }
        fn name(&self) -> &str {
            self.1
        }
        fn labels(&self) -> &[String] {
            &self.2
        }
    }

    fn run(rank: i64, labels: &[&str]) -> Run {
        Run(
            rank,
            "job",
            labels.iter().map(|l| (*l).to_owned()).collect(),
        )
    }

    #[test]
    fn ranks_are_unique_and_ordered() {
        let runs = by_rank([run(2, &[]), run(0, &[])]).unwrap();
        assert_eq!(runs.iter().map(Run::rank).collect::<Vec<_>>(), [0, 2]);
        assert_eq!(missing_ranks(&runs, 4), [1, 3]);
        assert!(matches!(
            by_rank([run(1, &[]), run(1, &[])]),
            Err(RankProblem::Twice(..))
        ));
        assert!(matches!(
            by_rank([run(-1, &[])]),
            Err(RankProblem::Negative(_))
        ));
        assert!(other_name(&[run(0, &[]), Run(1, "other", Vec::new())]).is_some());
    }

    #[test]
    fn a_crashed_rank_is_a_prefix_of_the_longest() {
        let runs = [run(0, &["a"]), run(1, &["a", "b"]), run(2, &["a", "b"])];
        let longest = longest(&runs).unwrap();
        assert_eq!(longest.rank(), 1);
        assert_eq!(label_mismatch(&runs[0], longest), None);
        assert_eq!(label_mismatch(&run(3, &["a", "c"]), longest), Some(1));
    }
}
