"""The exit codes of every command (``tcgd``, ``tcgd-tensor``, ``tcgd-memory``), defined once
here so that no command can drift from the tables in ``docs/cli.md``."""

from __future__ import annotations

EXIT_OK = 0
EXIT_MISMATCH = 1
EXIT_ERROR = 2
EXIT_INCONCLUSIVE = 3
# The shell's codes for a process ended by SIGINT and by SIGPIPE: a cut-off output must
# not read as a match (0) or mismatch (1) to a script checking the status.
EXIT_INTERRUPTED = 130
EXIT_OUTPUT_CLOSED = 141

# A comparison's status (`Comparison.status`) as the exit code of the command that ran it.
EXIT_FOR_STATUS = {"match": EXIT_OK, "mismatch": EXIT_MISMATCH, "inconclusive": EXIT_INCONCLUSIVE}
# `tcgd-tensor` keeps the reference design's three statuses, which scripts written for it
# test: an inconclusive comparison proved nothing, so it fails like a mismatch. `tcgd tensor`
# tells the two apart (3).
REFERENCE_EXIT_FOR_STATUS = {
    "match": EXIT_OK,
    "mismatch": EXIT_MISMATCH,
    "inconclusive": EXIT_MISMATCH,
}
