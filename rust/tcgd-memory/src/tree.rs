//! One reading of a snapshot, two sources: the dict `torch.cuda.memory._snapshot()` returns
//! (read in place through the Python bindings) and a `_dump_snapshot` pickle (read by
//! [`crate::pickle`]). Ingestion is written once against [`SnapshotTree`].

use crate::pickle::{PickleTree, PickleValue};

/// Every key ingestion reads. A source can prepare its keys once (interned Python
/// strings, pickle string ids) instead of building them for every lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    Segments,
    DeviceTraces,
    Address,
    Addr,
    Device,
    Stream,
    SegmentPoolId,
    SegmentType,
    TotalSize,
    AllocatedSize,
    ActiveSize,
    RequestedSize,
    IsExpandable,
    Blocks,
    Frames,
    Size,
    State,
    Action,
    TimeUs,
    UserMetadata,
    CompileContext,
    PoolId,
    DeviceFree,
    Filename,
    Line,
    Name,
    FxNodeOp,
    FxNodeName,
    FxNodeTarget,
    FxOriginalTrace,
}

impl Field {
    pub const ALL: [Field; 30] = [
        Field::Segments,
        Field::DeviceTraces,
        Field::Address,
        Field::Addr,
        Field::Device,
        Field::Stream,
        Field::SegmentPoolId,
        Field::SegmentType,
        Field::TotalSize,
        Field::AllocatedSize,
        Field::ActiveSize,
        Field::RequestedSize,
        Field::IsExpandable,
        Field::Blocks,
        Field::Frames,
        Field::Size,
        Field::State,
        Field::Action,
        Field::TimeUs,
        Field::UserMetadata,
        Field::CompileContext,
        Field::PoolId,
        Field::DeviceFree,
        Field::Filename,
        Field::Line,
        Field::Name,
        Field::FxNodeOp,
        Field::FxNodeName,
        Field::FxNodeTarget,
        Field::FxOriginalTrace,
    ];

    pub fn key(self) -> &'static str {
        match self {
            Field::Segments => "segments",
            Field::DeviceTraces => "device_traces",
            Field::Address => "address",
            Field::Addr => "addr",
            Field::Device => "device",
            Field::Stream => "stream",
            Field::SegmentPoolId => "segment_pool_id",
            Field::SegmentType => "segment_type",
            Field::TotalSize => "total_size",
            Field::AllocatedSize => "allocated_size",
            Field::ActiveSize => "active_size",
            Field::RequestedSize => "requested_size",
            Field::IsExpandable => "is_expandable",
            Field::Blocks => "blocks",
            Field::Frames => "frames",
            Field::Size => "size",
            Field::State => "state",
            Field::Action => "action",
            Field::TimeUs => "time_us",
            Field::UserMetadata => "user_metadata",
            Field::CompileContext => "compile_context",
            Field::PoolId => "pool_id",
            Field::DeviceFree => "device_free",
            Field::Filename => "filename",
            Field::Line => "line",
            Field::Name => "name",
            Field::FxNodeOp => "fx_node_op",
            Field::FxNodeName => "fx_node_name",
            Field::FxNodeTarget => "fx_node_target",
            Field::FxOriginalTrace => "fx_original_trace",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// An integer read from a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntValue {
    Int(i64),
    /// An integer outside the signed 64-bit range.
    OutOfRange,
    NotAnInt,
}

/// Read access to a nested snapshot value. Methods answer `None` / `NotAnInt` for a value
/// of another type; ingestion turns that into an error naming the field.
pub trait SnapshotTree {
    type Node: Clone;

    /// `node[field]` when `node` is a dict holding that key; `Err(())` when `node` is not
    /// a dict at all.
    #[allow(clippy::result_unit_err)]
    fn get(&self, node: &Self::Node, field: Field) -> Result<Option<Self::Node>, ()>;
    /// Length of a list or tuple.
    fn seq_len(&self, node: &Self::Node) -> Option<usize>;
    fn seq_item(&self, node: &Self::Node, index: usize) -> Option<Self::Node>;
    fn int(&self, node: &Self::Node) -> IntValue;
    fn boolean(&self, node: &Self::Node) -> Option<bool>;
    fn with_str<R>(&self, node: &Self::Node, f: impl FnOnce(&str) -> R) -> Option<R>;
    fn is_none(&self, node: &Self::Node) -> bool;
    /// Identity of a container value: equal for the same object, so shared frame dicts
    /// are decoded once. Valid only while the tree is alive.
    fn identity(&self, node: &Self::Node) -> usize;
    /// The value's type, for messages.
    fn type_name(&self, node: &Self::Node) -> String;
}

/// A parsed pickle with its field keys resolved to string ids.
pub struct PickleSnapshot {
    tree: PickleTree,
    keys: [Option<u32>; Field::ALL.len()],
}

impl PickleSnapshot {
    pub fn new(tree: PickleTree) -> PickleSnapshot {
        let keys = Field::ALL.map(|f| tree.string_id(f.key()));
        PickleSnapshot { tree, keys }
    }

    pub fn root(&self) -> PickleValue {
        self.tree.root()
    }
}

impl SnapshotTree for PickleSnapshot {
    type Node = PickleValue;

    fn get(&self, node: &PickleValue, field: Field) -> Result<Option<PickleValue>, ()> {
        if !matches!(node, PickleValue::Dict(_)) {
            return Err(());
        }
        Ok(self.keys[field.index()].and_then(|key| self.tree.get(*node, key)))
    }

    fn seq_len(&self, node: &PickleValue) -> Option<usize> {
        match node {
            PickleValue::List(_) | PickleValue::Tuple(_) => self.tree.items(*node).map(<[_]>::len),
            _ => None,
        }
    }

    fn seq_item(&self, node: &PickleValue, index: usize) -> Option<PickleValue> {
        match node {
            PickleValue::List(_) | PickleValue::Tuple(_) => {
                self.tree.items(*node)?.get(index).copied()
            }
            _ => None,
        }
    }

    fn int(&self, node: &PickleValue) -> IntValue {
        match *node {
            PickleValue::Int(v) => IntValue::Int(v),
            PickleValue::Bool(b) => IntValue::Int(i64::from(b)),
            PickleValue::BigInt => IntValue::OutOfRange,
            _ => IntValue::NotAnInt,
        }
    }

    fn boolean(&self, node: &PickleValue) -> Option<bool> {
        match *node {
            PickleValue::Bool(b) => Some(b),
            PickleValue::Int(0) => Some(false),
            PickleValue::Int(1) => Some(true),
            _ => None,
        }
    }

    fn with_str<R>(&self, node: &PickleValue, f: impl FnOnce(&str) -> R) -> Option<R> {
        match *node {
            PickleValue::Str(id) => Some(f(self.tree.str(id))),
            _ => None,
        }
    }

    fn is_none(&self, node: &PickleValue) -> bool {
        matches!(node, PickleValue::None)
    }

    fn identity(&self, node: &PickleValue) -> usize {
        // Distinct containers of different kinds may share an index: tag the kind.
        match *node {
            PickleValue::List(i) => (i as usize) << 3,
            PickleValue::Tuple(i) => ((i as usize) << 3) | 1,
            PickleValue::Dict(i) => ((i as usize) << 3) | 2,
            PickleValue::Set(i) => ((i as usize) << 3) | 3,
            PickleValue::Str(i) => ((i as usize) << 3) | 4,
            _ => usize::MAX,
        }
    }

    fn type_name(&self, node: &PickleValue) -> String {
        match node {
            PickleValue::None => "None",
            PickleValue::Bool(_) => "bool",
            PickleValue::Int(_) | PickleValue::BigInt => "int",
            PickleValue::Float(_) => "float",
            PickleValue::Str(_) => "str",
            PickleValue::Bytes(_) => "bytes",
            PickleValue::List(_) => "list",
            PickleValue::Tuple(_) => "tuple",
            PickleValue::Dict(_) => "dict",
            PickleValue::Set(_) => "set",
        }
        .to_owned()
    }
}

/// A snapshot in JSON form (pool ids as two-element arrays). Used by tests and by tools
/// that keep snapshots as JSON; JSON has no shared objects, so frames are decoded per
/// occurrence.
pub struct JsonSnapshot<'a>(pub &'a serde_json::Value);

impl<'a> SnapshotTree for JsonSnapshot<'a> {
    type Node = &'a serde_json::Value;

    fn get(&self, node: &Self::Node, field: Field) -> Result<Option<Self::Node>, ()> {
        node.as_object().map(|m| m.get(field.key())).ok_or(())
    }

    fn seq_len(&self, node: &Self::Node) -> Option<usize> {
        node.as_array().map(Vec::len)
    }

    fn seq_item(&self, node: &Self::Node, index: usize) -> Option<Self::Node> {
        node.as_array()?.get(index)
    }

    fn int(&self, node: &Self::Node) -> IntValue {
        match node {
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(v) => IntValue::Int(v),
                None if n.is_u64() => IntValue::OutOfRange,
                None => IntValue::NotAnInt,
            },
            serde_json::Value::Bool(b) => IntValue::Int(i64::from(*b)),
            _ => IntValue::NotAnInt,
        }
    }

    fn boolean(&self, node: &Self::Node) -> Option<bool> {
        node.as_bool()
    }

    fn with_str<R>(&self, node: &Self::Node, f: impl FnOnce(&str) -> R) -> Option<R> {
        node.as_str().map(f)
    }

    fn is_none(&self, node: &Self::Node) -> bool {
        node.is_null()
    }

    fn identity(&self, node: &Self::Node) -> usize {
        *node as *const serde_json::Value as usize
    }

    fn type_name(&self, node: &Self::Node) -> String {
        match node {
            serde_json::Value::Null => "None",
            serde_json::Value::Bool(_) => "bool",
            serde_json::Value::Number(n) if n.is_f64() => "float",
            serde_json::Value::Number(_) => "int",
            serde_json::Value::String(_) => "str",
            serde_json::Value::Array(_) => "list",
            serde_json::Value::Object(_) => "dict",
        }
        .to_owned()
    }
}
