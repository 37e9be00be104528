//! How many summary-only points per second the commit queue takes: the host-side cost
//! of recording a compiled model's summaries at every call (28 sites per point, like the
//! Llama benchmark's projections).
//!
//! The sites' facts are built once and shared by every point, as the device recorder
//! registers its sites once and hands the same facts to each harvested point.
//!
//! `cargo run --release -p tcgd-store --example summary_point_throughput [points] [sites] [groups]`

use std::sync::Arc;
use std::time::Instant;

use tcgd_store::{
    CommitJob, CommitQueue, ObservationInput, PayloadKind, PointInput, RunHeader, RunKind,
    RunWriter, Site, SiteFacts, Value,
};
use tcgd_tensor::{DType, TensorSummary};

fn site(i: usize) -> Arc<SiteFacts> {
    Arc::new(SiteFacts {
        name: format!("inference:mm_{i}"),
        dtype: DType::BFloat16,
        shape: vec![4, 128, 512],
        stride: vec![65536, 512, 1],
        source_device: "cuda:0".into(),
        site: Site {
            site_id: Some(format!("inference:mm_{i}")),
            graph_kind: Some("inference".into()),
            node_name: Some(format!("mm_{i}")),
            aten_op: Some("aten.mm.default".into()),
            module_path: Some(format!("model.layers.{}.self_attn.q_proj", i / 7)),
            source_location: Some(
                "transformers/models/llama/modeling_llama.py:262 in forward".into(),
            ),
            compile_id: Some("0/0".into()),
            materialized_by_probe: Some(false),
        },
    })
}

fn job(label: String, sites: Arc<Vec<Arc<SiteFacts>>>) -> CommitJob {
    Box::new(move |writer: &mut RunWriter| {
        let inputs: Vec<ObservationInput<'_>> = sites
            .iter()
            .enumerate()
            .map(|(i, facts)| ObservationInput {
                facts: Arc::clone(facts),
                order: i as i64,
                invocation_index: 0,
                payload: PayloadKind::Summary,
                value: Value::Summary(TensorSummary {
                    numel: 4 * 128 * 512,
                    finite_count: 4 * 128 * 512,
                    min: Some(-3.0),
                    max: Some(3.0),
                    mean: Some(0.01),
                    std: Some(1.0),
                    l2_norm: 512.0,
                    nan_count: 0,
                    pos_inf_count: 0,
                    neg_inf_count: 0,
                    zero_count: 0,
                }),
            })
            .collect();
        let point = PointInput {
            label,
            metadata: "{\"graph_replays\":{\"inference#0\":1}}".into(),
            replay_index: Some(1),
            timestamp_us: None,
        };
        writer.commit_point(&point, &inputs).map(|_| ())
    })
}

fn main() {
    let mut args = std::env::args().skip(1);
    let points: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3000);
    let sites: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(28);
    // Groups the points are committed in (a flush after each share): a long recording
    // commits a group per `commit_interval`, and finishing compacts their files.
    let groups: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1).max(1);
    let facts: Arc<Vec<Arc<SiteFacts>>> = Arc::new((0..sites).map(site).collect());
    let tmp = std::env::temp_dir().join(format!("tcgd-throughput-{}", std::process::id()));
    let header = RunHeader::new("throughput", "throughput", RunKind::Tensor, "compiled");
    let writer = RunWriter::create(&tmp, header, "bench").expect("run");
    let mut queue = CommitQueue::start(writer, 64, usize::MAX).expect("queue");
    let started = Instant::now();
    for p in 0..points {
        let label = format!("call{p}");
        queue
            .submit(&label, 0, job(label.clone(), Arc::clone(&facts)))
            .expect("submit");
        if groups > 1 && (p + 1) % points.div_ceil(groups) == 0 {
            queue.flush().expect("flush");
        }
    }
    let submitted = started.elapsed();
    queue.flush().expect("flush");
    let total = started.elapsed();
    // Finishing compacts the run's files (one per group) into large ones.
    let closing = Instant::now();
    queue.close(true).expect("close");
    let closed = closing.elapsed();
    println!(
        "{points} points x {sites} summary sites: {:.1} us per point ({:.1} us submitted), \
         {:.0} points/s; finishing the run (compaction): {:.0} ms",
        total.as_secs_f64() * 1e6 / points as f64,
        submitted.as_secs_f64() * 1e6 / points as f64,
        points as f64 / total.as_secs_f64(),
        closed.as_secs_f64() * 1e3
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
