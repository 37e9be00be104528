//! Group commit: when the waiting points are due, and how a group becomes one Parquet file
//! per table, staged, fsynced and added to the table's Delta log (payloads first, `points` last).

use std::collections::HashSet;
use std::fs;
use std::iter::once;
use std::time::Duration;

use arrow::array::RecordBatch;

use crate::delta::{Operation, StagedFile};
use crate::error::{Result, StoreError};
use crate::layout::PartName;
use crate::schema::Table;

use super::*;

impl RunWriter {
    /// The labels of the points waiting for their group commit, as a failure names them.
    pub fn waiting_labels(&self) -> String {
        self.group.labels.join("', '")
    }

    /// How long until the waiting group is due; `None` when no point waits.
    pub fn commit_due_in(&self) -> Option<Duration> {
        let started = self.group.started?;
        Some(self.policy.interval.saturating_sub(started.elapsed()))
    }

    /// Commits the waiting group if it is old or large enough.
    pub fn commit_if_due(&mut self) -> Result<()> {
        let due = self.group.points > 0
            && (self.group.bytes >= self.policy.max_bytes
                || self.commit_due_in().is_some_and(|d| d.is_zero()));
        if due {
            self.commit_group()?;
        }
        Ok(())
    }

    /// Commits every point handed over: they are durable when this returns.
    pub fn flush(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        if self.failed {
            return Err(StoreError::RunFinished { path: self.path() });
        }
        self.commit_group()
    }

    /// Writes and commits the waiting group: one file per table, `points` last.
    pub(super) fn commit_group(&mut self) -> Result<()> {
        if self.group.points == 0 {
            return Ok(());
        }
        let group = std::mem::take(&mut self.group);
        let result = self.write_group(group);
        if result.is_err() {
            // Some tables may hold rows of this group's points, which readers leave out
            // (no `points` rows); later points would come after a hole.
            self.failed = true;
        }
        result
    }

    pub(super) fn write_group(&mut self, mut group: Group) -> Result<()> {
        let first = group.first_point;
        let last = first + group.points - 1;
        let run_id = self.manifest.header.run_id.clone();
        // Payloads first (observations refer to them), `points` last (a point exists once
        // its row there is committed), the other tables between.
        let mut files: Vec<(Table, RecordBatch)> = Vec::new();
        let mut concat = |table: Table| -> Result<()> {
            if let Some(batches) = group.tables.get(&table) {
                let rows = arrow::compute::concat_batches(&table.schema(), batches)
                    .map_err(|e| StoreError::invalid(table.dir_name(), e.to_string()))?;
                files.push((table, rows));
            }
            Ok(())
        };
        concat(Table::Payloads)?;
        for table in group
            .tables
            .keys()
            .copied()
            .filter(|t| *t != Table::Payloads)
        {
            concat(table)?;
        }
        let labels = StringArray::from_iter_values(&group.labels);
        let points = group.point_rows.finish(&run_id, &labels)?;
        for (table, rows) in files {
            self.commit_file(table, once(Ok(rows)), first, last, Operation::Append, &[])?;
        }
        if let Some(observations) = group.observations.take() {
            let (staged, written, stats) = observations.finish()?;
            let (file, name) = place_file(
                &self.root,
                Table::Observations,
                self.rank(),
                &run_id,
                &staged,
                written,
                stats,
                (first, last),
            )?;
            self.commit_staged(Table::Observations, file, name, Operation::Append, &[])?;
        }
        self.commit_file(
            Table::Points,
            once(Ok(points)),
            first,
            last,
            Operation::Append,
            &[],
        )?;
        self.committed_points = last + 1;
        Ok(())
    }

    /// Where the next data file of this run is written before it moves into its table.
    pub(super) fn staging_path(&mut self, table: Table) -> Result<std::path::PathBuf> {
        self.staged_files += 1;
        let tag = self.staged_files.to_string();
        staging_path(&self.root, &self.manifest.header.run_id, table, &tag)
    }

    /// Writes the rows of `chunks` as one data file of this run, moves it into the table
    /// and commits it (with `retire` removed in the same commit).
    pub(super) fn commit_file(
        &mut self,
        table: Table,
        chunks: impl Iterator<Item = Result<RecordBatch>>,
        first: u64,
        last: u64,
        operation: Operation,
        retire: &[OwnFile],
    ) -> Result<OwnFile> {
        let rank = self.rank();
        let stats = self.table(table)?.stats_collector(rank)?;
        let path = self.staging_path(table)?;
        let (staged, name) = stage_file(
            &self.root,
            table,
            rank,
            &self.manifest.header.run_id,
            &path,
            chunks,
            (first, last),
            stats,
        )?;
        self.commit_staged(table, staged, name, operation, retire)
    }

    /// Commits a data file of this run that is in its table already (with `retire`
    /// removed in the same commit); a file the commit fails for is taken out again.
    fn commit_staged(
        &mut self,
        table: Table,
        staged: StagedFile,
        name: PartName,
        operation: Operation,
        retire: &[OwnFile],
    ) -> Result<OwnFile> {
        let own = OwnFile {
            table,
            logged: staged.path.clone(),
            name,
            size: staged.size,
        };
        let removes: Vec<String> = retire.iter().map(|f| f.logged.clone()).collect();
        let delta = self.table(table)?;
        let committed = delta.commit(std::slice::from_ref(&staged), &removes, operation);
        if let Err(e) = committed {
            // Not in the log: take it out of the table again so no glob sees it.
            let _ = fs::remove_file(delta.dir().join(&own.logged));
            return Err(e);
        }
        let dir = delta.dir().to_path_buf();
        delete_files(&dir, &removes);
        let retired: HashSet<&str> = removes.iter().map(String::as_str).collect();
        self.files
            .retain(|f| !(f.table == table && retired.contains(f.logged.as_str())));
        if table != Table::Runs {
            self.files.push(own.clone());
        }
        Ok(own)
    }
}
