//! What a point knows beyond the allocator snapshot: who owns each private pool (the
//! Graph Trees manager of a device, a `torch.cuda.graph` capture, a `torch.cuda.MemPool`)
//! and the peaks and counters of `torch.cuda.memory_stats()`.
//!
//! Both are read in Python at point time (no per-call cost) and stored with the point
//! (`memory_pool_owners`, and columns of `memory_devices`; docs/storage.md).

use serde::Serialize;

use crate::model::PoolId;

/// What kind of thing owns a private pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OwnerKind {
    /// The CUDA Graph Trees manager of one device (`torch.compile(mode="reduce-overhead")`).
    GraphTrees,
    /// A `torch.cuda.graph` capture made with this package's probes.
    CudaGraph,
    /// A `torch.cuda.MemPool` the user created.
    MemPool,
}

impl OwnerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OwnerKind::GraphTrees => "graph_trees",
            OwnerKind::CudaGraph => "cuda_graph",
            OwnerKind::MemPool => "mempool",
        }
    }

    pub fn parse(s: &str) -> Option<OwnerKind> {
        [
            OwnerKind::GraphTrees,
            OwnerKind::CudaGraph,
            OwnerKind::MemPool,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }

    /// The word reports use (`graph-trees`).
    fn display(self) -> &'static str {
        match self {
            OwnerKind::GraphTrees => "graph-trees",
            OwnerKind::CudaGraph => "cuda-graph",
            OwnerKind::MemPool => "mempool",
        }
    }
}

/// The owner of one private pool of one device at a point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolOwner {
    pub device: i64,
    pub pool: PoolId,
    pub kind: OwnerKind,
    /// A probe's or pool's name, when it has one.
    pub name: Option<String>,
    /// Graph Trees graph ids recorded into the pool (warmup nodes excluded), ascending.
    pub graph_ids: Vec<i64>,
    /// `forward`, `backward`, `inference`: the function kinds of those graphs, each once.
    pub function_kinds: Vec<String>,
    /// The compile ids (`frame/attempt`) of the compiled functions, each once.
    pub compile_ids: Vec<String>,
}

/// `0-3,5,7-8`: ascending ids with runs collapsed.
fn id_ranges(ids: &[i64]) -> String {
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

impl PoolOwner {
    /// One line naming the owner, as every report shows it next to the pool:
    /// `graph-trees cuda:0 graphs 0-3 forward/backward compile 0/0`.
    pub fn describe(&self) -> String {
        let mut out = format!("{} cuda:{}", self.kind.display(), self.device);
        if let Some(name) = &self.name {
            out.push(' ');
            out.push_str(name);
        }
        if !self.graph_ids.is_empty() {
            let word = if self.graph_ids.len() == 1 {
                "graph"
            } else {
                "graphs"
            };
            out.push_str(&format!(" {word} {}", id_ranges(&self.graph_ids)));
        }
        if !self.function_kinds.is_empty() {
            out.push(' ');
            out.push_str(&self.function_kinds.join("/"));
        }
        if !self.compile_ids.is_empty() {
            out.push_str(" compile ");
            out.push_str(&self.compile_ids.join(","));
        }
        out
    }
}

/// The three byte peaks torch keeps per device, each `None` when unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PeakBytes {
    pub peak_reserved_bytes: Option<i64>,
    pub peak_allocated_bytes: Option<i64>,
    pub peak_active_bytes: Option<i64>,
}

impl PeakBytes {
    /// Each peak with the word reports name it by.
    pub fn labelled(&self) -> [(&'static str, Option<i64>); 3] {
        [
            ("reserved", self.peak_reserved_bytes),
            ("allocated", self.peak_allocated_bytes),
            ("active", self.peak_active_bytes),
        ]
    }

    /// `f` of each peak here and the same peak in `other`.
    fn zip_with(
        &self,
        other: &PeakBytes,
        f: impl Fn(Option<i64>, Option<i64>) -> Option<i64>,
    ) -> PeakBytes {
        PeakBytes {
            peak_reserved_bytes: f(self.peak_reserved_bytes, other.peak_reserved_bytes),
            peak_allocated_bytes: f(self.peak_allocated_bytes, other.peak_allocated_bytes),
            peak_active_bytes: f(self.peak_active_bytes, other.peak_active_bytes),
        }
    }
}

/// `torch.cuda.memory_stats(device)` at a point: the peaks and the cumulative counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DevicePeaks {
    pub device: i64,
    #[serde(flatten)]
    pub bytes: PeakBytes,
    /// Cumulative since the process started (torch never resets these with the peaks).
    pub num_alloc_retries: Option<i64>,
    pub num_ooms: Option<i64>,
    /// The peaks were reset at the previous point, so they cover exactly the time since.
    pub since_previous_point: bool,
}

/// The peaks and counters of one device between the previous point and this one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PeaksBetween {
    /// The highest value since the previous point; `None` when the reading cannot say
    /// (peaks not reset and no higher than at the previous point: the maximum in
    /// between is then at most the previous peak, not known exactly).
    #[serde(flatten)]
    pub bytes: PeakBytes,
    /// Retries and OOMs since the previous point (since the process started at the first).
    pub alloc_retries: Option<i64>,
    pub ooms: Option<i64>,
}

impl DevicePeaks {
    /// This reading against the previous point's (`None` at the first point, whose
    /// window starts with the process or the user's last reset).
    pub fn between(&self, previous: Option<&DevicePeaks>) -> PeaksBetween {
        let peak = |now: Option<i64>, before: Option<i64>| -> Option<i64> {
            let now = now?;
            match previous {
                None => Some(now),
                Some(_) if self.since_previous_point => Some(now),
                // Not reset: the peak is a running maximum; it says what happened since
                // the previous point only when it rose.
                Some(_) => match before {
                    Some(b) if now > b => Some(now),
                    None => None,
                    Some(_) => None,
                },
            }
        };
        let count = |now: Option<i64>, before: Option<i64>| -> Option<i64> {
            let now = now?;
            match previous {
                None => Some(now),
                Some(_) => now.checked_sub(before?).filter(|d| *d >= 0),
            }
        };
        let p = previous.copied().unwrap_or_default();
        PeaksBetween {
            bytes: self.bytes.zip_with(&p.bytes, peak),
            alloc_retries: count(self.num_alloc_retries, p.num_alloc_retries),
            ooms: count(self.num_ooms, p.num_ooms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> PoolOwner {
        PoolOwner {
            device: 0,
            pool: (1, 2),
            kind: OwnerKind::GraphTrees,
            name: None,
            graph_ids: vec![3, 0, 1, 2, 7],
            function_kinds: vec!["forward".into(), "backward".into()],
            compile_ids: vec!["0/0".into()],
        }
    }

    #[test]
    fn describes_graph_trees_owner() {
        assert_eq!(
            owner().describe(),
            "graph-trees cuda:0 graphs 0-3,7 forward/backward compile 0/0"
        );
        let one = PoolOwner {
            kind: OwnerKind::CudaGraph,
            name: Some("decode".into()),
            graph_ids: vec![],
            function_kinds: vec![],
            compile_ids: vec![],
            ..owner()
        };
        assert_eq!(one.describe(), "cuda-graph cuda:0 decode");
        assert_eq!(OwnerKind::parse("mempool"), Some(OwnerKind::MemPool));
    }

    #[test]
    fn peaks_between_points() {
        let first = DevicePeaks {
            device: 0,
            bytes: PeakBytes {
                peak_reserved_bytes: Some(100),
                peak_allocated_bytes: Some(80),
                peak_active_bytes: Some(90),
            },
            num_alloc_retries: Some(1),
            num_ooms: Some(0),
            since_previous_point: false,
        };
        assert_eq!(first.between(None).bytes.peak_reserved_bytes, Some(100));
        assert_eq!(first.between(None).alloc_retries, Some(1));
        // Not reset, no new high: the maximum in between is not known.
        let flat = DevicePeaks {
            num_alloc_retries: Some(3),
            ..first
        };
        let b = flat.between(Some(&first));
        assert_eq!(b.bytes.peak_reserved_bytes, None);
        assert_eq!(b.alloc_retries, Some(2));
        assert_eq!(b.ooms, Some(0));
        // Not reset, a new high: that high happened in between.
        let rose = DevicePeaks {
            bytes: PeakBytes {
                peak_reserved_bytes: Some(150),
                ..first.bytes
            },
            ..first
        };
        assert_eq!(
            rose.between(Some(&first)).bytes.peak_reserved_bytes,
            Some(150)
        );
        // Reset at the previous point: the peak is the window's own.
        let reset = DevicePeaks {
            bytes: PeakBytes {
                peak_reserved_bytes: Some(40),
                ..first.bytes
            },
            since_previous_point: true,
            ..first
        };
        assert_eq!(
            reset.between(Some(&first)).bytes.peak_reserved_bytes,
            Some(40)
        );
    }
}
