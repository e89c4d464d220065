//! The operators of the graph API (`air::prelude` re-exports them): windows
//! and aggregates, top-N per window, joins, keyed process functions with
//! timers, and sinks that stream. They extend the stream handles of
//! [`air_runtime::dataflow`] through traits ([`KeyedWindowExt::window`],
//! [`TopNExt::top_n`], [`JoinExt::join`], [`KeyedProcessExt::process`],
//! [`PartitionedExt::sink_partitioned`]).

pub mod aggregate;
mod fixed;
pub mod join;
pub mod late;
pub mod live_source;
pub mod partitioned;
pub mod process;
pub mod session;
pub mod sink;
pub mod source;
pub mod top;
pub mod window;
pub mod window_owner;
mod window_partial;
pub mod windows;

/// What a file source does with a bad record (the built-in readers' policy).
pub use crate::sources::ysb::OnBadRecord;
pub use aggregate::{
    AggregateFunction, Bare, Count, DistinctCount, Extreme, Filtered, Max, MaxBy, Mean, Min,
    Number, OrNone, Sum, TopN,
};
pub use join::{IntervalJoin, JoinExt, Joined, JoinedStreams, WindowJoin};
pub use late::{BehindWatermark, LateRecord, LateStream, Lateness, OnTime};
pub use live_source::{LineFormat, LiveSource};
pub use partitioned::{PartitionedCsv, PartitionedExt};
pub use process::{
    process_fn, KeyedProcess, KeyedProcessExt, KeyedProcessFunction, NoTimer, ProcessCx, ProcessFn,
    SaveState, StateNotSaved, StateSaved, TimerFn,
};
pub use session::{SavedSession, SessionWindow, Sessions};
pub use sink::{Csv, JsonLines};
pub use source::{
    BadRecords, CsvFormat, CsvSource, FileFormat, FileSource, JsonFormat, JsonLinesSource,
    RecordFault,
};
pub use top::{
    ByKey, CollectByWindowExt, LocalTop, MaxByWindowExt, Ranked, RankedTopN, Score, TopNExt,
    WindowTopN,
};
pub use window::{
    Dense, DenseKey, DenseMap, Hashed, KeyMap, KeyedWindowExt, MapKind, Partial, Sliding, Tumbling,
    WindowEveryEvent, WindowFinal, WindowRow, WindowSpec, Windowed, WindowedStream, Windows,
};
