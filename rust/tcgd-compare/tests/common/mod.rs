//! Builders shared by the integration tests: observation sets held in memory, and runs
//! written with the store's writer.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use tcgd_compare::{
    compare_run_groups, CompareOptions, Comparison, ObservationMeta, ObservationSet, PayloadBuf,
    PayloadSource, PointMapping, PointRef, Result, RunData, RunGroup, Silent, SiteLocation,
    Subject, TensorSummary,
};
use tcgd_store::{
    content_digest, ObservationDescriptor, ObservationInput, PayloadKind, PointInput, RunHeader,
    RunKind, RunWriter, Site, Value,
};
use tcgd_tensor::{summarize, DType};

/// Payloads held in memory, by observation index.
pub struct Memory(pub Vec<Vec<u8>>);

impl PayloadSource for Memory {
    fn load(&self, index: usize, _meta: &ObservationMeta) -> Result<Arc<dyn PayloadBuf>> {
        Ok(Arc::new(self.0[index].clone()))
    }
}

pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn i64_bytes(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// One observation for an in-memory set.
pub struct Obs {
    pub name: &'static str,
    pub invocation: i64,
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub bytes: Vec<u8>,
    pub payload: PayloadKind,
    pub site: Option<SiteLocation>,
}

pub fn obs(name: &'static str, dtype: DType, shape: &[i64], bytes: Vec<u8>) -> Obs {
    Obs {
        name,
        invocation: 0,
        dtype,
        shape: shape.to_vec(),
        bytes,
        payload: PayloadKind::Full,
        site: None,
    }
}

fn row_major(shape: &[i64]) -> Vec<i64> {
    let mut stride = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        stride[i] = stride[i + 1] * shape[i + 1].max(1);
    }
    stride
}

pub fn summary_of(dtype: DType, bytes: &[u8]) -> TensorSummary {
    summarize(dtype, bytes).expect("test bytes are whole elements")
}

/// A float32 value of one element.
pub fn one_f32(name: &'static str, x: f32) -> Obs {
    obs(name, DType::Float32, &[1], f32_bytes(&[x]))
}

/// Two run groups compared point by point by label, with the default options.
pub fn compare_groups(reference: &RunGroup, candidate: &RunGroup) -> Comparison {
    compare_run_groups(
        reference,
        candidate,
        &PointMapping::ByLabel,
        &CompareOptions::default(),
        &Silent,
    )
    .expect("compare groups")
}

pub fn set(label: &str, observations: Vec<Obs>) -> ObservationSet {
    let mut metas = Vec::new();
    let mut bytes = Vec::new();
    for (order, o) in observations.into_iter().enumerate() {
        metas.push(ObservationMeta {
            descriptor: ObservationDescriptor {
                order: order as i64,
                name: o.name.to_owned(),
                invocation_index: o.invocation,
                dtype: o.dtype,
                stride: row_major(&o.shape),
                shape: o.shape,
                source_device: "cpu".into(),
                payload: o.payload,
            },
            digest: Some(content_digest(&o.bytes)),
            summary: Some(summary_of(o.dtype, &o.bytes)),
            site: o.site.map(tcgd_store::Site::from),
        });
        bytes.push(o.bytes);
    }
    ObservationSet {
        point: PointRef {
            label: Some(label.to_owned()),
            index: Some(0),
            ..PointRef::default()
        },
        observations: metas,
        source: Arc::new(Memory(bytes)),
    }
}

pub fn subject(kind: &str, name: &str) -> Subject {
    Subject {
        kind: kind.into(),
        name: Some(name.into()),
        ..Subject::default()
    }
}

/// Writes a run: `points` of `(label, observations)`; `complete` says how it ends.
pub fn write_run(
    dir: &Path,
    name: &str,
    rank: i64,
    world_size: i64,
    points: &[(&str, Vec<Obs>)],
    complete: bool,
) {
    let run_id = format!(
        "{}{rank}",
        name.replace(|c: char| !c.is_ascii_alphanumeric(), "")
    );
    let header = RunHeader {
        rank: Some(rank),
        world_size: Some(world_size),
        ..RunHeader::new(&run_id, name, RunKind::Tensor, "eager")
    };
    let mut writer = RunWriter::create(dir, header, "test").expect("create run");
    for (i, (label, observations)) in points.iter().enumerate() {
        let inputs: Vec<ObservationInput<'_>> = observations
            .iter()
            .enumerate()
            .map(|(order, o)| {
                ObservationInput::new(
                    ObservationDescriptor {
                        order: order as i64,
                        name: o.name.into(),
                        invocation_index: o.invocation,
                        dtype: o.dtype,
                        shape: o.shape.clone(),
                        stride: row_major(&o.shape),
                        source_device: "cpu".into(),
                        payload: o.payload,
                    },
                    o.site.clone().map(Site::from).unwrap_or_default(),
                    Value::Bytes(&o.bytes),
                )
            })
            .collect();
        writer
            .commit_point(
                &PointInput {
                    label: (*label).into(),
                    metadata: "{}".into(),
                    replay_index: Some(i as i64 + 1),
                    timestamp_us: Some(1_700_000_000_000_000 + i as i64),
                },
                &inputs,
            )
            .expect("commit point");
    }
    writer.close(complete).expect("close run");
}

/// Writes a run of one process (rank 0 of 1), as [`write_run`] does, and opens it.
pub fn single_rank_run(
    dir: &Path,
    name: &str,
    points: &[(&str, Vec<Obs>)],
    complete: bool,
) -> RunData {
    write_run(dir, name, 0, 1, points, complete);
    RunData::open(dir).expect("open run")
}
