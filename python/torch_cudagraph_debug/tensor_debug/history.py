"""The history rings of a probe (``RecordAction(history=N)``): reading the replays they
hold, freezing and re-arming. A base class of ``TensorProbe``, which owns the runtime and
the captured sites."""

from __future__ import annotations

import time
from typing import Literal

from torch_cudagraph_debug import _native
from torch_cudagraph_debug._torch_bridge import (
    tensor_from_bytes,
)
from torch_cudagraph_debug.errors import (
    RecorderStateError,
)
from torch_cudagraph_debug.tensor_debug.observations import (
    TensorObservation,
)
from torch_cudagraph_debug.tensor_debug.sites import SyncArg, _observation, _Site
from torch_cudagraph_debug.tensor_debug.snapshot import (
    TensorProbeSnapshot,
)


class ProbeHistory:
    """The history part of ``TensorProbe`` (which sets the attributes declared here)."""

    name: str
    probe_id: str
    history_depth: int
    _runtime: _native.ProbeRuntime | None
    _mode: Literal["eager", "capture"] | None
    _captured: dict[tuple[str, int], _Site]
    _snapshots: int

    def _check_open(self) -> None:
        raise NotImplementedError

    def _wait(self, synchronize: SyncArg, what: str) -> None:
        raise NotImplementedError

    def _new_snapshot(
        self,
        replay: int,
        observations: list[TensorObservation],
        eager_overwrites: tuple[tuple[str, int], ...] = (),
    ) -> TensorProbeSnapshot:
        """The probe's next snapshot (indices count every snapshot the probe returned),
        taken now."""
        snapshot = TensorProbeSnapshot(
            probe_id=self.probe_id,
            probe_name=self.name,
            snapshot_index=self._snapshots,
            replay_index=replay,
            timestamp=time.time(),
            observations=tuple(observations),
            eager_overwrites=eager_overwrites,
        )
        self._snapshots += 1
        return snapshot

    def _history_runtime(self, what: str) -> _native.ProbeRuntime | None:
        self._check_open()
        if not self.history_depth:
            raise RecorderStateError(
                f"probe {self.name!r}: {what} needs a history; create the probe with "
                "RecordAction(history=N)"
            )
        if self._runtime is None or self._mode != "capture":
            return None
        return self._runtime

    def history(self, *, synchronize: SyncArg = None) -> tuple[TensorProbeSnapshot, ...]:
        """The replays the history rings hold, oldest first: one snapshot per replay (its
        ``replay_index`` is the replay's), with every captured observation that replay
        wrote. Empty before the first replay. ``synchronize`` as for ``snapshot()``."""
        runtime = self._history_runtime("history()")
        if runtime is None:
            return ()
        self._wait(synchronize, "history()")
        by_replay: dict[int, list[TensorObservation]] = {}
        for site in sorted(self._captured.values(), key=lambda s: s.order):
            if site.ring is None:
                continue
            values, replays = runtime.read_ring(site.ring)
            for index, replay in enumerate(replays):
                if replay == 0:
                    continue  # never written
                chunk = values[index * site.nbytes : (index + 1) * site.nbytes]
                value = tensor_from_bytes(chunk, site.dtype, site.shape)
                by_replay.setdefault(replay, []).append(_observation(site, value))
        return tuple(
            self._new_snapshot(replay, sorted(by_replay[replay], key=lambda o: o.order))
            for replay in sorted(by_replay)
        )

    @property
    def history_frozen_at(self) -> int | None:
        """The replay the history froze at (a failed check, or ``freeze_history()``), or
        None while it records. Without synchronising, a freeze in flight may not show."""
        runtime = self._history_runtime("history_frozen_at")
        return None if runtime is None else runtime.history_frozen_at

    def freeze_history(self, *, synchronize: SyncArg = None) -> int:
        """Freezes the history at the last replay (after synchronising as for
        ``snapshot()``); returns that replay. An earlier freeze stands."""
        runtime = self._history_runtime("freeze_history()")
        if runtime is None:
            raise RecorderStateError(
                f"probe {self.name!r}: freeze_history() before the probe was captured"
            )
        self._wait(synchronize, "freeze_history()")
        runtime.freeze_history(runtime.replay_count())
        frozen = runtime.history_frozen_at
        assert frozen is not None
        return frozen

    def rearm_history(self) -> None:
        """Lets a frozen history record again (from the next replay on)."""
        runtime = self._history_runtime("rearm_history()")
        if runtime is not None:
            runtime.rearm_history()
